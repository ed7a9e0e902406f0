//! Supervisor exits: the run is recorded first, then the claim is released, retried, handed off
//! or parked. What happens next is decided by the pure [`decide_exit`] (and, after a plain
//! normal exit, [`decide_continue`] from the issue's current tracker state); the
//! `Orchestrator` methods here only apply the decision.

use super::*;
use crate::agent::AgentErrorKind;
use crate::config::TrackerConfig;
use crate::orchestrator::msg::{ErrorCode, UsageLimit};
use crate::orchestrator::run_error::{RetryError, RunError};

/// What happens to an issue's claim after its supervisor exited (its run is already recorded).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ExitStep {
    /// Shutdown is draining: nothing is scheduled, the claim ends with the process.
    Nothing,
    /// A cancellation whose retry is already queued (a stall queues its own): leave it.
    KeepQueuedRetry,
    /// A cancellation (reconciliation, budget): release the claim.
    Release,
    /// A retryable failure: retry after the failure backoff.
    Retry {
        attempt: u32,
        delay_ms: u64,
        error: RunError,
    },
    /// A failure a plain retry is not expected to fix (missing agent, input required, …). It
    /// still waits the failure backoff, loudly: releasing the claim would dispatch the issue
    /// again at the next tick, forever.
    RetryUnfixable {
        attempt: u32,
        delay_ms: u64,
        error: RunError,
    },
    /// The provider refused the session for a usage limit: hold the agent kind until the reset
    /// and retry the issue then (trigger `usage_limit`).
    UsageLimited {
        attempt: u32,
        /// The reset, or the end of the failure backoff when that is later.
        due_at_ms: i64,
        limit: UsageLimit,
    },
    /// The agent could not log in: no retry (none could succeed); the agent kind is held and
    /// the claim released, so the issue dispatches again once the hold lifts.
    AuthFailed { message: String },
    /// The agent declared itself blocked: park the issue under `label`, release the claim.
    Park { label: String },
    /// The agent declared an outcome: move the issue to `state` if one is configured, then
    /// release the claim. `no_change`: the declaration was `no-change-needed`, a success that
    /// makes the stage hop of a rule with `next` instead of the write.
    Declared {
        state: Option<String>,
        no_change: bool,
    },
    /// The session ended without a declaration: read the issue's state, then hand off or
    /// continue with `attempt` ([`decide_continue`]).
    Continue { attempt: u32 },
}

/// What [`decide_exit`] reads.
pub(super) struct ExitFacts<'a> {
    pub exit: &'a SupervisorExit,
    /// The attempt that just ended (0 on first dispatch).
    pub attempt: u32,
    pub draining: bool,
    /// Whether a retry of the issue is already queued.
    pub retry_queued: bool,
    pub backoff_cap_ms: u64,
    pub tracker: &'a TrackerConfig,
    pub now_ms: i64,
}

