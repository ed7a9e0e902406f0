//! The poll tick: reload, preflight, reconcile, fetch, sort, budget holds, spend windows, park
//! releases and the dispatch pass.

use crate::orchestrator::core::orchestrator::*;

impl Orchestrator {
    pub(crate) fn reload_workflow(&mut self) -> bool {
        self.reload_workflow_on(false)
    }

    /// Reloads the workflow; `written` when the watcher saw the file written. A load that
    /// changed the workflow, or follows a write of the file, lifts the agent login holds.
    pub(crate) fn reload_workflow_on(&mut self, written: bool) -> bool {
        let now = self.clock.now_ms();
        let loaded =
            crate::orchestrator::core::reload::reload(&self.workflow.path, &self.load_options)
                .and_then(|(wf, template)| {
                    let rebuilt = crate::orchestrator::core::reload::rebuild_adapters(
                        &self.workflow,
                        &wf,
                        self.clock.clone(),
                    )?;
                    Ok((wf, template, rebuilt))
                });
        match loaded {
            Ok((mut wf, template, rebuilt)) => {
                wf.config
                    .keep_previous_rates(&self.workflow.config.token_rates);
                let changed = wf.config != self.workflow.config
                    || wf.prompt_template != self.workflow.prompt_template;
                if changed {
                    log::info!(path:% = wf.path.display(); "workflow reloaded");
                }
                if let Some(t) = rebuilt.tracker {
                    log::info!(
                        kind:% = wf.config.tracker.kind;
                        "tracker settings changed, tracker adapter rebuilt"
                    );
                    self.tracker_ops.use_tracker(t.clone());
                    self.tracker = t;
                }
                if let Some(a) = rebuilt.agent {
                    log::info!(
                        kind:% = wf.config.agent.kind,
                        command:% = crate::mask::mask(wf.config.agent.command.as_deref().unwrap_or(""));
                        "agent settings changed, agent adapter rebuilt for new dispatches"
                    );
                    self.agent = a;
                }
                self.prices.set_token_rates(wf.config.token_rates.clone());
                self.prices
                    .apply_settings(wf.config.price_table.clone(), now);
                self.workflow = Arc::new(wf);
                self.template = Arc::new(template);
                self.state.health.workflow.record(now, Ok(()));
                if changed || written {
                    self.features_on_reload();
                    self.release_failure_holds_after_reload();
                }
                true
            }
            Err(e) => {
                log::warn!(
                    path:% = self.workflow.path.display(),
                    error:% = e;
                    "workflow reload failed"
                );
                if crate::config::is_replace_file_error(&e.to_string()) {
                    self.prices.file_load_failed(now, e.to_string());
                }
                self.state.health.workflow.record(now, Err(e));
                false
            }
        }
    }

