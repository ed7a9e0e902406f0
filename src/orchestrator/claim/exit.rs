//! Supervisor exits: the run is recorded first, then the claim is released, retried, handed off
//! or parked. What happens next is decided by the pure [`decide_exit`] (and, after a plain
//! normal exit, [`decide_continue`] from the issue's current tracker state); the
//! `Orchestrator` methods here only apply the decision.

use super::exit_calls::{ExitAnswers, ExitCalls, failed_answers};
use crate::config::TrackerConfig;
use crate::domain::stage::StageOutcome;
use crate::orchestrator::claim::exit_step::{ContinueStep, ExitFacts, ExitStep, decide_exit};
use crate::orchestrator::claim::run_error::{RetryError, RunError};
use crate::orchestrator::core::msg::{ErrorCode, UsageLimit};
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::stages::hop::HopWrite;
use crate::tracker::TrackerResult;

/// What became of an exit's run record.
pub(crate) enum RecordState {
    Committed,
    /// Kept by the writer for retry; the exit waits in `awaiting_record`.
    Kept,
    /// Failed for good (not a database condition): the run is not recorded.
    Failed,
}

impl Orchestrator {
    pub(crate) fn on_exit(&mut self, mut result: SupervisorResult) {
        let Some(issue_id) = self.state.dispatch_index.remove(&result.dispatch_id) else {
            return;
        };
        let Some(mut entry) = self.state.running.remove(&issue_id) else {
            return;
        };
        self.features_on_exit(&entry.facts, &result);
        if entry.facts.workspace_path.is_none() {
            entry.facts.workspace_path = result.workspace_path.clone();
        }
        if result.session_id.is_some() {
            entry.facts.session_id = result.session_id.clone();
        }
        self.withhold_unevidenced_handoff(&entry, &mut result);
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
    pub(crate) fn on_run_recorded(&mut self, dispatch_id: &str) {
        if let Some(AwaitingRecord { entry, result }) =
            self.state.awaiting_record.remove(dispatch_id)
        {
            log::info!(
                issue_id:% = entry.facts.issue.id,
                issue_identifier:% = entry.facts.issue.identifier,
                dispatch_id:% = dispatch_id;
                "run record committed after the database recovered"
            );
            self.finish_exit(entry, result);
        }
    }

    /// Counts `exit` in the issue's withheld handoffs in a row and stores a changed count, so
    /// the ceiling counts across a restart.
    fn count_withheld(&mut self, issue_id: &str, exit: &SupervisorExit) -> u32 {
        let before = self.state.handoff_absence.get(issue_id);
        let in_a_row = self.state.handoff_absence.after_exit(issue_id, exit);
        let now = self.state.handoff_absence.get(issue_id);
        if now != before {
            persist::save_handoff_absence(&self.store, issue_id, now, self.clock.now_ms());
        }
        in_a_row
    }

    /// After the run is recorded: cleanup, then the step [`decide_exit`] chooses. A step that
    /// needs tracker calls makes them off `orch` ([`ExitCalls`]) and ends in
    /// [`Orchestrator::settle_exit`].
    fn finish_exit(&mut self, entry: RunningEntry, result: SupervisorResult) {
        if entry.facts.pending_cleanup {
            self.remove_workspace(&entry);
        }
        let withheld_in_a_row = self.count_withheld(&entry.facts.issue.id, &result.exit);
        let step = decide_exit(&ExitFacts {
            exit: &result.exit,
            attempt: entry.facts.attempt,
            draining: self.draining.is_some(),
            retry_queued: self.state.retries.contains_key(&entry.facts.issue.id),
            backoff_cap_ms: self.backoff_cap(),
            tracker: &self.workflow.config.tracker,
            now_ms: self.clock.now_ms(),
            withheld_in_a_row,
        });
        if step == ExitStep::Nothing {
            return;
        }
        match result.exit {
            SupervisorExit::Normal { .. } => self.breaker_run_ok(&entry.facts.issue.id),
            // The stall rule queued the retry; the breaker may hold the issue instead.
            SupervisorExit::Cancelled {
                reason: crate::agent::CancelReason::Stall,
            } if step == ExitStep::KeepQueuedRetry => {
                self.breaker_holds_stall(&entry);
            }
            _ => {}
        }
        match ExitCalls::for_step(&step, || self.plan_stage_hop(&entry)) {
            Some(calls) => self.settle_off_thread(entry, result, step, calls),
            None => {
                self.apply_exit_step(&entry, step);
                self.exit_done(&entry, &result);
            }
        }
    }

    /// The tracker calls of an exit came back: applies its step with their answers.
    pub(crate) fn settle_exit(
        &mut self,
        issue_id: &str,
        answers: Result<ExitAnswers, crate::orchestrator::core::io_pool::CallPanicked>,
        tracker_kind: &str,
    ) {
        let Some(s) = self.state.settling.remove(issue_id) else {
            return;
        };
        let answers = answers.unwrap_or_else(|panic| {
            log::error!(
                issue_id:% = issue_id,
                issue_identifier:% = s.entry.facts.issue.identifier,
                panic:% = panic;
                "exit tracker calls panicked"
            );
            failed_answers(
                &s.step,
                tracker_kind,
                &format!("tracker calls panicked: {panic}"),
            )
        });
        self.apply_answers(&s.entry, s.step, answers, s.result.session_id.clone());
        if self.poll_out.is_some() {
            self.settled_while_polling.insert(issue_id.to_string());
        }
        self.exit_done(&s.entry, &s.result);
    }

    /// What every applied exit ends with: reactions seeded from its pull-request record (a hop
    /// releases the claim they would follow; the last stage seeds them) and the lifecycle
    /// comment.
    fn exit_done(&mut self, entry: &RunningEntry, result: &SupervisorResult) {
        if !self.hopped(entry) {
            self.seed_reactions(entry, result);
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
    pub(crate) fn record_exit(
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
        let price = crate::orchestrator::features::spend::session_cost::session_price(
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
                    issue_id:% = entry.facts.issue.id,
                    issue_identifier:% = entry.facts.issue.identifier,
                    dispatch_id:% = result.dispatch_id,
                    error:% = error.to_string();
                    "run record kept until the database takes writes; issue waits"
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
                    issue_id:% = entry.facts.issue.id,
                    issue_identifier:% = entry.facts.issue.identifier,
                    error:% = e.to_string();
                    "failed to record run; issue not handed off"
                );
                RecordState::Failed
            }
        }
    }

    /// Removes the workspace of an issue that reconciliation found terminal, under the root
    /// (and with the hooks) it was dispatched with, even if a reload changed them since. The
    /// removal (hooks, an SSH host) runs on a `work` thread.
    fn remove_workspace(&mut self, entry: &RunningEntry) {
        let ws = entry.handles.workspaces.clone();
        let (id, identifier) = (
            entry.facts.issue.id.clone(),
            entry.facts.issue.identifier.clone(),
        );
        let host = self.host_named(entry.facts.ssh_host.as_deref());
        let path = entry.facts.workspace_path.clone();
        self.features.hosts.pool.unstick(&id);
        let label = crate::orchestrator::core::io_pool::JobLabel::new(
            "workspace removal",
            identifier.clone(),
        );
        self.spawn_io(
            crate::orchestrator::core::io::Lane::Work,
            label,
            move || {
                let removed = match (&path, &host) {
                    (_, Some(h)) => ws.remove_on(&id, &identifier, Some(h)),
                    (Some(p), None) => ws.remove_path(&id, &identifier, p),
                    (None, None) => ws.remove(&id, &identifier),
                };
                if let Err(e) = removed {
                    log::warn!(
                        issue_id:% = id,
                        issue_identifier:% = identifier,
                        error:% = e.to_string();
                        "workspace cleanup failed"
                    );
                }
            },
            |_, done| {
                if let Err(panic) = done {
                    log::error!(panic:% = panic; "workspace removal panicked");
                }
            },
        );
    }

    /// Carries out the step [`decide_exit`] chose.
    fn apply_exit_step(&mut self, entry: &RunningEntry, step: ExitStep) {
        let issue = &entry.facts.issue;
        match step {
            ExitStep::Nothing | ExitStep::KeepQueuedRetry => {}
            ExitStep::Release => self.release(&issue.id),
            ExitStep::Retry {
                attempt,
                delay_ms,
                error,
            } => {
                if !self.breaker_holds(entry, &error) {
                    self.failure_retry(entry, attempt, delay_ms, &error, false);
                }
            }
            ExitStep::RetryUnfixable {
                attempt,
                delay_ms,
                error,
            } => {
                if !self.breaker_holds(entry, &error) {
                    self.failure_retry(entry, attempt, delay_ms, &error, true);
                }
            }
            // Not the failure breaker's: the handoff-absence ceiling parks the issue instead.
            ExitStep::Withheld {
                attempt,
                delay_ms,
                error,
            } => self.failure_retry(entry, attempt, delay_ms, &error, false),
            ExitStep::UsageLimited {
                attempt,
                due_at_ms,
                limit,
            } => self.usage_limit_retry(entry, attempt, due_at_ms, &limit),
            ExitStep::AuthFailed { message } => {
                let kind = persist::route_kind(&entry.facts.route, &self.workflow).to_string();
                self.note_auth_failed(issue, &message, &kind);
                self.release(&issue.id);
            }
            // Steps with tracker calls are applied with their answers (`apply_answers`).
            ExitStep::Park { .. } | ExitStep::Declared { .. } | ExitStep::Continue { .. } => {}
        }
    }

    /// Carries out a step that made tracker calls, with what they answered.
    fn apply_answers(
        &mut self,
        entry: &RunningEntry,
        step: ExitStep,
        answers: ExitAnswers,
        session_id: Option<String>,
    ) {
        let issue = &entry.facts.issue;
        match (step, answers) {
            (
                ExitStep::Park { label, reason },
                ExitAnswers::Park {
                    label: added,
                    state,
                },
            ) => {
                self.park(issue, (label, reason), entry.facts.pass(), added, state);
                self.release(&issue.id);
            }
            (ExitStep::Declared { state, .. }, ExitAnswers::Declared { hop, transition }) => {
                let hopped = hop.is_some_and(|w| self.apply_hop(entry, w, StageOutcome::NoChange));
                if !hopped && let (Some(state), Some(result)) = (state, transition) {
                    self.record_handoff(issue, &state, result);
                }
                self.release(&issue.id);
            }
            (
                ExitStep::Continue { attempt },
                ExitAnswers::Continue {
                    step,
                    hop,
                    transition,
                },
            ) => self.hand_off_or_continue(entry, attempt, session_id, (step, hop, transition)),
            (step, _) => {
                log::error!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    step:% = step.word();
                    "exit answers do not match the step; releasing the claim"
                );
                self.release(&issue.id);
            }
        }
    }

