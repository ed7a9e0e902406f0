//! The failure breaker as the orchestrator applies it (`failure_holds`): a failed run is
//! counted and may hold its issue instead of queueing a retry; a run that does not fail ends
//! the streak; a person or a reload releases a hold.

use crate::orchestrator::claim::failure_holds::{FailureHold, Verdict};
use crate::orchestrator::claim::run_error::RunError;
use crate::orchestrator::core::msg::ErrorCode;
use crate::orchestrator::core::orchestrator::*;

/// The cause of runs the stall rule stopped.
const STALL_CAUSE: &str = "stall";

impl Orchestrator {
    /// Counts a failed run that would be retried; `true` when the breaker held the issue
    /// instead (its claim is released, no retry is queued).
    pub(crate) fn breaker_holds(&mut self, entry: &RunningEntry, error: &RunError) -> bool {
        let RunError::Failed { code, message } = error else {
            return false;
        };
        // An SSH host that cannot be reached is the host pool's to take out of service; the
        // issue's retry waits for a host, and its own count is left alone.
        let host_failed = matches!(
            code,
            ErrorCode::Agent(crate::agent::AgentErrorKind::PortExit) | ErrorCode::Workspace
        );
        if entry.facts.ssh_host.is_some() && host_failed {
            return false;
        }
        // A spent budget holds the issue itself (the failure retry installs that hold): the
        // person then sees the budget, the more specific reason.
        if let Ok(Some(_)) =
            self.budget_hold_for(&entry.facts.issue, None, Some(entry.facts.dispatched_at_ms))
        {
            return false;
        }
        let kind = persist::route_kind(&entry.facts.route, &self.workflow).to_string();
        // Only an agent failure before the model produced anything is classified: words the
        // agent wrote while working (a test's "connection refused") are not its own failure.
        let class = match code {
            ErrorCode::Agent(_) if entry.facts.tokens.output_tokens == 0 => {
                crate::registry::agent(&kind).and_then(|d| (d.classify_failure)(message))
            }
            _ => None,
        };
        self.count_failure(entry, code.as_str(), class, message)
    }

    /// Counts a run the stall rule stopped (its retry is already queued); `true` when the
    /// breaker held the issue and cancelled that retry.
    pub(crate) fn breaker_holds_stall(&mut self, entry: &RunningEntry) -> bool {
        // The agent's own last words, if it said anything before it went silent.
        let said = entry.facts.last_message.clone().unwrap_or_default();
        self.count_failure(entry, STALL_CAUSE, None, &said)
    }

    fn count_failure(
        &mut self,
        entry: &RunningEntry,
        code: &str,
        class: Option<crate::agent::failure_class::FailureClass>,
        message: &str,
    ) -> bool {
        let kind = persist::route_kind(&entry.facts.route, &self.workflow).to_string();
        let issue = &entry.facts.issue;
        let max_same = self.workflow.config.agent.max_same_failures;
        let verdict = self
            .state
            .failure_streaks
            .failed(&issue.id, code, class, max_same);
        let Verdict::Hold {
            cause,
            classified,
            runs,
        } = verdict
        else {
            return false;
        };
        let hold = FailureHold {
            issue: issue.clone(),
            agent_kind: kind,
            cause,
            classified,
            runs,
            message: crate::mask::mask(message),
            since_ms: self.clock.now_ms(),
        };
        log::error!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            agent_kind:% = hold.agent_kind,
            cause:% = hold.cause,
            runs:% = runs,
            error:% = hold.message;
            "failure will not heal by retrying; issue held until a person releases it"
        );
        persist::save_failure_hold(&self.store, &hold);
        // Listed in `held[]` from this snapshot on, not only from the next poll tick's pass.
        self.state.held.insert(
            issue.id.clone(),
            crate::orchestrator::core::state::Held {
                issue: Arc::new(issue.clone()),
                reason: hold.hold_reason(),
                since_ms: hold.since_ms,
            },
        );
        self.state.failure_held.insert(issue.id.clone(), hold);
        self.release(&issue.id);
        true
    }

    /// A run of the issue ended without failing: its streak ends.
    pub(crate) fn breaker_run_ok(&mut self, issue_id: &str) {
        self.state.failure_streaks.reset(issue_id);
    }

    /// Releases the failure hold of `issue_id`; `true` when there was one.
    pub(crate) fn release_failure_hold(&mut self, issue_id: &str, cause: &str) -> bool {
        let Some(h) = self.state.failure_held.remove(issue_id) else {
            return false;
        };
        self.state.failure_streaks.reset(issue_id);
        if self
            .state
            .held
            .get(issue_id)
            .is_some_and(|h| matches!(h.reason, HoldReason::FailureHeld { .. }))
        {
            self.state.held.remove(issue_id);
        }
        persist::delete_failure_hold(&self.store, issue_id);
        log::info!(
            issue_id:% = h.issue.id,
            issue_identifier:% = h.issue.identifier,
            cause:% = cause;
            "failure hold released"
        );
        true
    }

    /// The workflow reloaded: every failure hold and streak ends (a person may have fixed the
    /// configuration, the credentials or the network).
    pub(crate) fn release_failure_holds_after_reload(&mut self) {
        let ids: Vec<String> = self.state.failure_held.keys().cloned().collect();
        for id in ids {
            self.release_failure_hold(&id, "workflow_reloaded");
        }
        self.state.failure_streaks.clear();
    }

    /// A held issue the tracker no longer lists among the active candidates (done, cancelled,
    /// moved out of the active states) needs no person any more: its hold ends.
    pub(crate) fn release_failure_holds_of_inactive(&mut self, candidates: &[Arc<Issue>]) {
        let active: std::collections::HashSet<&str> =
            candidates.iter().map(|i| i.id.as_str()).collect();
        let gone: Vec<String> = self
            .state
            .failure_held
            .keys()
            .filter(|id| !active.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.release_failure_hold(&id, "issue_not_active");
        }
    }

    /// The issue id of the failure hold on `identifier`, if any.
    pub(crate) fn failure_held_id(&self, identifier: &str) -> Option<String> {
        self.state
            .failure_held
            .values()
            .find(|h| h.issue.identifier == identifier)
            .map(|h| h.issue.id.clone())
    }
}
