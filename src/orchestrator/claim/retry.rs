//! The retry queue: scheduling with backoff, the timer path that fires due retries, and
//! retry-now requests.

use crate::orchestrator::claim::dispatch_pass::{FeatureHold, OnRetry};
use crate::orchestrator::claim::retry_queue::RetryNowPutBack;
use crate::orchestrator::claim::run_error::RetryError;
use crate::orchestrator::core::orchestrator::*;

/// What a batch of firing retries read from the tracker (off `orch`).
struct RetryReads {
    issues: std::collections::BTreeMap<String, crate::tracker::TrackerResult<Issue>>,
    blockers: std::collections::BTreeMap<
        String,
        Result<crate::tracker::Blockers, crate::orchestrator::claim::dispatch_pass::BlockerMiss>,
    >,
}

/// The retries' issues, and the blocker lists the tracker left unread (at most the pass's
/// read budget).
/// The attempt at which a reaction retry that is still paused is dropped.
const MAX_PAUSED_ATTEMPT: u32 = 10;

fn read_retry_issues(tracker: &dyn TrackerAdapter, ids: &[String]) -> RetryReads {
    let issues = tracker.fetch_issues_by_ids(ids);
    let mut read = crate::orchestrator::claim::dispatch_pass::tracker_reader(tracker);
    let blockers = issues
        .values()
        .filter_map(|r| r.as_ref().ok())
        .filter(|i| i.blockers_read == crate::domain::BlockersRead::Unread)
        .take(crate::orchestrator::claim::dispatch_pass::BLOCKER_READS_PER_PASS)
        .map(|i| (i.id.clone(), read(i)))
        .collect();
    RetryReads { issues, blockers }
}

impl Orchestrator {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn schedule_retry(
        &mut self,
        issue: &Issue,
        attempt: u32,
        delay_ms: u64,
        trigger: RetryTrigger,
        error: Option<String>,
        session_id: Option<String>,
        pass: Pass,
    ) {
        let due = self.clock.now_ms() + delay_ms as i64;
        self.schedule_retry_at(issue, attempt, due, trigger, error, session_id, pass);
    }