    /// Turns a normal exit that would hand its issue off without evidence of work into a
    /// withheld handoff, before its run is recorded (`tracker.handoff_evidence`).
    fn withhold_unevidenced_handoff(&self, entry: &RunningEntry, result: &mut SupervisorResult) {
        use crate::orchestrator::claim::handoff_evidence::{
            HandoffFacts, withheld_because, withheld_exit,
        };
        if !matches!(result.exit, SupervisorExit::Normal { .. }) {
            return;
        }
        let cfg = &self.workflow.config.tracker;
        let facts = HandoffFacts {
            policy: cfg.handoff_evidence,
            handoff_state: cfg.handoff_state.as_deref(),
            hops: self.plan_stage_hop(entry).is_some(),
            evidence: result.evidence.as_ref(),
        };
        let Some(missing) = withheld_because(&result.exit, &facts) else {
            return;
        };
        log::warn!(
            issue_id:% = entry.facts.issue.id,
            issue_identifier:% = entry.facts.issue.identifier,
            policy:% = cfg.handoff_evidence.as_str(),
            missing:% = missing;
            "handoff withheld: the run shows no evidence of work"
        );
        let exit = std::mem::replace(
            &mut result.exit,
            SupervisorExit::Cancelled {
                reason: crate::agent::CancelReason::User,
            },
        );
        result.exit = withheld_exit(exit, missing);
    }

