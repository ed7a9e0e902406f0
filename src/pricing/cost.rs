//! Pricing a model's part of a session's spend and a whole run under a [`RateBook`].
//!
//! cost = (uncached input × input rate + cache reads × cache-read rate
//!         + cache writes × cache-write rate + output × output rate) / 1e6,
//! where uncached input is `input_tokens − cache_read − cache_write` (both cache classes are
//! parts of input). A class with spend and no rate leaves the part a lower bound (`partial`);
//! a zero rate prices.

use std::collections::BTreeMap;

use serde::Serialize;

use super::book::{RateBook, RateLayer};
use super::class::TokenClass;
use crate::agent::event::TokenUsage;

/// The API's `cost_status` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CostStatus {
    Estimated,
    Partial,
    Unpriced,
    Unmeasured,
}

impl CostStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CostStatus::Estimated => "estimated",
            CostStatus::Partial => "partial",
            CostStatus::Unpriced => "unpriced",
            CostStatus::Unmeasured => "unmeasured",
        }
    }

    /// Whether the status carries a figure (`estimated_cost_usd` is non-null exactly then).
    pub fn is_priced(self) -> bool {
        matches!(self, CostStatus::Estimated | CostStatus::Partial)
    }
}

/// What priced a part (the API's `price_source`), highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceSource {
    /// A `token_rates` entry or the operator's own table.
    Operator,
    Fetched,
    Embedded,
    /// The US-dollar amount the agent reported for a model no rate prices.
    Agent,
}

impl PriceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PriceSource::Operator => "operator",
            PriceSource::Fetched => "fetched",
            PriceSource::Embedded => "embedded",
            PriceSource::Agent => "agent",
        }
    }

    fn of(layer: RateLayer) -> PriceSource {
        match layer {
            RateLayer::KindEntry | RateLayer::ModelEntry | RateLayer::OperatorTable => {
                PriceSource::Operator
            }
            RateLayer::Fetched => PriceSource::Fetched,
            RateLayer::Embedded => PriceSource::Embedded,
        }
    }
}

/// How far a session's token figure reaches (the run's `usage_completeness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageCompleteness {
    Complete,
    LowerBound,
    Unmeasured,
}

/// A US-dollar amount the agent reported for one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentAmount {
    pub usd: f64,
    /// The session may have spent more than this.
    pub lower_bound: bool,
}

/// One model's part of a session's spend, priced.
#[derive(Debug, Clone, PartialEq)]
pub struct PartPrice {
    pub model: String,
    pub tokens: TokenUsage,
    /// Non-`None` exactly when `status` is priced.
    pub cost_usd: Option<f64>,
    pub status: CostStatus,
    /// The spent classes no rate priced, in [`TokenClass::ALL`] order.
    pub unrated_classes: Vec<TokenClass>,
    pub price_source: Option<PriceSource>,
}

/// A whole session's spend, priced: what a run row freezes when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPrice {
    pub cost_usd: Option<f64>,
    pub status: CostStatus,
    /// The highest-precedence source among the priced parts.
    pub price_source: Option<PriceSource>,
    /// Parts with spend, ordered by model.
    pub parts: Vec<PartPrice>,
    /// [`RateBook::version`] of the rates used.
    pub rates_version: String,
}

impl PartPrice {
    /// The part as a run's stored `model_usage` element; `None` for spend reported only as a
    /// total, which has no split to list.
    pub fn model_usage_element(&self) -> Option<serde_json::Value> {
        let t = &self.tokens;
        if t.input_tokens == 0 && t.output_tokens == 0 {
            return None;
        }
        let unrated: Vec<&str> = self.unrated_classes.iter().map(|c| c.as_str()).collect();
        Some(serde_json::json!({
            "model": self.model,
            "tokens": {
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "total_tokens": t.input_tokens + t.output_tokens,
                "cache_read_tokens": t.cache_read_tokens,
                "cache_write_tokens": t.cache_write_tokens,
            },
            "uncached_tokens": (t.input_tokens + t.output_tokens).saturating_sub(t.cache_read_tokens),
            "estimated_cost_usd": self.cost_usd,
            "cost_status": self.status.as_str(),
            "unrated_classes": unrated,
            "price_source": self.price_source.map(|s| s.as_str()),
        }))
    }
}

