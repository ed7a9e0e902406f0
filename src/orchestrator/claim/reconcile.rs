//! Reconciliation with the tracker: stall detection, state refresh of running issues, and the
//! sweep of workspaces of terminal issues.

use crate::orchestrator::core::orchestrator::*;
use crate::workspace::retention::RetentionCounts;

impl Orchestrator {
    /// Cancels sessions whose agent sent no event within the stall timeout and queues their
    /// retry (the exit then keeps it). Runs at every pass of the loop's timers (at least once
    /// a second), whatever the tracker does.
    pub(crate) fn stop_stalled(&mut self) -> bool {
        let now = self.clock.now_ms();
        let Some(stall) = self
            .workflow
            .config
            .agent
            .stall_timeout_ms
            .filter(|s| *s > 0)
        else {
            return false;
        };
        let mut stalled = Vec::new();
        for e in self.state.running.values() {
            let review = self.features.self_review.progress(&e.facts.dispatch_id);
            let Some(reference) = review.stall_reference_ms(&e.facts) else {
                continue;
            };
            let elapsed = now - reference;
            if elapsed > stall as i64 && e.handles.cancel.reason().is_none() {
                log::warn!(
                    issue_id:% = e.facts.issue.id,
                    issue_identifier:% = e.facts.issue.identifier,
                    elapsed_ms:% = elapsed,
                    stall_timeout_ms:% = stall;
                    "stall detected, cancelling worker"
                );
                stalled.push(e.facts.issue.id.clone());
            }
        }
        let any = !stalled.is_empty();
        for id in stalled {
            let Some(e) = self.state.running.get(&id) else {
                continue;
            };
            e.handles.cancel.cancel(CancelReason::Stall);
            let issue = e.facts.issue.clone();
            let next = e.facts.attempt + 1;
            let pass = e.facts.pass();
            let reaction = e.facts.reaction.clone();
            self.schedule_retry(
                &issue,
                next,
                failure_delay_ms(next, self.backoff_cap()),
                RetryTrigger::Stall,
                Some(crate::orchestrator::claim::run_error::RetryError::Stall.stored()),
                None,
                pass,
            );
            self.keep_retry_reaction(&id, reaction);
        }
        any
    }

    /// When the first running session not yet being stopped passes its stall limit.
    pub(crate) fn next_stall_ms(&self) -> Option<i64> {
        let stall = self
            .workflow
            .config
            .agent
            .stall_timeout_ms
            .filter(|s| *s > 0)?;
        self.state
            .running
            .values()
            .filter(|e| e.handles.cancel.reason().is_none())
            .filter_map(|e| {
                let review = self.features.self_review.progress(&e.facts.dispatch_id);
                review.stall_reference_ms(&e.facts)
            })
            .min()
            .map(|reference| reference.saturating_add(stall as i64))
    }

    /// Applies the poll's read of the running issues' states: an active one keeps running
    /// (with its state updated), a terminal one is stopped and its workspace removed after
    /// the exit, any other is stopped. An issue whose session ended while the read was out
    /// is left alone.
    pub(crate) fn refresh_running_states(
        &mut self,
        asked: Vec<String>,
        states: crate::tracker::TrackerResult<std::collections::BTreeMap<String, String>>,
    ) {
        let states = match states {
            Ok(s) => s,
            Err(e) => {
                log::warn!(
                    error:% = e.to_string();
                    "reconcile state refresh failed; keeping workers"
                );
                return;
            }
        };
        let cfg = self.workflow.config.clone();
        for id in asked {
            let state = states.get(&id).cloned().unwrap_or_default();
            let terminal = state_in(&state, &cfg.tracker.terminal_states);
            let Some(e) = self.state.running.get_mut(&id) else {
                continue;
            };
            // A run that continues a pull-request reaction may work while the issue waits in
            // the handoff state.
            let active = state_in(&state, &cfg.tracker.active_states)
                || (e.facts.reaction.is_some()
                    && cfg
                        .tracker
                        .handoff_state
                        .as_deref()
                        .is_some_and(|h| state_eq(h, &state)));
            if active && !terminal {
                e.facts.issue.state = state;
                self.metrics.reconciliation("keep");
                continue;
            }
            self.metrics
                .reconciliation(if terminal { "cleanup" } else { "stop" });
            let Some(e) = self.state.running.get_mut(&id) else {
                continue;
            };
            if terminal {
                log::info!(
                    issue_id:% = e.facts.issue.id,
                    issue_identifier:% = e.facts.issue.identifier,
                    state:% = state.to_string();
                    "stopping worker for terminal issue"
                );
                e.facts.pending_cleanup = true;
            } else {
                log::info!(
                    issue_id:% = e.facts.issue.id,
                    issue_identifier:% = e.facts.issue.identifier,
                    state:% = state.to_string();
                    "stopping worker for inactive issue"
                );
            }
            e.handles.cancel.cancel(CancelReason::Reconcile);
            if terminal {
                self.state
                    .outcomes
                    .insert(id.clone(), (OutcomeKind::Terminal, state.clone()));
                persist::set_outcome(&self.store, &id, OutcomeKind::Terminal, &state);
            }
            self.cancel_retry(&id);
        }
    }

