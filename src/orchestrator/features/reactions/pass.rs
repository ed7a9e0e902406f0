//! One pass over the due pull-request reactions, off `orch`: the tracker read of their
//! issues' states, the forge reads of each check (and the writes a check makes: a merge, a
//! branch deletion, a label removal), and a merge completion's transition. The rows are
//! copies; the feature applies what the pass decided to the rows still pending
//! (`apply_pass.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::config::reactions::ReactionsConfig;
use crate::domain::{ReactionKind, state_eq, state_in};
use crate::orchestrator::core::state::CheckHealth;
use crate::orchestrator::features::reactions::cx::CheckCx;
use crate::orchestrator::features::reactions::step::Step;
use crate::orchestrator::features::reactions::{ReactionRow, RowMemory};
use crate::scm::{PullRequestRef, ScmAdapter, ScmError};
use crate::tracker::{TrackerAdapter, TrackerResult};

/// A pending reaction's key: (issue id, kind).
pub type Key = (String, ReactionKind);

/// A due row as the pass checks it.
pub struct DueRow {
    pub key: Key,
    pub row: ReactionRow,
    pub mem: RowMemory,
    /// Another retry holds the issue's slot, or a session of the issue runs.
    pub slot_busy: bool,
}

/// What the pass needs, gathered on `orch` ([`ReactionsFeature::due_pass`](super::feature::ReactionsFeature::due_pass)).
pub struct ReactionPass {
    pub scm: Arc<dyn ScmAdapter>,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub cfg: ReactionsConfig,
    pub tracker_cfg: crate::config::TrackerConfig,
    pub poll_interval_ms: u64,
    pub now_ms: i64,
    pub rows: Vec<DueRow>,
    /// Issue id → the merge row (kind, pull request) it has, due or not.
    pub merge_rows: BTreeMap<String, (ReactionKind, PullRequestRef)>,
    pub health: CheckHealth<ScmError>,
}

/// How a watched issue's state ends its reactions.
#[derive(Debug)]
pub(crate) enum Ending {
    /// Terminal; `merged` when its merge row's pull request was merged (read once, so a
    /// forge that closes the issue on merge still yields `merged`).
    Terminal {
        state: String,
        merged: Option<(ReactionKind, PullRequestRef)>,
    },
    /// Gone, or out of the active, handoff and no-change states.
    Departed,
}

/// A row the pass checked.
pub(crate) struct Checked {
    pub key: Key,
    pub row: ReactionRow,
    pub mem: RowMemory,
    pub step: Step,
    pub was_escalated: bool,
    /// A merge completion's transition, made by the pass.
    pub transition: Option<TrackerResult<()>>,
}

impl Checked {
    /// What a run's exit seeded while the pass was out is `orch`'s, not the pass's copy: the
    /// row follows the newest run (its pass, selection, issue, branch and head) and the memory
    /// keeps the session to resume, the next attempt and every head Sortie's runs recorded, so
    /// the step does not treat the run's own head as someone else's push.
    pub(crate) fn keep_live_seed(&mut self, live: &ReactionRow, live_mem: Option<&RowMemory>) {
        self.row.issue = live.issue.clone();
        self.row.dispatched_at_ms = live.dispatched_at_ms;
        self.row.chain_id = live.chain_id.clone();
        self.row.rule_name = live.rule_name.clone();
        self.row.agent_kind = live.agent_kind.clone();
        self.row.configured_model = live.configured_model.clone();
        self.row.pr.branch = live.pr.branch.clone();
        self.row.pr.head_sha = live.pr.head_sha.clone();
        if let Some(m) = live_mem {
            self.mem.run_attempt = m.run_attempt;
            self.mem.session_id = m.session_id.clone();
            self.mem.own_heads.extend(m.own_heads.iter().cloned());
        }
    }
}

/// What the pass found.
pub(crate) struct PassDone {
    pub due: Vec<Key>,
    /// `Err`: the issues' states could not be read; every due row waits a backoff.
    pub states: crate::tracker::TrackerResult<()>,
    pub ended: Vec<(String, Ending)>,
    pub expired: Vec<Key>,
    pub checked: Vec<Checked>,
    pub health: CheckHealth<ScmError>,
    pub started_ms: i64,
}

impl std::fmt::Debug for ReactionPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactionPass")
            .field("now_ms", &self.now_ms)
            .field("due_rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl ReactionPass {
    pub(crate) fn run(mut self) -> PassDone {
        let due: Vec<Key> = self.rows.iter().map(|r| r.key.clone()).collect();
        let mut done = PassDone {
            due,
            states: Ok(()),
            ended: Vec::new(),
            expired: Vec::new(),
            checked: Vec::new(),
            health: CheckHealth::default(),
            started_ms: self.now_ms,
        };
        let ids: Vec<String> = self
            .rows
            .iter()
            .map(|r| r.key.0.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let states = match self.tracker.fetch_issue_states_by_ids(&ids) {
            Ok(s) => s,
            Err(e) => {
                done.states = Err(e);
                done.health = self.health;
                return done;
            }
        };
        let mut ended = BTreeSet::new();
        for id in ids {
            if let Some(ending) = self.ending(&id, states.get(&id)) {
                done.ended.push((id.clone(), ending));
                ended.insert(id);
            }
        }
        for DueRow {
            key,
            mut row,
            mut mem,
            slot_busy,
        } in std::mem::take(&mut self.rows)
        {
            if ended.contains(&key.0) {
                continue;
            }
            if row.watch_expired(self.now_ms) {
                done.expired.push(key);
                continue;
            }
            let was_escalated = row.escalated_at_ms.is_some();
            let mut cx = CheckCx {
                now_ms: self.now_ms,
                scm: self.scm.as_ref(),
                health: &mut self.health,
                cfg: &self.cfg,
                poll_interval_ms: self.poll_interval_ms,
                slot_busy,
            };
            let step =
                crate::orchestrator::features::reactions::check_row(&mut row, &mut mem, &mut cx);
            let transition = match &step {
                Step::Merged {
                    transition_to: Some(state),
                    ..
                } => Some(self.tracker.transition_issue(&row.issue.id, state)),
                _ => None,
            };
            done.checked.push(Checked {
                key,
                row,
                mem,
                step,
                was_escalated,
                transition,
            });
        }
        done.health = self.health;
        done
    }

    /// How the state `state` (`None`: the tracker does not know the issue) ends the issue's
    /// reactions; `None` while it is watched.
    fn ending(&self, id: &str, state: Option<&String>) -> Option<Ending> {
        let t = &self.tracker_cfg;
        let watched = |s: &str| {
            state_in(s, &t.active_states)
                || t.handoff_state.as_deref().is_some_and(|h| state_eq(h, s))
                || t.no_change_state.as_deref().is_some_and(|h| state_eq(h, s))
        };
        match state {
            Some(s) if state_in(s, &t.terminal_states) => Some(Ending::Terminal {
                state: s.clone(),
                merged: self.merged(id),
            }),
            Some(s) if watched(s) => None,
            _ => Some(Ending::Departed),
        }
    }

    /// The issue's merge row, when its pull request reads as merged.
    fn merged(&self, id: &str) -> Option<(ReactionKind, PullRequestRef)> {
        let (kind, pr) = self.merge_rows.get(id)?;
        let info = self.scm.pull_request(pr).ok()?;
        info.merged.then(|| (*kind, pr.clone()))
    }
}