/// Decides the step after a supervisor exit, without effects.
pub(super) fn decide_exit(f: &ExitFacts<'_>) -> ExitStep {
    if f.draining {
        return ExitStep::Nothing;
    }
    let next_attempt = f.attempt + 1;
    let failed = |code: &ErrorCode, message: &str| RunError::Failed {
        code: *code,
        message: message.to_string(),
    };
    match f.exit {
        SupervisorExit::Cancelled { .. } if f.retry_queued => ExitStep::KeepQueuedRetry,
        SupervisorExit::Cancelled { .. } => ExitStep::Release,
        SupervisorExit::UsageLimited(limit) => ExitStep::UsageLimited {
            attempt: next_attempt,
            due_at_ms: super::holds::usage_retry_due_ms(
                limit.resets_at_ms,
                f.now_ms,
                failure_delay_ms(next_attempt, f.backoff_cap_ms),
            ),
            limit: limit.clone(),
        },
        SupervisorExit::Error {
            code: ErrorCode::Agent(AgentErrorKind::AgentAuthFailed),
            message,
            ..
        } => ExitStep::AuthFailed {
            message: message.clone(),
        },
        SupervisorExit::Error {
            code,
            message,
            retryable: true,
        } => ExitStep::Retry {
            attempt: next_attempt,
            delay_ms: failure_delay_ms(next_attempt, f.backoff_cap_ms),
            error: failed(code, message),
        },
        SupervisorExit::Error {
            code,
            message,
            retryable: false,
        } => ExitStep::RetryUnfixable {
            attempt: next_attempt,
            delay_ms: failure_delay_ms(next_attempt, f.backoff_cap_ms),
            error: failed(code, message),
        },
        SupervisorExit::Normal { declared, .. } => match declared {
            Some(DeclaredOutcome::Blocked) => ExitStep::Park {
                label: DEFAULT_PARKING_LABEL.to_string(),
            },
            Some(DeclaredOutcome::NoChangeNeeded) => ExitStep::Declared {
                state: f.tracker.no_change_state.clone(),
                no_change: true,
            },
            Some(DeclaredOutcome::NeedsHumanReview) => ExitStep::Declared {
                state: f.tracker.handoff_state.clone(),
                no_change: false,
            },
            None => ExitStep::Continue {
                attempt: next_attempt,
            },
        },
    }
}

/// The step after a session that ended without a declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ContinueStep {
    /// The issue left the active states: release; `handoff_skipped` when a handoff state is
    /// configured (the handoff metric counts it).
    Release { handoff_skipped: bool },
    /// Move the issue to the handoff state; if that fails, continue.
    HandOff { state: String },
    /// Queue a continuation retry.
    Continue,
}

/// Decides from the issue's current tracker state (`None`: it could not be read, so it is
/// taken as still active, as the supervisor last saw it).
pub(super) fn decide_continue(current: Option<&str>, cfg: &TrackerConfig) -> ContinueStep {
    let still_active = match current {
        Some(s) => state_in(s, &cfg.active_states) && !state_in(s, &cfg.terminal_states),
        None => true,
    };
    match (still_active, &cfg.handoff_state) {
        (false, handoff) => ContinueStep::Release {
            handoff_skipped: handoff.is_some(),
        },
        (true, Some(state)) => ContinueStep::HandOff {
            state: state.clone(),
        },
        (true, None) => ContinueStep::Continue,
    }
}

/// What became of an exit's run record.
pub(super) enum RecordState {
    Committed,
    /// Kept by the writer for retry; the exit waits in `awaiting_record`.
    Kept,
    /// Failed for good (not a database condition): the run is not recorded.
    Failed,
}

impl Orchestrator {
    pub(super) fn on_exit(&mut self, result: SupervisorResult) {
        let Some(issue_id) = self.state.dispatch_index.remove(&result.dispatch_id) else {
            return;
        };
        let Some(mut entry) = self.state.running.remove(&issue_id) else {
            return;
        };
        if let Some(host) = entry.facts.ssh_host.clone() {
            self.host_session_ended(&host, super::hosts::host_unreachable(&result.exit));
        }
        if entry.facts.workspace_path.is_none() {
            entry.facts.workspace_path = result.workspace_path.clone();
        }
        if result.session_id.is_some() {
            entry.facts.session_id = result.session_id.clone();
        }
        match self.record_exit(&entry, &result) {
            RecordState::Committed => self.finish_exit(entry, result),
            // Nothing happens to the issue (no hand-off, retry or park) until the record
            // commits; it stays claimed meanwhile.
            RecordState::Kept => {
                self.state
                    .awaiting_record
                    .insert(result.dispatch_id.clone(), AwaitingRecord { entry, result });
            }
            // The record will never be written: nothing is handed off; the claim ends and a
            // later tick dispatches the issue again if it is still active.
            RecordState::Failed => self.release(&issue_id),
        }
    }

    /// The writer committed a run record it had kept: apply the exit it was waiting for.
    pub(super) fn on_run_recorded(&mut self, dispatch_id: &str) {
        if let Some(AwaitingRecord { entry, result }) =
            self.state.awaiting_record.remove(dispatch_id)
        {
            log::info!(
                "run record committed after the database recovered issue_id={} issue_identifier={} dispatch_id={dispatch_id}",
                entry.facts.issue.id,
                entry.facts.issue.identifier
            );
            self.finish_exit(entry, result);
        }
    }