    pub(crate) fn preflight(&mut self) -> Result<(), PreflightError> {
        let mut problems = self.workflow.config.config_preflight();
        problems.extend(
            self.workflow
                .config
                .agent_command_problem()
                .map(|p| p.message),
        );
        problems.extend(
            self.workflow
                .config
                .sandbox_problem(false)
                .map(|p| p.message),
        );
        problems.extend(
            self.workflow
                .config
                .host_capacity_problem(false)
                .map(|p| p.message),
        );
        if let Err(e) = self.workspaces().preflight_root_writable() {
            problems.push(format!("workspace.root_writable: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PreflightError::Checks { problems })
        }
    }

    /// A poll tick: reload, database check and preflight on `orch`, then the tracker reads on
    /// the poll thread ([`poll_reads`]), applied by [`Orchestrator::finish_poll`]. A tick
    /// that finds the previous poll's reads still out is skipped and counted: it never queues
    /// behind a tracker that does not answer.
    pub(crate) fn tick(&mut self) {
        self.tick_count += 1;
        let now = self.clock.now_ms();
        // Reload. A failure keeps the last good workflow in effect: the workflow health check
        // fails with the error, and dispatch continues under the last good config.
        self.reload_workflow();
        // Database ping (queued behind the writes before it; answered off this thread) and
        // preflight.
        let ping = persist::ping_queued(&self.store);
        let preflight = self.preflight();
        self.state.health.preflight.record(now, preflight.clone());
        if self.poll_out.is_some() {
            self.ping_alone(ping, now);
            self.state.health.poll.ticks_skipped += 1;
            self.skipped_while_out += 1;
            self.metrics.poll_skipped();
            // Once per outstanding poll; its end says how many ticks it cost.
            if self.skipped_while_out == 1 {
                log::warn!(
                    in_flight_ms:% = now - self.state.health.poll.in_flight_since_ms.unwrap_or(now);
                    "poll tick skipped: the previous poll's tracker reads are still out"
                );
            }
            return;
        }
        // Periodic sweep of workspaces of terminal issues.
        if self.tick_count.is_multiple_of(SWEEP_EVERY_TICKS) {
            self.sweep_terminal_workspaces();
        }
        let candidates = match preflight {
            Ok(()) => {
                // Pull-request reactions that are due.
                self.check_reactions();
                Some(self.candidate_ask())
            }
            Err(e) => {
                log::warn!(error:% = e; "dispatch preflight failed; nothing is dispatched this tick");
                self.state.health.poll.record(
                    now,
                    PollOutcome::PreflightFailed,
                    Some(e.to_string()),
                    0,
                    0,
                );
                self.metrics.poll(0.0, "skipped");
                None
            }
        };
        let running_ids: Vec<String> = self.state.running.keys().cloned().collect();
        if candidates.is_none() && running_ids.is_empty() {
            self.ping_alone(ping, now);
            return;
        }
        let ask = PollAsk {
            tracker: self.tracker.clone(),
            ping,
            running_ids,
            candidates,
        };
        let started = self.clock.instant();
        self.poll_out = Some(started);
        self.settled_while_polling.clear();
        self.state.health.poll.in_flight_since_ms = Some(now);
        self.spawn_io(
            super::io::Lane::Poll,
            crate::orchestrator::core::io_pool::JobLabel::new("poll", ""),
            move || poll_reads(ask),
            move |o: &mut Orchestrator, read| o.finish_poll(read, started, now),
        );
    }

    /// Waits for a ping no poll carries on a work lane and records its answer; while one is
    /// still out, a newer one is dropped (its answer would say the same).
    fn ping_alone(&mut self, ping: persist::PendingPing, at: i64) {
        if self.ping_out {
            return;
        }
        self.ping_out = true;
        self.spawn_io(
            super::io::Lane::Work,
            crate::orchestrator::core::io_pool::JobLabel::new("database ping", ""),
            move || ping.wait(),
            move |o: &mut Orchestrator, answer| {
                o.ping_out = false;
                let answer = answer.unwrap_or_else(|panic| {
                    log::error!(panic:% = panic; "database ping panicked");
                    Err(ping_lost())
                });
                o.record_database_check(at, answer);
            },
        );
    }

    /// Records the database check of the tick at `at`: the writer's ping answer, failed too
    /// while the last budget read failed.
    fn record_database_check(&mut self, at: i64, ping: Result<(), persist::PersistError>) {
        let db = ping.and_then(|()| match self.state.health.budget_read_failure.clone() {
            Some(e) => Err(e),
            None => Ok(()),
        });
        self.state.health.database.record(at, db);
    }

    /// What the candidate read needs from `orch`: the pass input the blocker lists are read
    /// ahead for, the parks a listing may lift, and the stage hops a read must confirm.
    fn candidate_ask(&mut self) -> CandidateAsk {
        let input = self.gated_pass_input(crate::orchestrator::core::feature::PassKind::Tick);
        let hops = self.features.stages.unconfirmed_targets();
        CandidateAsk {
            input,
            parked: self.state.parked.values().cloned().collect(),
            park_released: self.state.park_released.clone(),
            hops,
        }
    }

    /// Applies a poll's reads: the running issues' states, then (when the candidates were
    /// read) budget holds, spend windows, park releases, hop confirmations and the dispatch
    /// pass. Timed for `sortie_poll_duration_seconds` from the tick's start.
    fn finish_poll(
        &mut self,
        read: Result<PollRead, crate::orchestrator::core::io_pool::CallPanicked>,
        started: Instant,
        tick_at: i64,
    ) {
        self.poll_out = None;
        self.state.health.poll.in_flight_since_ms = None;
        let now = self.clock.now_ms();
        if self.skipped_while_out > 0 {
            log::warn!(
                took_ms:% = self.clock
                    .instant()
                    .saturating_duration_since(started)
                    .as_millis(),
                ticks_skipped:% = self.skipped_while_out;
                "slow poll answered"
            );
            self.skipped_while_out = 0;
        }
        let read = match read {
            Ok(r) => r,
            Err(panic) => {
                log::error!(panic:% = panic; "poll reads panicked");
                self.record_database_check(tick_at, Err(ping_lost()));
                self.state.health.poll.record(
                    now,
                    PollOutcome::TrackerFailed,
                    Some(format!("poll reads panicked: {panic}")),
                    0,
                    0,
                );
                return;
            }
        };
        self.record_database_check(tick_at, read.ping);
        if let Some(states) = read.running_states {
            self.refresh_running_states(read.running_ids, states);
        }
        let Some(c) = read.candidates else {
            return;
        };
        let pass_started = self.clock.instant();
        self.finish_candidates(c, now);
        self.metrics.dispatch_pass(
            self.clock
                .instant()
                .saturating_duration_since(pass_started)
                .as_secs_f64(),
        );
        let result = match self.state.health.poll.outcome {
            Some(PollOutcome::Ok) => "success",
            Some(PollOutcome::PreflightFailed) => "skipped",
            Some(PollOutcome::TrackerFailed) | None => "error",
        };
        let secs = self
            .clock
            .instant()
            .saturating_duration_since(started)
            .as_secs_f64();
        self.metrics.poll(secs, result);
    }

    fn finish_candidates(&mut self, c: CandidatesRead, now: i64) {
        self.state.health.tracker_rate_limit = c.rate_limit;
        self.metrics.tracker_request(
            "fetch_candidates",
            if c.issues.is_ok() { "success" } else { "error" },
        );
        for (result, n) in [(true, c.blocker_reads.0), (false, c.blocker_reads.1)] {
            for _ in 0..n {
                self.metrics
                    .tracker_request("fetch_blockers", if result { "success" } else { "error" });
            }
        }
        let candidates = match c.issues {
            Ok(c) => c,
            Err(e) => {
                log::warn!(error:% = e; "failed to fetch candidate issues");
                self.state.health.poll.record(
                    now,
                    PollOutcome::TrackerFailed,
                    Some(e.to_string()),
                    0,
                    0,
                );
                return;
            }
        };
        // Budget holds, spend windows and park releases.
        self.rebuild_budget_holds(&candidates);
        self.features_on_tick();
        self.release_parks(&candidates);
        self.release_failure_holds_of_inactive(&candidates);
        // The dispatch pass, unless the database cannot take writes or a budget read failed.
        let dispatched = if self.store_blocks_dispatch() {
            0
        } else {
            // The shared listing is copied only when a hop confirmation may relabel an issue.
            let confirmed: Vec<Arc<Issue>>;
            let listing: &[Arc<Issue>] = if self.features.stages.awaits_confirmation() {
                let mut copy = candidates.to_vec();
                self.confirm_hops(&mut copy, c.hop_reads);
                confirmed = copy;
                &confirmed
            } else {
                self.confirm_hops(&mut [], c.hop_reads);
                &candidates
            };
            self.run_pass(listing, &c.blockers, c.comments, now)
        };
        self.state
            .health
            .poll
            .record(now, PollOutcome::Ok, None, candidates.len(), dispatched);
        log::info!(
            candidates:% = candidates.len(),
            dispatched:% = dispatched,
            running:% = self.state.running.len(),
            retrying:% = self.state.retries.len();
            "tick completed"
        );
    }

    /// Dispatches what the pass decides and replaces the pass holds; returns how many issues
    /// were dispatched. A hold that is exactly as it was (same issue, same reason) is moved
    /// over from the previous tick rather than copied. Blocker lists and a released park's
    /// comments come from the poll's reads.
    fn run_pass(
        &mut self,
        candidates: &[Arc<Issue>],
        blockers: &BlockerLists,
        mut comments: CommentReads,
        now: i64,
    ) -> usize {
        let mut input = self.gated_pass_input(crate::orchestrator::core::feature::PassKind::Tick);
        // Claimed until their exits settled after this poll's reads began: left to the next.
        input.claimed.extend(self.settled_while_polling.drain());
        self.features.stages.end_pass();
        let workspaces = self.workspaces();
        // A workspace that does not exist has no lock: one listing of the root spares a probe
        // (a path resolution and an open) per candidate.
        let existing: std::collections::HashSet<String> =
            workspaces.list_workspace_dirs().into_iter().collect();
        probe_workspace_locks(candidates, &mut input, |identifier| {
            if existing.is_empty() {
                return None;
            }
            WorkspaceManager::sanitize_key(identifier)
                .is_ok_and(|key| existing.contains(&key))
                .then(|| workspaces.lock_holder(identifier))
                .flatten()
        });
        let mut read_lists = std::collections::BTreeMap::new();
        let decisions = {
            let mut read = crate::orchestrator::claim::dispatch_pass::read_ahead_reader(blockers);
            plan(candidates, &input, &mut |issue: &Issue| {
                let got = read(issue);
                if let Ok(b) = &got {
                    read_lists.insert(issue.id.clone(), b.refs.clone());
                }
                got
            })
        };
        self.declare_demand(&decisions, &input);
        let mut dispatched = 0;
        let (mut previous, rows) = self.state.held.take();
        let previous_len = previous.len();
        let mut kept_all = true;
        let mut held = std::collections::HashMap::with_capacity(previous_len);
        for (listed, decision) in candidates.iter().zip(decisions) {
            // Copied only when it changes or leaves for a dispatch.
            let mut issue = std::borrow::Cow::Borrowed(&**listed);
            if let Some(list) = read_lists.remove(&listed.id) {
                let issue = issue.to_mut();
                issue.blocked_by = list;
                issue.blockers_read = crate::domain::BlockersRead::Complete;
            }
            let decision = match decision {
                Decision::Dispatch => {
                    let read = comments.remove(&listed.id);
                    self.released_park_comments(issue.to_mut(), read)
                }
                other => other,
            };
            match decision {
                Decision::Dispatch => {
                    self.state.park_released.remove(&listed.id);
                    let pass = self.poll_pass(&issue, now);
                    self.dispatch(
                        issue.into_owned(),
                        0,
                        None,
                        pass,
                        crate::orchestrator::core::state::DispatchCause::PollTick,
                        None,
                    );
                    dispatched += 1;
                }
                Decision::Held(reason) => {
                    self.metrics.candidate_hold(reason.code().as_str());
                    let shared = match issue {
                        std::borrow::Cow::Borrowed(_) => Arc::clone(listed),
                        std::borrow::Cow::Owned(changed) => Arc::new(changed),
                    };
                    let (id, row, kept) = next_hold(&mut previous, shared, reason, now);
                    kept_all &= kept;
                    held.insert(id, row);
                }
                Decision::Skip(_) => {}
            }
        }
        log_holds_ended(&previous);
        self.split_between_holds(&mut held);
        // Every hold kept as it was and none ended: the served list stays valid.
        let unchanged = kept_all && previous.is_empty() && held.len() == previous_len;
        self.state.held.replace(held, rows, unchanged);
        dispatched
    }

    /// A released park's next run receives the comments a person left: the poll read them
    /// for every issue whose park was released, and an issue whose read failed (or was not
    /// made) is held (`park_comments_unread`), so the next poll reads again.
    fn released_park_comments(
        &self,
        issue: &mut Issue,
        read: Option<crate::tracker::TrackerResult<Vec<crate::domain::Comment>>>,
    ) -> Decision {
        if !self.state.park_released.contains(&issue.id) {
            return Decision::Dispatch;
        }
        let result = if matches!(read, Some(Ok(_))) {
            "success"
        } else {
            "error"
        };
        self.metrics.tracker_request("fetch_comments", result);
        match read {
            Some(Ok(comments)) => {
                issue.comments = Some(comments);
                Decision::Dispatch
            }
            other => {
                let error = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "not read with this poll".to_string(),
                };
                log::warn!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    error:% = error;
                    "comments of a released park could not be read"
                );
                Decision::Held(HoldReason::ParkCommentsUnread)
            }
        }
    }

