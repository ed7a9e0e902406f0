//! `config.dispatch`: the rules in configuration order with the kind each resolves, the
//! default selection, the stage chains and the hop ceiling in force. Templates and settings
//! blocks are not served (a settings block may carry credentials).

use schemars::JsonSchema;
use serde::Serialize;

use crate::config::dispatch::{
    DispatchConfig, DispatchRule, PriorityPredicate, RuleMatch, SelectedBy,
};

use super::super::running::{ArrivalName, usage_arrival_of};

/// How a rule is selected.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "ConfigRuleSelectedBy")]
pub enum SelectedByName {
    Stage,
    CatchAll,
    Match,
}

impl From<SelectedBy> for SelectedByName {
    fn from(s: SelectedBy) -> Self {
        match s {
            SelectedBy::Stage => SelectedByName::Stage,
            SelectedBy::CatchAll => SelectedByName::CatchAll,
            SelectedBy::Match => SelectedByName::Match,
        }
    }
}

/// A `priority` operator.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "ConfigPriorityOp")]
pub enum PriorityOp {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
}

/// `{"op": "<op>", "value": n}`, or `{"op": "in", "values": [...]}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigPriorityPredicate")]
pub struct PriorityView {
    pub op: PriorityOp,
    /// Present for every operator but `in`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Present only for `in`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<i64>>,
}

impl PriorityView {
    fn build(p: &PriorityPredicate) -> PriorityView {
        let one = |op, v: &i64| PriorityView {
            op,
            value: Some(*v),
            values: None,
        };
        match p {
            PriorityPredicate::Eq(v) => one(PriorityOp::Eq, v),
            PriorityPredicate::Lt(v) => one(PriorityOp::Lt, v),
            PriorityPredicate::Lte(v) => one(PriorityOp::Lte, v),
            PriorityPredicate::Gt(v) => one(PriorityOp::Gt, v),
            PriorityPredicate::Gte(v) => one(PriorityOp::Gte, v),
            PriorityPredicate::In(vs) => PriorityView {
                op: PriorityOp::In,
                value: None,
                values: Some(vs.clone()),
            },
        }
    }
}

/// Each non-empty key of a rule's `match` block; lists in the order written.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigRuleMatch")]
pub struct MatchView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifier: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityView>,
}

impl MatchView {
    fn build(m: &RuleMatch) -> MatchView {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        MatchView {
            labels: list(&m.labels),
            issue_type: list(&m.issue_type),
            title: list(&m.title),
            identifier: list(&m.identifier),
            assignee: list(&m.assignee),
            priority: m.priority.as_ref().map(PriorityView::build),
        }
    }
}

/// One `dispatch.rules[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigDispatchRule")]
pub struct RuleView {
    /// Omitted when the rule has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub selected_by: SelectedByName,
    /// Present only when `selected_by` is `stage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Present only when `selected_by` is `match`.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<MatchView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The agent kind dispatch resolves for the rule.
    pub agent_kind: String,
    /// Derived from `agent_kind` like `agent.usage_arrival`; the settings block does not
    /// change it.
    pub usage_arrival: ArrivalName,
}

/// `dispatch.default` when it names an agent or a template.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigDispatchDefault")]
pub struct DefaultView {
    pub agent_kind: String,
    pub usage_arrival: ArrivalName,
}

/// `config.dispatch`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DispatchConfigView {
    /// In configuration order; `[]` when there are none.
    pub rules: Vec<RuleView>,
    /// Null when `dispatch.default` names neither an agent nor a template.
    pub default: Option<DefaultView>,
    /// Rule names in `next` order, one list per chain; `[]` without `next`.
    pub chains: Vec<Vec<String>>,
    /// As written; null when absent.
    pub max_consecutive_hops: Option<u32>,
    /// The limit in force: the written value, or the larger of 10 and the longest chain's hops.
    pub hop_ceiling: u32,
}

/// Like `agent.usage_arrival`: a kind without a known arrival reads `none`.
fn arrival(kind: &str) -> ArrivalName {
    match usage_arrival_of(kind) {
        ArrivalName::Unknown => ArrivalName::None,
        a => a,
    }
}

impl DispatchConfigView {
    pub fn build(d: &DispatchConfig, workflow_kind: &str) -> DispatchConfigView {
        let default = &d.default;
        let default_view = (default.agent.is_some() || default.template.is_some()).then(|| {
            let kind = default
                .agent
                .clone()
                .unwrap_or_else(|| workflow_kind.to_string());
            DefaultView {
                usage_arrival: arrival(&kind),
                agent_kind: kind,
            }
        });
        DispatchConfigView {
            rules: d
                .rules
                .iter()
                .map(|r| rule_view(d, r, workflow_kind))
                .collect(),
            default: default_view,
            chains: d.chains(),
            max_consecutive_hops: d.max_consecutive_hops,
            hop_ceiling: d.hop_ceiling(),
        }
    }
}

fn rule_view(d: &DispatchConfig, r: &DispatchRule, workflow_kind: &str) -> RuleView {
    let selected_by = r.selected_by();
    let kind = d.rule_kind(r, workflow_kind).to_string();
    RuleView {
        name: (!r.name.is_empty()).then(|| r.name.clone()),
        selected_by: selected_by.into(),
        stage: r.stage.clone().filter(|_| selected_by == SelectedBy::Stage),
        matcher: r
            .matcher
            .as_ref()
            .filter(|_| selected_by == SelectedBy::Match)
            .map(MatchView::build),
        next: r.next.clone(),
        usage_arrival: arrival(&kind),
        agent_kind: kind,
    }
}
