//! Pull-request reactions as a feature: it owns the pending rows, the engine's memory of each,
//! whether a check pass is out and the triage runs that are out. The rows reach the snapshot
//! (`pending_reactions`). Its other decisions are methods in the files beside it (a returned
//! pass: `apply_pass.rs`, `act.rs`; seeding: `rebuild.rs`; triage: `triage_verdict.rs`;
//! check-now: `check_request.rs`), each returning the effects the loop applies; `hooks.rs` and
//! `triage_hooks.rs` are where the loop calls them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::CancelToken;
use crate::config::reactions::ReactionsConfig;
use crate::domain::{ReactionKind, ReactionWait};
use crate::orchestrator::core::effect::Effect;
use crate::orchestrator::core::feature::{Cx, Feature};
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::core::state::State;
pub use crate::orchestrator::features::reactions::pass::Key;
use crate::orchestrator::features::reactions::pass::{DueRow, ReactionPass};
use crate::orchestrator::features::reactions::seed::{self, SeedRun};
use crate::orchestrator::features::reactions::{FixContext, ReactionRow, RowMemory};
use crate::scm::ScmAdapter;
use crate::tracker::TrackerAdapter;

/// What a check pass reads beyond the loop's view: the forge, the tracker, and the reactions
/// the process applies (`Orchestrator::reaction_config`).
pub struct PassSources {
    pub scm: Arc<dyn ScmAdapter>,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub cfg: ReactionsConfig,
}

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

    /// A row of `key` follows the run: a row watching another pull request (or none) is
    /// replaced by a new one and its memory forgotten; a row watching this one is refreshed
    /// with its counts kept. Either way its memory remembers the run.
    pub fn seed(
        &mut self,
        key: Key,
        run: &SeedRun,
        pr: &crate::scm::PullRequestRef,
        now_ms: i64,
        cfg: &ReactionsConfig,
    ) {
        match self.rows.get_mut(&key) {
            Some(row) if row.pr.pr == *pr => seed::refresh_row(row, run, now_ms),
            _ => {
                let row = seed::new_row(key.1, run, pr.clone(), now_ms, cfg);
                self.rows.insert(key.clone(), row);
                self.memory.remove(&key);
            }
        }
        let mem = self.memory.entry(key).or_default();
        seed::remember_run(mem, run);
    }

    /// Whether a session of the issue runs, a retry holds its one slot, or a triage run of it
    /// is out.
    pub fn slot_busy(&self, state: &State, issue_id: &str) -> bool {
        state.running.contains_key(issue_id)
            || state.retries.contains_key(issue_id)
            || state
                .awaiting_record
                .values()
                .any(|a| a.entry.facts.issue.id == issue_id)
            || self.triage_running(issue_id)
    }

    /// The check pass of the rows due now, as an effect the loop runs on a `work` thread (one
    /// pass at a time: none while one is out, none when nothing is due). The rows and their
    /// memory go as copies; what the pass found is applied to the rows still pending then
    /// (`ReactionsFeature::pass_returned`, `apply_checked`).
    pub fn due_pass(&mut self, cx: &Cx<'_>, sources: PassSources) -> Vec<Effect> {
        if self.pass_out {
            return Vec::new();
        }
        let now = cx.now_ms;
        let rows: Vec<DueRow> = self
            .rows
            .iter()
            .filter(|(_, r)| r.next_poll_at_ms <= now)
            .map(|(k, row)| DueRow {
                key: k.clone(),
                row: row.clone(),
                mem: self.memory.get(k).cloned().unwrap_or_default(),
                slot_busy: self.slot_busy(cx.state, &k.0),
            })
            .collect();
        if rows.is_empty() {
            return Vec::new();
        }
        let merge_rows = self
            .rows
            .values()
            .filter(|r| matches!(r.kind, ReactionKind::Merge | ReactionKind::MergeCompletion))
            .map(|r| (r.issue.id.clone(), (r.kind, r.pr.pr.clone())))
            .collect();
        let health = cx
            .state
            .health
            .scm
            .as_ref()
            .map(|h| h.check.clone())
            .unwrap_or_default();
        self.pass_out = true;
        vec![Effect::CheckReactions(Box::new(ReactionPass {
            scm: sources.scm,
            tracker: sources.tracker,
            cfg: sources.cfg,
            tracker_cfg: cx.workflow.config.tracker.clone(),
            poll_interval_ms: cx.workflow.config.polling.interval_ms,
            now_ms: now,
            rows,
            merge_rows,
            health,
        }))]
    }

    /// A tracker read failed: the due rows wait a backoff (doubling from the poll interval,
    /// at least a second, at most `cx::MAX_BACKOFF_MS`).
    pub fn back_off(&mut self, due: &[Key], now_ms: i64, poll_interval_ms: u64) {
        for key in due {
            if let Some(row) = self.rows.get_mut(key) {
                row.backoff_count += 1;
                let factor = 1u64 << row.backoff_count.min(16);
                let delay = poll_interval_ms
                    .max(1_000)
                    .saturating_mul(factor)
                    .min(crate::orchestrator::features::reactions::cx::MAX_BACKOFF_MS);
                row.wait = Some(ReactionWait::Backoff);
                row.next_poll_at_ms = now_ms + delay as i64;
            }
        }
    }

    /// The row stays pending; a check that a request to check now brought forward gives the
    /// replaced time back.
    pub fn keep(&mut self, key: Key, mut row: ReactionRow, mem: RowMemory, started_ms: i64) {
        crate::orchestrator::features::reactions::check_now::settle_check_now(&mut row, started_ms);
        self.rows.insert(key.clone(), row);
        self.memory.insert(key, mem);
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