    /// After the run is recorded: cleanup, then the step [`decide_exit`] chooses.
    fn finish_exit(&mut self, entry: RunningEntry, result: SupervisorResult) {
        if entry.facts.pending_cleanup {
            self.remove_workspace(&entry);
        }
        let step = decide_exit(&ExitFacts {
            exit: &result.exit,
            attempt: entry.facts.attempt,
            draining: self.draining.is_some(),
            retry_queued: self.state.retries.contains_key(&entry.facts.issue.id),
            backoff_cap_ms: self.backoff_cap(),
            tracker: &self.workflow.config.tracker,
            now_ms: self.clock.now_ms(),
        });
        if step == ExitStep::Nothing {
            return;
        }
        self.apply_exit_step(&entry, step, result.session_id.clone());
        // A hop releases the claim the reactions would follow; the last stage seeds them.
        if !self.hopped(&entry) {
            self.seed_reactions(&entry, &result);
        }
        self.lifecycle_comment_at_exit(
            &entry.facts.issue,
            &result.exit,
            entry.facts.session_id.as_deref(),
            result.ended_at_ms - entry.facts.started_at_ms,
            result.turns_completed,
        );
    }

    /// Totals, metrics and the run record; the run is persisted before any retry is scheduled
    /// and before any hand-off. A record the database cannot take now is kept by the writer,
    /// which sends `RunRecorded` once it commits; the database check fails meanwhile.
    pub(super) fn record_exit(
        &mut self,
        entry: &RunningEntry,
        result: &SupervisorResult,
    ) -> RecordState {
        let now = self.clock.now_ms();
        let seconds = ((now - entry.facts.started_at_ms).max(0) as f64) / 1000.0;
        self.state.totals.seconds_running += seconds;
        if !entry.facts.tokens_measured {
            self.state.totals.unmeasured_sessions += 1;
            self.metrics.unmeasured_session();
        }
        let status = run_status(&result.exit, entry.facts.budget_stop.is_some());
        self.metrics.worker_exit(status, seconds);
        let tx = self.tx.clone();
        let dispatch_id = result.dispatch_id.clone();
        let on_commit: crate::store::OnCommit = Box::new(move |_| {
            let _ = tx.send(OrchMsg::RunRecorded { dispatch_id });
        });
        // Priced once, under the rates in force now; the row keeps the figure for good.
        let price = crate::orchestrator::session_cost::session_price(
            &entry.facts,
            &self.workflow.config.agent.kind,
            &self.prices.current(),
        );
        if let Some(usd) = price.cost_usd {
            self.metrics.estimated_cost(usd);
        }
        let recorded = persist::record_run_or_keep(
            &self.store,
            &self.workflow,
            entry,
            result,
            status,
            &price,
            on_commit,
        );
        match recorded {
            Ok(persist::RunRecorded::Committed(_)) => RecordState::Committed,
            Ok(persist::RunRecorded::Kept(error)) => {
                log::error!(
                    "run record kept until the database takes writes; issue waits issue_id={} issue_identifier={} dispatch_id={} error={:?}",
                    entry.facts.issue.id,
                    entry.facts.issue.identifier,
                    result.dispatch_id,
                    error.to_string()
                );
                self.state.health.database.record(
                    now,
                    Err(persist::PersistError {
                        op: "record run",
                        message: format!("database write failed, kept for retry: {error}"),
                    }),
                );
                RecordState::Kept
            }
            Err(e) => {
                log::error!(
                    "failed to record run; issue not handed off issue_id={} issue_identifier={} error={:?}",
                    entry.facts.issue.id,
                    entry.facts.issue.identifier,
                    e.to_string()
                );
                RecordState::Failed
            }
        }
    }

