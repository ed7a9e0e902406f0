//! Placing a dispatch on an SSH host, and what a session's end says about its host
//! (`hosts::pool`).

use crate::orchestrator::core::msg::ErrorCode;
use crate::orchestrator::core::orchestrator::*;
use crate::ssh::SshHost;

/// Whether a session's end says its host could not be reached: `ssh` itself failed (exit
/// 255, the agent's `port_exit`) or the workspace could not be prepared there.
pub(crate) fn host_unreachable(exit: &SupervisorExit) -> bool {
    matches!(
        exit,
        SupervisorExit::Error {
            code: ErrorCode::Agent(crate::agent::AgentErrorKind::PortExit) | ErrorCode::Workspace,
            ..
        }
    )
}

/// Where a dispatch runs.
pub(crate) enum Placement {
    /// No SSH host is configured.
    Here,
    Host(SshHost),
    /// Hosts are configured and none has room (the pass's room count said otherwise).
    NoRoom,
}

impl Orchestrator {
    pub(crate) fn place(&mut self, issue: &Issue) -> Placement {
        let worker = &self.workflow.config.worker;
        if !worker.remote() {
            return Placement::Here;
        }
        let usage = self.state.host_usage();
        let store = &self.store;
        let last_host =
            || match persist::last_ssh_host(store, crate::store::IssueKey::Id, &issue.id) {
                Ok(h) => h,
                Err(e) => {
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        error:% = e.to_string();
                        "last ssh host unknown"
                    );
                    None
                }
            };
        let now = self.clock.now_ms();
        let picked = self
            .state
            .hosts
            .pick(worker, &usage, &issue.id, last_host, now)
            .cloned();
        match picked {
            Some(h) => {
                self.state.hosts.stick(&issue.id, h.name());
                Placement::Host(h)
            }
            None => Placement::NoRoom,
        }
    }

    /// The configured host of that name ([`host_named_in`]).
    pub(crate) fn host_named(&self, name: Option<&str>) -> Option<SshHost> {
        host_named_in(&self.workflow.config.worker, name)
    }

    /// A session on `host` ended: whether it reached the host feeds the host's health.
    pub(crate) fn host_session_ended(&mut self, host: &str, unreachable: bool) {
        if !unreachable {
            self.state.hosts.record_reached(host);
            return;
        }
        let now = self.clock.now_ms();
        if let Some(until) = self.state.hosts.record_unreachable(host, now) {
            log::warn!(
                ssh_host:% = host,
                until:% = crate::clock::rfc3339_ms(until),
                failures_in_a_row:% = crate::orchestrator::features::hosts::pool::FAILURES_BEFORE_OUT;
                "ssh host out of service"
            );
        } else {
            log::warn!(ssh_host:% = host; "ssh host unreachable");
        }
    }
}

/// The configured host of that name. A host no longer configured is reached with the current
/// options, so its workspaces can still be removed.
pub(crate) fn host_named_in(
    worker: &crate::config::worker::WorkerConfig,
    name: Option<&str>,
) -> Option<SshHost> {
    let name = name?;
    if let Some(h) = worker.host(name) {
        return Some(h.clone());
    }
    match crate::ssh::SshTarget::parse(name) {
        Ok(target) => Some(SshHost {
            target,
            options: worker.options.clone(),
        }),
        Err(e) => {
            log::warn!(ssh_host:% = name, error:% = e.to_string(); "ssh host unusable");
            None
        }
    }
}

/// The host an identifier's workspace lives on, from its newest run (read from the store, so
/// callable off `orch`).
pub(crate) fn workspace_host_in(
    store: &Store,
    worker: &crate::config::worker::WorkerConfig,
    identifier: &str,
) -> Option<SshHost> {
    let key = crate::store::IssueKey::Identifier;
    match persist::last_ssh_host(store, key, identifier) {
        Ok(name) => host_named_in(worker, name.as_deref()),
        Err(e) => {
            log::warn!(
                issue_identifier:% = identifier,
                error:% = e.to_string();
                "last ssh host unknown"
            );
            None
        }
    }
}
