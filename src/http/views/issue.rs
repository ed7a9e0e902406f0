//! The issue members every live row starts with, and the lookup of one issue's rows.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::Issue;
use crate::orchestrator::reactions::ReactionRow;
use crate::orchestrator::snapshot::{
    BetweenStagesRow, BudgetRow, ParkedRow, RetryRow, RunningRow, Snapshot,
};

use super::nonempty;

/// An issue's status: the live list that holds it (by precedence), or `history` when only
/// run history does.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IssueStatus {
    Running,
    Retrying,
    BudgetExhausted,
    Parked,
    PendingReactions,
    BetweenStages,
    History,
}

/// `issue_id`, `issue_identifier` and the tracker fields, each omitted when empty
/// (`issue_labels` always present).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct IssueFields {
    pub issue_id: String,
    pub issue_identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    pub issue_labels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    /// The tracker state (a park serves the state it observed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl IssueFields {
    pub fn of(issue: &Issue) -> IssueFields {
        IssueFields {
            issue_id: issue.id.clone(),
            issue_identifier: issue.identifier.clone(),
            issue_title: nonempty(&issue.title),
            issue_url: nonempty(&issue.url),
            issue_labels: issue.labels.clone(),
            display_identifier: nonempty(&issue.display_identifier),
            issue_type: nonempty(&issue.issue_type),
            state: nonempty(&issue.state),
        }
    }
}

/// The rows of one issue across the live lists, for the issue detail and the run-history
/// groups (which decide its status by precedence).
pub struct IssueRows<'a> {
    pub running: Option<&'a RunningRow>,
    pub retry: Option<&'a RetryRow>,
    pub budget: Option<&'a BudgetRow>,
    pub parked: Option<&'a ParkedRow>,
    /// The issue's pending reaction rows, in list order.
    pub pending: Vec<&'a ReactionRow>,
    pub between: Option<&'a BetweenStagesRow>,
}

impl<'a> IssueRows<'a> {
    pub fn find(snap: &'a Snapshot, issue_id: &str) -> IssueRows<'a> {
        IssueRows {
            running: snap.running.iter().find(|r| r.issue.id == issue_id),
            retry: snap.retrying.iter().find(|r| r.issue.id == issue_id),
            budget: snap
                .budget_exhausted
                .iter()
                .find(|r| r.issue.id == issue_id),
            parked: snap.parked.iter().find(|r| r.issue.id == issue_id),
            pending: snap
                .pending_reactions
                .iter()
                .filter(|r| r.issue.id == issue_id)
                .collect(),
            between: snap
                .between_stages
                .iter()
                .find(|r| r.hop.issue_id == issue_id),
        }
    }
}
