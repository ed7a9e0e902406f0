//! A `parked[]` row: an issue the agent reported as blocked, with its park label.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{ConfigView, ParkedRow};

use super::super::wording;
use super::stage::{RouteNames, StagePosition, Stages};
use super::{IssueFields, Sentences, nonempty, opt_ts, ts};

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
    /// The dispatch rule of the run the park follows; absent when it follows no run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_position: Option<StagePosition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
}

impl ParkedView {
    pub fn build(p: &ParkedRow, cfg: &ConfigView, stages: &Stages<'_>) -> ParkedView {
        let names = RouteNames::of_opt(p.route.as_ref(), cfg);
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
            rule_name: names.rule_name,
            // The previous rule of the run the park follows chooses among chains.
            stage_position: p
                .route
                .as_ref()
                .and_then(|r| stages.of_route(r, &p.issue.id)),
            agent_kind: names.agent_kind,
            configured_model: names.configured_model,
        }
    }
}
