//! A `retrying[]` row: a queued retry and when it comes due.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{ConfigView, RetryRow};

use super::super::wording;
use super::{IssueFields, Null, Sentences, nonempty, ts};

/// A `retrying[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RetryRow")]
pub struct RetryView {
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// `null` when the first dispatch time is unknown (a retry restored without one).
    pub dispatched_at: Option<String>,
    pub attempt: u32,
    pub due_at: String,
    /// The plain sentence of the run before it, or the reschedule reason as written; the
    /// sentences use the plain form of a reason.
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    pub stage_lineage: Null,
    pub stage_position: Null,
    pub paused: bool,
}

impl RetryView {
    pub fn build(r: &RetryRow, cfg: &ConfigView, now_ms: i64) -> RetryView {
        let error = r.error.as_deref().filter(|e| !e.trim().is_empty());
        RetryView {
            issue: IssueFields::of(&r.issue),
            sentences: wording::retrying(
                r.attempt,
                r.due_at_ms - now_ms,
                r.trigger.as_str(),
                error,
            )
            .into(),
            dispatched_at: (r.dispatched_at_ms > 0).then(|| ts(r.dispatched_at_ms)),
            attempt: r.attempt,
            due_at: ts(r.due_at_ms),
            error: error.map(wording::retry_error),
            trigger: nonempty(r.trigger.as_str()),
            agent_kind: nonempty(&cfg.agent_kind),
            stage_lineage: Null,
            stage_position: Null,
            paused: false,
        }
    }
}
