//! Pull-request reactions on the `orch` thread: seeding rows at a run's exit, checking due
//! rows in each poll tick, and applying what a check decided (a continuation retry, a
//! standing escalation, an outcome, the end of the watch). The decisions themselves are made
//! by `orchestrator::reactions`.

use crate::config::reactions::ReactionsConfig;
use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::reactions::escalation;
use crate::orchestrator::features::reactions::feature::PassSources;
use crate::orchestrator::features::reactions::pass::{Checked, Ending, PassDone};
use crate::orchestrator::features::reactions::seed::{self, SeedRun};
use crate::orchestrator::features::reactions::step::Step;
use crate::orchestrator::features::reactions::{
    FixContext, LastCheck, ReactionRow, RowMemory, RunReaction,
};
use crate::store::{Fingerprint, GivenComments, ReactionWrite, StoredEscalation};

/// A fix run starts this soon after the check that asked for it.
const REACTION_RETRY_DELAY_MS: u64 = 1_000;

type Key = (String, ReactionKind);

impl Orchestrator {
    /// The reactions the process applies: every kind as captured at startup, except
    /// `ci_failure`, which follows the workflow in effect.
    pub(crate) fn reaction_config(&self) -> ReactionsConfig {
        self.reactions_cfg
            .after_reload(&self.workflow.config.reactions)
    }

