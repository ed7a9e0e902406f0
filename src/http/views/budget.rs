//! A `budget_exhausted[]` row: an issue held at its session, token or money budget.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::BudgetReason;
use crate::orchestrator::snapshot::{BudgetRow, ConfigView};

use super::super::wording;
use super::stage::{RouteNames, StageLineageView, StagePosition, Stages, lineage};
use super::{IssueFields, Sentences, opt_ts, ts};

/// A `budget_exhausted[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "BudgetRow")]
pub struct BudgetView {
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// The pass of the blocked dispatch; `null` when it cannot be dated.
    pub dispatched_at: Option<String>,
    /// `session_budget`, `token_budget` or `money_budget`.
    pub reason: String,
    pub used_sessions: Option<u64>,
    pub budget_sessions: Option<u64>,
    pub used_tokens: Option<u64>,
    pub budget_tokens: Option<u64>,
    /// `null` while the money ceiling was not evaluated, or no part of the spend is priced.
    pub used_usd: Option<f64>,
    /// `null` while the money ceiling was not evaluated.
    pub used_usd_complete: Option<bool>,
    pub budget_usd: Option<f64>,
    /// `null` when the issue's spend was not read (no token ceiling).
    pub unmeasured_sessions: Option<u64>,
    pub stopped_in_flight: Option<u64>,
    pub exhausted_at: String,
    /// The dispatch rule of the blocked dispatch; absent without a dispatch context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_lineage: Option<StageLineageView>,
    pub stage_position: Option<StagePosition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
}

impl BudgetView {
    pub fn build(b: &BudgetRow, cfg: &ConfigView, stages: &Stages<'_>) -> BudgetView {
        let names = RouteNames::of_opt(b.route.as_ref(), cfg);
        let sessions = b.reason == BudgetReason::Session;
        // A zero sum beside unmeasured or lower-bound sessions is spend not known, not none.
        let used_tokens = b.spend.and_then(|s| {
            let unknown =
                s.uncached_tokens == 0 && (s.unmeasured_sessions > 0 || s.lower_bound_sessions > 0);
            (!unknown).then_some(s.uncached_tokens)
        });
        BudgetView {
            issue: IssueFields::of(&b.issue),
            sentences: match (b.reason, b.money) {
                (BudgetReason::Money, Some(m)) => {
                    wording::budget_money(m.used_usd, m.complete, m.budget_usd).into()
                }
                _ => wording::budget(b.reason.as_str(), b.used, b.limit).into(),
            },
            dispatched_at: opt_ts(b.dispatched_at_ms),
            reason: b.reason.as_str().to_string(),
            used_sessions: sessions.then_some(b.used),
            budget_sessions: cfg.max_sessions,
            used_tokens: match b.reason {
                BudgetReason::Token => Some(b.used),
                BudgetReason::Session | BudgetReason::Money => used_tokens,
            },
            budget_tokens: cfg.max_tokens,
            used_usd: b.money.and_then(|m| m.used_usd),
            used_usd_complete: b.money.map(|m| m.complete),
            budget_usd: cfg.max_cost_usd,
            unmeasured_sessions: b.spend.map(|s| s.unmeasured_sessions),
            stopped_in_flight: b.spend.map(|s| s.stopped_in_flight),
            exhausted_at: ts(b.since_ms),
            rule_name: names.rule_name,
            stage_lineage: b.route.as_ref().and_then(lineage),
            stage_position: b
                .route
                .as_ref()
                .and_then(|r| stages.of_route(r, &b.issue.id)),
            agent_kind: names.agent_kind,
            configured_model: names.configured_model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::state::HoldSpend;
    use serde_json::Value;

    fn hold(reason: BudgetReason, spend: Option<HoldSpend>) -> Value {
        let b = BudgetRow {
            issue: Default::default(),
            reason,
            used: 3,
            limit: 3,
            since_ms: 0,
            dispatched_at_ms: Some(1_000),
            spend,
            money: None,
            route: None,
        };
        let (cfg, hops) = (ConfigView::default(), Default::default());
        let stages = Stages {
            dispatch: &cfg.dispatch,
            hop_counts: &hops,
        };
        super::super::to_value(&BudgetView::build(&b, &cfg, &stages))
    }

    #[test]
    fn spend_is_served_once_the_token_ceiling_read_it() {
        let v = hold(BudgetReason::Session, None);
        assert_eq!(v["dispatched_at"], "1970-01-01T00:00:01.000Z");
        for k in ["used_tokens", "unmeasured_sessions", "stopped_in_flight"] {
            assert_eq!(v[k], Value::Null, "{k}");
        }
        let read = HoldSpend {
            uncached_tokens: 40,
            unmeasured_sessions: 1,
            lower_bound_sessions: 0,
            stopped_in_flight: 2,
        };
        let v = hold(BudgetReason::Session, Some(read));
        assert_eq!(v["used_tokens"], 40);
        assert_eq!(v["unmeasured_sessions"], 1);
        assert_eq!(v["stopped_in_flight"], 2);
        // A zero sum beside an unmeasured session is not a measured zero.
        let unknown = HoldSpend {
            uncached_tokens: 0,
            ..read
        };
        let v = hold(BudgetReason::Session, Some(unknown));
        assert_eq!(v["used_tokens"], Value::Null);
        assert_eq!(v["unmeasured_sessions"], 1);
    }
}
