//! An `attention[]` item: something that needs a person. `http::attention` decides which items
//! exist and builds them as these types, so every served member is in the schema.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::{BudgetReason, Issue, ParkReason, SpendCeilingReason};

use super::nonempty;

// The text is also the first part of the item id and is stored with an acknowledgement, so a
// word must never change.
/// What an item is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    WorkflowReloadFailed,
    PreflightFailed,
    DatabaseFailed,
    /// An agent kind's login failed, so nothing is dispatched to it.
    AgentAuthFailed,
    Parked,
    BudgetHeld,
    /// A spend window holds every dispatch.
    SpendCeilingReached,
    /// A pending pull-request reaction escalated to a person.
    ReactionEscalated,
    /// The failure breaker holds an issue whose runs fail in a way a retry will not fix.
    FailureHeld,
    /// A notification destination did not take a notice after its retries.
    NotificationFailing,
    /// A notification destination sends nothing: its `url` or `secret` names an unset variable.
    NotificationDestinationDisabled,
}

impl AttentionKind {
    pub const ALL: &'static [AttentionKind] = &[
        AttentionKind::WorkflowReloadFailed,
        AttentionKind::PreflightFailed,
        AttentionKind::DatabaseFailed,
        AttentionKind::AgentAuthFailed,
        AttentionKind::Parked,
        AttentionKind::BudgetHeld,
        AttentionKind::SpendCeilingReached,
        AttentionKind::ReactionEscalated,
        AttentionKind::FailureHeld,
        AttentionKind::NotificationFailing,
        AttentionKind::NotificationDestinationDisabled,
    ];

    /// The served text (the same as serde's, checked by a test).
    pub const fn as_str(self) -> &'static str {
        match self {
            AttentionKind::WorkflowReloadFailed => "workflow_reload_failed",
            AttentionKind::PreflightFailed => "preflight_failed",
            AttentionKind::DatabaseFailed => "database_failed",
            AttentionKind::AgentAuthFailed => "agent_auth_failed",
            AttentionKind::Parked => "parked",
            AttentionKind::BudgetHeld => "budget_held",
            AttentionKind::SpendCeilingReached => "spend_ceiling_reached",
            AttentionKind::ReactionEscalated => "reaction_escalated",
            AttentionKind::FailureHeld => "failure_held",
            AttentionKind::NotificationFailing => "notification_failing",
            AttentionKind::NotificationDestinationDisabled => "notification_destination_disabled",
        }
    }

    /// The severity belongs to the kind: a process-wide failure stops every dispatch, the
    /// others concern one issue.
    pub const fn severity(self) -> Severity {
        match self {
            AttentionKind::WorkflowReloadFailed
            | AttentionKind::PreflightFailed
            | AttentionKind::DatabaseFailed
            | AttentionKind::AgentAuthFailed
            | AttentionKind::SpendCeilingReached => Severity::Critical,
            AttentionKind::Parked
            | AttentionKind::BudgetHeld
            | AttentionKind::ReactionEscalated
            | AttentionKind::FailureHeld
            | AttentionKind::NotificationFailing
            | AttentionKind::NotificationDestinationDisabled => Severity::Warning,
        }
    }
}

// The derived order (declaration order) puts `critical` items first in the list.
/// `critical`: a cause under which poll ticks dispatch nothing for any issue; `warning`: a
/// cause about one issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
}

/// The kind of action a client should offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    OpenIssue,
    OpenPullRequest,
    Acknowledge,
}

/// What the dashboard offers to do about the item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AttentionAction {
    pub kind: ActionKind,
    /// The page to open (`open_issue`, `open_pull_request`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl AttentionAction {
    pub fn acknowledge() -> AttentionAction {
        AttentionAction {
            kind: ActionKind::Acknowledge,
            url: None,
        }
    }

    /// Opens the issue's page; an issue without a link can only be acknowledged.
    pub fn open_issue_or_acknowledge(issue: &Issue) -> AttentionAction {
        match nonempty(&issue.url) {
            Some(url) => AttentionAction {
                kind: ActionKind::OpenIssue,
                url: Some(url),
            },
            None => AttentionAction::acknowledge(),
        }
    }

    /// Opens the pull request's page, else the issue's, else only acknowledges.
    pub fn open_pull_request_or_issue(pr_url: &str, issue_url: &str) -> AttentionAction {
        match (nonempty(pr_url), nonempty(issue_url)) {
            (Some(url), _) => AttentionAction {
                kind: ActionKind::OpenPullRequest,
                url: Some(url),
            },
            (None, Some(url)) => AttentionAction {
                kind: ActionKind::OpenIssue,
                url: Some(url),
            },
            (None, None) => AttentionAction::acknowledge(),
        }
    }
}

/// The reason of the row behind an item: a park reason, a budget reason, or the hold reason
/// of a spend window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum EvidenceReason {
    Park(ParkReason),
    Budget(BudgetReason),
    Spend(SpendCeilingReason),
}

/// The facts behind the item; which members are present depends on its kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct AttentionEvidence {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The failing notification destination's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<EvidenceReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_tokens_complete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_sessions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_sessions: Option<u64>,
    /// A money budget's or spend window's estimated spend, whether it is complete, and its
    /// ceiling (USD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_usd_complete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// When the spend window resets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// The escalated reaction's kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_kind: Option<crate::domain::ReactionKind>,
    /// The setting that raises the ceiling, or the escalated reaction's `reactions` key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_key: Option<String>,
    /// The pull request the escalated reaction watches, as its row serves it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<super::pending_reaction::PullRequestView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_trigger: Option<crate::domain::EscalationTrigger>,
    /// The escalated row's tries and budget, each omitted when null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The escalated row's latest check, omitted when null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_check: Option<super::pending_reaction::LastCheckView>,
    /// The agent kind an agent_auth_failed or failure_held item is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    /// A failure_held item's cause: a failure class (`not_logged_in`, `unsupported_token`,
    /// `no_provider`, `provider_unreachable`, `quota_or_billing`, `agent_image_unavailable`) or the repeated error code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// A failure_held item's consecutive runs that ended with the cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
}

/// The issue an item names: id and identifier always, the others only when not empty. Every
/// member is absent on an item about the process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ItemIssue {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
}

impl ItemIssue {
    pub fn of(issue: &Issue) -> ItemIssue {
        ItemIssue {
            issue_id: Some(issue.id.clone()),
            issue_identifier: Some(issue.identifier.clone()),
            display_identifier: nonempty(&issue.display_identifier),
            issue_title: nonempty(&issue.title),
            issue_url: nonempty(&issue.url),
        }
    }
}

/// One item that needs a person.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "AttentionItem")]
pub struct AttentionItemView {
    pub id: String,
    pub kind: AttentionKind,
    pub severity: Severity,
    pub since: Option<String>,
    pub acknowledged_at: Option<String>,
    #[serde(flatten)]
    pub issue: ItemIssue,
    pub reason_text: String,
    pub why_text: String,
    pub clears_text: String,
    pub action: AttentionAction,
    pub evidence: AttentionEvidence,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_text_is_the_served_text() {
        for k in AttentionKind::ALL {
            assert_eq!(super::super::to_value(k), k.as_str());
        }
    }

    #[test]
    fn evidence_reason_serializes_as_the_bare_word() {
        let r = EvidenceReason::Budget(BudgetReason::Session);
        assert_eq!(super::super::to_value(&r), "session_budget");
        let r = EvidenceReason::Park(ParkReason::AgentBlocked);
        assert_eq!(super::super::to_value(&r), "agent_blocked");
    }
}
