//! `agent.env` and `agent.inherit_env`: what an agent gets from sortie's environment beyond
//! the system basics and its kind's variables (see `crate::child_env`).
//!
//! ```yaml
//! agent:
//!   env:
//!     - GH_TOKEN            # passed from sortie's environment (named exactly: passed even
//!                           # when it holds the tracker token)
//!     - OTEL_*              # every variable with the prefix
//!     - NODE_OPTIONS: --max-old-space-size=4096
//!     - API_TOKEN: $AGENT_API_TOKEN   # a value; `$VAR` reads sortie's environment
//!   inherit_env: false      # true: the whole environment, as Sortie passes it
//! ```
//!
//! A map (`env: {NAME: value}`) is read like the list's `NAME: value` entries. An entry that is
//! no variable name is left out with a warning. The tracker token and every
//! `SORTIE_WEBHOOK_SECRET_*` value are withheld from variables that hold them unless named
//! exactly.

use serde_json::{Map, Value};

use super::coerce::type_name;
use super::env::expand_env;
use super::error::{ConfigError, ConfigWarning};
use crate::child_env::{EnvPolicy, valid_pattern};

/// The prefix of the webhook secrets' variables.
const WEBHOOK_SECRET_PREFIX: &str = "SORTIE_WEBHOOK_SECRET_";

/// Builds the policy from the `agent:` section; `tracker_key` is the resolved tracker token.
/// Values that came from `$VAR` are appended to `secrets` (masked like the tracker key).
pub fn build_agent_env(
    m: &Map<String, Value>,
    env: &std::collections::BTreeMap<String, String>,
    tracker_key: Option<&str>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) -> Result<EnvPolicy, ConfigError> {
    let inherit_all = match m.get("inherit_env") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ConfigError::field(
                "agent.inherit_env",
                format!("expected bool, got {}", type_name(other)),
            ));
        }
    };
    let mut policy = EnvPolicy {
        inherit_all,
        ..Default::default()
    };
    match m.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let field = format!("agent.env[{i}]");
                match item {
                    Value::String(name) => add_name(&mut policy, name.trim(), &field, warnings),
                    Value::Object(pairs) => {
                        for (k, v) in pairs {
                            add_value(&mut policy, k, v, env, &field, warnings, secrets);
                        }
                    }
                    other => warnings.push(ConfigWarning::new(
                        "invalid_value",
                        field,
                        format!(
                            "expected a variable name or NAME: value, got {}; entry ignored",
                            type_name(other)
                        ),
                    )),
                }
            }
        }
        Some(Value::Object(pairs)) => {
            for (k, v) in pairs {
                let field = format!("agent.env.{k}");
                add_value(&mut policy, k, v, env, &field, warnings, secrets);
            }
        }
        Some(other) => {
            return Err(ConfigError::field(
                "agent.env",
                format!("expected list or map, got {}", type_name(other)),
            ));
        }
    }
    policy.withheld = tracker_key
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .into_iter()
        .chain(
            env.iter()
                .filter(|(k, v)| k.starts_with(WEBHOOK_SECRET_PREFIX) && !v.is_empty())
                .map(|(_, v)| v.clone()),
        )
        .collect();
    Ok(policy)
}

fn add_name(policy: &mut EnvPolicy, name: &str, field: &str, warnings: &mut Vec<ConfigWarning>) {
    if !valid_pattern(name) {
        warnings.push(ConfigWarning::new(
            "invalid_value",
            field,
            format!("{name:?} is not a variable name (or a prefix ending in *); entry ignored"),
        ));
        return;
    }
    if name.starts_with(crate::child_env::SORTIE_PREFIX) {
        warnings.push(ConfigWarning::new(
            "invalid_value",
            field,
            format!(
                "{name:?} is one of sortie's own variables, which never reach an agent; entry ignored"
            ),
        ));
        return;
    }
    policy.pass.push(name.to_string());
}

fn add_value(
    policy: &mut EnvPolicy,
    name: &str,
    value: &Value,
    env: &std::collections::BTreeMap<String, String>,
    field: &str,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) {
    let name = name.trim();
    if !valid_pattern(name) || name.ends_with('*') {
        warnings.push(ConfigWarning::new(
            "invalid_value",
            field,
            format!("{name:?} is not a variable name; entry ignored"),
        ));
        return;
    }
    let raw = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => {
            warnings.push(ConfigWarning::new(
                "invalid_value",
                field,
                format!(
                    "expected a string value, got {}; entry ignored",
                    type_name(other)
                ),
            ));
            return;
        }
    };
    let expanded = expand_env(&raw, env);
    secrets.extend(expanded.substituted.into_iter().filter(|s| !s.is_empty()));
    policy.set.retain(|(k, _)| k != name);
    policy.set.push((name.to_string(), expanded.text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn build(yaml: &str, env: &[(&str, &str)]) -> (EnvPolicy, Vec<ConfigWarning>, Vec<String>) {
        let m: Map<String, Value> = serde_yaml::from_str(yaml).unwrap();
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (mut w, mut s) = (Vec::new(), Vec::new());
        let p = build_agent_env(&m, &env, Some("tk"), &mut w, &mut s).unwrap();
        (p, w, s)
    }

    #[test]
    fn names_patterns_and_values_are_read_and_bad_entries_warned() {
        let (p, w, s) = build(
            "env:\n  - GH_TOKEN\n  - OTEL_*\n  - FOO: bar\n  - TOK: $SRC\n  - bad name\n  - SORTIE_TRACKER_API_KEY\n  - 3\ninherit_env: true\n",
            &[("SRC", "s3cr3t"), ("SORTIE_WEBHOOK_SECRET_GITHUB", "wh")],
        );
        assert!(p.inherit_all);
        assert_eq!(p.pass, ["GH_TOKEN", "OTEL_*"]);
        assert_eq!(
            p.set,
            [
                ("FOO".to_string(), "bar".to_string()),
                ("TOK".to_string(), "s3cr3t".to_string())
            ]
        );
        assert_eq!(p.withheld, ["tk", "wh"]);
        assert_eq!(s, ["s3cr3t"]);
        assert_eq!(w.len(), 3, "{w:?}");
    }

    #[test]
    fn a_map_reads_as_values_and_a_wrong_type_is_an_error() {
        let (p, _, _) = build("env: {A: '1', B: 2}\n", &[]);
        assert_eq!(p.set.len(), 2);
        let m: Map<String, Value> = serde_yaml::from_str("env: 3\n").unwrap();
        let err = build_agent_env(&m, &BTreeMap::new(), None, &mut Vec::new(), &mut Vec::new());
        assert!(err.is_err());
        let m: Map<String, Value> = serde_yaml::from_str("inherit_env: yes please\n").unwrap();
        let err = build_agent_env(&m, &BTreeMap::new(), None, &mut Vec::new(), &mut Vec::new());
        assert!(err.is_err());
    }
}
