//! A rule's `match` block → [`RuleMatch`]: the six keys, globs checked, the `title` phrases
//! and the one-operator `priority` predicate.

use serde_json::{Map, Value};

use super::super::coerce::{coerce_int, display_value};
use super::super::dispatch::{PriorityPredicate, RuleMatch};
use super::super::error::ConfigError;
use super::super::validate::closest;
use super::shape;

const MATCH_KEYS: &[&str] = &[
    "labels",
    "issue_type",
    "priority",
    "identifier",
    "assignee",
    "title",
];
const PRIORITY_OPS: &[&str] = &["eq", "lt", "lte", "gt", "gte", "in"];

/// `v` is the value of `match` (absent or null: a catch-all).
pub(super) fn build_match(v: Option<&Value>, prefix: &str) -> Result<RuleMatch, ConfigError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(RuleMatch::default()),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(super::not_a_map(prefix, other)),
    };
    if let Some(key) = m.keys().find(|k| !MATCH_KEYS.contains(&k.as_str())) {
        let hint = closest(key, MATCH_KEYS.iter().copied())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        return Err(ConfigError::field(
            format!("{prefix}.{key}"),
            format!(
                "unknown match key; match accepts labels, issue_type, priority, identifier, assignee and title{hint}"
            ),
        ));
    }
    let field = |key: &str| format!("{prefix}.{key}");
    Ok(RuleMatch {
        labels: globs(m, "labels", &field("labels"))?,
        issue_type: strings(m.get("issue_type"), &field("issue_type"))?,
        title: titles(m, &field("title"))?,
        identifier: globs(m, "identifier", &field("identifier"))?,
        assignee: strings(m.get("assignee"), &field("assignee"))?,
        priority: match m.get("priority") {
            None => None,
            Some(v) => Some(priority(v, &field("priority"))?),
        },
    })
}

/// A string or a list of strings; null and `[]` read as empty (the key takes no part).
/// Each item is returned with the field that names it (`[<j>]` for a list element).
fn items(v: Option<&Value>, field: &str) -> Result<Vec<(String, String)>, ConfigError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![(s.clone(), field.to_string())]),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(j, item)| {
                let f = format!("{field}[{j}]");
                match item {
                    Value::String(s) => Ok((s.clone(), f)),
                    other => Err(ConfigError::field(
                        f,
                        format!("expected a string, got {}", shape(other)),
                    )),
                }
            })
            .collect(),
        Some(other) => Err(ConfigError::field(
            field,
            format!(
                "expected a string or a list of strings, got {}",
                shape(other)
            ),
        )),
    }
}

fn strings(v: Option<&Value>, field: &str) -> Result<Vec<String>, ConfigError> {
    Ok(items(v, field)?.into_iter().map(|(s, _)| s).collect())
}

/// `labels` / `identifier`: each a valid glob.
fn globs(m: &Map<String, Value>, key: &str, field: &str) -> Result<Vec<String>, ConfigError> {
    let list = items(m.get(key), field)?;
    for (pattern, f) in &list {
        if let Err(e) = glob::Pattern::new(pattern) {
            return Err(ConfigError::field(
                f,
                format!("malformed glob {pattern:?}: {e}"),
            ));
        }
    }
    Ok(list.into_iter().map(|(s, _)| s).collect())
}

/// `title`: at least one phrase, each text with a character other than white space.
fn titles(m: &Map<String, Value>, field: &str) -> Result<Vec<String>, ConfigError> {
    let list = match m.get("title") {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) if !list.is_empty() => list
            .iter()
            .enumerate()
            .map(|(j, v)| (v, format!("{field}[{j}]")))
            .collect(),
        Some(Value::Null) | Some(Value::Array(_)) => {
            return Err(ConfigError::field(
                field,
                "needs at least one phrase; remove the key to leave the title out of the match",
            ));
        }
        Some(v) => vec![(v, field.to_string())],
    };
    list.into_iter().map(|(v, f)| phrase(v, &f)).collect()
}

fn phrase(v: &Value, field: &str) -> Result<String, ConfigError> {
    let quoting = match v {
        Value::String(s) if s.trim().is_empty() => {
            return Err(ConfigError::field(
                field,
                "needs a phrase with a character other than white space",
            ));
        }
        Value::String(s) => return Ok(s.clone()),
        Value::Array(_) => {
            "YAML read this phrase as a list; quote a phrase that starts with \"[\", for example \"[docs]\""
        }
        Value::Object(_) => {
            "YAML read this phrase as a mapping; quote a phrase that contains \": \", for example \"fix: typo\""
        }
        Value::Number(_) => {
            "YAML read this phrase as a number; quote it to match it as text, for example \"2024\""
        }
        Value::Bool(_) => {
            "YAML read this phrase as a true/false value; quote it to match it as text, for example \"yes\""
        }
        Value::Null => "needs a phrase with a character other than white space",
    };
    Err(ConfigError::field(field, quoting))
}

/// `priority`: exactly one operator; `in` takes a list.
fn priority(v: &Value, field: &str) -> Result<PriorityPredicate, ConfigError> {
    let m = match v {
        Value::Object(m) => m,
        other => {
            return Err(ConfigError::field(
                field,
                format!(
                    "expected a map with one operator of eq, lt, lte, gt, gte or in, got {}",
                    shape(other)
                ),
            ));
        }
    };
    if let Some(op) = m.keys().find(|k| !PRIORITY_OPS.contains(&k.as_str())) {
        return Err(ConfigError::field(
            format!("{field}.{op}"),
            "unknown priority operator; use one of eq, lt, lte, gt, gte or in",
        ));
    }
    let (op, value) = match m.iter().collect::<Vec<_>>().as_slice() {
        [(op, value)] => (op.as_str(), *value),
        [] => {
            return Err(ConfigError::field(
                field,
                "priority predicate carries no operator; write exactly one of eq, lt, lte, gt, gte or in",
            ));
        }
        many => {
            let ops: Vec<&str> = many.iter().map(|(k, _)| k.as_str()).collect();
            return Err(ConfigError::field(
                field,
                format!(
                    "priority predicate carries more than one operator ({}); write exactly one",
                    ops.join(", ")
                ),
            ));
        }
    };
    let f = format!("{field}.{op}");
    if op == "in" {
        let list = value.as_array().filter(|l| !l.is_empty()).ok_or_else(|| {
            ConfigError::field(
                &f,
                "in needs a non-empty list of integers, for example { in: [1, 2] }",
            )
        })?;
        return list
            .iter()
            .map(|v| integer(v, &f))
            .collect::<Result<_, _>>()
            .map(PriorityPredicate::In);
    }
    let n = integer(value, &f)?;
    Ok(match op {
        "eq" => PriorityPredicate::Eq(n),
        "lt" => PriorityPredicate::Lt(n),
        "lte" => PriorityPredicate::Lte(n),
        "gt" => PriorityPredicate::Gt(n),
        _ => PriorityPredicate::Gte(n),
    })
}

fn integer(v: &Value, field: &str) -> Result<i64, ConfigError> {
    match v {
        Value::Null => Err(ConfigError::field(field, "needs an integer value")),
        v => coerce_int(v).ok_or_else(|| {
            ConfigError::field(
                field,
                format!("invalid integer value: {}", display_value(v)),
            )
        }),
    }
}