    /// Tells the daemon-wide cap how many sessions this pass would start: the ones it
    /// dispatches and the ones only the shared cap holds back, within this workflow's own cap.
    fn declare_demand(&self, decisions: &[Decision], input: &PassInput) {
        let Some(slots) = &self.daemon_slots else {
            return;
        };
        let wanted = decisions
            .iter()
            .filter(|d| {
                matches!(
                    d,
                    Decision::Dispatch
                        | Decision::Held(HoldReason::AgentSlotsFull {
                            scope: crate::orchestrator::claim::dispatch_pass::SlotScope::Daemon,
                            ..
                        })
                )
            })
            .count();
        let own_room = input
            .max_concurrent_agents
            .saturating_sub(input.running_total);
        slots.declare_demand(wanted.min(own_room), self.clock.now_ms());
    }

    pub(crate) fn pass_input(&self) -> PassInput {
        let mut input = self.pass_input_without_hosts();
        input.ssh_room = self.features.hosts.room(&self.cx());
        input.daemon = self
            .daemon_slots
            .as_ref()
            .map(|d| d.pass_room(self.clock.now_ms()));
        input
    }

    /// The pass input with every standing gate in its declared order: the failure breaker's
    /// (from [`Orchestrator::pass_input`]), then the features' (`features::Features`).
    pub(crate) fn gated_pass_input(
        &self,
        pass: crate::orchestrator::core::feature::PassKind,
    ) -> PassInput {
        let mut input = self.pass_input();
        input.gates.extend(self.feature_gates(pass));
        input
    }

