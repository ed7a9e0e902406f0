//! Reconciliation with the tracker: stall detection, state refresh of running issues, and the
//! sweep of workspaces of terminal issues.

use super::*;

impl Orchestrator {
    pub(super) fn reconcile(&mut self) {
        self.stop_stalled();
        self.refresh_running_states();
    }

    /// Cancels sessions whose agent sent no event within the stall timeout and queues their
    /// retry (the exit then keeps it).
    fn stop_stalled(&mut self) {
        let now = self.clock.now_ms();
        if let Some(stall) = self
            .workflow
            .config
            .agent
            .stall_timeout_ms
            .filter(|s| *s > 0)
        {
            let mut stalled = Vec::new();
            for e in self.state.running.values() {
                let Some(reference) = e.facts.stall_reference_ms() else {
                    continue;
                };
                let elapsed = now - reference;
                if elapsed > stall as i64 && e.handles.cancel.reason().is_none() {
                    log::warn!(
                        "stall detected, cancelling worker issue_id={} issue_identifier={} elapsed_ms={} stall_timeout_ms={}",
                        e.facts.issue.id,
                        e.facts.issue.identifier,
                        elapsed,
                        stall
                    );
                    stalled.push(e.facts.issue.id.clone());
                }
            }
            for id in stalled {
                let Some(e) = self.state.running.get(&id) else {
                    continue;
                };
                e.handles.cancel.cancel(CancelReason::Stall);
                let issue = e.facts.issue.clone();
                let next = e.facts.attempt + 1;
                let pass = e.facts.pass();
                self.schedule_retry(
                    &issue,
                    next,
                    failure_delay_ms(next, self.backoff_cap()),
                    RetryTrigger::Stall,
                    Some(crate::orchestrator::run_error::RetryError::Stall.stored()),
                    None,
                    pass,
                );
            }
        }
    }

    /// Reads the tracker state of every running issue: an active one keeps running (with its
    /// state updated), a terminal one is stopped and its workspace removed after the exit, any
    /// other is stopped.
    fn refresh_running_states(&mut self) {
        if self.state.running.is_empty() {
            return;
        }
        let ids: Vec<String> = self.state.running.keys().cloned().collect();
        let states = match self.tracker.fetch_issue_states_by_ids(&ids) {
            Ok(s) => s,
            Err(e) => {
                log::warn!(
                    "reconcile state refresh failed; keeping workers error={:?}",
                    e.to_string()
                );
                return;
            }
        };
        let cfg = self.workflow.config.clone();
        for id in ids {
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
                    "stopping worker for terminal issue issue_id={} issue_identifier={} state={:?}",
                    e.facts.issue.id,
                    e.facts.issue.identifier,
                    state.to_string()
                );
                e.facts.pending_cleanup = true;
            } else {
                log::info!(
                    "stopping worker for inactive issue issue_id={} issue_identifier={} state={:?}",
                    e.facts.issue.id,
                    e.facts.issue.identifier,
                    state.to_string()
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

    pub(super) fn sweep_terminal_workspaces(&mut self) {
        let ws = self.workspaces();
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
            .collect();
        let dirs: Vec<String> = ws
            .list_workspace_dirs()
            .into_iter()
            .filter(|d| !owned.contains(d))
            .collect();
        if dirs.is_empty() {
            return;
        }
        match self.tracker.fetch_issue_states_by_identifiers(&dirs) {
            Ok(states) => {
                let terminal: Vec<String> = states
                    .into_iter()
                    .filter(|(_, s)| state_in(s, &self.workflow.config.tracker.terminal_states))
                    .map(|(k, _)| k)
                    .collect();
                let removed = ws.cleanup_terminal_on(&terminal, |i| self.workspace_host(i));
                for _ in 0..removed {
                    self.metrics.reconciliation("sweep_cleanup");
                }
                if removed > 0 {
                    log::info!("removed workspaces of terminal issues count={removed}");
                }
            }
            Err(e) => log::warn!("terminal workspace sweep failed error={:?}", e.to_string()),
        }
    }
}