    /// At the exit of a run that ended normally and left a pull-request record: a row per
    /// applied kind, or the existing rows follow the run (their counts kept).
    pub(crate) fn seed_reactions(&mut self, entry: &RunningEntry, result: &SupervisorResult) {
        let Some(record) = result.pr_record.clone() else {
            return;
        };
        let normal = matches!(
            &result.exit,
            SupervisorExit::Normal { declared, .. } if *declared != Some(DeclaredOutcome::Blocked)
        );
        if !normal || self.scm.is_none() {
            return;
        }
        let cfg = self.reaction_config();
        let kinds = seed::applied_kinds(&cfg);
        let issue = &entry.facts.issue;
        let state = match self.state.outcomes.get(&issue.id) {
            Some((OutcomeKind::HandedOff, s)) => s.clone(),
            _ => issue.state.clone(),
        };
        let run = SeedRun {
            issue: seed::issue_of(issue, &state),
            record,
            dispatched_at_ms: Some(entry.facts.dispatched_at_ms),
            chain_id: entry.facts.route.chain_id.clone(),
            rule_name: entry.facts.route.rule_name.clone(),
            agent_kind: persist::route_kind(&entry.facts.route, &self.workflow).to_string(),
            configured_model: entry.facts.route.configured_model.clone(),
            next_attempt: entry.facts.attempt + 1,
            session_id: result.session_id.clone().or(entry.facts.session_id.clone()),
        };
        let Some(pr) = run.pull_request() else {
            log::debug!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier;
                "reactions not seeded: the pull request record names no pull request"
            );
            return;
        };
        let now = self.clock.now_ms();
        for kind in kinds {
            self.features
                .reactions
                .seed((issue.id.clone(), kind), &run, &pr, now, &cfg);
        }
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            pull_request:% = format!("{}#{}", pr.repository(), pr.number);
            "pull request reactions watching"
        );
    }

    /// Checks every due row (the reconcile part of a poll tick): the feature decides the
    /// pass ([`ReactionsFeature::due_pass`](super::feature::ReactionsFeature::due_pass)), the
    /// loop runs it on a `work` thread and applies it in
    /// [`Orchestrator::finish_reaction_pass`].
    pub(crate) fn check_reactions(&mut self) {
        let Some(scm) = self.scm.clone() else {
            return;
        };
        let sources = PassSources {
            scm,
            tracker: self.tracker.clone(),
            cfg: self.reaction_config(),
        };
        self.with_features(|f, cx| f.reactions.due_pass(cx, sources));
    }

    /// Applies a reaction pass to the rows still pending: ended issues, expired watches, and
    /// each checked row's step. A row that left the pending set while the pass was out (its
    /// issue hopped, or a new run re-seeded it for another pull request) is not touched.
    pub(crate) fn finish_reaction_pass(
        &mut self,
        done: Result<PassDone, crate::orchestrator::core::io_pool::CallPanicked>,
    ) {
        self.features.reactions.pass_out = false;
        let done = match done {
            Ok(d) => d,
            Err(panic) => {
                log::error!(panic:% = panic; "reaction checks panicked");
                return;
            }
        };
        if let Some(h) = self.state.health.scm.as_mut() {
            h.check = done.health;
        }
        if let Err(e) = &done.states {
            log::warn!(error:% = e; "reaction issue states not read; reactions wait");
            self.back_off_rows(&done.due);
            return;
        }
        for (id, ending) in done.ended {
            match ending {
                Ending::Terminal { state, merged } => {
                    self.issue_reached_terminal(&id, &state, merged)
                }
                Ending::Departed => {
                    self.end_issue_reactions(&id, "the issue left the handoff state")
                }
            }
        }
        for key in done.expired {
            if let Some(row) = self.features.reactions.rows.remove(&key) {
                self.features.reactions.memory.remove(&key);
                log::warn!(
                    issue_id:% = row.issue.id,
                    issue_identifier:% = row.issue.identifier,
                    reaction_kind:% = row.kind;
                    "reaction watch window ended"
                );
                self.forget_row(&row);
            }
        }
        let cfg = self.reaction_config();
        for mut c in done.checked {
            let pending = self
                .features
                .reactions
                .rows
                .get(&c.key)
                .is_some_and(|r| r.pr.pr == c.row.pr.pr);
            if !pending {
                continue;
            }
            if let Some(live) = self.features.reactions.rows.get(&c.key) {
                c.keep_live_seed(live, self.features.reactions.memory.get(&c.key));
            }
            let answered = self.keep_live_triage(&mut c);
            let key = c.key.clone();
            self.features.reactions.rows.remove(&c.key);
            self.features.reactions.memory.remove(&c.key);
            self.count_check(&c.row, &c.step);
            self.note_quiet_check(&c.row, &mut c.mem, &c.step);
            if c.was_escalated && c.row.escalated_at_ms.is_none() {
                self.escalation_ended(&c.row);
            }
            self.apply_reaction_step(c, done.started_ms, &cfg);
            if let (true, Some(row)) = (answered, self.features.reactions.rows.get_mut(&key)) {
                row.next_poll_at_ms = row.next_poll_at_ms.min(done.started_ms);
            }
        }
    }

    /// `sortie_ci_status_checks_total` and `sortie_review_checks_total`.
    fn count_check(&self, row: &ReactionRow, step: &Step) {
        let failed = matches!(
            step,
            Step::Wait {
                wait: ReactionWait::Backoff,
                ..
            }
        );
        match row.kind {
            ReactionKind::Ci => {
                let result = match (&row.last_check, failed) {
                    (_, true) => "error",
                    (Some(LastCheck::Ci { status, .. }), _) => status.as_str(),
                    _ => "pending",
                };
                self.metrics.ci_status_check(result);
            }
            ReactionKind::Review | ReactionKind::BotReview => {
                let result = match step {
                    Step::Dispatch { .. } => "dispatched",
                    _ if failed => "error",
                    _ => "skipped",
                };
                self.metrics.review_check(result);
            }
            _ => {}
        }
    }

    /// Whether a session of the issue runs or a retry holds its one slot.
    fn slot_busy(&self, issue_id: &str) -> bool {
        self.features.reactions.slot_busy(&self.state, issue_id)
    }

    /// A tracker read failed: the due rows wait a backoff.
    fn back_off_rows(&mut self, due: &[Key]) {
        let now = self.clock.now_ms();
        let base = self.workflow.config.polling.interval_ms;
        self.features.reactions.back_off(due, now, base);
    }

    /// Records how an issue a reaction watches ended: `merged` when the pass read its merge
    /// row's pull request as merged, `terminal` otherwise; its reactions end.
    fn issue_reached_terminal(
        &mut self,
        issue_id: &str,
        state: &str,
        merged: Option<(ReactionKind, crate::scm::PullRequestRef)>,
    ) {
        match merged {
            Some((kind, pr)) => {
                let path = if kind == ReactionKind::Merge {
                    "auto_merge"
                } else {
                    "merge_completion"
                };
                self.record_merged(issue_id, path, &pr);
            }
            None => {
                self.state.outcomes.insert(
                    issue_id.to_string(),
                    (OutcomeKind::Terminal, state.to_string()),
                );
                persist::set_outcome(&self.store, issue_id, OutcomeKind::Terminal, state);
            }
        }
        self.end_issue_reactions(issue_id, "the issue reached a terminal state");
    }

    fn record_merged(&mut self, issue_id: &str, path: &str, pr: &crate::scm::PullRequestRef) {
        let replace = self
            .state
            .outcomes
            .get(issue_id)
            .is_none_or(|(k, _)| crate::store::outcome_replaces(*k, OutcomeKind::Merged));
        if replace {
            self.state
                .outcomes
                .insert(issue_id.to_string(), (OutcomeKind::Merged, String::new()));
        }
        persist::set_merged_outcome(&self.store, issue_id, path, pr);
    }

    /// Drops every row of the issue and what is stored for them.
    fn end_issue_reactions(&mut self, issue_id: &str, why: &str) {
        let keys: Vec<Key> = self
            .features
            .reactions
            .rows
            .keys()
            .filter(|k| k.0 == issue_id)
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        let identifier = keys
            .first()
            .and_then(|k| self.features.reactions.rows.get(k))
            .map(|r| r.issue.identifier.clone())
            .unwrap_or_default();
        for key in &keys {
            self.features.reactions.rows.remove(key);
            self.features.reactions.memory.remove(key);
        }
        log::info!(
            issue_id:% = issue_id,
            issue_identifier:% = identifier,
            why:% = why;
            "pull request reactions ended"
        );
        persist::reaction_write(&self.store, ReactionWrite::ClearIssue(issue_id.to_string()));
    }

    /// A row left the pending set: its stored escalation and fingerprint go with it.
    fn forget_row(&mut self, row: &ReactionRow) {
        let id = row.issue.id.clone();
        if row.escalated_at_ms.is_some() {
            persist::reaction_write(
                &self.store,
                ReactionWrite::DeleteEscalation(id.clone(), row.kind),
            );
        }
        persist::reaction_write(
            &self.store,
            ReactionWrite::DeleteFingerprint(id.clone(), row.kind),
        );
        persist::reaction_write(
            &self.store,
            ReactionWrite::DeleteTriageAnswer(id.clone(), row.kind),
        );
        if !self.features.reactions.rows.keys().any(|k| k.0 == id) {
            persist::reaction_write(&self.store, ReactionWrite::ClearIssue(id));
        }
    }

    fn escalation_ended(&mut self, row: &ReactionRow) {
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            reaction_kind:% = row.kind;
            "reaction escalation ended"
        );
        persist::reaction_write(
            &self.store,
            ReactionWrite::DeleteEscalation(row.issue.id.clone(), row.kind),
        );
    }

    fn apply_reaction_step(&mut self, c: Checked, started_ms: i64, cfg: &ReactionsConfig) {
        let Checked {
            key,
            mut row,
            mut mem,
            step,
            transition,
            ..
        } = c;
        match step {
            Step::Wait {
                wait,
                next_poll_at_ms,
            } => {
                set_wait(&mut row, wait, next_poll_at_ms);
                self.keep_row(key, row, mem, started_ms);
            }
            // Checks of one pass see the slot as it was when the pass began: a triage run
            // of another kind of the issue started since holds the workspace.
            Step::Dispatch { .. } if self.triage_running(&key.0) => {
                self.wait_for_slot(key, row, mem, started_ms, cfg);
            }
            Step::Dispatch {
                context,
                fingerprint,
                given,
                counts,
            } => {
                self.dispatch_reaction(&mut row, &mut mem, context, fingerprint, given, counts);
                self.keep_polling(key, row, mem, started_ms, cfg);
            }
            Step::Escalate { trigger } => {
                self.escalate(&mut row, trigger, cfg);
                self.keep_polling(key, row, mem, started_ms, cfg);
            }
            // Likewise a run or retry of the issue the pass did not see yet.
            Step::Triage { .. } if self.slot_busy(&key.0) => {
                self.wait_for_slot(key, row, mem, started_ms, cfg);
            }
            Step::Triage {
                fingerprint,
                context,
            } => {
                self.start_triage(&key, &row, &mut mem, fingerprint, context);
                let interval =
                    poll_interval(row.kind, cfg, self.workflow.config.polling.interval_ms);
                set_wait(&mut row, ReactionWait::Triage, started_ms + interval as i64);
                self.keep_row(key, row, mem, started_ms);
            }
            Step::End { why } => {
                log::info!(
                    issue_id:% = row.issue.id,
                    issue_identifier:% = row.issue.identifier,
                    reaction_kind:% = row.kind,
                    why:% = why;
                    "reaction ended"
                );
                self.forget_row(&row);
            }
            Step::Merged {
                merge_path,
                merged_here,
                ..
            } => {
                let moved = matches!(transition, Some(Ok(())));
                if merged_here || moved {
                    self.note_pr_loop(&row, crate::store::PrLoopMark::Acted);
                }
                self.reaction_merged(key, row, mem, merge_path, transition, cfg)
            }
        }
    }

    /// The row stays pending at the kind's cadence.
    fn keep_polling(
        &mut self,
        key: Key,
        mut row: ReactionRow,
        mem: RowMemory,
        started_ms: i64,
        cfg: &ReactionsConfig,
    ) {
        let interval = poll_interval(row.kind, cfg, self.workflow.config.polling.interval_ms);
        set_wait(
            &mut row,
            ReactionWait::PollInterval,
            started_ms + interval as i64,
        );
        self.keep_row(key, row, mem, started_ms);
    }

    /// The row waits for the issue's retry slot at the kind's cadence.
    fn wait_for_slot(
        &mut self,
        key: Key,
        mut row: ReactionRow,
        mem: RowMemory,
        started_ms: i64,
        cfg: &ReactionsConfig,
    ) {
        let interval = poll_interval(row.kind, cfg, self.workflow.config.polling.interval_ms);
        set_wait(
            &mut row,
            ReactionWait::RetrySlot,
            started_ms + interval as i64,
        );
        self.keep_row(key, row, mem, started_ms);
    }

    /// The row stays pending ([`ReactionsFeature::keep`](super::feature::ReactionsFeature::keep)).
    fn keep_row(&mut self, key: Key, row: ReactionRow, mem: RowMemory, started_ms: i64) {
        self.features.reactions.keep(key, row, mem, started_ms);
    }

    /// Queues the continuation run a check asked for. A budget hold may keep it from
    /// starting; it still counts.
    fn dispatch_reaction(
        &mut self,
        row: &mut ReactionRow,
        mem: &mut RowMemory,
        context: Option<FixContext>,
        fingerprint: Option<String>,
        given: Vec<String>,
        counts: bool,
    ) {
        let now = self.clock.now_ms();
        let issue = persist::issue_from_parts(
            &row.issue.id,
            &row.issue.identifier,
            &row.issue.title,
            &row.issue.url,
            row.issue.issue_type.as_deref().unwrap_or(""),
            row.issue.labels.as_deref().unwrap_or(&[]),
            &row.issue.state,
        );
        let used = row.used_attempts.unwrap_or(0) + u32::from(counts);
        let reaction = RunReaction {
            kind: row.kind,
            attempt: counts.then_some(used),
            pr: row.pr.pr.clone(),
        };
        if row.kind == ReactionKind::Ci {
            self.record_ci_failed(row);
        }
        self.cancel_retry(&issue.id);
        let trigger = if row.kind == ReactionKind::Ci {
            RetryTrigger::CiFix
        } else {
            RetryTrigger::Continuation
        };
        let attempt = mem.run_attempt.max(1);
        self.schedule_retry(
            &issue,
            attempt,
            REACTION_RETRY_DELAY_MS,
            trigger,
            None,
            mem.session_id.clone(),
            Pass {
                dispatched_at_ms: row.dispatched_at_ms.unwrap_or(now),
                route: row.route(),
            },
        );
        mem.last_context = context.clone();
        if let Some(info) = self.state.retries.get_mut(&issue.id) {
            info.reaction = Some(reaction);
            info.reaction_context = context;
            persist::save_retry(&self.store, info, &self.workflow);
        }
        if counts {
            row.used_attempts = Some(used);
        }
        mem.run_attempt = attempt + 1;
        self.note_pr_loop(row, crate::store::PrLoopMark::Continuation);
        self.note_dispatched(row, mem, fingerprint, given, now);
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            reaction_kind:% = row.kind,
            attempt:% = used;
            "reaction dispatched a continuation"
        );
    }

    /// The fingerprint and the given comments of a dispatch, kept so the same subject is
    /// never dispatched twice, also across a restart.
    fn note_dispatched(
        &mut self,
        row: &ReactionRow,
        mem: &mut RowMemory,
        fingerprint: Option<String>,
        given: Vec<String>,
        now: i64,
    ) {
        if let Some(fp) = fingerprint {
            mem.fingerprint = Some((fp.clone(), true));
            let f = Fingerprint {
                issue_id: row.issue.id.clone(),
                kind: row.kind,
                fingerprint: fp,
                dispatched: true,
            };
            persist::reaction_write(&self.store, ReactionWrite::SaveFingerprint(f, now));
        }
        if !given.is_empty() {
            mem.given.extend(given.iter().cloned());
            persist::reaction_write(
                &self.store,
                ReactionWrite::GiveComments(GivenComments {
                    issue_id: row.issue.id.clone(),
                    pr_key: pr_key(&row.pr.pr),
                    comment_ids: given,
                }),
            );
        }
    }

    /// A failing CI verdict Sortie acts on is a run-history row (no agent, no dispatch id),
    /// counted towards `agent.max_sessions`.
    fn record_ci_failed(&mut self, row: &ReactionRow) {
        let Some(LastCheck::Ci {
            head_sha,
            status: CiStatus::Failing,
            failing_checks,
            ..
        }) = &row.last_check
        else {
            return;
        };
        let now = self.clock.now_ms();
        let mut run = crate::store::RunRecord::new(RunStatus::CiFailed);
        run.issue_id = row.issue.id.clone();
        run.identifier = row.issue.identifier.clone();
        run.display_identifier = row.issue.display_identifier.clone();
        run.issue_title = row.issue.title.clone();
        run.issue_url = row.issue.url.clone();
        run.started_at_ms = now;
        run.completed_at_ms = now;
        run.dispatched_at_ms = row.dispatched_at_ms;
        run.chain_id = row.chain_id.clone();
        run.workflow_file = self.workflow.path.display().to_string();
        run.trigger = Some(String::new());
        run.reaction_kind = Some(ReactionKind::Ci.as_str().into());
        run.reaction_config_key = Some(ReactionKind::Ci.config_key().into());
        run.error = Some(crate::mask::mask(&format!(
            "CI failing on {head_sha}: {}",
            failing_checks.join(", ")
        )));
        if let Err(e) = self.store.writer().record_run(run, Vec::new()) {
            log::warn!(
                issue_id:% = row.issue.id,
                issue_identifier:% = row.issue.identifier,
                error:% = e.to_string();
                "CI result not recorded"
            );
        }
    }

    /// Begins a standing escalation: stored first, then the tracker write queued (a failed
    /// write is logged and the escalation stands).
    fn escalate(
        &mut self,
        row: &mut ReactionRow,
        trigger: EscalationTrigger,
        cfg: &ReactionsConfig,
    ) {
        let now = self.clock.now_ms();
        if row.kind == ReactionKind::Ci {
            self.record_ci_failed(row);
            persist::reaction_write(
                &self.store,
                ReactionWrite::DeleteFingerprint(row.issue.id.clone(), row.kind),
            );
        }
        row.escalated_at_ms = Some(now);
        row.escalation_trigger = Some(trigger);
        persist::reaction_write(&self.store, ReactionWrite::SaveEscalation(stored(row)));
        self.note_pr_loop(row, crate::store::PrLoopMark::Escalated);
        log::warn!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            reaction_kind:% = row.kind,
            trigger:% = trigger;
            "reaction escalated to a person"
        );
        self.tracker_ops.submit(
            crate::orchestrator::core::tracker_ops::TrackerOp::Escalate {
                issue_id: row.issue.id.clone(),
                issue_identifier: row.issue.identifier.clone(),
                kind: row.kind,
                write: escalation::write_for(row, cfg),
            },
        );
    }

    /// The pull request merged. Merge completion moves the issue first (a failed move counts
    /// and may escalate); then the outcome is `merged` and the watch ends. A merge by the
    /// `merge` kind leaves a merge-completion row to move the issue.
    fn reaction_merged(
        &mut self,
        key: Key,
        mut row: ReactionRow,
        mem: RowMemory,
        merge_path: &'static str,
        transition: Option<crate::tracker::TrackerResult<()>>,
        cfg: &ReactionsConfig,
    ) {
        if let Some(Err(e)) = transition {
            self.merge_transition_failed(key, row, mem, &e, cfg);
            return;
        }
        self.record_merged(&row.issue.id, merge_path, &row.pr.pr);
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            merge_path:% = merge_path;
            "pull request merged"
        );
        let completion = (row.issue.id.clone(), ReactionKind::MergeCompletion);
        if row.kind == ReactionKind::Merge && self.features.reactions.rows.contains_key(&completion)
        {
            if let Some(c) = self.features.reactions.rows.get_mut(&completion) {
                c.next_poll_at_ms = self.clock.now_ms();
            }
            let others: Vec<Key> = self
                .features
                .reactions
                .rows
                .keys()
                .filter(|k| k.0 == row.issue.id && k.1 != ReactionKind::MergeCompletion)
                .cloned()
                .collect();
            for k in others {
                self.features.reactions.rows.remove(&k);
                self.features.reactions.memory.remove(&k);
            }
            row.escalated_at_ms = None;
            self.forget_row(&row);
            return;
        }
        self.end_issue_reactions(&row.issue.id, "the pull request merged");
    }

    fn merge_transition_failed(
        &mut self,
        key: Key,
        mut row: ReactionRow,
        mem: RowMemory,
        e: &crate::tracker::TrackerError,
        cfg: &ReactionsConfig,
    ) {
        log::warn!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            error:% = e.to_string();
            "merge completion transition failed"
        );
        let used = row.used_attempts.unwrap_or(0) + 1;
        row.used_attempts = Some(used);
        let max = row.max_attempts.unwrap_or(0);
        let refused = matches!(
            e.kind,
            crate::tracker::TrackerErrorKind::Auth | crate::tracker::TrackerErrorKind::Payload
        );
        let interval = poll_interval(row.kind, cfg, self.workflow.config.polling.interval_ms);
        let now = self.clock.now_ms();
        if refused || used >= max {
            let trigger = if refused {
                EscalationTrigger::Refused
            } else {
                EscalationTrigger::BudgetExhausted
            };
            self.escalate(&mut row, trigger, cfg);
            set_wait(&mut row, ReactionWait::PollInterval, now + interval as i64);
        } else {
            row.backoff_count += 1;
            let delay = interval
                .saturating_mul(1 << row.backoff_count.min(16))
                .min(crate::orchestrator::features::reactions::cx::MAX_BACKOFF_MS);
            row.wait = Some(ReactionWait::Backoff);
            row.next_poll_at_ms = now + delay as i64;
        }
        self.keep_row(key, row, mem, now);
    }

    /// Startup: rows rebuilt from the newest runs that left a pull-request record, with the
    /// stored escalations, fingerprints and given comments. A rebuilt row has no wait, no
    /// check, no link, and only the title and link of its issue.
    pub(crate) fn rebuild_reactions(&mut self, snap: crate::store::ReactionsSnapshot) {
        if self.scm.is_none() {
            return;
        }
        let cfg = self.reaction_config();
        let kinds = seed::applied_kinds(&cfg);
        let now = self.clock.now_ms();
        for run in &snap.pr_runs {
            let finished = matches!(
                self.state.outcomes.get(&run.issue_id),
                Some((OutcomeKind::Merged | OutcomeKind::Terminal, _))
            );
            if finished {
                continue;
            }
            let Some(seed_run) = rebuilt_run(run) else {
                continue;
            };
            let Some(pr) = seed_run.pull_request() else {
                continue;
            };
            for kind in &kinds {
                self.features.reactions.seed(
                    (run.issue_id.clone(), *kind),
                    &seed_run,
                    &pr,
                    now,
                    &cfg,
                );
            }
        }
        self.restore_reaction_memory(&snap);
        self.restore_triage_answers(&snap.triage_answers);
    }

    fn restore_reaction_memory(&mut self, snap: &crate::store::ReactionsSnapshot) {
        for e in &snap.escalations {
            if let Some(row) = self
                .features
                .reactions
                .rows
                .get_mut(&(e.issue_id.clone(), e.kind))
            {
                row.escalated_at_ms = Some(e.escalated_at_ms);
                row.escalation_trigger = Some(e.trigger);
                row.used_attempts = e.used_attempts.map(|n| n.max(0) as u32);
            }
        }
        for f in &snap.fingerprints {
            if let Some(mem) = self
                .features
                .reactions
                .memory
                .get_mut(&(f.issue_id.clone(), f.kind))
            {
                mem.fingerprint = Some((f.fingerprint.clone(), f.dispatched));
            }
        }
        for g in &snap.given {
            for kind in [ReactionKind::Review, ReactionKind::BotReview] {
                if let Some(mem) = self
                    .features
                    .reactions
                    .memory
                    .get_mut(&(g.issue_id.clone(), kind))
                {
                    mem.given.extend(g.comment_ids.iter().cloned());
                }
            }
        }
    }
}