    fn pass_input_without_hosts(&self) -> PassInput {
        let mut input = PassInput::new(
            &self.workflow.config,
            LiveClaims {
                running_states: self
                    .state
                    .running
                    .values()
                    .map(|e| e.facts.issue.state.clone())
                    .collect(),
                claimed: self.state.claimed(),
                budget_held: self.state.budget_held.keys().cloned().collect(),
                parked: self.state.parked.keys().cloned().collect(),
                claimed_identifiers: self.state.claimed_identifiers(),
            },
        );
        // Only a person (or a reload) releases it: no other gate's reason matters.
        input
            .gates
            .push(crate::orchestrator::claim::dispatch_pass::Gate::Issues(
                self.state
                    .failure_held
                    .iter()
                    .map(|(id, h)| (id.clone(), h.hold_reason()))
                    .collect(),
            ));
        input
    }

    /// The budget hold of one issue, if a per-issue ceiling is reached. `usage` is what the
    /// issue spent according to run history (`None`: read it now). A failed read is an error,
    /// never "no hold": budgets fail closed. `dispatched_at_ms` is the pass of the dispatch
    /// the hold blocks (a retry's); `None` takes the issue's newest run's.
    pub(crate) fn budget_hold_for(
        &self,
        issue: &Issue,
        usage: Option<crate::store::IssueUsage>,
        dispatched_at_ms: Option<i64>,
    ) -> Result<Option<BudgetHold>, persist::PersistError> {
        let cfg = &self.workflow.config.agent;
        let max_tokens = cfg.max_tokens.filter(|l| *l > 0);
        let max_sessions = cfg.max_sessions.filter(|l| *l > 0);
        let max_cost =
            crate::orchestrator::features::spend::money_budget::ceiling(cfg.max_cost_usd);
        if max_tokens.is_none() && max_sessions.is_none() && max_cost.is_none() {
            return Ok(None);
        }
        let usage = match usage {
            Some(u) => u,
            None => match persist::usage_for_issue(&self.store, &issue.id) {
                Ok(u) => u,
                Err(e) => {
                    log::error!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        error:% = e;
                        "budget read failed"
                    );
                    return Err(e);
                }
            },
        };
        let now = self.clock.now_ms();
        let count = |n: i64| n.max(0) as u64;
        // The spend is read for the token ceiling only; without one it is not served.
        let spend = max_tokens.map(|_| crate::orchestrator::core::state::HoldSpend {
            uncached_tokens: count(usage.uncached_tokens),
            unmeasured_sessions: count(usage.unmeasured_sessions),
            lower_bound_sessions: count(usage.lower_bound_sessions),
            stopped_in_flight: count(usage.budget_stopped_sessions),
        });
        let money = max_cost
            .map(|c| crate::orchestrator::features::spend::money_budget::hold_money(&usage, c));
        let hold = |reason, used: i64, limit| BudgetHold {
            issue: issue.clone(),
            reason,
            used: used.max(0) as u64,
            limit,
            since_ms: now,
            dispatched_at_ms: dispatched_at_ms.or(usage.latest_dispatched_at_ms),
            spend,
            money,
            route: None,
        };
        // An issue past several ceilings is held for money first, then tokens, then sessions.
        if let Some(m) = money
            && crate::orchestrator::features::spend::money_budget::reached(m.used_usd, m.budget_usd)
        {
            return Ok(Some(hold(BudgetReason::Money, 0, 0)));
        }
        if let Some(limit) = max_tokens
            && usage.uncached_tokens.max(0) as u64 >= limit
        {
            return Ok(Some(hold(
                BudgetReason::Token,
                usage.uncached_tokens,
                limit,
            )));
        }
        if let Some(limit) = max_sessions
            && usage.sessions.max(0) as u64 >= limit
        {
            return Ok(Some(hold(BudgetReason::Session, usage.sessions, limit)));
        }
        Ok(None)
    }

    pub(crate) fn rebuild_budget_holds(&mut self, candidates: &[Arc<Issue>]) {
        let cfg = &self.workflow.config.agent;
        if cfg.max_tokens.unwrap_or(0) == 0
            && cfg.max_sessions.unwrap_or(0) == 0
            && crate::orchestrator::features::spend::money_budget::ceiling(cfg.max_cost_usd)
                .is_none()
        {
            self.state.health.budget_read_failure = None;
            self.replace_budget_holds(std::collections::BTreeMap::new());
            return;
        }
        let usage = match persist::usage_by_issue(&self.store) {
            Ok(u) => u,
            Err(e) => {
                // Budgets fail closed: the database check fails and this tick dispatches
                // nothing (`store_blocks_dispatch`).
                log::error!(
                    error:% = e;
                    "budget read failed; keeping the previous holds, dispatching nothing"
                );
                let now = self.clock.now_ms();
                self.state.health.budget_read_failure = Some(e.clone());
                self.state.health.database.record(now, Err(e));
                return;
            }
        };
        self.state.health.budget_read_failure = None;
        let mut holds = std::collections::BTreeMap::new();
        for issue in candidates {
            if self.state.running.contains_key(&issue.id) {
                continue;
            }
            let used = usage.get(&issue.id).copied().unwrap_or_default();
            if let Ok(Some(mut h)) = self.budget_hold_for(issue, Some(used), None) {
                let prev = self.state.budget_held.get(&issue.id);
                if let Some(prev) = prev {
                    h.since_ms = prev.since_ms;
                    // A hold found on a retry keeps that retry's dispatch context.
                    if prev.dispatched_at_ms.is_some() {
                        h.dispatched_at_ms = prev.dispatched_at_ms;
                    }
                }
                // Logged when the hold begins or changes reason, not on every tick.
                if prev.map(|p| p.reason) != Some(h.reason) {
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        reason:% = h.reason,
                        used:% = h.used_text(),
                        limit:% = h.limit_text();
                        "effort budget exhausted, blocking re-dispatch"
                    );
                }
                holds.insert(issue.id.clone(), h);
            }
        }
        self.keep_reaction_budget_holds(&mut holds, &usage);
        self.replace_budget_holds(holds);
    }

    /// Installs this tick's budget holds, logging the ones that ended.
    fn replace_budget_holds(&mut self, holds: std::collections::BTreeMap<String, BudgetHold>) {
        for (id, h) in &self.state.budget_held {
            if !holds.contains_key(id) {
                log::info!(
                    issue_id:% = id,
                    issue_identifier:% = h.issue.identifier,
                    reason:% = h.reason;
                    "budget hold lifted"
                );
            }
        }
        self.state.budget_held = holds;
    }

    /// A park lifts when the issue's state changed since it was parked, or when a person
    /// removed the label Sortie applied ([`park_lifts`]).
    pub(crate) fn release_parks(&mut self, candidates: &[Arc<Issue>]) {
        let mut lifted = Vec::new();
        for issue in candidates {
            if let Some(p) = self.state.parked.get(&issue.id)
                && park_lifts(p, issue)
            {
                lifted.push(issue.id.clone());
            }
        }
        for id in lifted {
            if let Some(p) = self.state.parked.remove(&id) {
                log::info!(
                    issue_id:% = p.issue.id,
                    issue_identifier:% = p.issue.identifier;
                    "park lifted"
                );
                persist::unpark(&self.store, &id);
                self.reset_hops(&id, "unparked");
                self.state.park_released.insert(id);
            }
        }
        // A released issue that left the candidates has no next run to read comments for.
        self.state
            .park_released
            .retain(|id| candidates.iter().any(|c| &c.id == id));
    }
}

