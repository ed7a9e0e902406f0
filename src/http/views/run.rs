//! Run history: one recorded run, an issue's outcome and totals, and the pages that list them.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::agent::event::USD_UNIT;
use crate::domain::{OutcomeKind, UnmeasuredCause};
use crate::store::{IssueTotalsRow, OutcomeRow, RunRecord};

use super::super::wording;
use super::event::EventView;
use super::issue::IssueStatus;
use super::pr_loop::PrLoopView;
use super::running::CostStatus;
use super::tokens::TokensView;
use super::{Sentences, nonempty, opt_ts, stored_json_schema, ts};
use crate::config::dispatch::DispatchConfig;

/// The pull request a merged issue ended with.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PullRequestView {
    pub number: Option<i64>,
    pub repository: String,
}

/// How the issue ended, as stored.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueOutcome")]
pub struct OutcomeView {
    pub kind: String,
    pub observed_at: String,
    /// Merged issues only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_path: Option<String>,
    /// Merged issues only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestView>,
    /// Issues that did not end merged: the state they ended in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(flatten)]
    pub sentences: Sentences,
}

impl OutcomeView {
    pub fn build(o: &OutcomeRow) -> OutcomeView {
        let merged = match o.kind {
            OutcomeKind::Merged => true,
            OutcomeKind::HandedOff | OutcomeKind::Terminal => false,
        };
        OutcomeView {
            kind: o.kind.as_str().to_string(),
            observed_at: ts(o.observed_at_ms),
            merge_path: merged.then(|| o.merge_path.clone()),
            pull_request: merged.then(|| PullRequestView {
                number: o.pr_number,
                repository: o.pr_repository.clone(),
            }),
            state: (!merged).then(|| o.state.clone()),
            sentences: wording::history(Some(o.kind.as_str()), &o.state).into(),
        }
    }
}

/// A stored self-review summary.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SelfReviewView {
    #[schemars(with = "String")]
    pub final_verdict: Value,
    #[schemars(with = "Option<u64>")]
    pub total_iterations: Value,
    #[schemars(with = "Option<bool>")]
    pub cap_reached: Value,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UsageCompleteness {
    Complete,
    LowerBound,
    Unmeasured,
}

/// One recorded run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Run")]
pub struct RunView {
    pub run_id: i64,
    pub issue_id: String,
    pub issue_identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    pub attempt: i64,
    pub status: String,
    pub error: Option<String>,
    pub declared_outcome: Option<String>,
    /// The agent's own words, served only with a declared outcome.
    pub agent_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_effort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_file: Option<String>,
    pub started_at: String,
    pub completed_at: String,
    pub dispatched_at: Option<String>,
    pub turns_completed: i64,
    pub tokens: TokensView,
    pub uncached_tokens: Option<i64>,
    pub usage_completeness: UsageCompleteness,
    #[schemars(schema_with = "stored_json_schema")]
    pub usage_provenance: Value,
    #[schemars(schema_with = "stored_json_schema")]
    pub vendor_amounts: Value,
    pub unmeasured_cause: Option<String>,
    /// The units an `amounts_only` run reported, ascending, US dollars included.
    pub unmeasured_units: Vec<String>,
    pub estimated_cost_usd: Option<f64>,
    pub cost_status: CostStatus,
    #[schemars(schema_with = "stored_json_schema")]
    pub model_usage: Value,
    #[serde(flatten)]
    pub stage: StageFields,
    /// The chain the run's rule stands on (chosen by `stage_previous`), under the
    /// configuration in effect; `null` without a rule or when the rule is on no chain.
    pub stage_chain: Option<Vec<String>>,
    pub self_review: Option<SelfReviewView>,
    #[serde(flatten)]
    pub origin: OriginFields,
    /// What each configured reaction recorded in the pass the run's `chain_id` names; `null`
    /// in groups and issue history.
    pub pr_loop: Option<PrLoopView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "stored_json_schema")]
    pub skills: Option<Value>,
    pub issue_outcome: Option<OutcomeView>,
}

/// The stage-chain members of a run, each absent when empty.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StageFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_previous: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_previous_outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_result: Option<String>,
}

