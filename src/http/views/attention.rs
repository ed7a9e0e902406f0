//! The documented shape of an `attention[]` item. Items are assembled by `http::attention`;
//! this type is their schema, and the live OpenAPI tests hold the served items to it.

use schemars::JsonSchema;

#[derive(Debug, Clone, Copy, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum Severity {
    Critical,
    Warning,
}

#[derive(Debug, Clone, Copy, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum ActionKind {
    OpenIssue,
    OpenPullRequest,
    Acknowledge,
}

/// What the dashboard offers to do about the item.
#[derive(Debug, Clone, JsonSchema)]
#[allow(dead_code)]
pub struct AttentionAction {
    pub kind: ActionKind,
    /// The page to open (`open_issue`, `open_pull_request`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The facts behind the item; which members are present depends on its kind.
#[derive(Debug, Clone, JsonSchema)]
#[allow(dead_code)]
pub struct AttentionEvidence {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
}

/// One item that needs a person.
#[derive(Debug, Clone, JsonSchema)]
#[schemars(rename = "AttentionItem")]
#[allow(dead_code)]
pub struct AttentionItemView {
    pub id: String,
    pub kind: String,
    pub severity: Severity,
    pub since: Option<String>,
    pub acknowledged_at: Option<String>,
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
    pub reason_text: String,
    pub why_text: String,
    pub clears_text: String,
    pub action: AttentionAction,
    pub evidence: AttentionEvidence,
}
