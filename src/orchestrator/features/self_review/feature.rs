//! Self-review as a feature: it owns each running session's progress through the phase (the
//! supervisor runs the turns and reports where the phase is). A report moves the session's
//! progress; its end hands the audit trail to the run record (an effect); a turn start ends
//! Sortie's own checks and restarts the stall clock; an exit drops the session's progress;
//! the progress reaches the snapshot, where the running row and its stall clock read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::orchestrator::core::effect::Effect;
use crate::orchestrator::core::feature::{Cx, ExitView, Feature};
use crate::orchestrator::core::run_record::SelfReviewPhase;
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::features::self_review::progress::ReviewProgress;

/// The self-review feature's slice of state.
#[derive(Debug, Default)]
pub struct SelfReviewFeature {
    /// Dispatch id → progress, for the running sessions that entered the phase; shared with
    /// published snapshots and copied on write.
    sessions: Arc<BTreeMap<String, ReviewProgress>>,
}

impl SelfReviewFeature {
    /// The progress of the session `dispatch_id` (the default when it never entered the
    /// phase).
    pub fn progress(&self, dispatch_id: &str) -> ReviewProgress {
        self.sessions.get(dispatch_id).copied().unwrap_or_default()
    }

    /// The running session `dispatch_id` reported where its phase is. At the phase's end its
    /// audit trail becomes the run's `review_metadata`.
    pub fn report(&mut self, dispatch_id: &str, phase: SelfReviewPhase) -> Vec<Effect> {
        let progress = Arc::make_mut(&mut self.sessions)
            .entry(dispatch_id.to_string())
            .or_default();
        match progress.apply(phase) {
            Some(metadata) => vec![Effect::ReviewMetadata {
                dispatch_id: dispatch_id.to_string(),
                metadata,
            }],
            None => Vec::new(),
        }
    }

    /// A turn of the session `dispatch_id` started: checks that ran before it are over, and
    /// the stall clock starts again at `now_ms`.
    pub fn turn_started(&mut self, dispatch_id: &str, now_ms: i64) {
        if !self.progress(dispatch_id).checks_running {
            return;
        }
        if let Some(p) = Arc::make_mut(&mut self.sessions).get_mut(dispatch_id) {
            p.checks_running = false;
            p.stall_floor_ms = now_ms;
        }
    }
}

impl Feature for SelfReviewFeature {
    /// The session ended: its progress is no longer shown.
    fn on_exit(&mut self, exit: &ExitView<'_>, _cx: &Cx<'_>) -> Vec<Effect> {
        if self.sessions.contains_key(&exit.facts.dispatch_id) {
            Arc::make_mut(&mut self.sessions).remove(&exit.facts.dispatch_id);
        }
        Vec::new()
    }

    fn snapshot(&self, snap: &mut Snapshot, _now_ms: i64) {
        self.snapshot_running(snap);
    }

    fn snapshot_running(&self, snap: &mut Snapshot) {
        snap.self_review = Arc::clone(&self.sessions);
    }
}
