//! Agent-kind holds as a feature: it owns the holds in force and the agents' reported rate
//! limits. A usage limit or a failed login found on a session's exit installs a hold, its gate
//! holds every candidate of the kind, a reset (`on_tick`), a workflow load (`on_reload`) or a
//! successful turn lifts it, and the holds reach the snapshot.

use std::sync::Arc;

use crate::agent::RateLimitWindow;
use crate::domain::Issue;
use crate::orchestrator::claim::dispatch_pass::Gate;
use crate::orchestrator::core::effect::{Effect, Write};
use crate::orchestrator::core::feature::{Cx, Feature, PassKind};
use crate::orchestrator::core::run_record::UsageLimit;
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::features::agent_holds::rate_limits::RateLimits;
use crate::orchestrator::features::agent_holds::{AgentHolds, AuthHold, UsageHold};

/// The agent holds feature's slice of state.
#[derive(Debug, Default)]
pub struct AgentHoldsFeature {
    /// Holds on a whole agent kind (usage limit, failed login).
    holds: AgentHolds,
    /// Usage limits the agents reported; shared with published snapshots.
    rate_limits: Arc<RateLimits>,
}

impl AgentHoldsFeature {
    /// Restores the usage holds stored before a restart.
    pub fn restore(&mut self, holds: Vec<UsageHold>) {
        for h in holds {
            self.holds.note_usage_limit(h);
        }
    }

    /// Usage holds in force (for the warm start's log line).
    pub fn usage_holds(&self) -> usize {
        self.holds.usage.len()
    }

    /// Installs the usage hold of a refused session. `resets_at_ms` is the reset the agent
    /// reported, else the refused issue's retry due time. A limit that names a model stops the
    /// configured model alone (the refused session ran on it); one that names none stops the
    /// kind.
    pub fn note_usage_limit(
        &mut self,
        issue: &Issue,
        limit: &UsageLimit,
        resets_at_ms: i64,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        let model_only = limit.model.is_some();
        let hold = UsageHold {
            agent_kind: cx.workflow.config.agent.kind.clone(),
            model_only,
            model: if model_only {
                cx.configured_model()
            } else {
                None
            },
            resets_at_ms,
            since_ms: cx.now_ms,
        };
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            agent_kind:% = hold.agent_kind,
            model_only:% = hold.model_only,
            model:% = hold.model.as_deref().unwrap_or(""),
            resets_at:% = crate::clock::rfc3339_ms(resets_at_ms),
            error:% = limit.message;
            "agent usage limit reached, holding new sessions of the kind until the reset"
        );
        let save = Effect::Write(Write::SaveUsageHold(usage_hold_row(&hold)));
        self.holds.note_usage_limit(hold);
        vec![save]
    }

    /// Installs the login hold of `kind` (the kind the failed session was routed to, which a
    /// dispatch rule may have chosen) after a session failed to authenticate.
    pub fn note_auth_failed(&mut self, issue: &Issue, message: &str, kind: &str, now_ms: i64) {
        let kind = kind.to_string();
        log::error!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            agent_kind:% = kind,
            error:% = message;
            "agent not logged in; holding every dispatch of the kind until the workflow reloads or a session of it succeeds"
        );
        self.holds.note_auth_failed(AuthHold {
            agent_kind: kind,
            message: crate::mask::mask(message),
            since_ms: now_ms,
        });
    }

    /// A session of `kind` completed a turn: its login works again.
    pub fn lift_auth_after_success(&mut self, kind: &str) {
        if self.holds.lift_auth(kind) {
            log::info!(
                agent_kind:% = kind,
                cause:% = "session_succeeded";
                "agent login hold lifted after a successful turn"
            );
        }
    }

    /// An agent of `kind` reported its rate-limit windows.
    pub fn record_rate_limits(&mut self, kind: &str, windows: &[RateLimitWindow], at_ms: i64) {
        Arc::make_mut(&mut self.rate_limits).record(kind, windows, at_ms);
    }

    fn auth_holds(&self) -> Arc<Vec<AuthHold>> {
        Arc::new(self.holds.auth.values().cloned().collect())
    }
}

impl Feature for AgentHoldsFeature {
    /// The hold on the workflow's agent kind (and configured model): a poll tick's pass honours
    /// a usage hold one poll interval past its reset, a retry only until the reset.
    fn gate(&self, cx: &Cx<'_>, pass: PassKind) -> Option<Gate> {
        let grace = match pass {
            PassKind::Tick => cx.poll_grace_ms(),
            PassKind::Retry => 0,
        };
        self.holds
            .hold_for(
                &cx.workflow.config.agent.kind,
                cx.configured_model().as_deref(),
                cx.now_ms,
                grace,
            )
            .map(Gate::Every)
    }

    /// Drops the usage holds whose reset and grace have passed, and their rows.
    fn on_tick(&mut self, cx: &Cx<'_>) -> Vec<Effect> {
        let ended = self.holds.prune(cx.now_ms, cx.poll_grace_ms());
        ended
            .iter()
            .map(|h| {
                log::info!(
                    agent_kind:% = h.agent_kind,
                    model:% = h.model.as_deref().unwrap_or(""),
                    resets_at:% = crate::clock::rfc3339_ms(h.resets_at_ms);
                    "agent usage limit hold ended"
                );
                Effect::Write(Write::DeleteUsageHold(usage_hold_row(h)))
            })
            .collect()
    }

    /// A person may have logged the agent in: every login hold lifts, and the next poll tick
    /// tries again.
    fn on_reload(&mut self, _cx: &Cx<'_>) -> Vec<Effect> {
        for kind in self.holds.lift_all_auth() {
            log::info!(
                agent_kind:% = kind,
                cause:% = "workflow_reloaded";
                "agent login hold lifted"
            );
        }
        Vec::new()
    }

    fn snapshot(&self, snap: &mut Snapshot, _now_ms: i64) {
        self.snapshot_running(snap);
    }

    fn snapshot_running(&self, snap: &mut Snapshot) {
        snap.rate_limits = Arc::clone(&self.rate_limits);
        snap.auth_holds = self.auth_holds();
    }
}

/// A usage hold's stored row.
fn usage_hold_row(h: &UsageHold) -> crate::store::UsageHoldRow {
    crate::store::UsageHoldRow {
        agent_kind: h.agent_kind.clone(),
        model_only: h.model_only,
        model: h.model.clone().unwrap_or_default(),
        resets_at_ms: h.resets_at_ms,
        since_ms: h.since_ms,
    }
}
