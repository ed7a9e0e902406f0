//! The poll tick: reload, preflight, reconcile, fetch, sort, budget holds, park releases and
//! the dispatch pass.

use super::*;

impl Orchestrator {
    pub(super) fn reload_workflow(&mut self) -> bool {
        let now = self.clock.now_ms();
        match super::super::reload::reload(&self.workflow.path, &self.load_options) {
            Ok((wf, template)) => {
                if wf.config != self.workflow.config
                    || wf.prompt_template != self.workflow.prompt_template
                {
                    log::info!("workflow reloaded path={}", wf.path.display());
                }
                self.workflow = Arc::new(wf);
                self.template = Arc::new(template);
                self.state.health.workflow.record(now, Ok(()));
                true
            }
            Err(e) => {
                log::warn!(
                    "workflow reload failed path={} error=\"{}\"",
                    self.workflow.path.display(),
                    e
                );
                self.state.health.workflow.record(now, Err(e));
                false
            }
        }
    }

    pub(super) fn preflight(&mut self) -> Result<(), String> {
        let mut problems = self.workflow.config.config_preflight();
        if let Err(e) = self.workspaces().preflight_root_writable() {
            problems.push(format!("workspace.root_writable: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "dispatch preflight failed: {}",
                problems.join("; ")
            ))
        }
    }

    /// One poll tick, timed for `sortie_poll_duration_seconds`.
    pub(super) fn tick(&mut self) {
        let started = self.clock.instant();
        self.tick_inner();
        let result = match self.state.health.poll.outcome.as_str() {
            "ok" => "success",
            "preflight_failed" => "skipped",
            _ => "error",
        };
        let secs = self
            .clock
            .instant()
            .saturating_duration_since(started)
            .as_secs_f64();
        self.metrics.poll(secs, result);
    }

    fn tick_inner(&mut self) {
        self.tick_count += 1;
        let now = self.clock.now_ms();
        // 1. Reload (failure keeps the last good workflow).
        let loaded = self.reload_workflow();
        // 2. Database ping and preflight.
        let db = persist::ping(&self.store);
        self.state.health.database.record(now, db);
        let preflight = if loaded {
            self.preflight()
        } else {
            Err(format!(
                "dispatch preflight failed: workflow file cannot be loaded: {}",
                self.state.health.workflow.error.clone().unwrap_or_default()
            ))
        };
        self.state.health.preflight.record(now, preflight.clone());
        // 4. Reconcile running sessions.
        self.reconcile();
        // 5. Periodic sweep.
        if self.tick_count.is_multiple_of(SWEEP_EVERY_TICKS) {
            self.sweep_terminal_workspaces();
        }
        if let Err(e) = preflight {
            log::warn!("{e}");
            self.state
                .health
                .poll
                .record(now, "preflight_failed", Some(e.clone()), 0, 0);
            return;
        }
        // 7. Candidates.
        let fetched = self.tracker.fetch_candidate_issues();
        self.metrics.tracker_request(
            "fetch_candidates",
            if fetched.is_ok() { "success" } else { "error" },
        );
        let mut candidates = match fetched {
            Ok(c) => c,
            Err(e) => {
                log::warn!("failed to fetch candidate issues error=\"{e}\"");
                self.state
                    .health
                    .poll
                    .record(now, "tracker_failed", Some(e.to_string()), 0, 0);
                return;
            }
        };
        sort_candidates(&mut candidates);
        // 9. Budget holds and park releases.
        self.rebuild_budget_holds(&candidates);
        self.release_parks(&candidates);
        // 11. The dispatch pass.
        let input = self.pass_input();
        let decisions = plan(&candidates, &input);
        let mut dispatched = 0;
        let mut held = std::collections::BTreeMap::new();
        for (issue, decision) in candidates.iter().zip(decisions) {
            match decision {
                Decision::Dispatch => {
                    let dispatched_at = now;
                    self.dispatch(issue.clone(), 0, None, dispatched_at);
                    dispatched += 1;
                }
                Decision::Held(reason) => {
                    let since = self
                        .state
                        .held
                        .get(&issue.id)
                        .map(|h| h.since_ms)
                        .unwrap_or(now);
                    held.insert(
                        issue.id.clone(),
                        Held {
                            issue: issue.clone(),
                            reason,
                            since_ms: since,
                        },
                    );
                }
                Decision::Skip(_) => {}
            }
        }
        self.state.held = held;
        self.state
            .health
            .poll
            .record(now, "ok", None, candidates.len(), dispatched);
        log::info!(
            "tick completed candidates={} dispatched={} running={} retrying={}",
            candidates.len(),
            dispatched,
            self.state.running.len(),
            self.state.retries.len()
        );
    }