    /// Removes the workspace of an issue that reconciliation found terminal, under the root
    /// (and with the hooks) it was dispatched with, even if a reload changed them since.
    fn remove_workspace(&self, entry: &RunningEntry) {
        let ws = &entry.handles.workspaces;
        let removed = match &entry.facts.workspace_path {
            Some(p) => ws.remove_path(&entry.facts.issue.id, &entry.facts.issue.identifier, p),
            None => ws.remove(&entry.facts.issue.id, &entry.facts.issue.identifier),
        };
        if let Err(e) = removed {
            log::warn!(
                "workspace cleanup failed issue_id={} issue_identifier={} error={:?}",
                entry.facts.issue.id,
                entry.facts.issue.identifier,
                e.to_string()
            );
        }
    }

    /// Carries out the step [`decide_exit`] chose.
    fn apply_exit_step(
        &mut self,
        entry: &RunningEntry,
        step: ExitStep,
        session_id: Option<String>,
    ) {
        let issue = &entry.facts.issue;
        match step {
            ExitStep::Nothing | ExitStep::KeepQueuedRetry => {}
            ExitStep::Release => self.release(&issue.id),
            ExitStep::Retry {
                attempt,
                delay_ms,
                error,
            } => self.failure_retry(entry, attempt, delay_ms, &error, false),
            ExitStep::RetryUnfixable {
                attempt,
                delay_ms,
                error,
            } => self.failure_retry(entry, attempt, delay_ms, &error, true),
            ExitStep::UsageLimited {
                attempt,
                due_at_ms,
                limit,
            } => self.usage_limit_retry(entry, attempt, due_at_ms, &limit),
            ExitStep::AuthFailed { message } => {
                self.note_auth_failed(issue, &message);
                self.release(&issue.id);
            }
            ExitStep::Park { label } => {
                self.park(issue, label, entry.facts.pass());
                self.release(&issue.id);
            }
            ExitStep::Declared { state, no_change } => {
                let hopped = no_change
                    && self.issue_still_active(issue)
                    && self.try_stage_hop(entry, crate::domain::stage::StageOutcome::NoChange);
                if !hopped && let Some(state) = state {
                    self.transition_and_record(issue, &state);
                }
                self.release(&issue.id);
            }
            ExitStep::Continue { attempt } => {
                self.hand_off_or_continue(entry, attempt, session_id);
            }
        }
    }

    /// Queues the failure retry `decide_exit` chose; an unfixable-looking failure is logged as
    /// an error but waits the same backoff, so it never returns at poll rate.
    fn failure_retry(
        &mut self,
        entry: &RunningEntry,
        attempt: u32,
        delay_ms: u64,
        error: &RunError,
        unfixable: bool,
    ) {
        let issue = &entry.facts.issue;
        let (level, what) = if unfixable {
            (
                log::Level::Error,
                "worker run failed, non-retryable, waiting the failure backoff",
            )
        } else {
            (log::Level::Warn, "worker run failed, scheduling retry")
        };
        log::log!(
            level,
            "{what} issue_id={} issue_identifier={} next_attempt={} delay_ms={} error={:?}",
            issue.id,
            issue.identifier,
            attempt,
            delay_ms,
            error.stored()
        );
        self.schedule_retry(
            issue,
            attempt,
            delay_ms,
            RetryTrigger::Error,
            Some(RetryError::WorkerExited(error.clone()).stored()),
            None,
            entry.facts.pass(),
        );
    }

    /// Holds the agent kind until the reset and queues the refused issue's retry at it.
    fn usage_limit_retry(
        &mut self,
        entry: &RunningEntry,
        attempt: u32,
        due: i64,
        limit: &UsageLimit,
    ) {
        let issue = &entry.facts.issue;
        self.note_usage_limit(issue, limit, limit.resets_at_ms.unwrap_or(due));
        let error = RunError::Failed {
            code: ErrorCode::UsageLimited,
            message: limit.message.clone(),
        };
        self.schedule_retry_at(
            issue,
            attempt,
            due,
            RetryTrigger::UsageLimit,
            Some(RetryError::WorkerExited(error).stored()),
            entry.facts.session_id.clone(),
            entry.facts.pass(),
        );
    }

