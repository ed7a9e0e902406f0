//! A `between_stages[]` row: an issue a stage hop moved to its next stage that no run has
//! picked up yet, with the hold the latest dispatch pass gave it.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{BetweenStagesRow, ConfigView};

use super::super::wording;
use super::held::{HoldView, SlotUse};
use super::pending_reaction::ReactionIssueView;
use super::stage::{RouteNames, StagePosition, Stages};
use super::{IssueFields, Sentences, nonempty, opt_ts, ts};

/// A `between_stages[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "BetweenStagesRow")]
pub struct BetweenStagesView {
    /// The issue as the hopping run read it; `issue_labels` are the labels the hop leaves,
    /// omitted while the hop holds no read of them.
    #[serde(flatten)]
    pub issue: ReactionIssueView,
    /// The rule whose run made the hop.
    pub source_rule: String,
    /// The rule the hop targeted.
    pub target_rule: String,
    /// The stage label the hop added.
    pub target_label: String,
    pub hopped_at: String,
    /// The first dispatch of the pass the hop continues; `null` when it cannot be dated.
    pub dispatched_at: Option<String>,
    /// The rule the issue's next run dispatches on (`target_rule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_position: Option<StagePosition>,
    /// What a dispatch of `rule_name` resolves to now; absent when no stage rule has that name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    /// The latest pass's hold of the issue; `null` while it recorded none.
    pub hold: Option<HoldView>,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// The issue members as the other lists hold them, for `active[]`; not served.
    #[serde(skip)]
    #[schemars(skip)]
    pub fields: IssueFields,
}

impl BetweenStagesView {
    pub fn build(
        row: &BetweenStagesRow,
        cfg: &ConfigView,
        stages: &Stages<'_>,
        slots: &SlotUse,
    ) -> BetweenStagesView {
        let hop = &row.hop;
        let issue = ReactionIssueView {
            issue_id: hop.issue_id.clone(),
            issue_identifier: hop.identifier.clone(),
            display_identifier: nonempty(&hop.display_identifier),
            issue_title: nonempty(&hop.issue_title),
            issue_url: nonempty(&hop.issue_url),
            issue_type: nonempty(&hop.issue_type),
            issue_labels: hop.issue_labels.clone(),
            state: nonempty(&hop.state),
        };
        let fields = issue.fields();
        let names = RouteNames::of_stage_rule(&hop.target_rule, cfg);
        let hop_count = stages
            .hop_counts
            .get(&hop.issue_id)
            .copied()
            .unwrap_or(hop.hop_count);
        BetweenStagesView {
            issue,
            source_rule: hop.source_rule.clone(),
            target_rule: hop.target_rule.clone(),
            target_label: hop.target_label.clone(),
            hopped_at: ts(hop.hopped_at_ms),
            dispatched_at: opt_ts(hop.dispatched_at_ms),
            rule_name: names.rule_name,
            // The source rule chooses among the chains that hold the target.
            stage_position: stages.position_with(
                &hop.target_rule,
                Some(&hop.source_rule),
                hop_count,
            ),
            agent_kind: names.agent_kind,
            configured_model: names.configured_model,
            hold: row
                .hold
                .as_ref()
                .map(|h| HoldView::build(&h.reason, h.since_ms, slots).0),
            sentences: wording::between_stages(
                &hop.source_rule,
                &hop.target_rule,
                &hop.target_label,
            )
            .into(),
            fields,
        }
    }
}

/// The rows in the reference's order: issue identifier, then issue id.
pub fn build_all(
    rows: &[BetweenStagesRow],
    cfg: &ConfigView,
    stages: &Stages<'_>,
    slots: &SlotUse,
) -> Vec<BetweenStagesView> {
    let mut out: Vec<BetweenStagesView> = rows
        .iter()
        .map(|r| BetweenStagesView::build(r, cfg, stages, slots))
        .collect();
    out.sort_by(|a, b| {
        (&a.issue.issue_identifier, &a.issue.issue_id)
            .cmp(&(&b.issue.issue_identifier, &b.issue.issue_id))
    });
    out
}
