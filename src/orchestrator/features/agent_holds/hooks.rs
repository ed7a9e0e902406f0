//! Agent-kind holds as the orchestrator applies them: a usage limit or a failed login found on
//! a session's exit installs one, the dispatch pass and due retries honour it, and a reset, a
//! workflow reload or a successful session lifts it (`agent_holds`).

use crate::orchestrator::core::msg::UsageLimit;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::agent_holds::{AuthHold, UsageHold};

impl Orchestrator {
    /// The `model` of the workflow's agent block: the model new sessions are configured with
    /// (`None`: the runtime's default).
    pub(crate) fn configured_model(&self) -> Option<String> {
        let cfg = &self.workflow.config;
        cfg.adapter_block(&cfg.agent.kind)
            .and_then(|b| b.get("model"))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    }

    /// One poll interval: how long past its reset a usage hold still stops poll-tick dispatch.
    pub(crate) fn poll_grace_ms(&self) -> i64 {
        i64::try_from(self.workflow.config.polling.interval_ms.max(1)).unwrap_or(i64::MAX)
    }

    /// The hold on the workflow's agent kind (and configured model) now; `grace_ms` is one poll
    /// interval for a poll-tick dispatch, 0 for a retry.
    pub(crate) fn agent_hold(&self, grace_ms: i64) -> Option<HoldReason> {
        self.state.agent_holds.hold_for(
            &self.workflow.config.agent.kind,
            self.configured_model().as_deref(),
            self.clock.now_ms(),
            grace_ms,
        )
    }

    /// Installs the usage hold of a refused session. `resets_at_ms` is the reset the agent
    /// reported, else the refused issue's retry due time. A limit that names a model stops the
    /// configured model alone (the refused session ran on it); one that names none stops the
    /// kind.
    pub(crate) fn note_usage_limit(
        &mut self,
        issue: &Issue,
        limit: &UsageLimit,
        resets_at_ms: i64,
    ) {
        let model_only = limit.model.is_some();
        let hold = UsageHold {
            agent_kind: self.workflow.config.agent.kind.clone(),
            model_only,
            model: if model_only {
                self.configured_model()
            } else {
                None
            },
            resets_at_ms,
            since_ms: self.clock.now_ms(),
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
        persist::save_usage_hold(&self.store, &hold);
        self.state.agent_holds.note_usage_limit(hold);
    }

    /// Installs the login hold of `kind` (the kind the failed session was routed to, which a
    /// dispatch rule may have chosen) after a session failed to authenticate.
    pub(crate) fn note_auth_failed(&mut self, issue: &Issue, message: &str, kind: &str) {
        let kind = kind.to_string();
        log::error!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            agent_kind:% = kind,
            error:% = message;
            "agent not logged in; holding every dispatch of the kind until the workflow reloads or a session of it succeeds"
        );
        self.state.agent_holds.note_auth_failed(AuthHold {
            agent_kind: kind,
            message: crate::mask::mask(message),
            since_ms: self.clock.now_ms(),
        });
    }

    /// A session of `kind` completed a turn: its login works again.
    pub(crate) fn lift_auth_hold_after_success(&mut self, kind: &str) {
        if self.state.agent_holds.lift_auth(kind) {
            log::info!(
                agent_kind:% = kind,
                cause:% = "session_succeeded";
                "agent login hold lifted after a successful turn"
            );
        }
    }

    /// The workflow loaded (a change, or a write of the file): a person may have logged the
    /// agent in, so every login hold lifts and the next poll tick tries again.
    pub(crate) fn lift_auth_holds_after_reload(&mut self) {
        for kind in self.state.agent_holds.lift_all_auth() {
            log::info!(
                agent_kind:% = kind,
                cause:% = "workflow_reloaded";
                "agent login hold lifted"
            );
        }
    }

    /// Drops the usage holds whose reset and grace have passed.
    pub(crate) fn prune_agent_holds(&mut self) {
        let now = self.clock.now_ms();
        let grace = self.poll_grace_ms();
        for h in self.state.agent_holds.prune(now, grace) {
            persist::delete_usage_hold(&self.store, &h);
            log::info!(
                agent_kind:% = h.agent_kind,
                model:% = h.model.as_deref().unwrap_or(""),
                resets_at:% = crate::clock::rfc3339_ms(h.resets_at_ms);
                "agent usage limit hold ended"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::orchestrator::claim::exit_step::usage_retry_due_ms;

    #[test]
    fn a_usage_retry_waits_for_the_reset_or_the_longer_backoff() {
        assert_eq!(usage_retry_due_ms(Some(100_000), 40_000, 10_000), 100_000);
        assert_eq!(usage_retry_due_ms(Some(45_000), 40_000, 10_000), 50_000);
        assert_eq!(usage_retry_due_ms(Some(1_000), 40_000, 10_000), 50_000);
        assert_eq!(usage_retry_due_ms(None, 40_000, 10_000), 50_000);
    }
}
