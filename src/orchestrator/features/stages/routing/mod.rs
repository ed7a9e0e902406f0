//! Rule selection, as a pure function of the issue, the configuration and the issue's latest
//! stage hop: which dispatch rule an issue runs on, with which agent kind and template.
//!
//! Selection order: (1) the target rule of the latest hop, when the issue carries the label
//! the hop added and the rule still exists; (2) the rules that carry a stage label the issue
//! carries — of several, the one furthest along a chain, then list order; (3) the rules
//! without a stage label, first match in configuration order (a catch-all matches every
//! issue), then `dispatch.default`, then the workflow-wide agent.

mod matching;
mod title;

use crate::config::ServiceConfig;
use crate::config::dispatch::{DEFAULT_RULE_NAME, DispatchConfig, DispatchRule};
use crate::domain::Issue;
use crate::domain::stage::{Route, StageHop};

pub use matching::rule_matches;

/// What selection chose for an issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `chain_id` is left empty: the caller knows whether the dispatch starts a pass.
    pub route: Route,
    /// Every configured stage label the issue carries, in rule order, when it carries more
    /// than one (the caller logs `several stage labels found`); empty otherwise.
    pub several_stage_labels: Vec<String>,
}

/// Selects the rule `issue` dispatches on.
pub fn select(issue: &Issue, cfg: &ServiceConfig, hop: Option<&StageHop>) -> Selection {
    let d = &cfg.dispatch;
    let staged: Vec<&DispatchRule> = d
        .rules
        .iter()
        .filter(|r| r.stage_on(&issue.labels))
        .collect();
    let several = if staged.len() > 1 {
        staged.iter().filter_map(|r| r.stage.clone()).collect()
    } else {
        Vec::new()
    };
    let by_hop = hop
        .filter(|h| {
            issue
                .labels
                .iter()
                .any(|l| l.eq_ignore_ascii_case(&h.target_label))
        })
        .and_then(|h| d.rule(&h.target_rule).map(|r| (r, h)));
    let mut route = if let Some((rule, hop)) = by_hop {
        let mut route = rule_route(rule, cfg);
        route.lineage = hop.lineage();
        route
    } else if let Some(rule) = furthest_along(d, &staged) {
        rule_route(rule, cfg)
    } else if let Some(rule) = d
        .rules
        .iter()
        .filter(|r| r.stage.is_none())
        .find(|r| r.matcher.as_ref().is_none_or(|m| rule_matches(m, issue)))
    {
        rule_route(rule, cfg)
    } else {
        fallback_route(d, cfg)
    };
    route.configured_model = cfg
        .configured_model_for(&route.agent_kind, &route.rule_name)
        .unwrap_or_default();
    Selection {
        route,
        several_stage_labels: several,
    }
}

/// Of the staged rules an issue carries, the one furthest along a chain: a rule that leads,
/// through `next`, to another of them is set aside; of the rest, the first listed.
fn furthest_along<'a>(d: &DispatchConfig, staged: &[&'a DispatchRule]) -> Option<&'a DispatchRule> {
    let leads_to_other = |r: &DispatchRule| {
        let mut at = r.next.as_deref();
        let mut steps = 0;
        while let Some(name) = at {
            if staged.iter().any(|s| s.name == name) {
                return true;
            }
            steps += 1;
            if steps > d.rules.len() {
                return false;
            }
            at = d.rule(name).and_then(|n| n.next.as_deref());
        }
        false
    };
    staged
        .iter()
        .find(|r| !leads_to_other(r))
        .or(staged.first())
        .copied()
}

fn rule_route(rule: &DispatchRule, cfg: &ServiceConfig) -> Route {
    let d = &cfg.dispatch;
    Route {
        rule_name: rule.name.clone(),
        agent_kind: d.rule_kind(rule, &cfg.agent.kind).to_string(),
        template: rule
            .selection
            .template
            .clone()
            .or_else(|| d.default.template.clone())
            .unwrap_or_default(),
        ..Default::default()
    }
}

fn fallback_route(d: &DispatchConfig, cfg: &ServiceConfig) -> Route {
    let by_default = d.default.agent.is_some() || d.default.template.is_some();
    Route {
        rule_name: if by_default {
            DEFAULT_RULE_NAME.to_string()
        } else {
            String::new()
        },
        agent_kind: d
            .default
            .agent
            .clone()
            .unwrap_or_else(|| cfg.agent.kind.clone()),
        template: d.default.template.clone().unwrap_or_default(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
