//! Pull-request reactions as a feature: it owns the pending rows, the engine's memory of each,
//! whether a check pass is out and the triage runs that are out. The rows reach the snapshot
//! (`pending_reactions`). Seeding at an exit, the pass's application and triage verdicts are
//! still `impl Orchestrator` hooks (`hooks.rs`, `triage_hooks.rs`) that change this state
//! through `Orchestrator::features`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::CancelToken;
use crate::domain::ReactionKind;
use crate::orchestrator::core::feature::Feature;
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::features::reactions::{FixContext, ReactionRow, RowMemory};

/// A pending reaction's key: (issue id, kind).
pub type Key = (String, ReactionKind);

/// The reactions feature's slice of state.
#[derive(Debug, Default)]
pub struct ReactionsFeature {
    /// Pending pull-request reactions by (issue id, kind).
    pub rows: BTreeMap<Key, ReactionRow>,
    /// The engine's memory of each pending reaction (not served).
    pub memory: BTreeMap<Key, RowMemory>,
    /// A check pass is out (one at a time).
    pub pass_out: bool,
    /// The triage runs that are out, by row: cancelled at shutdown.
    pub triage_runs: BTreeMap<Key, CancelToken>,
}

impl ReactionsFeature {
    /// Whether any reaction of the issue is pending.
    pub fn watches(&self, issue_id: &str) -> bool {
        self.rows.keys().any(|k| k.0 == issue_id)
    }

    /// The fix context the issue's latest dispatch of `kind` carried (for a retry that
    /// continues it).
    pub fn last_context(&self, issue_id: &str, kind: ReactionKind) -> Option<FixContext> {
        self.memory
            .get(&(issue_id.to_string(), kind))
            .and_then(|m| m.last_context.clone())
    }

    /// Drops every row of the issue and its memory (nothing stored changes).
    pub fn drop_issue(&mut self, issue_id: &str) {
        self.rows.retain(|(id, _), _| id != issue_id);
        self.memory.retain(|(id, _), _| id != issue_id);
    }

    /// Whether a triage run of the issue is out.
    pub fn triage_running(&self, issue_id: &str) -> bool {
        self.triage_runs.keys().any(|k| k.0 == issue_id)
    }

    /// The pending rows in the reference's order (identifier, issue id, kind).
    fn sorted_rows(&self) -> Vec<ReactionRow> {
        let mut rows: Vec<_> = self.rows.values().cloned().collect();
        rows.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        rows
    }
}

impl Feature for ReactionsFeature {
    fn snapshot(&self, snap: &mut Snapshot, _now_ms: i64) {
        snap.pending_reactions = Arc::new(self.sorted_rows());
    }
}