/// This tick's hold of `issue`, taken from `previous` when nothing about it changed (then
/// `true`); a hold that began or changed reason is logged (one that stays as it was is not
/// logged again) and keeps the time it began. An issue is unchanged when it is the one the
/// previous hold shares (a tracker that keeps its listing hands out the same issue until it
/// changes); anything else makes a new row, which costs a copy of the served list, never a
/// wrong one.
fn next_hold(
    previous: &mut std::collections::HashMap<String, Held>,
    issue: Arc<Issue>,
    reason: HoldReason,
    now: i64,
) -> (String, Held, bool) {
    match previous.remove_entry(&issue.id) {
        Some((id, prev)) if prev.reason == reason && Arc::ptr_eq(&prev.issue, &issue) => {
            (id, prev, true)
        }
        prev => {
            let prev = prev.map(|(_, p)| p);
            if prev.as_ref().map(|p| p.reason.code()) != Some(reason.code()) {
                log::info!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    reason:% = reason.code();
                    "issue held"
                );
            }
            let id = issue.id.clone();
            let row = Held {
                issue,
                reason,
                since_ms: prev.map(|p| p.since_ms).unwrap_or(now),
            };
            (id, row, false)
        }
    }
}

/// Logs the holds of the previous tick that this tick did not keep.
fn log_holds_ended(ended: &std::collections::HashMap<String, Held>) {
    let mut ended: Vec<(&String, &Held)> = ended.iter().collect();
    ended.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (id, h) in ended {
        log::info!(
            issue_id:% = id,
            issue_identifier:% = h.issue.identifier,
            reason:% = h.reason.code();
            "hold ended"
        );
    }
}

