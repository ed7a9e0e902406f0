//! One served agent event (run events route, issue detail, event stream `agent_event`): the
//! kept members plus `seq`, `text` and `tool_line`, worded when served and never stored.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's token totals after a turn-ending event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

/// The members of a `tool_result` event.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ToolFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_argument: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub tool_error: bool,
}

/// The members of a `stage.advanced` / `stage.not_advanced` event: the hop decision the run's
/// exit reached.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct StageFields {
    pub issue_id: String,
    pub issue_identifier: String,
    pub source_rule: String,
    pub target_rule: String,
    pub target_label: String,
    pub chain_id: String,
    /// The issue's consecutive hops: with this one when it was made, before it otherwise.
    pub hop_count: u64,
    pub hop_ceiling: u64,
    /// `advanced`, `partial`, `failed` or `ceiling` (the run's `stage_result`).
    pub result: String,
    /// `stage.not_advanced` only: `ceiling` or `add_failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One agent event as served.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[schemars(rename = "RunEvent")]
pub struct EventView {
    pub seq: i64,
    /// As recorded (`null` when the stored event lacks it).
    #[schemars(with = "Option<String>")]
    pub at: Value,
    pub event: String,
    pub message: String,
    /// `session_started` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `tool_result` only.
    #[serde(flatten)]
    pub tool: Option<ToolFields>,
    /// `stage.advanced` and `stage.not_advanced` only.
    #[serde(flatten)]
    pub stage: Option<StageFields>,
    /// Turn-ending events only: the run's totals so far, `null` while unmeasured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<UsageTotals>>,
    pub text: String,
    /// `tool_result` only: the call as one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_line: Option<String>,
}
