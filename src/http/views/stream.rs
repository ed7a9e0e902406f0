//! The `data` of the event stream's frames (`GET /api/v1/events`). `change` and `heartbeat`
//! frames carry an empty object.

use schemars::JsonSchema;
use serde::Serialize;

use super::event::EventView;

/// Why a subscription was reset.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    /// The run ended and none of its events were kept.
    NotRetained,
    /// Events between the cursor and the oldest kept one are gone.
    CursorExpired,
}

/// A `reset` frame.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "StreamReset")]
pub struct ResetFrame {
    pub dispatch_id: String,
    pub reason: ResetReason,
    /// `cursor_expired` only: the oldest event still kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<i64>,
}

/// A `run_ended` frame: the run's last event was sent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "StreamRunEnded")]
pub struct RunEndedFrame {
    pub dispatch_id: String,
    pub last_seq: i64,
}

/// An `agent_event` frame: one event of a subscribed run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "StreamAgentEvent")]
pub struct AgentEventFrame {
    pub dispatch_id: String,
    #[serde(flatten)]
    pub event: EventView,
}
