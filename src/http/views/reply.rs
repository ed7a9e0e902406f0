//! The error envelope and the action replies: `http::respond` serializes [`ErrorBody`],
//! `http::actions` the refresh, retry-now and acknowledge replies, and the reaction check
//! [`QueueReply`].

use schemars::JsonSchema;
use serde::Serialize;

use super::super::wording;
use super::attention::{AttentionItemView, AttentionKind};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `invalid_parameter`.
    pub code: String,
    pub message: String,
}

/// Every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

impl ErrorBody {
    pub fn new(code: &str, message: &str) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: code.to_string(),
                message: message.to_string(),
            },
        }
    }
}

/// What a refresh queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Poll,
    Reconcile,
}

/// `POST /api/v1/refresh` (202 queued or joined, 409 draining).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "RefreshReply")]
pub struct RefreshReply {
    pub queued: bool,
    pub coalesced: bool,
    pub requested_at: String,
    /// `poll` and `reconcile` when queued; empty when nothing was.
    pub operations: Vec<Operation>,
    pub outcome_text: String,
}

impl RefreshReply {
    /// Queued, or joined a refresh already pending (`coalesced`).
    pub fn queued(requested_at: String, coalesced: bool) -> RefreshReply {
        RefreshReply {
            queued: true,
            coalesced,
            requested_at,
            operations: vec![Operation::Poll, Operation::Reconcile],
            outcome_text: if coalesced {
                wording::REFRESH_COALESCED
            } else {
                wording::REFRESH_QUEUED
            }
            .to_string(),
        }
    }

    pub fn draining(requested_at: String) -> RefreshReply {
        RefreshReply {
            queued: false,
            coalesced: false,
            requested_at,
            operations: Vec::new(),
            outcome_text: wording::NOTHING_QUEUED_DRAINING.to_string(),
        }
    }
}

/// `POST /api/v1/retries/{identifier}/run` and the reaction check (409 draining).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "QueueReply")]
pub struct QueueReply {
    pub queued: bool,
    pub requested_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    /// The attempt now due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The kind of the reaction whose check is due now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::domain::ReactionKind>,
    /// The pull request that reaction watches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<super::pending_reaction::PullRequestKey>,
    pub outcome_text: String,
}

/// The reaction a check-now request made due, as the orchestrator found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCheck {
    pub issue_id: String,
    pub issue_identifier: String,
    /// Empty when the identifier is enough.
    pub display_identifier: String,
    pub kind: crate::domain::ReactionKind,
    pub pr: crate::scm::PullRequestRef,
}

/// The retry a retry-now request made due, as the client saw it in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueRetry {
    pub issue_id: String,
    pub issue_identifier: String,
    /// Empty when the identifier is enough.
    pub display_identifier: String,
    pub attempt: u32,
}

impl QueueReply {
    pub fn draining(requested_at: String) -> QueueReply {
        QueueReply {
            queued: false,
            requested_at,
            issue_id: None,
            issue_identifier: None,
            display_identifier: None,
            attempt: None,
            kind: None,
            pull_request: None,
            outcome_text: wording::NOTHING_QUEUED_DRAINING.to_string(),
        }
    }

    /// A retry made due now; the sentence names the issue by its display identifier when it
    /// has one.
    pub fn retry_due(requested_at: String, r: DueRetry) -> QueueReply {
        let display = super::nonempty(&r.display_identifier);
        let key = display.as_deref().unwrap_or(&r.issue_identifier);
        let outcome_text = wording::retry_due_now(r.attempt, key);
        QueueReply {
            queued: true,
            requested_at,
            issue_id: Some(r.issue_id),
            issue_identifier: Some(r.issue_identifier),
            display_identifier: display,
            attempt: Some(r.attempt),
            kind: None,
            pull_request: None,
            outcome_text,
        }
    }

    /// A reaction's next check made due now; named like [`QueueReply::retry_due`].
    pub fn check_due(requested_at: String, c: DueCheck) -> QueueReply {
        let display = super::nonempty(&c.display_identifier);
        let key = display.as_deref().unwrap_or(&c.issue_identifier);
        let outcome_text = super::super::reaction_words::check_queued(key, c.pr.number, c.kind);
        QueueReply {
            queued: true,
            requested_at,
            issue_id: Some(c.issue_id),
            issue_identifier: Some(c.issue_identifier),
            display_identifier: display,
            attempt: None,
            kind: Some(c.kind),
            pull_request: Some(super::pending_reaction::PullRequestKey::of(&c.pr)),
            outcome_text,
        }
    }
}

/// `POST /api/v1/attention/{id}/acknowledge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "AcknowledgeReply")]
pub struct AcknowledgeReply {
    pub acknowledged: bool,
    pub already_acknowledged: bool,
    pub requested_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<AttentionKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<String>,
    pub outcome_text: String,
}

impl AcknowledgeReply {
    pub fn draining(requested_at: String) -> AcknowledgeReply {
        AcknowledgeReply {
            acknowledged: false,
            already_acknowledged: false,
            requested_at,
            id: None,
            kind: None,
            issue_id: None,
            issue_identifier: None,
            display_identifier: None,
            acknowledged_at: None,
            outcome_text: wording::NOTHING_ACKNOWLEDGED_DRAINING.to_string(),
        }
    }

