//! Stage chains: routing (the rule an issue dispatches on, `routing/`), the hops between
//! stages (`feature.rs`: the stages feature, which owns them; `hop.rs`: a hop's plan and
//! label writes; `hooks.rs`: where the loop and the claim core reach the feature), and as pure
//! functions here, the live stage passes the database keeps for `sortie stats` (a running
//! session of a stage rule, a budget hold on one) and the `stage.advanced` /
//! `stage.not_advanced` events a hop decision adds to the run that reached it.

pub mod feature;
pub(crate) mod hooks;
pub(crate) mod hop;
pub mod routing;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::ServiceConfig;
use crate::domain::stage::{HopResult, LivePass, LivePassKind, Route, StageHop};
use crate::domain::{HoldCode, Issue};
use crate::orchestrator::claim::dispatch_pass::{FeatureHold, HoldReason, OnRetry};

use crate::orchestrator::core::state::State;

/// The event type of a hop that was made.
pub const STAGE_ADVANCED: &str = "stage.advanced";
/// The event type of a hop that was due and not made.
pub const STAGE_NOT_ADVANCED: &str = "stage.not_advanced";

/// Whether `rule` stands on a stage chain of the configuration in force.
fn on_chain(cfg: &ServiceConfig, rule: &str) -> bool {
    !rule.is_empty() && cfg.dispatch.chain_for(rule, None).is_some()
}

fn pass(
    issue: &Issue,
    kind: LivePassKind,
    route: &Route,
    via: &str,
    since_ms: i64,
) -> (String, LivePass) {
    (
        issue.id.clone(),
        LivePass {
            issue_id: issue.id.clone(),
            identifier: issue.identifier.clone(),
            kind,
            chain_id: route.chain_id.clone(),
            rule_name: route.rule_name.clone(),
            via_rule: via.to_string(),
            since_ms,
        },
    )
}

/// The stage a budget hold keeps an issue on: the hold's own selection when it has one, else
/// the target of a hop no run has picked up yet, else the selection the rules give the issue
/// now. The pass is the hold's or the hop's; `""` when neither names one.
fn held_route(
    issue: &Issue,
    route: Option<&Route>,
    hop: Option<&StageHop>,
    cfg: &ServiceConfig,
) -> (Route, String) {
    let pending = hop.filter(|h| !h.picked_up);
    if let Some(r) = route {
        let via = r
            .lineage
            .as_ref()
            .map(|l| l.previous.clone())
            .unwrap_or_default();
        return (r.clone(), via);
    }
    let mut r = crate::orchestrator::features::stages::routing::select(issue, cfg, pending).route;
    let via = r
        .lineage
        .as_ref()
        .map(|l| l.previous.clone())
        .unwrap_or_default();
    if let Some(h) = pending.filter(|h| h.target_rule == r.rule_name) {
        r.chain_id = h.chain_id.clone();
    }
    (r, via)
}

/// The live stage passes the state holds now: every running session whose rule is on a
/// chain, and every budget hold whose stage is (`hops`: each issue's latest hop). A pass
/// already `written` keeps its `since_ms`.
pub fn live_passes(
    state: &State,
    hops: &BTreeMap<String, StageHop>,
    written: &BTreeMap<String, LivePass>,
    cfg: &ServiceConfig,
    now_ms: i64,
) -> BTreeMap<String, LivePass> {
    let since = |id: &str, kind: LivePassKind, default: i64| {
        written
            .get(id)
            .filter(|p| p.kind == kind)
            .map_or(default, |p| p.since_ms)
    };
    let mut out = BTreeMap::new();
    for e in state.running.values() {
        let r = &e.facts.route;
        if !on_chain(cfg, &r.rule_name) {
            continue;
        }
        let via = r
            .lineage
            .as_ref()
            .map(|l| l.previous.as_str())
            .unwrap_or("");
        let at = since(
            &e.facts.issue.id,
            LivePassKind::Session,
            e.facts.started_at_ms,
        );
        let (id, p) = pass(&e.facts.issue, LivePassKind::Session, r, via, at);
        out.insert(id, p);
    }
    for (id, h) in &state.budget_held {
        if out.contains_key(id) {
            continue;
        }
        let (route, via) = held_route(&h.issue, h.route.as_ref(), hops.get(id), cfg);
        if !on_chain(cfg, &route.rule_name) {
            continue;
        }
        let at = since(id, LivePassKind::BudgetHold, h.since_ms.min(now_ms));
        let (id, p) = pass(&h.issue, LivePassKind::BudgetHold, &route, &via, at);
        out.insert(id, p);
    }
    out
}

