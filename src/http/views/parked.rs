//! A `parked[]` row: an issue the agent reported as blocked, with its park label.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{ConfigView, ParkedRow};

use super::super::wording;
use super::{IssueFields, Null, Sentences, nonempty, opt_ts, ts};

/// A `parked[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ParkedRow")]
pub struct ParkedView {
    /// The issue members; `state` is the state the park observed, not a later read, and the
    /// park label is left out of `issue_labels`.
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parked_state: Option<String>,
    /// The pass of the run the park follows; `null` when it follows none or is undated.
    pub dispatched_at: Option<String>,
    pub reason: String,
    pub label: String,
    pub label_applied: bool,
    pub parked_at: String,
    pub stage_position: Null,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
}

impl ParkedView {
    pub fn build(p: &ParkedRow, cfg: &ConfigView) -> ParkedView {
        let mut issue = IssueFields::of(&p.issue);
        issue.state = nonempty(&p.parked_state);
        issue.issue_labels.retain(|l| *l != p.label);
        ParkedView {
            issue,
            sentences: wording::parked(p.reason.as_str(), &p.label).into(),
            parked_state: nonempty(&p.parked_state),
            dispatched_at: opt_ts(p.dispatched_at_ms),
            reason: p.reason.as_str().to_string(),
            label: p.label.clone(),
            label_applied: p.label_applied,
            parked_at: ts(p.parked_at_ms),
            stage_position: Null,
            agent_kind: nonempty(&cfg.agent_kind),
        }
    }
}