    /// After a session that ended without a declaration: release an issue that left the active
    /// states, hand off when a handoff state is configured, otherwise queue a continuation.
    fn hand_off_or_continue(
        &mut self,
        entry: &RunningEntry,
        attempt: u32,
        session_id: Option<String>,
    ) {
        let issue = &entry.facts.issue;
        let current = self.current_state(issue);
        let cfg = &self.workflow.config.tracker;
        match decide_continue(current.as_deref(), cfg) {
            ContinueStep::Release { handoff_skipped } => {
                if handoff_skipped {
                    self.metrics.handoff("skipped");
                }
                self.release(&issue.id);
                return;
            }
            ContinueStep::HandOff { state } => {
                if self.try_stage_hop(entry, crate::domain::stage::StageOutcome::Succeeded) {
                    self.release(&issue.id);
                    return;
                }
                if self.transition_and_record(issue, &state) {
                    log::info!(
                        "handoff transition succeeded, releasing claim issue_id={} issue_identifier={} state={:?}",
                        issue.id,
                        issue.identifier,
                        state.to_string()
                    );
                    self.release(&issue.id);
                    return;
                }
            }
            ContinueStep::Continue => {}
        }
        self.schedule_retry(
            issue,
            attempt,
            CONTINUATION_DELAY_MS,
            RetryTrigger::Continuation,
            None,
            session_id,
            entry.facts.pass(),
        );
    }

    /// Parks an issue whose agent needs a person; the label is best effort. `dispatched_at_ms`
    /// is the pass of the run the park follows.
    fn park(&mut self, issue: &Issue, label: String, pass: Pass) {
        let label_applied = match self.tracker.add_label(&issue.id, &label) {
            Ok(()) => true,
            Err(e) => {
                log::warn!(
                    "parking label failed issue_id={} issue_identifier={} error={:?}",
                    issue.id,
                    issue.identifier,
                    e.to_string()
                );
                false
            }
        };
        let parked_state = self.state_when_parked(issue);
        let park = Park {
            issue: issue.clone(),
            reason: ParkReason::AgentBlocked,
            parked_at_ms: self.clock.now_ms() / 1000 * 1000,
            parked_state,
            label,
            label_applied,
            dispatched_at_ms: Some(pass.dispatched_at_ms),
            route: Some(pass.route),
        };
        self.reset_hops(&issue.id, "parked");
        log::info!(
            "issue parked issue_id={} issue_identifier={} reason={}",
            issue.id,
            issue.identifier,
            park.reason
        );
        persist::park(&self.store, &park);
        self.state.parked.insert(issue.id.clone(), park);
    }

    /// The state a park holds against: the issue's state in the tracker now. The issue the
    /// supervisor started from may be stale (it moved the issue to `in_progress_state`), and a
    /// park recorded against a stale state would lift on the next poll. When the tracker cannot
    /// be read, the in-progress state stands in for a transition that was attempted.
    fn state_when_parked(&self, issue: &Issue) -> String {
        match self
            .tracker
            .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
        {
            Ok(states) => match states.get(&issue.id) {
                Some(s) => return s.clone(),
                None => log::warn!(
                    "parked issue not found in the tracker issue_id={} issue_identifier={}",
                    issue.id,
                    issue.identifier
                ),
            },
            Err(e) => log::warn!(
                "parked issue state not read issue_id={} issue_identifier={} error={:?}",
                issue.id,
                issue.identifier,
                e.to_string()
            ),
        }
        parked_state_fallback(issue, &self.workflow.config.tracker)
    }