    /// Removes workspaces of issues that became terminal, on a `work` thread: the listing,
    /// the tracker read and the removals (hooks, SSH hosts) never wait on `orch`. One sweep
    /// at a time; the issues running or queued when it starts are left alone.
    pub(crate) fn sweep_terminal_workspaces(&mut self) {
        if self.sweep_out {
            return;
        }
        let owned: std::collections::HashSet<String> = self
            .state
            .running
            .values()
            .map(|e| e.facts.issue.identifier.clone())
            .chain(
                self.state
                    .retries
                    .values()
                    .map(|r| r.issue.identifier.clone()),
            )
            .chain(
                self.state
                    .settling
                    .values()
                    .map(|s| s.entry.facts.issue.identifier.clone()),
            )
            .collect();
        let sweep = Sweep {
            workspaces: self.workspaces(),
            tracker: self.tracker.clone(),
            store: self.store.clone(),
            worker: self.workflow.config.worker.clone(),
            terminal_states: self.workflow.config.tracker.terminal_states.clone(),
            retention_days: self.workflow.config.workspace.retention_days,
            clock: self.clock.clone(),
            owned,
        };
        self.sweep_out = true;
        self.spawn_io(
            crate::orchestrator::core::io::Lane::Work,
            crate::orchestrator::core::io_pool::JobLabel::new("terminal workspace sweep", ""),
            move || sweep.run(),
            |o: &mut Orchestrator, counts| {
                o.sweep_out = false;
                match counts {
                    Ok(c) => {
                        for _ in 0..c.removed_terminal {
                            o.metrics.reconciliation("sweep_cleanup");
                        }
                        for _ in 0..c.removed_by_age {
                            o.metrics.reconciliation("retention_cleanup");
                        }
                    }
                    Err(panic) => log::error!(panic:% = panic; "terminal workspace sweep panicked"),
                }
            },
        );
    }
}

/// A sweep of workspaces of terminal issues, as it runs off `orch`.
struct Sweep {
    workspaces: Arc<WorkspaceManager>,
    tracker: Arc<dyn TrackerAdapter>,
    store: Arc<Store>,
    worker: crate::config::worker::WorkerConfig,
    terminal_states: Vec<String>,
    /// `workspace.retention_days` (0: off).
    retention_days: u32,
    clock: Arc<dyn crate::clock::Clock>,
    /// Identifiers of the issues running or queued when the sweep started.
    owned: std::collections::HashSet<String>,
}

impl Sweep {
    /// Removes the workspaces of terminal issues, then (with retention on) the aged-out ones
    /// among the rest; returns what it did.
    fn run(self) -> RetentionCounts {
        let mut counts = RetentionCounts::default();
        let (dirs, owned): (Vec<String>, Vec<String>) = self
            .workspaces
            .list_workspace_dirs()
            .into_iter()
            .partition(|d| !self.owned.contains(d));
        counts.in_flight = owned.len();
        if dirs.is_empty() {
            return counts;
        }
        let host_of = |i: &str| {
            crate::orchestrator::features::hosts::hooks::workspace_host_in(
                &self.store,
                &self.worker,
                i,
            )
        };
        let mut terminal = Vec::new();
        match self.tracker.fetch_issue_states_by_identifiers(&dirs) {
            Ok(states) => {
                terminal = states
                    .into_iter()
                    .filter(|(_, s)| state_in(s, &self.terminal_states))
                    .map(|(k, _)| k)
                    .collect();
                counts.removed_terminal = self.workspaces.cleanup_terminal_on(&terminal, host_of);
                if counts.removed_terminal > 0 {
                    log::info!(count:% = counts.removed_terminal; "removed workspaces of terminal issues");
                }
            }
            Err(e) => log::warn!(error:% = e.to_string(); "terminal workspace sweep failed"),
        }
        if self.retention_days > 0 {
            self.retain(&dirs, &terminal, &mut counts);
        }
        counts
    }

    /// The age bound over the workspaces the terminal pass left, logged as one summary line.
    fn retain(&self, dirs: &[String], terminal: &[String], counts: &mut RetentionCounts) {
        let rest: Vec<String> = dirs
            .iter()
            .filter(|d| !terminal.contains(d))
            .cloned()
            .collect();
        let activity = match self
            .store
            .read_conn()
            .and_then(|c| c.workspace_last_activity())
        {
            Ok(a) => a,
            Err(e) => {
                counts.not_evaluated += rest.len();
                log::warn!(error:% = e.to_string(); "workspace retention skipped: run records unreadable");
                return;
            }
        };
        self.workspaces.remove_aged(
            &rest,
            &activity,
            self.clock.now_ms(),
            self.retention_days,
            |i| {
                crate::orchestrator::features::hosts::hooks::workspace_host_in(
                    &self.store,
                    &self.worker,
                    i,
                )
            },
            counts,
        );
        log::info!(
            retention_days:% = self.retention_days,
            in_flight:% = counts.in_flight,
            removed_terminal:% = counts.removed_terminal,
            removed_by_age:% = counts.removed_by_age,
            retained_in_window:% = counts.retained_in_window,
            retained_no_record:% = counts.retained_no_record,
            retained_locked:% = counts.retained_locked,
            not_evaluated:% = counts.not_evaluated;
            "workspace sweep"
        );
    }
}
