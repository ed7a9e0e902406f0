//! A `budget_exhausted[]` row: an issue held at its session or token budget.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::BudgetReason;
use crate::orchestrator::snapshot::{BudgetRow, ConfigView};

use super::super::wording;
use super::{IssueFields, Null, Sentences, nonempty, ts};

/// A `budget_exhausted[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "BudgetRow")]
pub struct BudgetView {
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// Budget rows are not placed by dispatch time.
    pub dispatched_at: Null,
    /// `session_budget` or `token_budget`.
    pub reason: String,
    pub used_sessions: Option<u64>,
    pub budget_sessions: Option<u64>,
    pub used_tokens: Option<u64>,
    pub budget_tokens: Option<u64>,
    pub used_usd: Null,
    pub used_usd_complete: Null,
    pub budget_usd: Option<f64>,
    pub unmeasured_sessions: Null,
    pub stopped_in_flight: Null,
    pub exhausted_at: String,
    pub stage_lineage: Null,
    pub stage_position: Null,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
}

impl BudgetView {
    pub fn build(b: &BudgetRow, cfg: &ConfigView) -> BudgetView {
        let sessions = b.reason == BudgetReason::Session;
        let tokens = b.reason == BudgetReason::Token;
        BudgetView {
            issue: IssueFields::of(&b.issue),
            sentences: wording::budget(b.reason.as_str(), b.used, b.limit).into(),
            dispatched_at: Null,
            reason: b.reason.as_str().to_string(),
            used_sessions: sessions.then_some(b.used),
            budget_sessions: cfg.max_sessions,
            used_tokens: tokens.then_some(b.used),
            budget_tokens: cfg.max_tokens,
            used_usd: Null,
            used_usd_complete: Null,
            budget_usd: cfg.max_cost_usd,
            unmeasured_sessions: Null,
            stopped_in_flight: Null,
            exhausted_at: ts(b.since_ms),
            stage_lineage: Null,
            stage_position: Null,
            agent_kind: nonempty(&cfg.agent_kind),
        }
    }
}