/// Tokens of each class as billed: input without its cache parts, then the other three.
fn billed(t: &TokenUsage) -> [(TokenClass, u64); 4] {
    let uncached = t
        .input_tokens
        .saturating_sub(t.cache_read_tokens)
        .saturating_sub(t.cache_write_tokens);
    [
        (TokenClass::Input, uncached),
        (TokenClass::Output, t.output_tokens),
        (TokenClass::CacheRead, t.cache_read_tokens),
        (TokenClass::CacheWrite, t.cache_write_tokens),
    ]
}

/// Spend reported as a total with no split by class, which no rate can price.
fn total_only(t: &TokenUsage) -> bool {
    t.total_tokens > 0 && t.input_tokens == 0 && t.output_tokens == 0
}

impl RateBook {
    /// Prices one model's part. A part no rate prices takes the agent's US-dollar amount for
    /// the model when there is one.
    pub fn price_part(
        &self,
        agent_kind: &str,
        model: &str,
        tokens: &TokenUsage,
        agent_usd: Option<AgentAmount>,
    ) -> PartPrice {
        let mut part = self.rated_part(agent_kind, model, tokens);
        if part.status == CostStatus::Unpriced
            && let Some(a) = agent_usd
        {
            part.cost_usd = Some(a.usd);
            part.status = if a.lower_bound {
                CostStatus::Partial
            } else {
                CostStatus::Estimated
            };
            part.unrated_classes.clear();
            part.price_source = Some(PriceSource::Agent);
        }
        part
    }

    fn rated_part(&self, agent_kind: &str, model: &str, tokens: &TokenUsage) -> PartPrice {
        let resolved = self.resolve(agent_kind, model);
        let mut part = PartPrice {
            model: model.to_string(),
            tokens: *tokens,
            cost_usd: None,
            status: CostStatus::Unpriced,
            unrated_classes: Vec::new(),
            price_source: None,
        };
        if total_only(tokens) {
            return part;
        }
        let mut cost = 0.0;
        let mut best: Option<RateLayer> = None;
        for (class, n) in billed(tokens) {
            let rate = resolved.class(class);
            match (rate.per_mtok, rate.layer) {
                _ if n == 0 => {}
                (Some(r), Some(layer)) if !resolved.incomplete_kind_entry => {
                    cost += n as f64 * r;
                    best = Some(best.map_or(layer, |b| b.min(layer)));
                }
                _ => part.unrated_classes.push(class),
            }
        }
        let spent = billed(tokens).iter().any(|(_, n)| *n > 0);
        part.status = match (spent, best, part.unrated_classes.is_empty()) {
            (false, _, _) => CostStatus::Estimated,
            (true, None, _) => return part,
            (true, Some(_), true) => CostStatus::Estimated,
            (true, Some(_), false) => CostStatus::Partial,
        };
        part.cost_usd = Some(cost / 1e6);
        part.price_source = best.or(resolved.layer).map(PriceSource::of);
        part
    }

    /// Prices a session from its usage: `parts` is its spend per model (one part under the
    /// reported model, or `""`, for an agent that does not split by model), `total` its whole
    /// figure, `agent_usd` the US-dollar amounts the agent reported per model.
    pub fn price_run(
        &self,
        agent_kind: &str,
        completeness: UsageCompleteness,
        total: &TokenUsage,
        parts: &[(String, TokenUsage)],
        agent_usd: &BTreeMap<String, AgentAmount>,
    ) -> RunPrice {
        let mut run = RunPrice {
            cost_usd: None,
            status: CostStatus::Unmeasured,
            price_source: None,
            parts: Vec::new(),
            rates_version: self.version(),
        };
        if completeness == UsageCompleteness::Unmeasured {
            return run;
        }
        let mut priced: Vec<(String, TokenUsage)> = parts
            .iter()
            .filter(|(_, t)| !t.is_zero())
            .cloned()
            .collect();
        priced.sort_by(|a, b| a.0.cmp(&b.0));
        run.parts = priced
            .iter()
            .map(|(m, t)| self.price_part(agent_kind, m, t, agent_usd.get(m).copied()))
            .collect();
        let lower_bound = completeness == UsageCompleteness::LowerBound;
        run.status = run_status(&run.parts, total, lower_bound);
        if run.status.is_priced() {
            run.cost_usd = Some(run.parts.iter().filter_map(|p| p.cost_usd).sum());
            run.price_source = run.parts.iter().filter_map(|p| p.price_source).min();
        }
        run
    }
}

