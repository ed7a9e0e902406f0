//! A `retrying[]` row: a queued retry and when it comes due.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{ConfigView, RetryRow};

use crate::domain::{ReactionKind, RetryTrigger};

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
    /// Omitted for a review, bot review, merge conflict or label command continuation, which
    /// `reaction_kind` names instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The reaction behind the retry; omitted when it carries none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_kind: Option<ReactionKind>,
    /// The `reactions` key that configures `reaction_kind`; omitted with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_config_key: Option<String>,
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
            trigger: nonempty(r.trigger.as_str()).filter(|_| !named_by_reaction(r)),
            reaction_kind: r.reaction.as_ref().map(|x| x.kind),
            reaction_config_key: r.reaction.as_ref().map(|x| x.kind.config_key().to_string()),
            agent_kind: nonempty(&cfg.agent_kind),
            stage_lineage: Null,
            stage_position: Null,
            paused: false,
        }
    }
}

/// A continuation of a reaction other than CI serves no `trigger`: its `reaction_kind` says
/// what started it.
fn named_by_reaction(r: &RetryRow) -> bool {
    r.trigger == RetryTrigger::Continuation
        && r.reaction
            .as_ref()
            .is_some_and(|x| x.kind != ReactionKind::Ci)
}
