//! The cross-rule checks: unique names, rules a catch-all shadows, stage labels, `next`
//! links and their cycles, the hop ceiling, and stage labels that collide with the states and
//! labels sortie writes.

use serde_json::Value;

use super::super::coerce::{coerce_int, display_value};
use super::super::dispatch::{DispatchConfig, DispatchRule, SelectedBy, stage_labels_equal};
use super::super::error::ConfigError;
use super::super::reactions::{Escalation, ReactionsConfig};
use super::super::schema::TrackerConfig;
use super::PARKING_LABEL;
use crate::domain::EscalationMode;

/// The check id `sortie validate` reports a shadowed rule under.
pub const UNREACHABLE_RULES_CHECK: &str = "unreachable_rules";

fn rule_field(i: usize) -> String {
    format!("dispatch.rules[{i}]")
}

fn display_name(r: &DispatchRule) -> &str {
    if r.name.is_empty() { "<none>" } else { &r.name }
}

pub(super) fn check_rules(cfg: &DispatchConfig) -> Result<(), ConfigError> {
    unique_names(&cfg.rules)?;
    reachable(&cfg.rules)?;
    unique_stages(&cfg.rules)?;
    next_targets(cfg)?;
    no_cycles(cfg)
}

fn unique_names(rules: &[DispatchRule]) -> Result<(), ConfigError> {
    for (j, r) in rules.iter().enumerate().filter(|(_, r)| !r.name.is_empty()) {
        if let Some(i) = rules[..j].iter().position(|o| o.name == r.name) {
            return Err(ConfigError::field(
                format!("{}.name", rule_field(j)),
                format!("duplicate rule name {:?} (first at index {i})", r.name),
            ));
        }
    }
    Ok(())
}

/// Only rules with `stage` may follow a catch-all.
fn reachable(rules: &[DispatchRule]) -> Result<(), ConfigError> {
    let Some(i) = rules
        .iter()
        .position(|r| r.selected_by() == SelectedBy::CatchAll)
    else {
        return Ok(());
    };
    let shadowed = rules
        .iter()
        .enumerate()
        .skip(i + 1)
        .find(|(_, r)| r.stage.is_none());
    match shadowed {
        None => Ok(()),
        Some((j, r)) => Err(ConfigError::Checked {
            check: UNREACHABLE_RULES_CHECK,
            field: rule_field(i),
            message: format!(
                "catch-all rule {:?} takes every issue, so it shadows dispatch.rules[{j}] ({:?}), which can never match; only rules with stage may follow a catch-all",
                display_name(&rules[i]),
                display_name(r)
            ),
        }),
    }
}

fn unique_stages(rules: &[DispatchRule]) -> Result<(), ConfigError> {
    for (j, r) in rules.iter().enumerate() {
        let Some(label) = r.stage.as_deref() else {
            continue;
        };
        let first = rules[..j].iter().position(|o| {
            o.stage
                .as_deref()
                .is_some_and(|s| stage_labels_equal(s, label))
        });
        if let Some(i) = first {
            return Err(ConfigError::field(
                format!("{}.stage", rule_field(j)),
                format!("duplicate stage label {label:?} (first at index {i})"),
            ));
        }
    }
    Ok(())
}

fn next_targets(cfg: &DispatchConfig) -> Result<(), ConfigError> {
    for (i, r) in cfg.rules.iter().enumerate() {
        let Some(next) = r.next.as_deref() else {
            continue;
        };
        let field = format!("{}.next", rule_field(i));
        let message = match cfg.rule(next) {
            None => format!("next {next:?} names no dispatch rule"),
            Some(t) if t.name == r.name => "next names the rule that carries it".to_string(),
            Some(t) if t.stage.is_none() => format!(
                "next {next:?} names a rule without a stage label; the rule a next names must carry stage"
            ),
            Some(_) => continue,
        };
        return Err(ConfigError::field(field, message));
    }
    Ok(())
}

/// The loop's first rule in list order, and the path from it back to it.
fn no_cycles(cfg: &DispatchConfig) -> Result<(), ConfigError> {
    for (i, start) in cfg.rules.iter().enumerate() {
        let mut path = vec![start.name.as_str()];
        let mut at = start;
        while let Some(next) = at.next.as_deref().and_then(|n| cfg.rule(n)) {
            if next.name == start.name {
                path.push(&start.name);
                return Err(ConfigError::field(
                    format!("{}.next", rule_field(i)),
                    format!("next links form a cycle: {}", path.join(" -> ")),
                ));
            }
            if path.contains(&next.name.as_str()) {
                break;
            }
            path.push(&next.name);
            at = next;
        }
    }
    Ok(())
}

