//! `SORTIE_*` environment overrides. Precedence: real environment >
//! `.env` > YAML > default; an empty value is ignored. An override replaces the YAML value and
//! switches `$VAR` expansion off for that field.
//!
//! Beyond Sortie's 24 overrides, `SORTIE_TRACKER_NO_CHANGE_STATE` and `SORTIE_AGENT_MAX_TOKENS`
//! exist for the two newer keys, following their neighbours, and `SORTIE_MOCK_TIME_SCALE` sets
//! the mock agent's `mock.time_scale` (how `sortie demo --speed` and tests run the demo's
//! script faster).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::error::ConfigError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Csv,
    Bool,
    Int,
    Num,
}

/// (environment variable, dotted field, value kind).
const OVERRIDES: &[(&str, &str, Kind)] = &[
    ("SORTIE_TRACKER_KIND", "tracker.kind", Kind::Str),
    ("SORTIE_TRACKER_ENDPOINT", "tracker.endpoint", Kind::Str),
    ("SORTIE_TRACKER_API_KEY", "tracker.api_key", Kind::Str),
    ("SORTIE_TRACKER_PROJECT", "tracker.project", Kind::Str),
    (
        "SORTIE_TRACKER_QUERY_FILTER",
        "tracker.query_filter",
        Kind::Str,
    ),
    (
        "SORTIE_TRACKER_HANDOFF_STATE",
        "tracker.handoff_state",
        Kind::Str,
    ),
    (
        "SORTIE_TRACKER_IN_PROGRESS_STATE",
        "tracker.in_progress_state",
        Kind::Str,
    ),
    (
        "SORTIE_TRACKER_NO_CHANGE_STATE",
        "tracker.no_change_state",
        Kind::Str,
    ),
    (
        "SORTIE_TRACKER_ACTIVE_STATES",
        "tracker.active_states",
        Kind::Csv,
    ),
    (
        "SORTIE_TRACKER_TERMINAL_STATES",
        "tracker.terminal_states",
        Kind::Csv,
    ),
    (
        "SORTIE_TRACKER_COMMENTS_ON_DISPATCH",
        "tracker.comments.on_dispatch",
        Kind::Bool,
    ),
    (
        "SORTIE_TRACKER_COMMENTS_ON_COMPLETION",
        "tracker.comments.on_completion",
        Kind::Bool,
    ),
    (
        "SORTIE_TRACKER_COMMENTS_ON_FAILURE",
        "tracker.comments.on_failure",
        Kind::Bool,
    ),
    (
        "SORTIE_POLLING_INTERVAL_MS",
        "polling.interval_ms",
        Kind::Int,
    ),
    ("SORTIE_WORKSPACE_ROOT", "workspace.root", Kind::Str),
    ("SORTIE_AGENT_KIND", "agent.kind", Kind::Str),
    ("SORTIE_AGENT_COMMAND", "agent.command", Kind::Str),
    (
        "SORTIE_AGENT_TURN_TIMEOUT_MS",
        "agent.turn_timeout_ms",
        Kind::Int,
    ),
    (
        "SORTIE_AGENT_READ_TIMEOUT_MS",
        "agent.read_timeout_ms",
        Kind::Int,
    ),
    (
        "SORTIE_AGENT_STALL_TIMEOUT_MS",
        "agent.stall_timeout_ms",
        Kind::Int,
    ),
    (
        "SORTIE_AGENT_MAX_CONCURRENT_AGENTS",
        "agent.max_concurrent_agents",
        Kind::Int,
    ),
    ("SORTIE_AGENT_MAX_TURNS", "agent.max_turns", Kind::Int),
    (
        "SORTIE_AGENT_MAX_RETRY_BACKOFF_MS",
        "agent.max_retry_backoff_ms",
        Kind::Int,
    ),
    ("SORTIE_AGENT_MAX_SESSIONS", "agent.max_sessions", Kind::Int),
    ("SORTIE_AGENT_MAX_TOKENS", "agent.max_tokens", Kind::Int),
    ("SORTIE_DB_PATH", "db_path", Kind::Str),
    ("SORTIE_MOCK_TIME_SCALE", "mock.time_scale", Kind::Num),
];

/// Which dotted fields an override set, and the env var that set each (for error suffixes).
#[derive(Debug, Default, Clone)]
pub struct Overridden {
    pub fields: BTreeMap<String, String>,
}

impl Overridden {
    pub fn contains(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }

    /// Appends ` (from SORTIE_X)` to a field error when that field came from an override.
    pub fn annotate(&self, err: ConfigError) -> ConfigError {
        match err {
            ConfigError::Field { field, message } => match self.fields.get(&field) {
                Some(var) => ConfigError::Field {
                    message: format!("{message} (from {var})"),
                    field,
                },
                None => ConfigError::Field { field, message },
            },
            other => other,
        }
    }
}