    /// Applies a hop's writes with the plan in force now; `true` when the hop was made.
    fn apply_hop(&mut self, entry: &RunningEntry, write: HopWrite, outcome: StageOutcome) -> bool {
        let made = match self.plan_stage_hop(entry) {
            Some(plan) => self.apply_stage_hop(entry, &plan, write, outcome),
            None => false,
        };
        // A hop releases the claim: the claim's pending reactions go with it.
        if made {
            self.features.reactions.drop_issue(&entry.facts.issue.id);
        }
        made
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
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            next_attempt:% = attempt,
            delay_ms:% = delay_ms,
            error:% = error.stored();
            "{what}"
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
        self.keep_retry_reaction(&issue.id, entry.facts.reaction.clone());
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
        self.keep_retry_reaction(&issue.id, entry.facts.reaction.clone());
    }

    /// After a session that ended without a declaration: release an issue that left the active
    /// states, hand off when a handoff state is configured (the stage hop, else the handoff
    /// write), otherwise queue a continuation. `answers` are the state read's decision and
    /// what the hop and handoff writes did.
    fn hand_off_or_continue(
        &mut self,
        entry: &RunningEntry,
        attempt: u32,
        session_id: Option<String>,
        answers: (ContinueStep, Option<HopWrite>, Option<TrackerResult<()>>),
    ) {
        let issue = &entry.facts.issue;
        let (step, hop, transition) = answers;
        match step {
            ContinueStep::Release { handoff_skipped } => {
                if handoff_skipped {
                    self.metrics.handoff("skipped");
                }
                self.release(&issue.id);
                return;
            }
            ContinueStep::HandOff { state } => {
                if hop.is_some_and(|w| self.apply_hop(entry, w, StageOutcome::Succeeded)) {
                    self.release(&issue.id);
                    return;
                }
                if let Some(result) = transition
                    && self.record_handoff(issue, &state, result)
                {
                    log::info!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        state:% = state.to_string();
                        "handoff transition succeeded, releasing claim"
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

    /// Parks an issue for `reason` (its agent needs a person, or its runs kept ending without
    /// evidence of work); the label is best effort. The park holds
    /// against the issue's state in the tracker after the run (`state`): the issue the
    /// supervisor started from may be stale (it moved the issue to `in_progress_state`), and a
    /// park recorded against a stale state would lift on the next poll. When the tracker could
    /// not be read, the in-progress state stands in for a transition that was attempted.
    fn park(
        &mut self,
        issue: &Issue,
        (label, reason): (String, ParkReason),
        pass: Pass,
        added: TrackerResult<()>,
        state: Result<String, crate::orchestrator::claim::exit_calls::StateUnread>,
    ) {
        let label_applied = match added {
            Ok(()) => true,
            Err(e) => {
                log::warn!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    error:% = e.to_string();
                    "parking label failed"
                );
                false
            }
        };
        let parked_state = state.unwrap_or_else(|why| {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                error:% = why;
                "parked issue state not read"
            );
            parked_state_fallback(issue, &self.workflow.config.tracker)
        });
        let park = Park {
            issue: issue.clone(),
            reason,
            parked_at_ms: self.clock.now_ms() / 1000 * 1000,
            parked_state,
            label,
            label_applied,
            dispatched_at_ms: Some(pass.dispatched_at_ms),
            route: Some(pass.route),
        };
        self.reset_hops(&issue.id, "parked");
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            reason:% = park.reason;
            "issue parked"
        );
        persist::park(&self.store, &park);
        self.state.parked.insert(issue.id.clone(), park);
    }

    /// Queues the optional completion/failure comment (never for cancellations).
    pub(crate) fn lifecycle_comment_at_exit(
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
            SupervisorExit::HandoffWithheld { missing, .. } if c.on_failure => (
                Lifecycle::Failure,
                Some(format!("{}: {missing}", ErrorCode::HandoffWithheld)),
            ),
            _ => return,
        };
        self.tracker_ops
            .submit(crate::orchestrator::core::tracker_ops::TrackerOp::Comment {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                lifecycle,
                text: crate::orchestrator::core::tracker_ops::lifecycle_comment(
                    lifecycle,
                    session_id,
                    duration_ms,
                    turns,
                    error.as_deref(),
                    retry.as_deref(),
                ),
            });
    }