/// The `stage_hop_unconfirmed` hold: a stage hop added `target_label`, and no read has shown
/// it yet, so the issue's next stage waits (the retry path never meets it: only a poll tick's
/// pass is gated by it).
pub fn unconfirmed_hold(target_label: &str) -> HoldReason {
    let reason_text = format!("Stage label {target_label} not seen on the issue yet");
    let release_text = format!(
        "Released when a poll reads the issue with the label {target_label}, or finds it outside the active states."
    );
    let full_text = format!(
        "{reason_text}. Sortie moved the issue to its next stage and starts that stage once a read confirms the move."
    );
    HoldReason::Feature(FeatureHold {
        code: HoldCode::StageHopUnconfirmed,
        reason_text,
        release_text,
        full_text,
        dry_run_text: format!("stage label {target_label} not seen yet"),
        resets_at_ms: None,
        on_retry: OnRetry::Release,
    })
}

/// The members both stage events carry.
fn members(hop: &HopFacts<'_>) -> serde_json::Map<String, Value> {
    let v = json!({
        "issue_id": hop.issue.id,
        "issue_identifier": hop.issue.identifier,
        "source_rule": hop.source_rule,
        "target_rule": hop.target_rule,
        "target_label": hop.target_label,
        "chain_id": hop.chain_id,
        "hop_count": hop.hop_count,
        "hop_ceiling": hop.ceiling,
    });
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// What a hop decision is about, for its event.
#[derive(Debug, Clone)]
pub struct HopFacts<'a> {
    pub issue: &'a Issue,
    pub source_rule: &'a str,
    pub target_rule: &'a str,
    pub target_label: &'a str,
    pub chain_id: &'a str,
    /// The issue's consecutive hops: with this one when it was made, before it otherwise.
    pub hop_count: u32,
    pub ceiling: u32,
}

/// The `stage.advanced` event of a hop that was made; `left` are the stage labels whose
/// removal failed (the `partial` result).
pub fn advanced(hop: &HopFacts<'_>, left: &[String]) -> (&'static str, Value) {
    let result = if left.is_empty() {
        HopResult::Advanced
    } else {
        HopResult::Partial
    };
    let mut m = members(hop);
    m.insert("result".into(), result.as_str().into());
    let mut message = format!(
        "Moved from stage {} to stage {}, and Sortie added `{}`",
        hop.source_rule, hop.target_rule, hop.target_label
    );
    if !left.is_empty() {
        message.push_str(&format!("; removing {} failed", left.join(", ")));
    }
    message.push('.');
    m.insert("message".into(), message.into());
    (STAGE_ADVANCED, Value::Object(m))
}

/// Why a due hop was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotMade {
    /// One more hop would pass the hop ceiling.
    Ceiling,
    /// Adding the target label failed, with the tracker's error.
    AddFailed(String),
}

/// The `stage.not_advanced` event of a hop that was due and not made: the issue took the
/// handoff write instead.
pub fn not_advanced(hop: &HopFacts<'_>, why: &NotMade) -> (&'static str, Value) {
    let mut m = members(hop);
    let (result, reason, message) = match why {
        NotMade::Ceiling => (
            HopResult::Ceiling,
            "ceiling",
            format!(
                "Stayed on stage {}: a hop to {} would pass the hop ceiling of {}, so the issue was handed off.",
                hop.source_rule, hop.target_rule, hop.ceiling
            ),
        ),
        NotMade::AddFailed(e) => (
            HopResult::Failed,
            "add_failed",
            format!(
                "Stayed on stage {}: adding `{}` failed ({}), so the issue was handed off.",
                hop.source_rule,
                hop.target_label,
                e.trim()
            ),
        ),
    };
    m.insert("result".into(), result.as_str().into());
    m.insert("reason".into(), reason.into());
    m.insert("message".into(), crate::mask::mask(&message).into());
    (STAGE_NOT_ADVANCED, Value::Object(m))
}

#[cfg(test)]
mod tests;
