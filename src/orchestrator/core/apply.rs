//! The one place effects are applied. Features decide from a read-only [`Cx`] and return
//! [`Effect`]s; the loop runs them here, in the order given.

use crate::orchestrator::core::effect::{Count, Effect, ReactionDispatch, Write};
use crate::orchestrator::core::feature::{Cx, ExitView, PassKind};
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::Features;

impl Orchestrator {
    /// The read-only view features decide from.
    pub(crate) fn cx(&self) -> Cx<'_> {
        Cx {
            now_ms: self.clock.now_ms(),
            workflow: &self.workflow,
            state: &self.state,
            store: &self.store,
            prices: &self.prices,
        }
    }

    /// Runs `f` over the features with a read-only view of the rest of the loop, then
    /// applies the effects it returns.
    pub(crate) fn with_features(&mut self, f: impl FnOnce(&mut Features, &Cx<'_>) -> Vec<Effect>) {
        let cx = Cx {
            now_ms: self.clock.now_ms(),
            workflow: &self.workflow,
            state: &self.state,
            store: &self.store,
            prices: &self.prices,
        };
        let effects = f(&mut self.features, &cx);
        self.apply(effects);
    }

    /// Applies effects in order.
    pub(crate) fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Write(w) => self.write(w),
                Effect::ReadFailed(e) => {
                    let now = self.clock.now_ms();
                    self.state.health.budget_read_failure = Some(e.clone());
                    self.state.health.database.record(now, Err(e));
                }
                Effect::CheckReactions(pass) => self.spawn_io(
                    crate::orchestrator::core::io::Lane::Work,
                    crate::orchestrator::core::io_pool::JobLabel::new("reaction checks", ""),
                    move || pass.run(),
                    |o: &mut Orchestrator, done| o.finish_reaction_pass(done),
                ),
                Effect::ReviewMetadata {
                    dispatch_id,
                    metadata,
                } => {
                    if let Some(e) = self.running_by_dispatch(&dispatch_id) {
                        e.facts.review_metadata = metadata;
                    }
                }
                Effect::RecordRun { run, what } => self.record_run(*run, what),
                Effect::Outcome {
                    issue_id,
                    kind,
                    state,
                } => {
                    persist::set_outcome(&self.store, &issue_id, kind, &state);
                    self.state.outcomes.insert(issue_id, (kind, state));
                }
                Effect::Merged {
                    issue_id,
                    merge_path,
                    pr,
                } => self.merged_outcome(issue_id, merge_path, &pr),
                Effect::Tracker(op) => self.tracker_ops.submit(op),
                Effect::Count(c) => self.count(c),
                Effect::DispatchReaction(d) => self.queue_reaction_run(*d),
                Effect::StartTriage(t) => self.start_triage(*t),
            }
        }
    }

    fn record_run(&self, run: crate::store::RunRecord, what: &'static str) {
        let (issue_id, identifier) = (run.issue_id.clone(), run.identifier.clone());
        if let Err(e) = self.store.writer().record_run(run, Vec::new()) {
            log::warn!(
                issue_id:% = issue_id,
                issue_identifier:% = identifier,
                error:% = e.to_string();
                "{what} not recorded"
            );
        }
    }

    /// A `merged` outcome replaces in memory only the outcomes it outranks; the stored one
    /// is always written.
    fn merged_outcome(&mut self, issue_id: String, path: &str, pr: &crate::scm::PullRequestRef) {
        persist::set_merged_outcome(&self.store, &issue_id, path, pr);
        let replace = self
            .state
            .outcomes
            .get(&issue_id)
            .is_none_or(|(k, _)| crate::store::outcome_replaces(*k, OutcomeKind::Merged));
        if replace {
            self.state
                .outcomes
                .insert(issue_id, (OutcomeKind::Merged, String::new()));
        }
    }

    fn count(&self, c: Count) {
        match c {
            Count::CiStatusCheck(result) => self.metrics.ci_status_check(result),
            Count::ReviewCheck(result) => self.metrics.review_check(result),
            Count::EstimatedCost(usd) => self.metrics.estimated_cost(usd),
        }
    }

    /// A reaction's fix run replaces the issue's queued retry. A budget hold may keep it from
    /// queueing; otherwise the retry carries the reaction and its context.
    fn queue_reaction_run(&mut self, d: ReactionDispatch) {
        self.cancel_retry(&d.issue.id);
        self.schedule_retry(
            &d.issue,
            d.attempt,
            d.delay_ms,
            d.trigger,
            None,
            d.session_id,
            Pass {
                dispatched_at_ms: d.dispatched_at_ms,
                route: d.route,
            },
        );
        if let Some(info) = self.state.retries.get_mut(&d.issue.id) {
            info.reaction = Some(d.reaction);
            info.reaction_context = d.context;
            persist::save_retry(&self.store, info, &self.workflow);
        }
    }

    fn write(&self, w: Write) {
        let writer = self.store.writer();
        let (op, queued) = match w {
            Write::SaveUsageHold(row) => ("save_usage_hold", writer.upsert_usage_hold(row)),
            Write::DeleteUsageHold(row) => ("delete_usage_hold", writer.delete_usage_hold(row)),
            Write::StageHop(w) => (stage_write_op(&w), writer.stage_hop(w)),
            Write::Reaction(w) => return persist::reaction_write(&self.store, w),
        };
        if let Err(e) = queued {
            log::error!(op:% = op, error:% = e.to_string(); "database write failed");
        }
    }

    /// Every feature's `on_tick`, before a dispatch decision (a poll tick's pass, a due
    /// retry's check).
    pub(crate) fn features_on_tick(&mut self) {
        self.with_features(|f, cx| {
            f.in_order_mut()
                .into_iter()
                .flat_map(|feature| feature.on_tick(cx))
                .collect()
        });
    }

    /// Every feature's `on_exit`, for a session that ended (before its run is recorded).
    pub(crate) fn features_on_exit(
        &mut self,
        facts: &crate::orchestrator::core::state::RunFacts,
        result: &SupervisorResult,
    ) {
        let exit = ExitView { facts, result };
        self.with_features(|f, cx| {
            f.in_order_mut()
                .into_iter()
                .flat_map(|feature| feature.on_exit(&exit, cx))
                .collect()
        });
    }

    /// Every feature's `on_reload`, after the workflow loaded with a change or its file was
    /// written.
    pub(crate) fn features_on_reload(&mut self) {
        self.with_features(|f, cx| {
            f.in_order_mut()
                .into_iter()
                .flat_map(|feature| feature.on_reload(cx))
                .collect()
        });
    }

    /// The features' gates for a pass, in their declared order.
    pub(crate) fn feature_gates(
        &self,
        pass: PassKind,
    ) -> Vec<crate::orchestrator::claim::dispatch_pass::Gate> {
        let cx = self.cx();
        self.features
            .in_order()
            .into_iter()
            .filter_map(|feature| feature.gate(&cx, pass))
            .collect()
    }
}

/// The `op` a failed stage write is logged with.
fn stage_write_op(w: &crate::store::StageHopWrite) -> &'static str {
    use crate::store::StageHopWrite as W;
    match w {
        W::Save(_) => "save_stage_hop",
        W::Delete(_) => "delete_stage_hop",
        W::RunStage { .. } => "set_run_stage",
        W::LivePass(_) => "save_live_stage_pass",
        W::EndLivePass(_) => "end_live_stage_pass",
        W::ClearLivePasses => "clear_live_stage_passes",
        W::RunEvent { .. } => "save_stage_event",
    }
}