/// Whether the listing `issue` lifts the park `p`: its state changed since it was parked, or
/// a person removed the label Sortie applied.
fn park_lifts(p: &Park, issue: &Issue) -> bool {
    let state_moved = !crate::domain::state_eq(&p.parked_state, &issue.state);
    let label_removed = p.label_applied
        && !issue
            .labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&p.label));
    state_moved || label_removed
}

/// The database check's failure when the thread waiting for the ping's answer panicked.
fn ping_lost() -> persist::PersistError {
    persist::PersistError::store("ping")(crate::store::StoreError::WriterGone)
}

/// Blocker lists the poll read ahead of the pass.
type BlockerLists = std::collections::BTreeMap<
    String,
    Result<crate::tracker::Blockers, crate::orchestrator::claim::dispatch_pass::BlockerMiss>,
>;

/// Comments of released parks the poll read.
type CommentReads =
    std::collections::BTreeMap<String, crate::tracker::TrackerResult<Vec<crate::domain::Comment>>>;

/// What a poll tick reads, gathered on `orch` when it starts.
struct PollAsk {
    tracker: Arc<dyn TrackerAdapter>,
    /// The tick's database ping, waited for here rather than on `orch`.
    ping: persist::PendingPing,
    /// The running issues, whose states reconciliation reads.
    running_ids: Vec<String>,
    /// `None` when preflight failed: only the running issues are read.
    candidates: Option<CandidateAsk>,
}