fn run_status(parts: &[PartPrice], total: &TokenUsage, lower_bound: bool) -> CostStatus {
    if parts.is_empty() {
        return match (total.is_zero(), lower_bound) {
            (false, _) => CostStatus::Unpriced,
            (true, false) => CostStatus::Estimated,
            (true, true) => CostStatus::Partial,
        };
    }
    let any_priced = parts.iter().any(|p| p.status.is_priced());
    let all_estimated = parts.iter().all(|p| p.status == CostStatus::Estimated);
    match (any_priced, all_estimated && !lower_bound) {
        (false, _) => CostStatus::Unpriced,
        (true, true) => CostStatus::Estimated,
        (true, false) => CostStatus::Partial,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::pricing::{ClassRates, PriceTable, RateEntry, TableLayer, TokenRates};

    fn sonnet_book(entries: &[(&str, bool, ClassRates)]) -> RateBook {
        let body = r#"{"claude-sonnet-4-5": {"input_cost_per_token": 3e-06,
            "output_cost_per_token": 1.5e-05, "cache_read_input_token_cost": 3e-07,
            "cache_creation_input_token_cost": 3.75e-06},
            "gpt-5": {"input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05}}"#;
        let t = PriceTable::parse(TableLayer::Embedded, "2026-11-30", body.as_bytes()).unwrap();
        let mut tr = TokenRates::default();
        for (k, per_kind, r) in entries {
            let e = RateEntry {
                rates: *r,
                per_kind: *per_kind,
            };
            tr.entries.insert(k.to_string(), e);
        }
        RateBook::new(tr, vec![Arc::new(t)])
    }

    fn usage(i: u64, o: u64, cr: u64, cw: u64) -> TokenUsage {
        TokenUsage::new(i, o, cr, cw)
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    fn part(tokens: TokenUsage) -> PartPrice {
        PartPrice {
            model: "m".into(),
            tokens,
            cost_usd: Some(0.5),
            status: CostStatus::Partial,
            unrated_classes: vec![TokenClass::CacheWrite],
            price_source: Some(PriceSource::Operator),
        }
    }

    #[test]
    fn a_model_usage_element_carries_the_part_price_and_spend_only_as_a_total_lists_none() {
        let v = part(TokenUsage::new(100, 10, 40, 5))
            .model_usage_element()
            .unwrap();
        assert_eq!(v["tokens"]["total_tokens"], 110);
        assert_eq!(v["uncached_tokens"], 70);
        assert_eq!(v["estimated_cost_usd"], 0.5);
        assert_eq!(v["cost_status"], "partial");
        assert_eq!(v["unrated_classes"], serde_json::json!(["cache_write"]));
        assert_eq!(v["price_source"], "operator");
        let total_only = TokenUsage {
            total_tokens: 50,
            ..TokenUsage::default()
        };
        assert_eq!(part(total_only).model_usage_element(), None);
    }

    #[test]
    fn the_seed_example_prices_to_0_06372() {
        // 12,500 input (8,400 cache reads, 1,200 cache writes), 3,200 output at 3/15/0.3/3.75.
        let p = sonnet_book(&[]).price_part(
            "claude-code",
            "claude-sonnet-4-5",
            &usage(12_500, 3_200, 8_400, 1_200),
            None,
        );
        assert!(close(p.cost_usd, 0.06372), "{:?}", p.cost_usd);
        assert_eq!(p.status, CostStatus::Estimated);
        assert_eq!(p.price_source, Some(PriceSource::Embedded));
        assert!(p.unrated_classes.is_empty());
    }

    #[test]
    fn a_spent_class_without_a_rate_makes_the_part_partial_and_names_it() {
        let p = sonnet_book(&[]).price_part("codex", "gpt-5", &usage(1000, 10, 400, 0), None);
        assert_eq!(p.status, CostStatus::Partial);
        assert_eq!(p.unrated_classes, vec![TokenClass::CacheRead]);
        assert!(close(p.cost_usd, (600.0 * 1.25 + 10.0 * 10.0) / 1e6));
    }

    #[test]
    fn an_unknown_model_is_unpriced_unless_the_agent_reported_dollars_for_it() {
        let b = sonnet_book(&[]);
        let p = b.price_part("x", "mystery", &usage(10, 10, 0, 0), None);
        assert_eq!((p.status, p.cost_usd), (CostStatus::Unpriced, None));
        assert_eq!(
            p.unrated_classes,
            vec![TokenClass::Input, TokenClass::Output]
        );
        let a = AgentAmount {
            usd: 0.5,
            lower_bound: true,
        };
        let p = b.price_part("x", "mystery", &usage(10, 10, 0, 0), Some(a));
        assert_eq!((p.status, p.cost_usd), (CostStatus::Partial, Some(0.5)));
        assert_eq!(p.price_source, Some(PriceSource::Agent));
    }

    #[test]
    fn a_kind_entry_without_an_output_rate_prices_nothing() {
        let r = ClassRates {
            input_per_mtok: Some(1.0),
            ..ClassRates::default()
        };
        let b = sonnet_book(&[("claude-code", true, r)]);
        let p = b.price_part(
            "claude-code",
            "claude-sonnet-4-5",
            &usage(10, 10, 0, 0),
            None,
        );
        assert_eq!(p.status, CostStatus::Unpriced);
        assert_eq!(
            p.unrated_classes,
            vec![TokenClass::Input, TokenClass::Output]
        );
    }

    #[test]
    fn a_zero_rate_prices_and_the_operator_source_wins() {
        let r = ClassRates {
            input_per_mtok: Some(0.0),
            output_per_mtok: Some(0.0),
            ..ClassRates::default()
        };
        let b = sonnet_book(&[("claude-code", true, r)]);
        let p = b.price_part("claude-code", "any", &usage(10, 10, 5, 0), None);
        assert_eq!(p.status, CostStatus::Estimated);
        assert_eq!(p.cost_usd, Some(0.0));
        assert_eq!(p.price_source, Some(PriceSource::Operator));
    }

    #[test]
    fn a_run_sums_its_parts_and_is_partial_when_one_is_unpriced() {
        let b = sonnet_book(&[]);
        let parts = vec![
            ("mystery".to_string(), usage(100, 0, 0, 0)),
            ("claude-sonnet-4-5".to_string(), usage(1_000_000, 0, 0, 0)),
        ];
        let total = usage(1_000_100, 0, 0, 0);
        let r = b.price_run(
            "claude-code",
            UsageCompleteness::Complete,
            &total,
            &parts,
            &BTreeMap::new(),
        );
        assert_eq!(r.status, CostStatus::Partial);
        assert!(close(r.cost_usd, 3.0));
        assert_eq!(r.parts[0].model, "claude-sonnet-4-5", "ordered by model");
        assert_eq!(r.price_source, Some(PriceSource::Embedded));
        assert_eq!(r.rates_version, b.version());
    }

    #[test]
    fn run_statuses_for_unmeasured_no_spend_total_only_and_lower_bound() {
        let b = sonnet_book(&[]);
        let none = BTreeMap::new();
        let price = |c, total: TokenUsage, parts: &[(String, TokenUsage)]| {
            b.price_run("claude-code", c, &total, parts, &none)
        };
        let u = price(UsageCompleteness::Unmeasured, usage(5, 5, 0, 0), &[]);
        assert_eq!((u.status, u.cost_usd), (CostStatus::Unmeasured, None));
        let z = price(UsageCompleteness::Complete, TokenUsage::default(), &[]);
        assert_eq!((z.status, z.cost_usd), (CostStatus::Estimated, Some(0.0)));
        let total = TokenUsage {
            total_tokens: 50,
            ..TokenUsage::default()
        };
        let t = price(UsageCompleteness::Complete, total, &[("m".into(), total)]);
        assert_eq!((t.status, t.cost_usd), (CostStatus::Unpriced, None));
        let sonnet = [("claude-sonnet-4-5".to_string(), usage(10, 10, 0, 0))];
        let lb = price(UsageCompleteness::LowerBound, usage(10, 10, 0, 0), &sonnet);
        assert_eq!(lb.status, CostStatus::Partial);
        assert!(lb.cost_usd.is_some());
    }
}
