//! Where the loop and the claim core reach the stages feature (`stages::feature`): a
//! successful exit's hop, the resets of an issue's hop count, a dispatch picking a hop up, the
//! poll's confirming reads, the routes of poll-tick and retry dispatches, the pass holds of
//! issues between stages, and the live stage passes at each full publish. Each applies the
//! effects the feature returns.

use std::collections::BTreeMap;

use crate::domain::stage::StageOutcome;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::stages::hop::{HopPlan, HopWrite};

impl Orchestrator {
    /// The hop a successful run of `entry` would make under the configuration in force now;
    /// `None` when its rule has no next stage with a label.
    pub(crate) fn plan_stage_hop(&self, entry: &RunningEntry) -> Option<HopPlan> {
        self.features
            .stages
            .plan_hop(&entry.facts, &self.workflow.config)
    }

    /// Applies what a hop's writes did. `true` when the hop was made: the caller releases the
    /// claim and writes no handoff. Otherwise the exit takes the handoff write.
    pub(crate) fn apply_stage_hop(
        &mut self,
        entry: &RunningEntry,
        plan: &HopPlan,
        write: HopWrite,
        outcome: StageOutcome,
    ) -> bool {
        let mut made = false;
        self.with_features(|f, cx| {
            let (m, effects) = f
                .stages
                .apply_hop(&entry.facts, plan, write, outcome, cx.now_ms);
            made = m;
            effects
        });
        made
    }

    /// Whether the exit of `entry` made a hop (its reactions are not seeded).
    pub(crate) fn hopped(&self, entry: &RunningEntry) -> bool {
        self.features.stages.hopped(&entry.facts)
    }

    /// Drops the issue's hop record: the issue was seen outside the active states, or a park
    /// was placed or released on it, or it was handed off.
    pub(crate) fn reset_hops(&mut self, issue_id: &str, trigger: &str) {
        self.with_features(|f, _| f.stages.reset(issue_id, trigger));
    }

    /// A run of the issue was dispatched: it is no longer between stages.
    pub(crate) fn note_picked_up(&mut self, issue_id: &str) {
        self.with_features(|f, _| f.stages.picked_up(issue_id));
    }

    /// Confirms the hops no read has confirmed yet with the poll's listing and direct reads
    /// (`StagesFeature::confirm`); the ones still unconfirmed are held by the stages gate of
    /// the pass that follows.
    pub(crate) fn confirm_hops(
        &mut self,
        candidates: &mut [Arc<Issue>],
        reads: BTreeMap<String, crate::tracker::TrackerResult<Issue>>,
    ) {
        let kind = self.tracker.kind();
        self.with_features(|f, cx| f.stages.confirm(candidates, reads, kind, cx));
    }

    /// The pass a poll-tick dispatch of `issue` runs in (`StagesFeature::poll_pass`).
    pub(crate) fn poll_pass(&self, issue: &Issue, now: i64) -> Pass {
        self.features
            .stages
            .poll_pass(issue, &self.workflow.config, now)
    }

    /// The pass a firing retry dispatches in (`StagesFeature::retry_pass`).
    pub(crate) fn retry_pass(&self, info: &RetryInfo, issue: &Issue) -> Pass {
        self.features
            .stages
            .retry_pass(info, issue, &self.workflow.config)
    }

    /// Moves the pass holds of issues between stages to their `between_stages[]` rows.
    pub(crate) fn split_between_holds(
        &mut self,
        held: &mut std::collections::HashMap<String, Held>,
    ) {
        self.features.stages.split_between_holds(held);
    }

    /// Empties the `live_stage_passes` table the previous process left (daemon start).
    pub(crate) fn clear_live_passes(&mut self) {
        self.with_features(|f, _| f.stages.clear_live_passes());
    }

    /// Keeps the `live_stage_passes` table in step with the state (at each full publish).
    pub(crate) fn sync_live_passes(&mut self) {
        self.with_features(|f, cx| f.stages.sync_live_passes(cx));
    }
}
