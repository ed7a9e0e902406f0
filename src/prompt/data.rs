//! The root data map templates see (`.issue`, `.attempt`, `.run`), built from the normalized
//! issue so every tracker's issues render alike.

use gotmpl::Value;

use super::reaction::{ReactionContext, root_values};
use super::value::{map, text};
use crate::domain::{BlockerRef, Comment, Issue, IssueRef};

/// Per-turn values exposed as `.run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunInfo {
    /// 1-based turn within this worker session.
    pub turn_number: u32,
    /// Effective `agent.max_turns` after clamping.
    pub max_turns: u32,
    /// `turn_number > 1`.
    pub is_continuation: bool,
}

impl RunInfo {
    /// The `run` values of `turn` (1-based) out of `max_turns`.
    pub fn for_turn(turn: u32, max_turns: u32) -> RunInfo {
        RunInfo {
            turn_number: turn,
            max_turns,
            is_continuation: turn > 1,
        }
    }
}

/// Everything a render needs. `attempt` is the scheduler's retry counter: `None` on the first
/// dispatch, which templates see as `0` (the contract's value, so `{{ if .attempt }}` is false).
#[derive(Debug, Clone, Copy)]
pub struct PromptData<'a> {
    pub issue: &'a Issue,
    pub attempt: Option<u32>,
    pub run: RunInfo,
    /// The pull-request reaction the run continues: `.ci_failure` or `.review_comments`.
    pub reaction: Option<&'a ReactionContext>,
    /// Where the run stands on a stage chain (`.stage`); `None` renders every member empty.
    pub stage: Option<&'a StageValues>,
}

/// `.stage`: present on every render, so a template never fails on a stage it was not reached
/// through. Each member is `""` when it does not apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageValues {
    /// The selected rule's name when the rule carries a stage label.
    pub current: String,
    /// The rule whose hop placed the issue on this stage.
    pub previous: String,
    /// `succeeded` or `no_change` for the run that hopped.
    pub previous_outcome: String,
}

/// Root keys of the data contract; the reaction keys are nil on a run that continues no
/// reaction of theirs.
pub(crate) const ROOT_KEYS: &[&str] = &[
    "issue",
    "attempt",
    "run",
    "ci_failure",
    "review_comments",
    "stage",
];

/// Keys of `.issue` (no `display_identifier`: the contract leaves it out).
pub(crate) const ISSUE_KEYS: &[&str] = &[
    "id",
    "identifier",
    "title",
    "description",
    "priority",
    "state",
    "branch_name",
    "url",
    "labels",
    "assignee",
    "issue_type",
    "parent",
    "comments",
    "blocked_by",
    "created_at",
    "updated_at",
];

pub(crate) const RUN_KEYS: &[&str] = &["turn_number", "max_turns", "is_continuation"];
pub(crate) const PARENT_KEYS: &[&str] = &["id", "identifier"];
pub(crate) const CI_FAILURE_KEYS: &[&str] = &[
    "status",
    "check_runs",
    "log_excerpt",
    "failing_count",
    "ref",
];

fn parent_value(parent: &IssueRef) -> Value {
    map(vec![
        ("id", text(&parent.id)),
        ("identifier", text(&parent.identifier)),
    ])
}

fn comment_value(c: &Comment) -> Value {
    map(vec![
        ("id", text(&c.id)),
        ("author", text(&c.author)),
        ("body", text(&c.body)),
        ("created_at", text(&c.created_at)),
    ])
}

fn blocker_value(b: &BlockerRef) -> Value {
    map(vec![
        ("id", text(&b.id)),
        ("identifier", text(&b.identifier)),
        ("state", text(&b.state)),
    ])
}

/// `.issue`: every key always present; absent optionals are nil (falsy), lists never nil
/// except `comments`, where nil means "not fetched".
pub(crate) fn issue_value(issue: &Issue) -> Value {
    map(vec![
        ("id", text(&issue.id)),
        ("identifier", text(&issue.identifier)),
        ("title", text(&issue.title)),
        ("description", text(&issue.description)),
        ("priority", issue.priority.map_or(Value::Nil, Value::Int)),
        ("state", text(&issue.state)),
        ("branch_name", text(&issue.branch_name)),
        ("url", text(&issue.url)),
        (
            "labels",
            Value::List(issue.labels.iter().map(|l| text(l)).collect()),
        ),
        ("assignee", text(&issue.assignee)),
        ("issue_type", text(&issue.issue_type)),
        (
            "parent",
            issue.parent.as_ref().map_or(Value::Nil, parent_value),
        ),
        (
            "comments",
            issue.comments.as_ref().map_or(Value::Nil, |cs| {
                Value::List(cs.iter().map(comment_value).collect())
            }),
        ),
        (
            "blocked_by",
            Value::List(issue.blocked_by.iter().map(blocker_value).collect()),
        ),
        ("created_at", text(&issue.created_at)),
        ("updated_at", text(&issue.updated_at)),
    ])
}

fn stage_value(stage: Option<&StageValues>) -> Value {
    let empty = StageValues::default();
    let s = stage.unwrap_or(&empty);
    map(vec![
        ("current", text(&s.current)),
        ("previous", text(&s.previous)),
        ("previous_outcome", text(&s.previous_outcome)),
    ])
}

impl PromptData<'_> {
    /// The root map handed to the engine.
    pub(crate) fn root_value(&self) -> Value {
        let (ci_failure, review_comments) = root_values(self.reaction);
        map(vec![
            ("issue", issue_value(self.issue)),
            ("attempt", Value::Int(i64::from(self.attempt.unwrap_or(0)))),
            (
                "run",
                map(vec![
                    ("turn_number", Value::Int(i64::from(self.run.turn_number))),
                    ("max_turns", Value::Int(i64::from(self.run.max_turns))),
                    ("is_continuation", Value::Bool(self.run.is_continuation)),
                ]),
            ),
            ("ci_failure", ci_failure),
            ("review_comments", review_comments),
            ("stage", stage_value(self.stage)),
        ])
    }
}
