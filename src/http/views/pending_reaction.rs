//! A `pending_reactions[]` row: a pull-request reaction Sortie keeps watching after a run
//! handed off, with its pull request, schedule, budget, escalation and latest check.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::orchestrator::reactions::{LastCheck, ReactionIssue, ReactionPr, ReactionRow};
use crate::scm::PullRequestRef;

use super::super::reaction_words;
use super::stage::{StagePosition, Stages};
use super::{IssueFields, Sentences, nonempty, opt_ts, ts};

/// A pull request named by number and repository (running rows, the check-now reply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PullRequestKey {
    pub number: u64,
    /// `owner/repo`.
    pub repository: String,
}

impl PullRequestKey {
    pub fn of(pr: &PullRequestRef) -> PullRequestKey {
        PullRequestKey {
            number: pr.number,
            repository: pr.repository(),
        }
    }
}

/// The pull request a reaction watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "ReactionPullRequest")]
pub struct PullRequestView {
    pub number: u64,
    pub repository: String,
    /// Omitted until a read reports the page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Omitted for label-review and merge-completion, which keep none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Omitted when none was recorded, and for label-review, label-fix and merge-completion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
}

impl PullRequestView {
    pub fn of(pr: &ReactionPr, kind: ReactionKind) -> PullRequestView {
        let keeps_branch = !matches!(
            kind,
            ReactionKind::LabelReview | ReactionKind::MergeCompletion
        );
        let keeps_head = !matches!(
            kind,
            ReactionKind::LabelReview | ReactionKind::LabelFix | ReactionKind::MergeCompletion
        );
        PullRequestView {
            number: pr.pr.number,
            repository: pr.pr.repository(),
            url: nonempty(&pr.url),
            branch: nonempty(&pr.branch).filter(|_| keeps_branch),
            head_sha: nonempty(&pr.head_sha).filter(|_| keeps_head),
        }
    }
}

/// `last_check` of a ci row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CiCheckView {
    pub observed_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    pub status: CiStatus,
    pub failing_checks: Vec<String>,
    pub failing: u32,
    pub pending: u32,
    pub passing: u32,
}

/// `last_check` of a review row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReviewCheckView {
    pub observed_at: String,
    pub actionable_comments: u32,
    pub new_comments: u32,
    /// Present only when true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting_approval: Option<bool>,
}

/// `last_check` of a bot-review row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BotReviewCheckView {
    pub observed_at: String,
    pub actionable_comments: u32,
    pub new_comments: u32,
    /// Present only when true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handled: Option<bool>,
}

/// `last_check` of a merge-conflict row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct MergeConflictCheckView {
    pub observed_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    /// `null` while the provider has not computed mergeability.
    pub mergeable: Option<bool>,
}

/// What the latest completed check observed: a flat object whose members follow the kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum LastCheckView {
    Ci(CiCheckView),
    Review(ReviewCheckView),
    BotReview(BotReviewCheckView),
    MergeConflict(MergeConflictCheckView),
}

impl LastCheckView {
    pub fn of(c: &LastCheck) -> LastCheckView {
        match c {
            LastCheck::Ci {
                observed_at_ms,
                head_sha,
                status,
                failing_checks,
                failing,
                pending,
                passing,
            } => LastCheckView::Ci(CiCheckView {
                observed_at: ts(*observed_at_ms),
                head_sha: nonempty(head_sha),
                status: *status,
                failing_checks: failing_checks.clone(),
                failing: *failing,
                pending: *pending,
                passing: *passing,
            }),
            LastCheck::Review {
                observed_at_ms,
                actionable_comments,
                new_comments,
                awaiting_approval,
            } => LastCheckView::Review(ReviewCheckView {
                observed_at: ts(*observed_at_ms),
                actionable_comments: *actionable_comments,
                new_comments: *new_comments,
                awaiting_approval: awaiting_approval.then_some(true),
            }),
            LastCheck::BotReview {
                observed_at_ms,
                actionable_comments,
                new_comments,
                handled,
            } => LastCheckView::BotReview(BotReviewCheckView {
                observed_at: ts(*observed_at_ms),
                actionable_comments: *actionable_comments,
                new_comments: *new_comments,
                handled: handled.then_some(true),
            }),
            LastCheck::MergeConflict {
                observed_at_ms,
                head_sha,
                mergeable,
            } => LastCheckView::MergeConflict(MergeConflictCheckView {
                observed_at: ts(*observed_at_ms),
                head_sha: nonempty(head_sha),
                mergeable: *mergeable,
            }),
        }
    }
}

/// The issue members of a pending reaction row, in the reference's order. Type, labels and
/// state are omitted while unread (a row rebuilt after a restart holds the title and link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReactionIssueView {
    pub issue_id: String,
    pub issue_identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl ReactionIssueView {
    fn of(i: &ReactionIssue) -> ReactionIssueView {
        ReactionIssueView {
            issue_id: i.id.clone(),
            issue_identifier: i.identifier.clone(),
            display_identifier: nonempty(&i.display_identifier),
            issue_title: nonempty(&i.title),
            issue_url: nonempty(&i.url),
            issue_type: i.issue_type.as_deref().and_then(nonempty),
            issue_labels: i.labels.clone(),
            state: nonempty(&i.state),
        }
    }

    /// The shared issue members other lists read (`active[]`).
    pub fn fields(&self) -> IssueFields {
        IssueFields {
            issue_id: self.issue_id.clone(),
            issue_identifier: self.issue_identifier.clone(),
            issue_title: self.issue_title.clone(),
            issue_url: self.issue_url.clone(),
            issue_labels: self.issue_labels.clone().unwrap_or_default(),
            display_identifier: self.display_identifier.clone(),
            issue_type: self.issue_type.clone(),
            state: self.state.clone(),
        }
    }
}

