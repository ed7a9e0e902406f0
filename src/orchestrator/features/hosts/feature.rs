//! SSH hosts as a feature: it owns the host pool (placement and health, `hosts::pool`). The
//! pass's room count and a dispatch's placement read it, a session's end feeds its host's
//! health (`on_exit`), and the hosts out of service reach the snapshot.

use crate::orchestrator::core::effect::Effect;
use crate::orchestrator::core::feature::{Cx, ExitView, Feature};
use crate::orchestrator::core::run_record::{ErrorCode, SupervisorExit};
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::features::hosts::pool::{FAILURES_BEFORE_OUT, HostPool};

/// The hosts feature's slice of state.
#[derive(Debug, Default)]
pub struct HostsFeature {
    /// SSH host placement and health.
    pub pool: HostPool,
}

impl HostsFeature {
    /// How many more sessions the SSH hosts take now (`None`: sessions run here).
    pub fn room(&self, cx: &Cx<'_>) -> Option<usize> {
        self.pool.room(
            &cx.workflow.config.worker,
            &cx.state.host_usage(),
            cx.now_ms,
        )
    }

    /// A session on `host` ended: whether it reached the host feeds the host's health.
    fn session_ended(&mut self, host: &str, unreachable: bool, now_ms: i64) {
        if !unreachable {
            self.pool.record_reached(host);
            return;
        }
        if let Some(until) = self.pool.record_unreachable(host, now_ms) {
            log::warn!(
                ssh_host:% = host,
                until:% = crate::clock::rfc3339_ms(until),
                failures_in_a_row:% = FAILURES_BEFORE_OUT;
                "ssh host out of service"
            );
        } else {
            log::warn!(ssh_host:% = host; "ssh host unreachable");
        }
    }
}

impl Feature for HostsFeature {
    fn on_exit(&mut self, exit: &ExitView<'_>, cx: &Cx<'_>) -> Vec<Effect> {
        if let Some(host) = &exit.facts.ssh_host {
            self.session_ended(host, host_unreachable(&exit.result.exit), cx.now_ms);
        }
        Vec::new()
    }

    fn snapshot(&self, snap: &mut Snapshot, now_ms: i64) {
        snap.ssh_hosts_out = std::sync::Arc::new(self.pool.out_of_service(now_ms));
    }
}

/// Whether a session's end says its host could not be reached: `ssh` itself failed (exit
/// 255, the agent's `port_exit`) or the workspace could not be prepared there.
fn host_unreachable(exit: &SupervisorExit) -> bool {
    matches!(
        exit,
        SupervisorExit::Error {
            code: ErrorCode::Agent(crate::agent::AgentErrorKind::PortExit) | ErrorCode::Workspace,
            ..
        }
    )
}