struct CandidateAsk {
    /// The pass input as of the tick's start: the blocker lists the pass may want are read
    /// ahead with it.
    input: PassInput,
    parked: Vec<Park>,
    park_released: std::collections::BTreeSet<String>,
    /// Issue id → target label of each stage hop no read has confirmed yet.
    hops: std::collections::BTreeMap<String, String>,
}

/// What a poll read.
struct PollRead {
    /// The writer's answer to the tick's ping.
    ping: Result<(), persist::PersistError>,
    running_ids: Vec<String>,
    running_states:
        Option<crate::tracker::TrackerResult<std::collections::BTreeMap<String, String>>>,
    candidates: Option<CandidatesRead>,
}

struct CandidatesRead {
    /// Sorted for dispatch.
    issues: crate::tracker::TrackerResult<crate::tracker::CandidateList>,
    rate_limit: Option<crate::http_client::RateLimitStatus>,
    blockers: BlockerLists,
    /// Blocker reads made: (succeeded, failed).
    blocker_reads: (usize, usize),
    comments: CommentReads,
    hop_reads: std::collections::BTreeMap<String, crate::tracker::TrackerResult<Issue>>,
}

/// The poll's tracker reads, on the poll thread.
fn poll_reads(ask: PollAsk) -> PollRead {
    let tracker = ask.tracker.as_ref();
    let running_states =
        (!ask.running_ids.is_empty()).then(|| tracker.fetch_issue_states_by_ids(&ask.running_ids));
    let candidates = ask.candidates.map(|c| candidate_reads(tracker, c));
    PollRead {
        // Last: the writer works through the writes queued before it meanwhile.
        ping: ask.ping.wait(),
        running_ids: ask.running_ids,
        running_states,
        candidates,
    }
}

