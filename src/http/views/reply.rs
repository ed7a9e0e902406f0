//! The error envelope and the action replies. Most of these bodies are assembled by
//! `http::respond` and `http::actions`; these types are their schemas, and the live OpenAPI
//! tests hold the served bodies to them. The reaction check serializes [`QueueReply`].

use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, JsonSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `invalid_parameter`.
    pub code: String,
    pub message: String,
}

/// Every error answer.
#[derive(Debug, Clone, JsonSchema)]
#[schemars(rename = "Error")]
#[allow(dead_code)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// `POST /api/v1/refresh` (202 queued or joined, 409 draining).
#[derive(Debug, Clone, JsonSchema)]
#[schemars(rename = "RefreshReply")]
#[allow(dead_code)]
pub struct RefreshReply {
    pub queued: bool,
    pub coalesced: bool,
    pub requested_at: String,
    /// `poll` and `reconcile` when queued; empty when nothing was.
    pub operations: Vec<String>,
    pub outcome_text: String,
}

/// `POST /api/v1/retries/{identifier}/run` and the reaction check (409 draining).
#[derive(Debug, Clone, Serialize, JsonSchema)]
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
    pub outcome_text: String,
}

/// `POST /api/v1/attention/{id}/acknowledge`.
#[derive(Debug, Clone, JsonSchema)]
#[schemars(rename = "AcknowledgeReply")]
#[allow(dead_code)]
pub struct AcknowledgeReply {
    pub acknowledged: bool,
    pub already_acknowledged: bool,
    pub requested_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
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