/// A `pending_reactions[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "PendingReactionRow")]
pub struct PendingReactionView {
    #[serde(flatten)]
    pub issue: ReactionIssueView,
    pub kind: ReactionKind,
    pub config_key: String,
    pub pull_request: PullRequestView,
    pub created_at: String,
    /// `null` when the pass cannot be dated.
    pub dispatched_at: Option<String>,
    pub next_poll_at: String,
    /// Omitted until a pass first returns the reaction to the pending set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<ReactionWait>,
    pub used_attempts: Option<u32>,
    pub max_attempts: Option<u32>,
    pub escalated_at: Option<String>,
    /// Present exactly while `escalated_at` is not null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_trigger: Option<EscalationTrigger>,
    pub watch_ends_at: Option<String>,
    pub last_check: Option<LastCheckView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_position: Option<StagePosition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// The issue members as the other lists hold them, for `active[]`; not served.
    #[serde(skip)]
    #[schemars(skip)]
    pub fields: IssueFields,
}

impl PendingReactionView {
    pub fn build(row: &ReactionRow, now_ms: i64, stages: &Stages<'_>) -> PendingReactionView {
        let issue = ReactionIssueView::of(&row.issue);
        let fields = issue.fields();
        let escalated = row.escalated_at_ms.is_some();
        PendingReactionView {
            issue,
            kind: row.kind,
            config_key: row.kind.config_key().to_string(),
            pull_request: PullRequestView::of(&row.pr, row.kind),
            created_at: ts(row.created_at_ms),
            dispatched_at: opt_ts(row.dispatched_at_ms),
            next_poll_at: ts(row.next_poll_at_ms),
            wait: row.wait,
            used_attempts: row.used_attempts,
            max_attempts: row.max_attempts,
            escalated_at: opt_ts(row.escalated_at_ms),
            escalation_trigger: row.escalation_trigger.filter(|_| escalated),
            watch_ends_at: opt_ts(row.watch_ends_at_ms()),
            last_check: row.last_check.as_ref().map(LastCheckView::of),
            rule_name: nonempty(&row.rule_name),
            // The row keeps no previous rule of the run it follows: the first chain that
            // holds the rule.
            stage_position: stages.position(&row.rule_name, None, &row.issue.id),
            agent_kind: nonempty(&row.agent_kind),
            configured_model: nonempty(&row.configured_model),
            sentences: reaction_words::pending(row, now_ms).into(),
            fields,
        }
    }
}

/// The rows of `pending_reactions` in the reference's order: issue identifier, issue id, kind.
pub fn build_all(
    rows: &[ReactionRow],
    now_ms: i64,
    stages: &Stages<'_>,
) -> Vec<PendingReactionView> {
    let mut sorted: Vec<&ReactionRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    sorted
        .into_iter()
        .map(|r| PendingReactionView::build(r, now_ms, stages))
        .collect()
}

/// The row that decides the status of an issue whose rows are `rows` (in list order): the
/// first escalated row; else the review row awaiting approval when every other row reports
/// nothing outstanding; else the first row.
pub fn deciding<'a>(rows: &[&'a ReactionRow]) -> Option<&'a ReactionRow> {
    if let Some(r) = rows.iter().find(|r| r.escalated_at_ms.is_some()) {
        return Some(r);
    }
    let awaiting = rows.iter().position(|r| {
        r.kind == ReactionKind::Review
            && matches!(
                r.last_check,
                Some(LastCheck::Review {
                    awaiting_approval: true,
                    ..
                })
            )
    });
    if let Some(i) = awaiting {
        let rest_quiet = rows
            .iter()
            .enumerate()
            .all(|(j, r)| j == i || r.nothing_outstanding());
        if rest_quiet {
            return Some(rows[i]);
        }
    }
    rows.first().copied()
}

/// Each issue's rows, deciding row first, the issues in list order.
pub fn by_issue(views: &[PendingReactionView], rows: &[ReactionRow]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, v) in views.iter().enumerate() {
        match groups.iter_mut().find(|(id, _)| *id == v.issue.issue_id) {
            Some((_, g)) => g.push(i),
            None => groups.push((v.issue.issue_id.clone(), vec![i])),
        }
    }
    groups
        .into_iter()
        .map(|(_, mut idx)| {
            let of_issue: Vec<&ReactionRow> = idx
                .iter()
                .filter_map(|&i| find_row(rows, &views[i]))
                .collect();
            if let Some(d) = deciding(&of_issue)
                && let Some(pos) = idx
                    .iter()
                    .position(|&i| views[i].kind == d.kind && views[i].issue.issue_id == d.issue.id)
            {
                let first = idx.remove(pos);
                idx.insert(0, first);
            }
            idx
        })
        .collect()
}

fn find_row<'a>(rows: &'a [ReactionRow], v: &PendingReactionView) -> Option<&'a ReactionRow> {
    rows.iter()
        .find(|r| r.issue.id == v.issue.issue_id && r.kind == v.kind)
}

#[cfg(test)]
#[path = "pending_reaction_tests.rs"]
pub(crate) mod tests;
