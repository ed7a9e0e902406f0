//! `GET /api/v1/{identifier}`: one issue's live rows, recent events and run history.

use schemars::JsonSchema;
use serde::Serialize;

use super::between_stages::BetweenStagesView;
use super::budget::BudgetView;
use super::event::EventView;
use super::issue::IssueStatus;
use super::parked::ParkedView;
use super::pending_reaction::PendingReactionView;
use super::pr_loop::PrLoopView;
use super::retry::RetryView;
use super::run::{IssueTotalsView, OutcomeView, RunView};
use super::running::RunningView;
use super::{EmptyObject, IssueFields, Sentences};

/// What happens next under a condition.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NextOutcome {
    pub condition: String,
    pub text: String,
}

/// The tracker's view of the issue (from the deciding row, or the newest run).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct IssueMember {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl IssueMember {
    pub fn of(f: &IssueFields) -> IssueMember {
        IssueMember {
            title: f.issue_title.clone(),
            url: f.issue_url.clone(),
            issue_type: f.issue_type.clone(),
            labels: Some(f.issue_labels.clone()),
            state: f.state.clone(),
        }
    }

    /// From a pending reaction row, whose type, labels and state may be unread.
    pub fn of_reaction(r: &PendingReactionView) -> IssueMember {
        IssueMember::of_read(&r.issue)
    }

    /// From a between-stages row, whose type, labels and state may be unread.
    pub fn of_hop(r: &BetweenStagesView) -> IssueMember {
        IssueMember::of_read(&r.issue)
    }

    fn of_read(i: &super::pending_reaction::ReactionIssueView) -> IssueMember {
        IssueMember {
            title: i.issue_title.clone(),
            url: i.issue_url.clone(),
            issue_type: i.issue_type.clone(),
            labels: i.issue_labels.clone(),
            state: i.state.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkspaceView {
    pub path: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AttemptsView {
    pub restart_count: u32,
    pub current_retry_attempt: u32,
}

/// A stage-chain hop recorded with a run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HopView {
    pub run_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<String>,
    pub source_rule: String,
    pub target_rule: String,
    pub result: String,
    pub completed_at: String,
}

/// The stage chain of the deciding run of an issue's history, and its rule.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LastStageView {
    pub chain: Vec<String>,
    pub rule: String,
}

/// The issue's run history.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueHistory")]
pub struct HistoryView {
    pub runs: Vec<RunView>,
    pub next_cursor: Option<String>,
    pub totals: IssueTotalsView,
    pub hops: Vec<HopView>,
    pub last_stage: Option<LastStageView>,
    pub issue_outcome: Option<OutcomeView>,
}

/// One issue's live rows, events and history.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueDetail")]
pub struct IssueDetailView {
    pub issue_identifier: String,
    pub issue_id: String,
    pub status: IssueStatus,
    #[serde(flatten)]
    pub sentences: Sentences,
    pub next_outcomes: Vec<NextOutcome>,
    pub issue: IssueMember,
    pub workspace: Option<WorkspaceView>,
    pub attempts: AttemptsView,
    pub running: Option<RunningView>,
    pub retry: Option<RetryView>,
    pub budget_exhausted: Option<BudgetView>,
    pub parked: Option<ParkedView>,
    /// The issue's rows as `pending_reactions` of the state document serves them.
    pub pending_reactions: Vec<PendingReactionView>,
    /// The issue's between-stages entry, hold included, whatever `status` reads.
    pub between_stages: Option<BetweenStagesView>,
    pub recent_events: Vec<EventView>,
    pub last_error: Option<String>,
    /// What each configured reaction recorded in the pass of the deciding row, or of the
    /// newest run for an issue only history knows.
    pub pr_loop: PrLoopView,
    pub tracked: EmptyObject,
    pub history: Option<HistoryView>,
}