    pub(super) fn pass_input(&self) -> PassInput {
        let cfg = &self.workflow.config;
        let mut running_by_state = std::collections::BTreeMap::new();
        for e in self.state.running.values() {
            *running_by_state
                .entry(e.facts.issue.state.trim().to_lowercase())
                .or_insert(0) += 1;
        }
        PassInput {
            running_total: self.state.running.len(),
            running_by_state,
            claimed: self.state.claimed(),
            budget_held: self.state.budget_held.keys().cloned().collect(),
            parked: self.state.parked.keys().cloned().collect(),
            ..PassInput::from_config(cfg)
        }
    }

    /// The budget hold of one issue, if a per-issue ceiling is reached. `usage` is what the
    /// issue spent according to run history (`None`: read it now).
    pub(super) fn budget_hold_for(
        &self,
        issue: &Issue,
        usage: Option<crate::store::IssueUsage>,
    ) -> Option<BudgetHold> {
        let cfg = &self.workflow.config.agent;
        let max_tokens = cfg.max_tokens.filter(|l| *l > 0);
        let max_sessions = cfg.max_sessions.filter(|l| *l > 0);
        if max_tokens.is_none() && max_sessions.is_none() {
            return None;
        }
        let usage = match usage {
            Some(u) => u,
            None => {
                let sessions = persist::count_sessions(&self.store, &issue.id);
                let tokens = persist::uncached_tokens_for_issue(&self.store, &issue.id);
                match (sessions, tokens) {
                    (Ok(s), Ok(t)) => crate::store::IssueUsage {
                        sessions: s as i64,
                        uncached_tokens: t as i64,
                    },
                    (Err(e), _) | (_, Err(e)) => {
                        // Fail open: a budget read failure must not stop all work.
                        log::warn!("budget read failed issue_id={} error=\"{e}\"", issue.id);
                        return None;
                    }
                }
            }
        };
        let now = self.clock.now_ms();
        let hold = |reason, used: i64, limit| BudgetHold {
            issue: issue.clone(),
            reason,
            used: used.max(0) as u64,
            limit,
            since_ms: now,
        };
        if let Some(limit) = max_tokens
            && usage.uncached_tokens.max(0) as u64 >= limit
        {
            return Some(hold("token_budget", usage.uncached_tokens, limit));
        }
        if let Some(limit) = max_sessions
            && usage.sessions.max(0) as u64 >= limit
        {
            return Some(hold("session_budget", usage.sessions, limit));
        }
        None
    }

    pub(super) fn rebuild_budget_holds(&mut self, candidates: &[Issue]) {
        let cfg = &self.workflow.config.agent;
        if cfg.max_tokens.unwrap_or(0) == 0 && cfg.max_sessions.unwrap_or(0) == 0 {
            self.state.budget_held.clear();
            return;
        }
        let usage = match persist::usage_by_issue(&self.store) {
            Ok(u) => u,
            Err(e) => {
                log::warn!("budget read failed; keeping the previous holds error=\"{e}\"");
                return;
            }
        };
        let mut holds = std::collections::BTreeMap::new();
        for issue in candidates {
            if self.state.running.contains_key(&issue.id) {
                continue;
            }
            let used = usage.get(&issue.id).copied().unwrap_or_default();
            if let Some(mut h) = self.budget_hold_for(issue, Some(used)) {
                if let Some(prev) = self.state.budget_held.get(&issue.id) {
                    h.since_ms = prev.since_ms;
                } else {
                    log::warn!(
                        "effort budget exhausted, blocking re-dispatch issue_id={} issue_identifier={} reason={} used={} limit={}",
                        issue.id,
                        issue.identifier,
                        h.reason,
                        h.used,
                        h.limit
                    );
                }
                holds.insert(issue.id.clone(), h);
            }
        }
        self.state.budget_held = holds;
    }

    /// A park lifts when the issue's state changed since it was parked, or when a person
    /// removed the label Sortie applied.
    pub(super) fn release_parks(&mut self, candidates: &[Issue]) {
        let mut lifted = Vec::new();
        for issue in candidates {
            if let Some(p) = self.state.parked.get(&issue.id) {
                let state_moved = !crate::domain::state_eq(&p.parked_state, &issue.state);
                let label_removed = p.label_applied
                    && !issue
                        .labels
                        .iter()
                        .any(|l| l.eq_ignore_ascii_case(&p.label));
                if state_moved || label_removed {
                    lifted.push(issue.id.clone());
                }
            }
        }
        for id in lifted {
            if let Some(p) = self.state.parked.remove(&id) {
                log::info!(
                    "park lifted issue_id={} issue_identifier={}",
                    p.issue.id,
                    p.issue.identifier
                );
                persist::unpark(&self.store, &id);
            }
        }
    }
}