    /// [`Orchestrator::schedule_retry`] due at the absolute time `due` (a usage limit's reset).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn schedule_retry_at(
        &mut self,
        issue: &Issue,
        attempt: u32,
        due: i64,
        trigger: RetryTrigger,
        error: Option<String>,
        session_id: Option<String>,
        pass: Pass,
    ) {
        let Pass {
            dispatched_at_ms,
            route,
        } = pass;
        let delay_ms = due.saturating_sub(self.clock.now_ms()).max(0);
        if let Some(existing) = self.state.retries.get(&issue.id)
            && existing.attempt >= attempt
        {
            return;
        }
        // A spent budget holds the issue now rather than queueing a retry that could only be
        // refused when it fires.
        // (A failed budget read queues the retry; it is checked again when it fires.)
        if let Ok(Some(mut hold)) = self.budget_hold_for(issue, None, Some(dispatched_at_ms)) {
            hold.route = Some(route.clone());
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                reason:% = hold.reason,
                used:% = hold.used_text(),
                limit:% = hold.limit_text();
                "effort budget exhausted, blocking re-dispatch"
            );
            self.state.budget_held.insert(issue.id.clone(), hold);
            return;
        }
        let info = RetryInfo {
            issue: issue.clone(),
            attempt,
            due_at_ms: due,
            error: error.map(|e| crate::mask::mask(&e)),
            session_id,
            trigger,
            started_by: Some(trigger),
            dispatched_at_ms,
            route,
            reaction: None,
            reaction_context: None,
        };
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            attempt:% = attempt,
            delay_ms:% = delay_ms,
            trigger:% = trigger;
            "retry scheduled"
        );
        persist::save_retry(&self.store, &info, &self.workflow);
        self.metrics.retry(trigger.as_str());
        self.state.retry_queue.schedule(&issue.id, due);
        self.state.retries.insert(issue.id.clone(), info);
    }

    /// The retry just queued for a reaction's run that failed or stalled continues the same
    /// reaction: its kind, try and pull request, and the context the run was given while the
    /// reaction is still pending.
    pub(crate) fn keep_retry_reaction(
        &mut self,
        issue_id: &str,
        reaction: Option<crate::orchestrator::features::reactions::RunReaction>,
    ) {
        let Some(reaction) = reaction else {
            return;
        };
        let context = self
            .features
            .reactions
            .last_context(issue_id, reaction.kind);
        let Some(info) = self.state.retries.get_mut(issue_id) else {
            return;
        };
        if info.reaction.is_some() {
            return;
        }
        info.reaction = Some(reaction);
        info.reaction_context = context;
        persist::save_retry(&self.store, info, &self.workflow);
    }

    pub(crate) fn cancel_retry(&mut self, issue_id: &str) {
        self.state.retries_firing.remove(issue_id);
        if self.state.retries.remove(issue_id).is_some() {
            self.state.retry_queue.cancel(issue_id);
            persist::delete_retry(&self.store, issue_id);
        }
    }

    /// Releases the claim of an issue whose supervisor has exited: with its running entry gone, a
    /// queued retry is all that still claims it. Its withheld handoffs in a row end with the
    /// claim (a terminal state, a cancellation, a release), so a later claim starts counting
    /// afresh and no stored count outlives the issue's work.
    pub(crate) fn release(&mut self, issue_id: &str) {
        self.cancel_retry(issue_id);
        self.end_absence_streak(issue_id);
    }

    /// Ends the issue's withheld handoffs in a row with its claim, removing the stored count.
    fn end_absence_streak(&mut self, issue_id: &str) {
        if self.state.handoff_absence.forget(issue_id) {
            persist::save_handoff_absence(&self.store, issue_id, 0, self.clock.now_ms());
        }
    }

    pub(crate) fn fire_due_retries(&mut self) -> bool {
        let now = self.clock.now_ms();
        let due = self.state.retry_queue.pop_due(now);
        if due.is_empty() {
            return false;
        }
        let infos = due
            .iter()
            .filter_map(|id| self.state.retries.remove(id))
            .collect();
        self.fire_retries(infos);
        true
    }

    /// Puts a retry that could not start back in the queue, due after its backoff, with
    /// `trigger` timer and `error` the reason. The caller passes the retry's attempt; a reason
    /// that advances it ([`RescheduleReason::advances_attempt`]) puts the retry back at the next
    /// one, waiting that attempt's backoff. A retry fired by a retry-now request keeps the
    /// attempt and due time it had (due at once when that has passed) instead.
    pub(crate) fn reschedule(&mut self, info: RetryInfo, attempt: u32, reason: RescheduleReason) {
        self.reschedule_at(info, attempt, reason, None);
    }

    /// [`Orchestrator::reschedule`], due at `due_at_ms` instead of after the failure backoff
    /// when given (a usage limit's reset).
    fn reschedule_at(
        &mut self,
        mut info: RetryInfo,
        attempt: u32,
        reason: RescheduleReason,
        due_at_ms: Option<i64>,
    ) {
        let now = self.clock.now_ms();
        let requested = self.retry_now.get(&info.issue.id).and_then(|r| r.due_at_ms);
        let attempt = if requested.is_none() && reason.advances_attempt() {
            attempt.saturating_add(1)
        } else {
            attempt
        };
        info.attempt = attempt;
        info.error = Some(RetryError::Reschedule(reason).stored());
        info.trigger = RetryTrigger::Timer;
        match requested {
            Some(due_before) => {
                info.due_at_ms = due_before.max(now);
                log::info!(
                    issue_id:% = info.issue.id,
                    issue_identifier:% = info.issue.identifier,
                    attempt:% = attempt,
                    due_at_ms:% = info.due_at_ms,
                    reason:% = reason.to_string();
                    "retry put back after a request to run it now"
                );
            }
            None => {
                let delay = match due_at_ms {
                    Some(due) => u64::try_from(due.saturating_sub(now)).unwrap_or(0),
                    None => failure_delay_ms(attempt, self.backoff_cap()),
                };
                info.due_at_ms = now + delay as i64;
                log::info!(
                    issue_id:% = info.issue.id,
                    issue_identifier:% = info.issue.identifier,
                    attempt:% = attempt,
                    delay_ms:% = delay,
                    reason:% = reason.to_string();
                    "retry rescheduled"
                );
            }
        }
        persist::save_retry(&self.store, &info, &self.workflow);
        self.metrics.retry(RetryTrigger::Timer.as_str());
        self.state
            .retry_queue
            .schedule(&info.issue.id, info.due_at_ms);
        self.state.retries.insert(info.issue.id.clone(), info);
    }

    /// Fires retries in due order. The ones still startable after the checks that need no
    /// tracker are read together on a `work` thread, so N due retries cost one tracker call
    /// (one read of a file tracker); meanwhile they stay queued (claimed and listed) and
    /// `firing`. [`Orchestrator::start_retries`] applies the read with one pass input kept
    /// current across them.
    fn fire_retries(&mut self, infos: Vec<RetryInfo>) {
        // A retry check evaluates the spend windows, as a poll tick does.
        self.features_on_tick();
        let usage = self.usage_for_batch(infos.len());
        let ready: Vec<RetryInfo> = infos
            .into_iter()
            .filter_map(|info| self.check_before_fetch(info, usage.as_ref()))
            .collect();
        if ready.is_empty() {
            return;
        }
        let ids: Vec<String> = ready.iter().map(|i| i.issue.id.clone()).collect();
        for info in &ready {
            self.state.retries_firing.insert(info.issue.id.clone());
            self.state
                .retries
                .insert(info.issue.id.clone(), info.clone());
        }
        let subject = ready
            .iter()
            .map(|i| i.issue.identifier.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let tracker = self.tracker.clone();
        self.spawn_io(
            crate::orchestrator::core::io::Lane::Work,
            crate::orchestrator::core::io_pool::JobLabel::new("retry issue read", subject),
            move || read_retry_issues(tracker.as_ref(), &ids),
            move |o: &mut Orchestrator, read| o.start_retries(ready, read),
        );
    }

    /// Applies a batch's read: each retry still firing (a reconciliation may have cancelled
    /// it meanwhile) starts, goes back in the queue or is released.
    fn start_retries(
        &mut self,
        ready: Vec<RetryInfo>,
        read: Result<RetryReads, crate::orchestrator::core::io_pool::CallPanicked>,
    ) {
        let mut read = read.unwrap_or_else(|panic| {
            log::error!(panic:% = panic; "retry issue read panicked");
            RetryReads {
                issues: Default::default(),
                blockers: Default::default(),
            }
        });
        // The refused issue's own retry is due at the reset, so a retry honours a usage hold
        // only until then (no poll-interval grace).
        let mut input = self.gated_pass_input(crate::orchestrator::core::feature::PassKind::Retry);
        for info in ready {
            let id = info.issue.id.clone();
            if !self.state.retries_firing.remove(&id) {
                self.answer_retry_now(&id);
                continue;
            }
            self.state.retries.remove(&id);
            input.claimed.remove(&id);
            let result = read.issues.remove(&id).unwrap_or_else(|| {
                Err(crate::tracker::TrackerError::new(
                    crate::tracker::TrackerErrorKind::Api,
                    self.tracker.kind(),
                    "the batch fetch did not answer for this issue",
                ))
            });
            let blockers = read.blockers.remove(&id);
            self.start_fetched(info, result, blockers, &mut input);
            self.answer_retry_now(&id);
        }
    }

    /// Spend per issue read once for a batch of retries (one query instead of two per retry);
    /// `None` for a single retry, without budgets, or when the read fails (each retry then
    /// reads its own and fails closed as it would alone).
    fn usage_for_batch(
        &self,
        retries: usize,
    ) -> Option<std::collections::HashMap<String, crate::store::IssueUsage>> {
        let cfg = &self.workflow.config.agent;
        let budgets = cfg.max_tokens.unwrap_or(0) > 0
            || cfg.max_sessions.unwrap_or(0) > 0
            || crate::orchestrator::features::spend::money_budget::ceiling(cfg.max_cost_usd)
                .is_some();
        if retries < 2 || !budgets {
            return None;
        }
        persist::usage_by_issue(&self.store).ok()
    }

    /// The checks a retry passes before its issue is fetched: its worker has ended, the
    /// database takes writes, its budget is not spent. Answers the retry when it may go on.
    fn check_before_fetch(
        &mut self,
        info: RetryInfo,
        usage: Option<&std::collections::HashMap<String, crate::store::IssueUsage>>,
    ) -> Option<RetryInfo> {
        let id = info.issue.id.clone();
        if self.state.running.contains_key(&id) {
            let a = info.attempt;
            self.reschedule(info, a, RescheduleReason::WorkerStillRunning);
            return None;
        }
        if self.store_blocks_dispatch() {
            let a = info.attempt;
            self.reschedule(info, a, RescheduleReason::DatabaseFailing);
            return None;
        }
        let used = usage.map(|u| u.get(&id).copied().unwrap_or_default());
        match self.budget_hold_for(&info.issue, used, Some(info.dispatched_at_ms)) {
            Ok(Some(mut h)) => {
                h.route = Some(info.route.clone());
                self.state.budget_held.insert(id.clone(), h);
                persist::delete_retry(&self.store, &id);
                None
            }
            Ok(None) => Some(info),
            Err(e) => {
                self.state
                    .health
                    .database
                    .record(self.clock.now_ms(), Err(e));
                let a = info.attempt;
                self.reschedule(info, a, RescheduleReason::DatabaseFailing);
                None
            }
        }
    }

    /// Starts, puts back or releases one retry given what the tracker answered for its issue;
    /// `input` is the pass input of the batch, updated with what this retry claimed.
    fn start_fetched(
        &mut self,
        info: RetryInfo,
        fetched: crate::tracker::TrackerResult<Issue>,
        blockers: Option<
            Result<
                crate::tracker::Blockers,
                crate::orchestrator::claim::dispatch_pass::BlockerMiss,
            >,
        >,
        input: &mut PassInput,
    ) {
        let Some((info, issue)) = self.fetched_issue(info, fetched, input) else {
            return;
        };
        let id = info.issue.id.clone();
        let cfg = &self.workflow.config.tracker;
        // A reaction's continuation also runs while the issue waits in the handoff state.
        let handoff = cfg
            .handoff_state
            .clone()
            .filter(|h| info.reaction.is_some() && state_eq(h, &issue.state));
        let terminal = state_in(&issue.state, &cfg.terminal_states);
        let eligible_state = state_in(&issue.state, &cfg.active_states) || handoff.is_some();
        if info.reaction.is_some() && issue.is_dispatchable_shape() && !terminal && !eligible_state
        {
            // A person moved the issue to a state that is neither active nor the handoff
            // state: the reaction's retry waits rather than losing the reaction's work.
            input.note_queued(&id, &info.issue.identifier);
            self.pause_reaction_retry(info, RescheduleReason::ReactionPausedByState);
            return;
        }
        if !issue.is_dispatchable_shape() || !eligible_state || terminal {
            persist::delete_retry(&self.store, &id);
            self.end_absence_streak(&id);
            return;
        }
        let decision = Self::plan_retry(
            &issue,
            handoff.as_deref(),
            blockers,
            input,
            &self.workspaces(),
        );
        self.apply_retry_decision(info, issue, decision, input);
    }

    /// The issue a retry's tracker read returned, or `None` once the retry is settled: released
    /// when the issue is gone, rescheduled when the read failed.
    fn fetched_issue(
        &mut self,
        info: RetryInfo,
        fetched: crate::tracker::TrackerResult<Issue>,
        input: &mut PassInput,
    ) -> Option<(RetryInfo, Issue)> {
        let id = info.issue.id.clone();
        match fetched {
            Ok(issue) => Some((info, issue)),
            Err(e) if e.kind == crate::tracker::TrackerErrorKind::NotFound => {
                log::info!(
                    issue_id:% = id,
                    issue_identifier:% = info.issue.identifier,
                    attempt:% = info.attempt,
                    error:% = e.to_string();
                    "retry released, issue not found in the tracker"
                );
                persist::delete_retry(&self.store, &id);
                self.end_absence_streak(&id);
                None
            }
            Err(e) => {
                log::warn!(
                    issue_id:% = id,
                    issue_identifier:% = info.issue.identifier,
                    error:% = e.to_string();
                    "retry issue fetch failed"
                );
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule(info, a, RescheduleReason::IssueFetchFailed);
                None
            }
        }
    }

    /// The dispatch pass's decision for one retried issue, planned against the batch's `input`
    /// as if the issue were not claimed (with the handoff state active for a reaction's
    /// continuation).
    fn plan_retry(
        issue: &Issue,
        handoff: Option<&str>,
        blockers: Option<
            Result<
                crate::tracker::Blockers,
                crate::orchestrator::claim::dispatch_pass::BlockerMiss,
            >,
        >,
        input: &mut PassInput,
        workspaces: &WorkspaceManager,
    ) -> Option<Decision> {
        let id = issue.id.clone();
        let was_claimed = input.claimed.remove(&id);
        probe_workspace_locks(std::slice::from_ref(issue), input, |i| {
            workspaces.lock_holder(i)
        });
        if let Some(h) = handoff {
            input.active_states.push(h.to_string());
        }
        // The issue was read by id, its blockers with it; a tracker that still leaves the list
        // unread got one read for it with the batch.
        let mut read = |_: &Issue| {
            blockers.clone().unwrap_or(Err(
                crate::orchestrator::claim::dispatch_pass::BlockerMiss::NotRead,
            ))
        };
        let decision = plan(std::slice::from_ref(issue), input, &mut read)
            .into_iter()
            .next();
        if handoff.is_some() {
            input.active_states.pop();
        }
        if was_claimed {
            input.claimed.insert(id.clone());
        }
        decision
    }

    /// Starts, reschedules, pauses or releases a retry by the pass's `decision`.
    fn apply_retry_decision(
        &mut self,
        info: RetryInfo,
        issue: Issue,
        decision: Option<Decision>,
        input: &mut PassInput,
    ) {
        let id = info.issue.id.clone();
        match decision {
            Some(Decision::Dispatch) => {
                persist::delete_retry(&self.store, &id);
                input.note_dispatched(&issue);
                let pass = self.retry_pass(&info, &issue);
                self.dispatch(
                    issue,
                    info.attempt,
                    info.session_id.clone(),
                    pass,
                    crate::orchestrator::core::state::DispatchCause::Retry(info.started_by),
                    info.reaction
                        .clone()
                        .map(|reaction| super::dispatch::ReactionDispatch {
                            reaction,
                            context: info.reaction_context.clone(),
                        }),
                );
            }
            Some(Decision::Held(HoldReason::AgentSlotsFull { .. })) => {
                // Advances the attempt: the wait grows by one backoff step each time.
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule(info, a, RescheduleReason::NoSlots);
            }
            Some(Decision::Held(HoldReason::SshHostsFull)) => {
                // Like a full slot limit: advances the attempt.
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule(info, a, RescheduleReason::NoSshHosts);
            }
            Some(Decision::Held(HoldReason::IdentifierInUse { .. })) => {
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule(info, a, RescheduleReason::IdentifierInUse);
            }
            Some(Decision::Held(HoldReason::UsageLimit { resets_at_ms, .. })) => {
                // Not a session either: the retry waits for the reset.
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule_at(info, a, RescheduleReason::UsageLimit, Some(resets_at_ms));
            }
            Some(Decision::Held(HoldReason::SpendCeiling { resets_at_ms, .. })) => {
                // Not a session: the retry waits while the window holds.
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                let due = self.spend_retry_due_ms(a, resets_at_ms);
                self.reschedule_at(info, a, RescheduleReason::SpendCeiling, Some(due));
            }
            Some(Decision::Held(HoldReason::Feature(FeatureHold {
                on_retry: OnRetry::WaitUntil { reason, due_at_ms },
                ..
            }))) => {
                // A feature's timed hold: the retry waits for its end.
                input.note_queued(&id, &info.issue.identifier);
                let a = info.attempt;
                self.reschedule_at(info, a, reason, Some(due_at_ms));
            }
            Some(Decision::Held(HoldReason::BlockedBy(_))) if info.reaction.is_some() => {
                // An open blocking issue pauses a reaction's retry instead of dropping it.
                input.note_queued(&id, &info.issue.identifier);
                self.pause_reaction_retry(info, RescheduleReason::ReactionPausedByBlocker);
            }
            Some(Decision::Held(HoldReason::BlockedBy(_)))
            | Some(Decision::Held(HoldReason::BlockersUnresolved))
            | Some(Decision::Held(HoldReason::BlockersNotRead))
            | Some(Decision::Held(HoldReason::BlockersIncomplete))
            | Some(Decision::Held(HoldReason::ParkCommentsUnread))
            | Some(Decision::Held(HoldReason::WorkspaceLocked { .. }))
            | Some(Decision::Held(HoldReason::AgentAuthFailed { .. }))
            | Some(Decision::Held(HoldReason::FailureHeld { .. }))
            | Some(Decision::Held(HoldReason::Feature(FeatureHold {
                on_retry: OnRetry::Release,
                ..
            })))
            | Some(Decision::Skip(_))
            | None => {
                // Blocked, parked, its workspace locked elsewhere, its agent not logged in or
                // otherwise ineligible: release the claim (the next tick lists a hold and
                // dispatches once it ends).
                log::info!(
                    issue_id:% = id,
                    issue_identifier:% = issue.identifier,
                    decision:% = decision.as_ref().map_or("none", Decision::word);
                    "retry released, issue not eligible"
                );
                persist::delete_retry(&self.store, &id);
                self.end_absence_streak(&id);
            }
        }
    }

    /// Puts a reaction's retry back paused (its `error` is the reason, which serves
    /// `paused: true`), advancing its attempt as the reference's table says. One that is still
    /// paused at attempt [`MAX_PAUSED_ATTEMPT`] is dropped: its backoff has long reached the
    /// cap, and the issue's next poll tick (or a person) decides what happens to it.
    fn pause_reaction_retry(&mut self, info: RetryInfo, reason: RescheduleReason) {
        if info.attempt >= MAX_PAUSED_ATTEMPT {
            log::info!(
                issue_id:% = info.issue.id,
                issue_identifier:% = info.issue.identifier,
                attempt:% = info.attempt,
                reason:% = reason.to_string();
                "reaction retry dropped, still paused"
            );
            persist::delete_retry(&self.store, &info.issue.id);
            return;
        }
        let a = info.attempt;
        self.reschedule(info, a, reason);
    }

    /// Makes a queued retry due now through the timer path; `reply` is answered once the
    /// retry started or went back in the queue. A retry that still cannot start is put back at
    /// its attempt and previous due time (due at once if that has passed), with its error set
    /// to the reason ([`Orchestrator::reschedule`]).
    pub(crate) fn retry_now(
        &mut self,
        identifier: &str,
        reply: crossbeam_channel::Sender<RetryNowOutcome>,
    ) {
        if self.draining.is_some() {
            let _ = reply.try_send(RetryNowOutcome::Draining);
            return;
        }
        let Some(id) = self
            .state
            .retries
            .values()
            .find(|r| r.issue.identifier == identifier)
            .map(|r| r.issue.id.clone())
        else {
            // A failure-held issue has no retry: the request releases it, and a poll tick
            // dispatches it at once.
            if let Some(id) = self.failure_held_id(identifier) {
                self.release_failure_hold(&id, "retry_now");
                self.refresh_pending = true;
                let _ = reply.try_send(RetryNowOutcome::StillWaiting {
                    reason: "released from its failure hold; the next poll tick dispatches it"
                        .into(),
                    due_at_ms: self.clock.now_ms(),
                });
                return;
            }
            let _ = reply.try_send(RetryNowOutcome::NotFound);
            return;
        };
        if self.state.retries_firing.contains(&id) || self.retry_now.contains_key(&id) {
            // Already starting: answered when its read comes back.
            self.note_retry_now_reply(&id, reply);
            return;
        }
        let Some(before) = self.state.retries.remove(&id) else {
            let _ = reply.try_send(RetryNowOutcome::NotFound);
            return;
        };
        self.state.retry_queue.cancel(&id);
        self.retry_now.insert(
            id.clone(),
            RetryNowPutBack {
                due_at_ms: Some(before.due_at_ms),
                reply: Some(reply),
            },
        );
        // With every global slot taken the timer path could only put the retry back: do that
        // without reading the tracker.
        let limit = self.workflow.config.agent.max_concurrent_agents as usize;
        if self.state.running.len() >= limit {
            let attempt = before.attempt;
            self.reschedule(before, attempt, RescheduleReason::NoSlots);
        } else {
            log::info!(
                issue_id:% = before.issue.id,
                issue_identifier:% = before.issue.identifier,
                attempt:% = before.attempt,
                replaced_due_at_ms:% = before.due_at_ms;
                "retry made due on request"
            );
            self.fire_retries(vec![before]);
        }
        if !self.state.retries_firing.contains(&id) {
            self.answer_retry_now(&id);
        }
    }

    /// Another request for a retry already starting waits for the same answer.
    fn note_retry_now_reply(
        &mut self,
        id: &str,
        reply: crossbeam_channel::Sender<RetryNowOutcome>,
    ) {
        let entry = self
            .retry_now
            .entry(id.to_string())
            .or_insert(RetryNowPutBack {
                due_at_ms: None,
                reply: None,
            });
        // One waiter at a time: an earlier one is told the retry is still waiting.
        if let Some(earlier) = entry.reply.replace(reply) {
            let _ = earlier.try_send(RetryNowOutcome::StillWaiting {
                reason: "another request to run it now is being answered".into(),
                due_at_ms: self.clock.now_ms(),
            });
        }
    }

    /// Answers the retry-now request of `id`, if one waits: the session it started, or why
    /// the retry still waits.
    fn answer_retry_now(&mut self, id: &str) {
        let Some(put_back) = self.retry_now.remove(id) else {
            return;
        };
        let Some(reply) = put_back.reply else {
            return;
        };
        let outcome = if let Some(e) = self.state.running.get(id) {
            RetryNowOutcome::Started {
                dispatch_id: e.facts.dispatch_id.clone(),
            }
        } else {
            match self.state.retries.get(id) {
                Some(r) => RetryNowOutcome::StillWaiting {
                    reason: r.error.clone().unwrap_or_default(),
                    due_at_ms: r.due_at_ms,
                },
                None => RetryNowOutcome::StillWaiting {
                    reason: "the issue is no longer eligible".into(),
                    due_at_ms: self.clock.now_ms(),
                },
            }
        };
        let _ = reply.try_send(outcome);
    }
}
