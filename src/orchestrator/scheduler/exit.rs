//! Worker exits: the run is recorded first, then the claim is released, retried, handed off
//! or parked.

use super::*;

impl Orchestrator {
    pub(super) fn on_exit(&mut self, result: SupervisorResult) {
        let Some(issue_id) = self.state.dispatch_index.remove(&result.dispatch_id) else {
            return;
        };
        let Some(mut entry) = self.state.running.remove(&issue_id) else {
            return;
        };
        if entry.facts.workspace_path.is_none() {
            entry.facts.workspace_path = result.workspace_path.clone();
        }
        if result.session_id.is_some() {
            entry.facts.session_id = result.session_id.clone();
        }
        let now = self.clock.now_ms();
        let seconds = ((now - entry.facts.started_at_ms).max(0) as f64) / 1000.0;
        self.state.totals.seconds_running += seconds;
        if !entry.facts.tokens_measured {
            self.state.totals.unmeasured_sessions += 1;
            self.metrics.unmeasured_session();
        }
        let status = run_status(&result.exit, entry.facts.budget_stopped);
        self.metrics.worker_exit(status, seconds);
        // Persist the run before any retry is scheduled.
        if let Err(e) = persist::record_run(
            &self.store,
            &self.workflow,
            &entry,
            &result,
            status,
            &self.state.totals,
        ) {
            log::error!(
                "failed to record run issue_id={} issue_identifier={} error=\"{e}\"",
                entry.facts.issue.id,
                entry.facts.issue.identifier
            );
        }
        if entry.facts.pending_cleanup {
            let ws = self.workspaces();
            let removed = match &entry.facts.workspace_path {
                Some(p) => ws.remove_path(&entry.facts.issue.id, &entry.facts.issue.identifier, p),
                None => ws.remove(&entry.facts.issue.id, &entry.facts.issue.identifier),
            };
            if let Err(e) = removed {
                log::warn!(
                    "workspace cleanup failed issue_id={} issue_identifier={} error=\"{e}\"",
                    entry.facts.issue.id,
                    entry.facts.issue.identifier
                );
            }
        }
        if self.draining.is_some() {
            return;
        }
        let issue = entry.facts.issue.clone();
        let next_attempt = entry.facts.attempt + 1;
        let exit_for_comment = result.exit.clone();
        let duration_ms = result.ended_at_ms - entry.facts.started_at_ms;
        let turns = result.turns_completed;
        let session_for_comment = entry.facts.session_id.clone();
        match result.exit {
            SupervisorExit::Cancelled { .. } => {
                // A stall schedules its own retry; other cancellations release the claim.
                if !self.state.retries.contains_key(&issue.id) {
                    self.release(&issue.id);
                }
            }
            SupervisorExit::Error {
                code,
                message,
                retryable,
            } => {
                if retryable {
                    let delay = failure_delay_ms(next_attempt, self.backoff_cap());
                    log::warn!(
                        "worker run failed, scheduling retry issue_id={} issue_identifier={} next_attempt={} delay_ms={} error=\"{}: {}\"",
                        issue.id,
                        issue.identifier,
                        next_attempt,
                        delay,
                        code,
                        message
                    );
                    self.schedule_retry(
                        &issue,
                        next_attempt,
                        delay,
                        "error",
                        Some(format!("worker exited: {code}: {message}")),
                        None,
                        entry.facts.dispatched_at_ms,
                    );
                } else {
                    log::error!(
                        "worker run failed, non-retryable, releasing claim issue_id={} issue_identifier={} error=\"{}: {}\"",
                        issue.id,
                        issue.identifier,
                        code,
                        message
                    );
                    self.release(&issue.id);
                }
            }
            SupervisorExit::Normal {
                declared,
                statement: _,
            } => self.on_normal_exit(&entry, declared, result.session_id),
        }
        self.lifecycle_comment_at_exit(
            &issue,
            &exit_for_comment,
            session_for_comment.as_deref(),
            duration_ms,
            turns,
        );
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
            SupervisorExit::Normal { .. } if c.on_completion => ("completion", None),
            SupervisorExit::Error { code, message, .. } if c.on_failure => {
                ("failure", Some(format!("{code}: {message}")))
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

    pub(super) fn on_normal_exit(
        &mut self,
        entry: &RunningEntry,
        declared: Option<DeclaredOutcome>,
        session_id: Option<String>,
    ) {
        let issue = &entry.facts.issue;
        let cfg = self.workflow.config.tracker.clone();
        match declared {
            Some(DeclaredOutcome::Blocked) => {
                let label = DEFAULT_PARKING_LABEL.to_string();
                let label_applied = match self.tracker.add_label(&issue.id, &label) {
                    Ok(()) => true,
                    Err(e) => {
                        log::warn!(
                            "parking label failed issue_id={} issue_identifier={} error=\"{e}\"",
                            issue.id,
                            issue.identifier
                        );
                        false
                    }
                };
                let park = Park {
                    issue: issue.clone(),
                    reason: "agent_blocked".into(),
                    parked_at_ms: self.clock.now_ms() / 1000 * 1000,
                    parked_state: issue.state.clone(),
                    label,
                    label_applied,
                };
                log::info!(
                    "issue parked issue_id={} issue_identifier={} reason=agent_blocked",
                    issue.id,
                    issue.identifier
                );
                persist::park(&self.store, &park);
                self.state.parked.insert(issue.id.clone(), park);
                self.release(&issue.id);
            }
            Some(DeclaredOutcome::NoChangeNeeded) => {
                if let Some(state) = cfg.no_change_state.as_deref() {
                    self.transition_and_record(issue, state);
                }
                self.release(&issue.id);
            }
            Some(DeclaredOutcome::NeedsHumanReview) => {
                if let Some(state) = cfg.handoff_state.as_deref() {
                    self.transition_and_record(issue, state);
                }
                self.release(&issue.id);
            }
            None => {
                let current = self
                    .tracker
                    .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
                    .ok()
                    .and_then(|m| m.get(&issue.id).cloned());
                let still_active = match &current {
                    Some(s) => {
                        state_in(s, &cfg.active_states) && !state_in(s, &cfg.terminal_states)
                    }
                    // Unknown (read failed): assume still active, as the worker last saw it.
                    None => true,
                };
                if !still_active {
                    if cfg.handoff_state.is_some() {
                        self.metrics.handoff("skipped");
                    }
                    self.release(&issue.id);
                    return;
                }
                if let Some(state) = cfg.handoff_state.as_deref()
                    && self.transition_and_record(issue, state)
                {
                    log::info!(
                        "handoff transition succeeded, releasing claim issue_id={} issue_identifier={} state=\"{}\"",
                        issue.id,
                        issue.identifier,
                        state
                    );
                    self.release(&issue.id);
                    return;
                }
                self.schedule_retry(
                    issue,
                    entry.facts.attempt + 1,
                    CONTINUATION_DELAY_MS,
                    "continuation",
                    None,
                    session_id,
                    entry.facts.dispatched_at_ms,
                );
            }
        }
    }

    pub(super) fn transition_and_record(&mut self, issue: &Issue, state: &str) -> bool {
        match self.tracker.transition_issue(&issue.id, state) {
            Ok(()) => {
                self.metrics.handoff("success");
                self.state
                    .outcomes
                    .insert(issue.id.clone(), ("handed_off".into(), state.to_string()));
                persist::set_outcome(
                    &self.store,
                    &issue.id,
                    &issue.identifier,
                    "handed_off",
                    state,
                );
                true
            }
            Err(e) => {
                self.metrics.handoff("error");
                log::warn!(
                    "handoff transition failed issue_id={} issue_identifier={} state=\"{}\" error=\"{e}\"",
                    issue.id,
                    issue.identifier,
                    state
                );
                false
            }
        }
    }
}