/// The run a stored history row describes, when its record is readable.
fn rebuilt_run(run: &crate::store::PrRun) -> Option<SeedRun> {
    let record: crate::agent::pr_record::PrRecord = serde_json::from_str(&run.pr_record).ok()?;
    Some(SeedRun {
        issue: crate::orchestrator::features::reactions::ReactionIssue {
            id: run.issue_id.clone(),
            identifier: run.identifier.clone(),
            display_identifier: run.display_identifier.clone(),
            title: run.issue_title.clone(),
            url: run.issue_url.clone(),
            issue_type: None,
            labels: None,
            state: String::new(),
        },
        record,
        dispatched_at_ms: run.dispatched_at_ms,
        chain_id: run.chain_id.clone(),
        rule_name: run.rule_name.clone(),
        agent_kind: run.agent_adapter.clone(),
        configured_model: run.configured_model.clone(),
        next_attempt: u32::try_from(run.attempt.max(0)).unwrap_or(0),
        session_id: run.session_id.clone(),
    })
}

fn set_wait(row: &mut ReactionRow, wait: ReactionWait, next_poll_at_ms: i64) {
    if wait == ReactionWait::Backoff {
        row.backoff_count += 1;
    } else {
        row.backoff_count = 0;
    }
    row.wait = Some(wait);
    row.next_poll_at_ms = next_poll_at_ms;
}