    /// The item is acknowledged (`already` when before this request); `issue_key` names its
    /// issue in the sentence.
    pub fn acknowledged(
        requested_at: String,
        item: &AttentionItemView,
        issue_key: Option<&str>,
        already: bool,
        acknowledged_at: String,
    ) -> AcknowledgeReply {
        AcknowledgeReply {
            acknowledged: true,
            already_acknowledged: already,
            requested_at,
            id: Some(item.id.clone()),
            kind: Some(item.kind),
            issue_id: item.issue.issue_id.clone(),
            issue_identifier: item.issue.issue_identifier.clone(),
            display_identifier: item.issue.display_identifier.clone(),
            acknowledged_at: Some(acknowledged_at),
            outcome_text: wording::acknowledged(already, issue_key, &item.reason_text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::attention::{
        AttentionAction, AttentionEvidence, AttentionItemView, AttentionKind, ItemIssue,
    };
    use super::*;

    const AT: &str = "2026-03-26T14:31:10Z";

    fn text<T: Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap_or_default()
    }

    /// Member names and order as served, the API's examples where it gives one.
    #[test]
    fn refresh_replies() {
        assert_eq!(
            text(&RefreshReply::queued(AT.into(), false)),
            r#"{"queued":true,"coalesced":false,"requested_at":"2026-03-26T14:31:10Z","operations":["poll","reconcile"],"outcome_text":"Tracker poll and reconciliation queued."}"#
        );
        assert_eq!(
            text(&RefreshReply::draining(AT.into())),
            r#"{"queued":false,"coalesced":false,"requested_at":"2026-03-26T14:31:10Z","operations":[],"outcome_text":"Nothing queued: Sortie is shutting down."}"#
        );
    }

    #[test]
    fn retry_now_replies() {
        let due = DueRetry {
            issue_id: "def456".into(),
            issue_identifier: "MT-650".into(),
            display_identifier: String::new(),
            attempt: 3,
        };
        assert_eq!(
            text(&QueueReply::retry_due(AT.into(), due.clone())),
            r#"{"queued":true,"requested_at":"2026-03-26T14:31:10Z","issue_id":"def456","issue_identifier":"MT-650","attempt":3,"outcome_text":"Retry 3 of MT-650 is due now."}"#
        );
        let due = DueRetry {
            display_identifier: "web/MT-650".into(),
            ..due
        };
        assert_eq!(
            text(&QueueReply::retry_due(AT.into(), due)),
            r#"{"queued":true,"requested_at":"2026-03-26T14:31:10Z","issue_id":"def456","issue_identifier":"MT-650","display_identifier":"web/MT-650","attempt":3,"outcome_text":"Retry 3 of web/MT-650 is due now."}"#
        );
        assert_eq!(
            text(&QueueReply::draining(AT.into())),
            r#"{"queued":false,"requested_at":"2026-03-26T14:31:10Z","outcome_text":"Nothing queued: Sortie is shutting down."}"#
        );
    }

    #[test]
    fn acknowledge_replies() {
        let item = AttentionItemView {
            id: "9ee206201099385b431c9bb01911553f".into(),
            kind: AttentionKind::Parked,
            severity: AttentionKind::Parked.severity(),
            since: Some("2026-03-26T14:05:00Z".into()),
            acknowledged_at: None,
            issue: ItemIssue {
                issue_id: Some("jkl012".into()),
                issue_identifier: Some("MT-652".into()),
                ..Default::default()
            },
            reason_text: "Parked: the agent needs a person".into(),
            why_text: String::new(),
            clears_text: String::new(),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence::default(),
        };
        let reply =
            AcknowledgeReply::acknowledged(AT.into(), &item, Some("MT-652"), false, AT.into());
        assert_eq!(
            text(&reply),
            r#"{"acknowledged":true,"already_acknowledged":false,"requested_at":"2026-03-26T14:31:10Z","id":"9ee206201099385b431c9bb01911553f","kind":"parked","issue_id":"jkl012","issue_identifier":"MT-652","acknowledged_at":"2026-03-26T14:31:10Z","outcome_text":"Acknowledged MT-652 (Parked: the agent needs a person). It comes back only if a new cause appears."}"#
        );
        let item = AttentionItemView {
            issue: ItemIssue {
                display_identifier: Some("web/MT-652".into()),
                ..item.issue.clone()
            },
            ..item
        };
        let reply = AcknowledgeReply::acknowledged(
            AT.into(),
            &item,
            Some("web/MT-652"),
            true,
            "2026-03-26T14:30:00Z".into(),
        );
        assert_eq!(
            text(&reply),
            r#"{"acknowledged":true,"already_acknowledged":true,"requested_at":"2026-03-26T14:31:10Z","id":"9ee206201099385b431c9bb01911553f","kind":"parked","issue_id":"jkl012","issue_identifier":"MT-652","display_identifier":"web/MT-652","acknowledged_at":"2026-03-26T14:30:00Z","outcome_text":"Already acknowledged web/MT-652 (Parked: the agent needs a person). It comes back only if a new cause appears."}"#
        );
        assert_eq!(
            text(&AcknowledgeReply::draining(AT.into())),
            r#"{"acknowledged":false,"already_acknowledged":false,"requested_at":"2026-03-26T14:31:10Z","outcome_text":"Nothing acknowledged: Sortie is shutting down."}"#
        );
    }
}