/// Why the run was started; all `null` for runs recorded before origins were kept.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OriginFields {
    pub origin_recorded: bool,
    pub trigger: Option<String>,
    pub reaction_kind: Option<String>,
    pub reaction_config_key: Option<String>,
    pub session_id: Option<String>,
    pub ssh_host: Option<String>,
    pub dispatch_id: Option<String>,
}

fn completeness(r: &RunRecord) -> UsageCompleteness {
    match r.usage_completeness.as_str() {
        "complete" => UsageCompleteness::Complete,
        "lower_bound" | "partial" => UsageCompleteness::LowerBound,
        "unmeasured" => UsageCompleteness::Unmeasured,
        _ if !r.tokens_measured => UsageCompleteness::Unmeasured,
        _ if r.unaccounted_turns > 0 => UsageCompleteness::LowerBound,
        _ => UsageCompleteness::Complete,
    }
}

/// The stored amounts without the US-dollar ones, which price parts instead of being listed.
fn served_vendor_amounts(stored: &Option<Value>) -> Value {
    match stored {
        Some(Value::Array(a)) => Value::Array(
            a.iter()
                .filter(|v| v.get("unit").and_then(Value::as_str) != Some(USD_UNIT))
                .cloned()
                .collect(),
        ),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// The distinct units an `amounts_only` run reported, ascending; `[]` for any other run.
fn unmeasured_units(r: &RunRecord, unmeasured: bool) -> Vec<String> {
    let amounts_only = r.unmeasured_cause.as_deref() == Some(UnmeasuredCause::AmountsOnly.as_str());
    let Some(Value::Array(a)) = r
        .vendor_amounts
        .as_ref()
        .filter(|_| unmeasured && amounts_only)
    else {
        return Vec::new();
    };
    let units: std::collections::BTreeSet<String> = a
        .iter()
        .filter_map(|v| v.get("unit").and_then(Value::as_str).map(str::to_string))
        .collect();
    units.into_iter().collect()
}

fn cost_status(r: &RunRecord, unmeasured: bool) -> CostStatus {
    match r.cost_status.as_str() {
        _ if unmeasured => CostStatus::Unmeasured,
        "estimated" => CostStatus::Estimated,
        "partial" => CostStatus::Partial,
        "unmeasured" => CostStatus::Unmeasured,
        _ => CostStatus::Unpriced,
    }
}

/// The served summary of a stored self-review record: `final_verdict` masked, `"none"` when the
/// record holds none; counts and flags that are not of their type read as null.
fn self_review(meta: &Option<Value>) -> Option<SelfReviewView> {
    let v = meta.as_ref().filter(|v| v.is_object())?;
    let verdict = v
        .get("final_verdict")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(|| "none".to_string(), crate::mask::mask);
    Some(SelfReviewView {
        final_verdict: Value::String(verdict),
        total_iterations: v
            .get("total_iterations")
            .and_then(Value::as_u64)
            .map_or(Value::Null, Value::from),
        cap_reached: v
            .get("cap_reached")
            .and_then(Value::as_bool)
            .map_or(Value::Null, Value::Bool),
    })
}

impl OriginFields {
    fn of(r: &RunRecord) -> OriginFields {
        let origin = r.trigger.is_some() || r.dispatch_id.is_some();
        let member = |v: &Option<String>| origin.then(|| v.clone().unwrap_or_default());
        OriginFields {
            origin_recorded: origin,
            // Unlike the other members, a trigger that was not stored stays null.
            trigger: r.trigger.clone().filter(|_| origin),
            reaction_kind: member(&r.reaction_kind),
            reaction_config_key: member(&r.reaction_config_key),
            session_id: member(&r.session_id),
            ssh_host: member(&r.ssh_host),
            dispatch_id: r.dispatch_id.clone(),
        }
    }
}

impl RunView {
    pub fn build(
        r: &RunRecord,
        outcome: Option<&OutcomeView>,
        in_group: bool,
        dispatch: &DispatchConfig,
    ) -> RunView {
        let measured = r.usage_completeness != "unmeasured" && r.tokens_measured;
        let n = |v: i64| measured.then_some(v);
        let completeness = completeness(r);
        let unmeasured = completeness == UsageCompleteness::Unmeasured;
        RunView {
            run_id: r.run_id,
            issue_id: r.issue_id.clone(),
            issue_identifier: r.identifier.clone(),
            display_identifier: nonempty(&r.display_identifier),
            issue_title: nonempty(&r.issue_title),
            issue_url: nonempty(&r.issue_url),
            attempt: r.attempt,
            status: r.status.as_str().to_string(),
            error: r
                .error
                .as_deref()
                .map(|e| wording::run_error(e, u32::try_from(r.turns_completed).ok())),
            declared_outcome: r.declared_outcome.clone().filter(|s| !s.is_empty()),
            agent_text: r
                .agent_text
                .clone()
                .filter(|s| !s.is_empty() && r.declared_outcome.is_some()),
            rule_name: nonempty(&r.rule_name),
            agent_kind: nonempty(&r.agent_kind),
            configured_model: nonempty(&r.configured_model),
            configured_effort: nonempty(&r.configured_effort),
            model_name: nonempty(&r.reported_model),
            workflow_file: super::base_name(&r.workflow_file),
            started_at: ts(r.started_at_ms),
            completed_at: ts(r.completed_at_ms),
            dispatched_at: opt_ts(r.dispatched_at_ms),
            turns_completed: r.turns_completed,
            tokens: TokensView::each(
                [
                    r.input_tokens,
                    r.output_tokens,
                    r.total_tokens,
                    r.cache_read_tokens,
                    r.cache_write_tokens,
                ],
                n,
            ),
            uncached_tokens: n(r.uncached_tokens()),
            usage_completeness: completeness,
            usage_provenance: r.usage_provenance.clone().unwrap_or(Value::Null),
            vendor_amounts: served_vendor_amounts(&r.vendor_amounts),
            // A run recorded before its cause was kept reads `unknown`, as the totals do.
            unmeasured_cause: unmeasured.then(|| {
                r.unmeasured_cause
                    .clone()
                    .unwrap_or_else(|| UnmeasuredCause::Unknown.as_str().into())
            }),
            unmeasured_units: unmeasured_units(r, unmeasured),
            estimated_cost_usd: r.estimated_cost_usd,
            cost_status: cost_status(r, unmeasured),
            model_usage: r.model_usage.clone().unwrap_or_else(|| json!([])),
            stage: StageFields {
                chain_id: nonempty(&r.chain_id),
                stage_previous: nonempty(&r.stage_previous),
                stage_previous_outcome: nonempty(&r.stage_previous_outcome),
                stage_target: nonempty(&r.stage_target),
                stage_result: nonempty(&r.stage_result),
            },
            stage_chain: stage_chain(r, dispatch),
            self_review: self_review(&r.review_metadata),
            origin: OriginFields::of(r),
            pr_loop: (!in_group).then(PrLoopView::default),
            skills: r
                .skills
                .clone()
                .filter(|s| s.as_array().is_some_and(|a| !a.is_empty())),
            issue_outcome: outcome.cloned(),
        }
    }
}

/// The chain `stage_position.chain` serves for the run's rule and previous rule.
pub fn stage_chain(r: &RunRecord, dispatch: &DispatchConfig) -> Option<Vec<String>> {
    dispatch.chain_for(&r.rule_name, nonempty(&r.stage_previous).as_deref())
}

/// An amount in a vendor unit (never converted), summed over an issue's runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "VendorAmount")]
pub struct VendorAmountView {
    pub unit: String,
    /// The model the agent attributed it to; `""` when it named none.
    pub model: String,
    pub amount: f64,
    /// Some run may have spent more in that unit.
    pub lower_bound: bool,
}

/// Why some of an issue's runs have no usage figure.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueTotals")]
pub struct IssueTotalsView {
    pub run_count: i64,
    pub unmeasured_runs: i64,
    pub tokens: TokensView,
    pub uncached_tokens: Option<i64>,
    pub tokens_complete: bool,
    pub estimated_cost_usd: Option<f64>,
    pub cost_status: CostStatus,
    /// One cause, `unknown` when none was recorded, `mixed` for several; `null` when all runs
    /// were measured.
    pub unmeasured_cause: Option<String>,
    pub unmeasured_units: Vec<String>,
    pub vendor_amounts: Vec<VendorAmountView>,
    pub agent_priced_usd: Option<f64>,
    pub agent_priced_models: Vec<String>,
}

impl IssueTotalsView {
    pub fn build(t: &IssueTotalsRow) -> IssueTotalsView {
        let complete = t.incomplete_runs == 0 && t.unmeasured_runs == 0;
        // A zero of an incomplete sum is no measurement.
        let fig = |v: i64| (v != 0 || complete).then_some(v);
        let cause = match t.unmeasured_causes.as_slice() {
            [] => None,
            [one] if one.is_empty() => Some(UnmeasuredCause::Unknown.as_str().to_string()),
            [one] => Some(one.clone()),
            _ => Some("mixed".to_string()),
        };
        let mut parts = crate::pricing::IssueCostParts {
            tokens_complete: complete,
            tokens_known: fig(t.uncached_tokens).is_some(),
            ..Default::default()
        };
        t.cost.add_to(&mut parts);
        let (estimated_cost_usd, cost_status) = parts.total();
        let amounts_only = cause.as_deref() == Some(UnmeasuredCause::AmountsOnly.as_str());
        IssueTotalsView {
            run_count: t.run_count,
            unmeasured_runs: t.unmeasured_runs,
            tokens: TokensView::each(t.tokens, fig),
            uncached_tokens: fig(t.uncached_tokens),
            tokens_complete: complete,
            estimated_cost_usd,
            cost_status,
            unmeasured_cause: cause,
            unmeasured_units: if amounts_only {
                t.unmeasured_units.clone()
            } else {
                Vec::new()
            },
            vendor_amounts: t
                .vendor_amounts
                .iter()
                .map(|a| VendorAmountView {
                    unit: a.unit.clone(),
                    model: a.model.clone(),
                    amount: a.amount,
                    lower_bound: a.lower_bound,
                })
                .collect(),
            agent_priced_usd: t.agent_priced_usd,
            agent_priced_models: t.agent_priced_models.clone(),
        }
    }
}

/// `GET /api/v1/runs`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RunsPage")]
pub struct RunsPage {
    pub runs: Vec<RunView>,
    pub next_cursor: Option<String>,
}

/// One issue of `GET /api/v1/runs/issues`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueGroup")]
pub struct IssueGroupView {
    pub issue_id: String,
    /// From the issue's newest run; absent when no run is readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    pub status: IssueStatus,
    #[serde(flatten)]
    pub sentences: Sentences,
    pub issue_outcome: Option<OutcomeView>,
    pub runs: Vec<RunView>,
    pub next_cursor: Option<String>,
    pub totals: IssueTotalsView,
}

/// `GET /api/v1/runs/issues`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "IssueGroupsPage")]
pub struct IssueGroupsPage {
    pub groups: Vec<IssueGroupView>,
    pub next_cursor: Option<String>,
}

/// `GET /api/v1/runs/{dispatch_id}/events`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RunEventsPage")]
pub struct RunEventsPage {
    pub dispatch_id: String,
    pub first_seq: Option<i64>,
    pub events: Vec<EventView>,
}

#[cfg(test)]
mod self_review_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_served_summary_follows_the_stored_record() {
        let served = |v: Value| serde_json::to_value(self_review(&Some(v))).unwrap_or_default();
        assert_eq!(
            served(
                json!({"final_verdict": "pass", "total_iterations": 2, "cap_reached": false, "iterations": []})
            ),
            json!({"final_verdict": "pass", "total_iterations": 2, "cap_reached": false})
        );
        assert_eq!(
            served(json!({"final_verdict": "", "total_iterations": "x"})),
            json!({"final_verdict": "none", "total_iterations": null, "cap_reached": null})
        );
        assert_eq!(served(json!({}))["final_verdict"], "none");
        assert!(self_review(&Some(json!("text"))).is_none());
        assert!(self_review(&None).is_none());
    }
}