/// The kind's check cadence.
fn poll_interval(kind: ReactionKind, cfg: &ReactionsConfig, base_ms: u64) -> u64 {
    let v = match kind {
        ReactionKind::Ci => None,
        ReactionKind::Review => cfg.review_comments.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::BotReview => cfg.bot_review.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::Merge => cfg.auto_merge.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::MergeCompletion => cfg.merge_completion.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::LabelReview | ReactionKind::LabelFix => {
            cfg.label_commands.as_ref().map(|c| c.poll_interval_ms)
        }
    };
    v.unwrap_or(base_ms)
}

fn pr_key(pr: &crate::scm::PullRequestRef) -> String {
    format!("{}#{}", pr.repository(), pr.number)
}

fn stored(row: &ReactionRow) -> StoredEscalation {
    StoredEscalation {
        issue_id: row.issue.id.clone(),
        kind: row.kind,
        escalated_at_ms: row.escalated_at_ms.unwrap_or(0),
        trigger: row
            .escalation_trigger
            .unwrap_or(EscalationTrigger::BudgetExhausted),
        used_attempts: row.used_attempts.map(i64::from),
        identifier: row.issue.identifier.clone(),
        display_identifier: row.issue.display_identifier.clone(),
        issue_title: row.issue.title.clone(),
        issue_url: row.issue.url.clone(),
        pr_owner: row.pr.pr.owner.clone(),
        pr_repo: row.pr.pr.repo.clone(),
        pr_number: i64::try_from(row.pr.pr.number).unwrap_or(0),
        pr_branch: row.pr.branch.clone(),
        pr_head_sha: row.pr.head_sha.clone(),
    }
}