    /// Queues the optional completion/failure comment (never for cancellations).
    pub(super) fn lifecycle_comment_at_exit(
        &self,
        issue: &Issue,
        exit: &SupervisorExit,
        session_id: Option<&str>,
        duration_ms: i64,
        turns: u32,
    ) {
        let c = &self.workflow.config.tracker.comments;
        let retry = self.state.retries.get(&issue.id).map(|r| {
            format!(
                "attempt {} in {}s",
                r.attempt,
                ((r.due_at_ms - self.clock.now_ms()).max(0) + 999) / 1000
            )
        });
        let (lifecycle, error) = match exit {
            SupervisorExit::Normal { .. } if c.on_completion => (Lifecycle::Completion, None),
            SupervisorExit::Error { code, message, .. } if c.on_failure => {
                (Lifecycle::Failure, Some(format!("{code}: {message}")))
            }
            _ => return,
        };
        self.tracker_ops
            .submit(crate::orchestrator::tracker_ops::TrackerOp::Comment {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                lifecycle,
                text: crate::orchestrator::tracker_ops::lifecycle_comment(
                    lifecycle,
                    session_id,
                    duration_ms,
                    turns,
                    error.as_deref(),
                    retry.as_deref(),
                ),
            });
    }

    /// The issue's tracker state now; `None` when it cannot be read.
    fn current_state(&self, issue: &Issue) -> Option<String> {
        self.tracker
            .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
            .ok()
            .and_then(|m| m.get(&issue.id).cloned())
    }

    /// Whether the issue is still in an active state (a failed read counts as active, as the
    /// supervisor last saw it).
    fn issue_still_active(&self, issue: &Issue) -> bool {
        let current = self.current_state(issue);
        let cfg = &self.workflow.config.tracker;
        current
            .is_none_or(|s| state_in(&s, &cfg.active_states) && !state_in(&s, &cfg.terminal_states))
    }

    pub(super) fn transition_and_record(&mut self, issue: &Issue, state: &str) -> bool {
        match self.tracker.transition_issue(&issue.id, state) {
            Ok(()) => {
                self.metrics.handoff("success");
                self.reset_hops(&issue.id, "handoff");
                self.state.outcomes.insert(
                    issue.id.clone(),
                    (OutcomeKind::HandedOff, state.to_string()),
                );
                persist::set_outcome(&self.store, &issue.id, OutcomeKind::HandedOff, state);
                true
            }
            Err(e) => {
                self.metrics.handoff("error");
                log::warn!(
                    "handoff transition failed issue_id={} issue_identifier={} state=\"{}\" error={:?}",
                    issue.id,
                    issue.identifier,
                    state,
                    e.to_string()
                );
                false
            }
        }
    }
}