    /// Records what the handoff write did; `true` when it moved the issue.
    pub(crate) fn record_handoff(
        &mut self,
        issue: &Issue,
        state: &str,
        result: TrackerResult<()>,
    ) -> bool {
        match result {
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
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    state:% = state,
                    error:% = e.to_string();
                    "handoff transition failed"
                );
                false
            }
        }
    }
}

/// The state a park records when the tracker cannot say: the in-progress state when one is
/// configured (the supervisor moved the issue there at dispatch), else the dispatched state.
pub(crate) fn parked_state_fallback(issue: &Issue, cfg: &TrackerConfig) -> String {
    cfg.in_progress_state
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| issue.state.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_park_without_a_tracker_read_holds_against_the_in_progress_state() {
        let issue = Issue {
            id: "1".into(),
            identifier: "A-1".into(),
            state: "To Do".into(),
            ..Default::default()
        };
        let mut cfg = TrackerConfig {
            active_states: vec!["To Do".into(), "In Progress".into()],
            terminal_states: vec!["Done".into()],
            handoff_state: Some("Human Review".into()),
            ..Default::default()
        };
        assert_eq!(parked_state_fallback(&issue, &cfg), "To Do");
        cfg.in_progress_state = Some("In Progress".into());
        assert_eq!(parked_state_fallback(&issue, &cfg), "In Progress");
    }
}
