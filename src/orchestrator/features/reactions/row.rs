//! A pending pull-request reaction: one row per issue and reaction kind, kept in memory by
//! `orch` (a standing escalation is also stored, so it survives a restart) and published in
//! snapshots as the state document's `pending_reactions`.

use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::scm::PullRequestRef;

/// The issue a reaction follows, as the run that created it read it. After a restart only the
/// title and link are known (`issue_type` and `labels` are `None`, `state` is empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReactionIssue {
    pub id: String,
    pub identifier: String,
    pub display_identifier: String,
    pub title: String,
    pub url: String,
    /// `None`: unread.
    pub issue_type: Option<String>,
    /// `None`: unread; `Some([])`: read, none.
    pub labels: Option<Vec<String>>,
    /// The state Sortie wrote at the exit (handoff or no-change), else the state the run read.
    pub state: String,
}

/// The pull request a reaction watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionPr {
    pub pr: PullRequestRef,
    /// The web page as the latest read reported it; empty until a read reports one.
    pub url: String,
    /// The head branch the run's record holds (empty for kinds that keep none).
    pub branch: String,
    /// The head commit the run's record holds (a later push does not change it).
    pub head_sha: String,
}

/// What the latest completed check observed, per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastCheck {
    Ci {
        observed_at_ms: i64,
        head_sha: String,
        status: CiStatus,
        failing_checks: Vec<String>,
        failing: u32,
        pending: u32,
        passing: u32,
    },
    Review {
        observed_at_ms: i64,
        actionable_comments: u32,
        new_comments: u32,
        /// Served only when true.
        awaiting_approval: bool,
    },
    BotReview {
        observed_at_ms: i64,
        actionable_comments: u32,
        new_comments: u32,
        /// Served only when true.
        handled: bool,
    },
    MergeConflict {
        observed_at_ms: i64,
        head_sha: String,
        mergeable: Option<bool>,
    },
}

/// A request to check now moved `next_poll_at` earlier: what it replaced, given back when the
/// brought-forward check leaves the reaction pending before that time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckNow {
    pub replaced_next_poll_at_ms: i64,
    pub backoff_count_before: u32,
}

/// One pending reaction.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionRow {
    pub issue: ReactionIssue,
    pub kind: ReactionKind,
    pub pr: ReactionPr,
    /// When this process created the row (the seeding exit, or the startup that rebuilt it).
    pub created_at_ms: i64,
    /// The first dispatch of the pass of the run the reaction follows; `None`: undated.
    pub dispatched_at_ms: Option<i64>,
    /// The pass (`chain_id`) of the run the reaction follows: its continuations run in it and
    /// its activity (`pr_loop`) is recorded under it; `""` for a pass recorded without one.
    pub chain_id: String,
    pub next_poll_at_ms: i64,
    /// `None` until a pass first returns the row to the pending set.
    pub wait: Option<ReactionWait>,
    /// What the kind counts (`None` for label commands).
    pub used_attempts: Option<u32>,
    /// The kind's budget as of the latest tick (`None`: no budget applies).
    pub max_attempts: Option<u32>,
    pub escalated_at_ms: Option<i64>,
    pub escalation_trigger: Option<EscalationTrigger>,
    /// The instant the kind measures its watch window from.
    pub watch_from_ms: i64,
    /// `watch_window_ms` as the process applies it (0 = no bound).
    pub watch_window_ms: u64,
    pub last_check: Option<LastCheck>,
    pub rule_name: String,
    pub agent_kind: String,
    pub configured_model: String,
    /// Consecutive failed checks (the backoff exponent).
    pub backoff_count: u32,
    pub check_now: Option<CheckNow>,
}

impl ReactionRow {
    /// The selection the reaction's continuation runs on: the rule, kind and model of the run
    /// it follows (the template comes from the rule at the attempt).
    pub fn route(&self) -> crate::domain::stage::Route {
        crate::domain::stage::Route {
            rule_name: self.rule_name.clone(),
            agent_kind: self.agent_kind.clone(),
            configured_model: self.configured_model.clone(),
            chain_id: self.chain_id.clone(),
            ..Default::default()
        }
    }

    /// `watch_ends_at`: `None` for kinds without a window, a 0 window, a standing
    /// escalation, and a review row awaiting approval.
    pub fn watch_ends_at_ms(&self) -> Option<i64> {
        let windowless = matches!(
            self.kind,
            ReactionKind::MergeCompletion | ReactionKind::LabelReview | ReactionKind::LabelFix
        );
        let awaiting = matches!(
            self.last_check,
            Some(LastCheck::Review {
                awaiting_approval: true,
                ..
            })
        );
        if windowless || self.watch_window_ms == 0 || self.escalated_at_ms.is_some() || awaiting {
            return None;
        }
        Some(
            self.watch_from_ms
                .saturating_add(self.watch_window_ms as i64),
        )
    }

    /// Whether the watch window has ended at `now_ms`.
    pub fn watch_expired(&self, now_ms: i64) -> bool {
        self.watch_ends_at_ms().is_some_and(|end| now_ms >= end)
    }

    /// Whether the row reports nothing outstanding (the `active[]` deciding-row rule): a
    /// passing CI row, a bot-review row with no actionable comment or handled, a mergeable
    /// merge-conflict row, and every merge, merge-completion and label row.
    pub fn nothing_outstanding(&self) -> bool {
        match (&self.kind, &self.last_check) {
            (ReactionKind::Ci, Some(LastCheck::Ci { status, .. })) => *status == CiStatus::Passing,
            (
                ReactionKind::BotReview,
                Some(LastCheck::BotReview {
                    actionable_comments,
                    handled,
                    ..
                }),
            ) => *actionable_comments == 0 || *handled,
            (ReactionKind::MergeConflict, Some(LastCheck::MergeConflict { mergeable, .. })) => {
                *mergeable == Some(true)
            }
            (
                ReactionKind::Merge
                | ReactionKind::MergeCompletion
                | ReactionKind::LabelReview
                | ReactionKind::LabelFix,
                _,
            ) => true,
            _ => false,
        }
    }

    /// Sort key of `pending_reactions`: identifier, issue id, kind.
    pub fn sort_key(&self) -> (&str, &str, ReactionKind) {
        (&self.issue.identifier, &self.issue.id, self.kind)
    }
}

/// The reaction a run (or a queued retry) continues: served on running rows as
/// `reaction_kind`, `reaction_config_key`, `reaction_attempt` and `pull_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReaction {
    pub kind: ReactionKind,
    /// Which try of its reaction the run is (`None` for label commands, which count nothing).
    pub attempt: Option<u32>,
    pub pr: PullRequestRef,
}