fn candidate_reads(tracker: &dyn TrackerAdapter, mut ask: CandidateAsk) -> CandidatesRead {
    let fetched = tracker.fetch_sorted_candidates();
    let rate_limit = tracker.rate_limit();
    let mut read = CandidatesRead {
        issues: Ok(Vec::new().into()),
        rate_limit,
        blockers: Default::default(),
        blocker_reads: (0, 0),
        comments: Default::default(),
        hop_reads: Default::default(),
    };
    let issues = match fetched {
        Ok(i) => i,
        Err(e) => {
            read.issues = Err(e);
            return read;
        }
    };
    for issue in issues.iter() {
        let lifts = ask
            .parked
            .iter()
            .any(|p| p.issue.id == issue.id && park_lifts(p, issue));
        if lifts {
            // The pass after the release may dispatch it: its blockers are read ahead too.
            ask.input.parked.remove(&issue.id);
        }
        if lifts || ask.park_released.contains(&issue.id) {
            read.comments
                .insert(issue.id.clone(), tracker.fetch_issue_comments(&issue.id));
        }
        if let Some(label) = ask.hops.get(&issue.id)
            && !issue.labels.iter().any(|l| l.eq_ignore_ascii_case(label))
        {
            read.hop_reads
                .insert(issue.id.clone(), tracker.fetch_issue_by_id(&issue.id));
        }
    }
    read.blockers = crate::orchestrator::claim::dispatch_pass::read_blockers_ahead(
        &issues, &ask.input, tracker,
    );
    let failed = read.blockers.values().filter(|b| b.is_err()).count();
    read.blocker_reads = (read.blockers.len() - failed, failed);
    read.issues = Ok(issues);
    read
}