/// `dispatch.max_consecutive_hops`: absent or null takes the default.
pub(super) fn max_consecutive_hops(
    v: Option<&Value>,
    cfg: &DispatchConfig,
) -> Result<Option<u32>, ConfigError> {
    const FIELD: &str = "dispatch.max_consecutive_hops";
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n))
            if n.as_i64().is_none() && (n.as_u64().is_some() || is_huge_whole(n)) =>
        {
            return Err(ConfigError::field(
                FIELD,
                format!(
                    "value is outside the range an integer setting accepts, {} to {}",
                    i64::MIN,
                    i64::MAX
                ),
            ));
        }
        Some(v) => coerce_int(v).ok_or_else(|| {
            ConfigError::field(
                FIELD,
                format!("invalid integer value: {}", display_value(v)),
            )
        })?,
    };
    if n <= 0 {
        return Err(ConfigError::field(FIELD, "must be greater than 0"));
    }
    let longest = cfg
        .chains()
        .into_iter()
        .max_by_key(Vec::len)
        .unwrap_or_default();
    let hops = longest.len().saturating_sub(1) as i64;
    if n < hops {
        return Err(ConfigError::field(
            FIELD,
            format!(
                "must be at least {hops}, the number of hops in the longest stage chain ({})",
                longest.join(" -> ")
            ),
        ));
    }
    Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)))
}

pub(super) fn check_handoff(
    cfg: &DispatchConfig,
    tracker: &TrackerConfig,
) -> Result<(), ConfigError> {
    if tracker.handoff_state.is_some() {
        return Ok(());
    }
    match cfg.rules.iter().position(|r| r.next.is_some()) {
        None => Ok(()),
        Some(i) => Err(ConfigError::field(
            format!("{}.next", rule_field(i)),
            "next requires tracker.handoff_state, the state a stage ends on when a hop is not made",
        )),
    }
}

/// Every value a stage label must differ from (ignoring case), with what it is.
fn written_values(tracker: &TrackerConfig, reactions: &ReactionsConfig) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in &tracker.active_states {
        out.push(("tracker.active_states entry".to_string(), s.clone()));
    }
    for s in &tracker.terminal_states {
        out.push(("tracker.terminal_states entry".to_string(), s.clone()));
    }
    for (what, v) in [
        ("tracker.handoff_state", &tracker.handoff_state),
        ("tracker.in_progress_state", &tracker.in_progress_state),
        ("tracker.no_change_state", &tracker.no_change_state),
    ] {
        if let Some(v) = v {
            out.push((what.to_string(), v.clone()));
        }
    }
    for (kind, e) in escalations(reactions) {
        if e.mode == EscalationMode::Label {
            out.push((
                format!("the escalation_label of reactions.{kind}"),
                e.label.clone(),
            ));
        }
    }
    out.push(("the parking label".to_string(), PARKING_LABEL.to_string()));
    out
}

fn escalations(r: &ReactionsConfig) -> Vec<(&'static str, &Escalation)> {
    let mut out = Vec::new();
    out.extend(r.ci_failure.as_ref().map(|c| ("ci_failure", &c.escalation)));
    out.extend(
        r.review_comments
            .as_ref()
            .map(|c| ("review_comments", &c.escalation)),
    );
    out.extend(r.bot_review.as_ref().map(|c| ("bot_review", &c.escalation)));
    out.extend(
        r.merge_conflicts
            .as_ref()
            .map(|c| ("merge_conflicts", &c.escalation)),
    );
    out.extend(r.auto_merge.as_ref().map(|c| ("auto_merge", &c.escalation)));
    out.extend(
        r.merge_completion
            .as_ref()
            .map(|c| ("merge_completion", &c.escalation)),
    );
    out
}

pub(super) fn check_collisions(
    cfg: &DispatchConfig,
    tracker: &TrackerConfig,
    reactions: &ReactionsConfig,
) -> Result<(), ConfigError> {
    let values = written_values(tracker, reactions);
    for (i, r) in cfg.rules.iter().enumerate() {
        let Some(label) = r.stage.as_deref() else {
            continue;
        };
        if let Some((what, value)) = values.iter().find(|(_, v)| stage_labels_equal(v, label)) {
            return Err(ConfigError::field(
                format!("{}.stage", rule_field(i)),
                format!(
                    "rule {:?}: stage label {label:?} collides with {what} {value:?}",
                    r.name
                ),
            ));
        }
    }
    Ok(())
}

/// A whole number YAML read as a float because it does not fit an integer.
fn is_huge_whole(n: &serde_json::Number) -> bool {
    n.as_f64()
        .is_some_and(|f| f.is_finite() && f.fract() == 0.0 && f.abs() >= 9.2e18)
}