/// Applies overrides from `env` (real environment) then `dotenv` into `raw`.
pub fn apply_overrides(
    raw: &mut Map<String, Value>,
    env: &BTreeMap<String, String>,
    dotenv: &BTreeMap<String, String>,
) -> Result<Overridden, ConfigError> {
    let mut done = Overridden::default();
    for &(var, field, kind) in OVERRIDES {
        let value = [env.get(var), dotenv.get(var)]
            .into_iter()
            .flatten()
            .find(|v| !v.is_empty());
        let Some(value) = value else { continue };
        let parsed = parse(value, kind)
            .map_err(|msg| ConfigError::field(field, format!("{msg} (from {var})")))?;
        set_dotted(raw, field, parsed);
        done.fields.insert(field.to_string(), var.to_string());
    }
    Ok(done)
}

/// An override variable's value that does not parse as its field's kind, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OverrideValueError {
    Bool(String),
    Int(String),
    Num(String),
}

impl std::fmt::Display for OverrideValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OverrideValueError::Bool(v) => {
                write!(f, "invalid boolean value: {v} (expected true/false/1/0)")
            }
            OverrideValueError::Int(v) => write!(f, "invalid integer value: {v}"),
            OverrideValueError::Num(v) => write!(f, "invalid number value: {v}"),
        }
    }
}

fn parse(value: &str, kind: Kind) -> Result<Value, OverrideValueError> {
    match kind {
        Kind::Str => Ok(Value::String(value.to_string())),
        Kind::Csv => Ok(Value::Array(
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
        Kind::Bool => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(OverrideValueError::Bool(value.to_string())),
        },
        Kind::Int => value
            .trim()
            .parse::<i64>()
            .map(|n| Value::Number(n.into()))
            .map_err(|_| OverrideValueError::Int(value.to_string())),
        Kind::Num => value
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| OverrideValueError::Num(value.to_string())),
    }
}

/// Sets `a.b.c` in `raw`, replacing any non-map section on the way.
fn set_dotted(raw: &mut Map<String, Value>, field: &str, value: Value) {
    let mut parts: Vec<&str> = field.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cur = raw;
    for part in parts {
        let entry = cur
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(next) = entry else { return };
        cur = next;
    }
    cur.insert(last.to_string(), value);
}

/// Names of every recognised override variable (for docs and `validate`).
pub fn override_vars() -> BTreeSet<&'static str> {
    OVERRIDES.iter().map(|(v, _, _)| *v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn raw(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn env_beats_dotenv_beats_yaml_and_empty_is_ignored() {
        let mut r = raw(json!({"tracker": {"kind": "yaml", "project": "Y", "endpoint": "E"}}));
        let env = map(&[
            ("SORTIE_TRACKER_KIND", "env"),
            ("SORTIE_TRACKER_PROJECT", ""),
        ]);
        let dot = map(&[
            ("SORTIE_TRACKER_KIND", "dot"),
            ("SORTIE_TRACKER_PROJECT", "D"),
        ]);
        let o = apply_overrides(&mut r, &env, &dot).unwrap();
        assert_eq!(r["tracker"]["kind"], "env");
        assert_eq!(r["tracker"]["project"], "D");
        assert_eq!(r["tracker"]["endpoint"], "E");
        assert!(o.contains("tracker.kind") && o.contains("tracker.project"));
        assert!(!o.contains("tracker.endpoint"));
    }

    #[test]
    fn typed_values() {
        let mut r = Map::new();
        let env = map(&[
            ("SORTIE_TRACKER_ACTIVE_STATES", " To Do, ,In Progress ,"),
            ("SORTIE_TRACKER_COMMENTS_ON_FAILURE", "TRUE"),
            ("SORTIE_TRACKER_COMMENTS_ON_DISPATCH", "0"),
            ("SORTIE_AGENT_MAX_TURNS", " 7 "),
        ]);
        apply_overrides(&mut r, &env, &BTreeMap::new()).unwrap();
        assert_eq!(
            r["tracker"]["active_states"],
            json!(["To Do", "In Progress"])
        );
        assert_eq!(r["tracker"]["comments"]["on_failure"], json!(true));
        assert_eq!(r["tracker"]["comments"]["on_dispatch"], json!(false));
        assert_eq!(r["agent"]["max_turns"], json!(7));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let mut r = Map::new();
        let e = apply_overrides(
            &mut r,
            &map(&[("SORTIE_POLLING_INTERVAL_MS", "soon")]),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: polling.interval_ms: invalid integer value: soon (from SORTIE_POLLING_INTERVAL_MS)"
        );
        let e = apply_overrides(
            &mut r,
            &map(&[("SORTIE_TRACKER_COMMENTS_ON_DISPATCH", "yes")]),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: tracker.comments.on_dispatch: invalid boolean value: yes (expected true/false/1/0) (from SORTIE_TRACKER_COMMENTS_ON_DISPATCH)"
        );
    }

    #[test]
    fn non_map_section_is_replaced() {
        let mut r = raw(json!({"agent": 5}));
        apply_overrides(
            &mut r,
            &map(&[("SORTIE_AGENT_KIND", "mock")]),
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(r["agent"], json!({"kind": "mock"}));
    }

    #[test]
    fn table_has_the_spec_overrides_plus_two() {
        assert_eq!(override_vars().len(), 27);
    }
}
