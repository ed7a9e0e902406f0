//! Each `dispatch.rules[]` entry on its own: its keys, name, stage, next, match, agent,
//! template and settings block.

use serde_json::{Map, Value};

use super::super::dispatch::{DEFAULT_RULE_NAME, DispatchRule, DispatchSelection};
use super::super::error::ConfigError;
use super::super::validate::closest;
use super::{matcher, not_a_map, shape};
use crate::registry;

const RULE_KEYS: &[&str] = &["name", "stage", "next", "match", "agent", "template"];

/// Keys a rule's settings block cannot write: they come from the workflow-wide `agent`.
pub const FORBIDDEN_SETTINGS_KEYS: &[&str] = &[
    "kind",
    "command",
    "turn_timeout_ms",
    "read_timeout_ms",
    "stall_timeout_ms",
    "stop_grace_ms",
];

pub(super) fn build_rules(
    v: Option<&Value>,
    default: &DispatchSelection,
    workflow_kind: &str,
) -> Result<Vec<DispatchRule>, ConfigError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ConfigError::field(
                "dispatch.rules",
                format!("expected a list, got {}", shape(other)),
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| build_rule(i, item, default, workflow_kind))
        .collect()
}

fn build_rule(
    i: usize,
    v: &Value,
    default: &DispatchSelection,
    workflow_kind: &str,
) -> Result<DispatchRule, ConfigError> {
    let prefix = format!("dispatch.rules[{i}]");
    let m = v.as_object().ok_or_else(|| not_a_map(&prefix, v))?;
    check_keys(m, &prefix)?;
    let name = rule_name(m, &prefix)?;
    let stage = text(
        m,
        "stage",
        &prefix,
        "a label",
        "needs a label with a character other than white space",
    )?;
    let next = text(m, "next", &prefix, "a rule name", "needs a rule name")?;
    if stage.is_some() && m.contains_key("match") {
        return Err(ConfigError::field(
            &prefix,
            "a rule with a stage label is selected by that label and cannot also carry match",
        ));
    }
    if stage.is_some() && name.is_empty() {
        return Err(ConfigError::field(
            &prefix,
            "a rule that carries a stage label must have a name",
        ));
    }
    if next.is_some() && name.is_empty() {
        return Err(ConfigError::field(
            &prefix,
            "a rule that carries next must have a name",
        ));
    }
    let matcher = match (&stage, m.get("match")) {
        (Some(_), _) => None,
        (None, v) => Some(matcher::build_match(v, &format!("{prefix}.match"))?),
    };
    let selection = DispatchSelection {
        agent: agent_kind(m, &prefix)?,
        template: template_path(m, &prefix)?,
    };
    let kind = RuleKind::resolve(&selection, default, workflow_kind);
    let settings = settings_block(m, &prefix, &name, &kind)?;
    Ok(DispatchRule {
        name,
        stage,
        next: next.map(|n| n.trim().to_string()),
        matcher,
        selection,
        settings,
    })
}

/// Unknown keys first, then "at least one of …" (`next` alone does not count).
fn check_keys(m: &Map<String, Value>, prefix: &str) -> Result<(), ConfigError> {
    for key in m.keys() {
        if !RULE_KEYS.contains(&key.as_str()) && registry::agent(key).is_none() {
            let known = RULE_KEYS
                .iter()
                .copied()
                .chain(registry::AGENTS.iter().map(|d| d.kind));
            let hint = closest(key, known)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(ConfigError::field(
                format!("{prefix}.{key}"),
                format!(
                    "unknown rule key; a rule accepts name, stage, next, match, agent, template, or a settings block named for an agent kind{hint}"
                ),
            ));
        }
    }
    let selects = m.keys().any(|k| {
        ["match", "stage", "agent", "template"].contains(&k.as_str())
            || registry::agent(k).is_some()
    });
    if !selects {
        return Err(ConfigError::field(
            prefix,
            "rule must specify at least one of match, stage, agent, template, or a settings block",
        ));
    }
    Ok(())
}

fn rule_name(m: &Map<String, Value>, prefix: &str) -> Result<String, ConfigError> {
    let field = format!("{prefix}.name");
    let name = match m.get("name") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ConfigError::field(
                field,
                format!("expected a rule name, got {}", shape(other)),
            ));
        }
    };
    if !valid_name(&name) {
        return Err(ConfigError::field(
            field,
            format!("rule name {name:?} must match ^[a-z][a-z0-9_-]*$"),
        ));
    }
    Ok(name)
}