/// The state a park records when the tracker cannot say: the in-progress state when one is
/// configured (the supervisor moved the issue there at dispatch), else the dispatched state.
pub(super) fn parked_state_fallback(issue: &Issue, cfg: &TrackerConfig) -> String {
    cfg.in_progress_state
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| issue.state.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker() -> TrackerConfig {
        TrackerConfig {
            active_states: vec!["To Do".into(), "In Progress".into()],
            terminal_states: vec!["Done".into()],
            handoff_state: Some("Human Review".into()),
            ..Default::default()
        }
    }

    fn decide(exit: SupervisorExit, retry_queued: bool, draining: bool) -> ExitStep {
        decide_exit(&ExitFacts {
            exit: &exit,
            attempt: 2,
            draining,
            retry_queued,
            backoff_cap_ms: 300_000,
            tracker: &tracker(),
            now_ms: 1_000_000,
        })
    }

    fn normal(declared: Option<DeclaredOutcome>) -> SupervisorExit {
        SupervisorExit::Normal {
            declared,
            statement: None,
        }
    }

    #[test]
    fn every_failure_waits_the_backoff_before_the_next_dispatch() {
        let boom = || RunError::Failed {
            code: crate::orchestrator::msg::ErrorCode::Agent(
                crate::agent::AgentErrorKind::TurnFailed,
            ),
            message: "boom".into(),
        };
        let err = |retryable| SupervisorExit::Error {
            code: crate::orchestrator::msg::ErrorCode::Agent(
                crate::agent::AgentErrorKind::TurnFailed,
            ),
            message: "boom".into(),
            retryable,
        };
        assert_eq!(
            decide(err(true), false, false),
            ExitStep::Retry {
                attempt: 3,
                delay_ms: failure_delay_ms(3, 300_000),
                error: boom(),
            }
        );
        assert_eq!(
            decide(err(false), false, false),
            ExitStep::RetryUnfixable {
                attempt: 3,
                delay_ms: failure_delay_ms(3, 300_000),
                error: boom()
            }
        );
    }

    #[test]
    fn a_usage_limit_retries_at_the_reset_and_a_failed_login_is_not_retried() {
        let limited = |resets_at_ms| {
            SupervisorExit::UsageLimited(UsageLimit {
                message: "limit".into(),
                resets_at_ms,
                model: None,
            })
        };
        // now 1_000_000; attempt 3 backs off 40 s.
        let due = |exit| match decide(exit, false, false) {
            ExitStep::UsageLimited {
                attempt, due_at_ms, ..
            } => (attempt, due_at_ms),
            other => panic!("{other:?}"),
        };
        assert_eq!(due(limited(Some(5_000_000))), (3, 5_000_000));
        assert_eq!(due(limited(Some(1_010_000))), (3, 1_040_000));
        assert_eq!(due(limited(None)), (3, 1_040_000));
        let auth = SupervisorExit::Error {
            code: ErrorCode::Agent(AgentErrorKind::AgentAuthFailed),
            message: "not logged in".into(),
            retryable: false,
        };
        assert_eq!(
            decide(auth, false, false),
            ExitStep::AuthFailed {
                message: "not logged in".into()
            }
        );
    }

    #[test]
    fn a_cancellation_keeps_a_stall_retry_and_otherwise_releases() {
        let cancelled = || SupervisorExit::Cancelled {
            reason: CancelReason::Stall,
        };
        assert_eq!(decide(cancelled(), true, false), ExitStep::KeepQueuedRetry);
        assert_eq!(decide(cancelled(), false, false), ExitStep::Release);
        assert_eq!(decide(cancelled(), false, true), ExitStep::Nothing);
    }

    #[test]
    fn declarations_park_or_move_the_issue_and_silence_continues() {
        assert_eq!(
            decide(normal(Some(DeclaredOutcome::Blocked)), false, false),
            ExitStep::Park {
                label: DEFAULT_PARKING_LABEL.into()
            }
        );
        assert_eq!(
            decide(
                normal(Some(DeclaredOutcome::NeedsHumanReview)),
                false,
                false
            ),
            ExitStep::Declared {
                state: Some("Human Review".into()),
                no_change: false
            }
        );
        assert_eq!(
            decide(normal(Some(DeclaredOutcome::NoChangeNeeded)), false, false),
            ExitStep::Declared {
                state: None,
                no_change: true
            }
        );
        assert_eq!(
            decide(normal(None), false, false),
            ExitStep::Continue { attempt: 3 }
        );
    }

    #[test]
    fn a_park_without_a_tracker_read_holds_against_the_in_progress_state() {
        let issue = Issue {
            id: "1".into(),
            identifier: "A-1".into(),
            state: "To Do".into(),
            ..Default::default()
        };
        let mut cfg = tracker();
        assert_eq!(parked_state_fallback(&issue, &cfg), "To Do");
        cfg.in_progress_state = Some("In Progress".into());
        assert_eq!(parked_state_fallback(&issue, &cfg), "In Progress");
    }

    #[test]
    fn after_a_plain_exit_the_tracker_state_decides() {
        let mut cfg = tracker();
        assert_eq!(
            decide_continue(Some("Done"), &cfg),
            ContinueStep::Release {
                handoff_skipped: true
            }
        );
        assert_eq!(
            decide_continue(None, &cfg),
            ContinueStep::HandOff {
                state: "Human Review".into()
            }
        );
        cfg.handoff_state = None;
        assert_eq!(
            decide_continue(Some("in progress"), &cfg),
            ContinueStep::Continue
        );
        assert_eq!(
            decide_continue(Some("Backlog"), &cfg),
            ContinueStep::Release {
                handoff_skipped: false
            }
        );
    }
}