/// `^[a-z][a-z0-9_-]*$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// `stage` / `next`: text with a character other than white space (kept as written).
fn text(
    m: &Map<String, Value>,
    key: &str,
    prefix: &str,
    what: &str,
    blank: &str,
) -> Result<Option<String>, ConfigError> {
    let field = format!("{prefix}.{key}");
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(Value::String(_)) | Some(Value::Null) => Err(ConfigError::field(field, blank)),
        Some(other) => Err(ConfigError::field(
            field,
            format!("expected {what}, got {}", shape(other)),
        )),
    }
}

/// `agent` of a rule or of `dispatch.default`: a registered kind.
pub(super) fn agent_kind(
    m: &Map<String, Value>,
    prefix: &str,
) -> Result<Option<String>, ConfigError> {
    let field = format!("{prefix}.agent");
    match m.get("agent") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(k)) if registry::agent(k.trim()).is_some() => {
            Ok(Some(k.trim().to_string()))
        }
        Some(Value::String(k)) => Err(ConfigError::field(field, registry::unsupported_agent(k))),
        Some(other) => Err(ConfigError::field(
            field,
            format!("expected an agent kind, got {}", shape(other)),
        )),
    }
}

/// `template` of a rule or of `dispatch.default`, as written (read and checked later).
pub(super) fn template_path(
    m: &Map<String, Value>,
    prefix: &str,
) -> Result<Option<String>, ConfigError> {
    let field = format!("{prefix}.template");
    match m.get("template") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(p)) if !p.trim().is_empty() => Ok(Some(p.clone())),
        Some(Value::String(_)) => Err(ConfigError::field(field, "needs a template path")),
        Some(other) => Err(ConfigError::field(
            field,
            format!("expected a template path, got {}", shape(other)),
        )),
    }
}

/// The kind a rule runs and where it came from (for the kind mismatch message).
struct RuleKind {
    kind: String,
    from: &'static str,
}

impl RuleKind {
    fn resolve(
        sel: &DispatchSelection,
        default: &DispatchSelection,
        workflow_kind: &str,
    ) -> RuleKind {
        match (&sel.agent, &default.agent) {
            (Some(k), _) => RuleKind {
                kind: k.clone(),
                from: "",
            },
            (None, Some(k)) => RuleKind {
                kind: k.clone(),
                from: ", taken from dispatch.default.agent",
            },
            (None, None) => RuleKind {
                kind: workflow_kind.to_string(),
                from: ", taken from agent.kind",
            },
        }
    }
}

/// The rule's settings block: named for the kind it runs, a map, no key the `agent` section
/// owns, on a named rule not called `default`.
fn settings_block(
    m: &Map<String, Value>,
    prefix: &str,
    name: &str,
    kind: &RuleKind,
) -> Result<Option<Map<String, Value>>, ConfigError> {
    let mut found = None;
    for (key, value) in m.iter().filter(|(k, _)| registry::agent(k).is_some()) {
        let field = format!("{prefix}.{key}");
        if *key != kind.kind {
            return Err(ConfigError::field(
                field,
                format!(
                    "settings block for agent kind {key:?}, but this rule runs agent kind {:?}{}",
                    kind.kind, kind.from
                ),
            ));
        }
        let block = value.as_object().ok_or_else(|| {
            ConfigError::field(
                &field,
                format!(
                    "a settings block must be a map (write {{}} for an empty one), got {}",
                    shape(value)
                ),
            )
        })?;
        if let Some(k) = block
            .keys()
            .find(|k| FORBIDDEN_SETTINGS_KEYS.contains(&k.as_str()))
        {
            return Err(ConfigError::field(
                format!("{field}.{k}"),
                format!(
                    "a rule's settings block cannot write {k}; it comes from the agent section, which is workflow-wide"
                ),
            ));
        }
        found = Some(block.clone());
    }
    if found.is_some() && name.is_empty() {
        return Err(ConfigError::field(
            prefix,
            "a rule that carries a settings block must have a name",
        ));
    }
    if found.is_some() && name == DEFAULT_RULE_NAME {
        return Err(ConfigError::field(
            format!("{prefix}.name"),
            "a rule that carries a settings block cannot be named \"default\", the name run history gives the dispatch.default selection",
        ));
    }
    Ok(found)
}
