//! `token_rates`: the operator's rates, keyed by agent kind (prices every model of the kind)
//! or by model name. A rate that is not a non-negative number is a warning and stays unset,
//! never fatal, so a typo in a rate cannot stop the service.

use serde_json::{Map, Value};

use super::error::ConfigWarning;
use super::schema::ServiceConfig;
use crate::pricing::{RateEntry, TokenClass, TokenRates};
use crate::registry;

/// The rate key of each class inside an entry.
const RATE_KEYS: [(TokenClass, &str); 4] = [
    (TokenClass::Input, "input_per_mtok"),
    (TokenClass::Output, "output_per_mtok"),
    (TokenClass::CacheRead, "cache_read_per_mtok"),
    (TokenClass::CacheWrite, "cache_write_per_mtok"),
];

pub use super::schema::RejectedRates;

impl ServiceConfig {
    /// Applies the reload rule of `token_rates`: an entry this load gives an invalid rate
    /// keeps the rate `previous` (the rates in force) has for that class.
    pub fn keep_previous_rates(&mut self, previous: &TokenRates) {
        for (key, class) in &self.token_rates_rejected.0 {
            let (Some(next), Some(prev)) = (
                self.token_rates.entries.get_mut(key),
                previous.entries.get(key),
            ) else {
                continue;
            };
            if next.per_kind == prev.per_kind && next.rates.get(*class).is_none() {
                next.rates.set(*class, prev.rates.get(*class));
            }
        }
    }
}

/// The entries of `raw["token_rates"]` and the rates rejected; a warning for everything
/// ignored.
pub fn build_token_rates(
    raw: &Map<String, Value>,
    warnings: &mut Vec<ConfigWarning>,
) -> (TokenRates, RejectedRates) {
    let mut out = TokenRates::default();
    let mut rejected = RejectedRates::default();
    let section = match raw.get("token_rates") {
        None | Some(Value::Null) => return (out, rejected),
        Some(Value::Object(m)) => m,
        Some(other) => {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                "token_rates",
                format!("expected a mapping, got {}; ignored", kind_of(other)),
            ));
            return (out, rejected);
        }
    };
    for (key, value) in section {
        if let Some(entry) = build_entry(key, value, warnings, &mut rejected) {
            out.entries.insert(key.clone(), entry);
        }
    }
    (out, rejected)
}

fn build_entry(
    key: &str,
    value: &Value,
    warnings: &mut Vec<ConfigWarning>,
    rejected: &mut RejectedRates,
) -> Option<RateEntry> {
    let field = format!("token_rates.{key}");
    let Value::Object(m) = value else {
        warnings.push(ConfigWarning::new(
            "type_mismatch",
            field,
            format!(
                "expected a mapping of rates, got {}; ignored",
                kind_of(value)
            ),
        ));
        return None;
    };
    let mut entry = RateEntry {
        per_kind: registry::agent(key).is_some(),
        ..RateEntry::default()
    };
    for (k, v) in m {
        match RATE_KEYS.iter().find(|(_, name)| name == k) {
            Some((class, _)) => {
                let r = rate(&field, k, v, warnings);
                if r.is_none() && !v.is_null() {
                    rejected.0.insert((key.to_string(), *class));
                }
                entry.rates.set(*class, r);
            }
            None => warnings.push(ConfigWarning::new(
                "unknown_key",
                format!("{field}.{k}"),
                "not a rate key (input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_write_per_mtok); ignored",
            )),
        }
    }
    Some(entry)
}

fn rate(field: &str, key: &str, v: &Value, warnings: &mut Vec<ConfigWarning>) -> Option<f64> {
    if v.is_null() {
        return None;
    }
    let n = v.as_f64().filter(|n| n.is_finite() && *n >= 0.0);
    if n.is_none() {
        warnings.push(ConfigWarning::new(
            "invalid_value",
            format!("{field}.{key}"),
            format!(
                "must be a non-negative number of USD per million tokens, got {}; ignored",
                super::coerce::display_value(v)
            ),
        ));
    }
    n
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> (TokenRates, Vec<ConfigWarning>) {
        let v: Value = serde_yaml::from_str(yaml).unwrap();
        let raw = v.as_object().unwrap().clone();
        let mut w = Vec::new();
        (build_token_rates(&raw, &mut w).0, w)
    }

    #[test]
    fn kind_and_model_entries_are_told_apart_by_the_agent_registry() {
        let (t, w) = parse(
            "token_rates:\n  claude-code: {input_per_mtok: 3, output_per_mtok: 15}\n  gpt-5: {input_per_mtok: 1.25}\n",
        );
        assert!(w.is_empty(), "{w:?}");
        let k = t.entries["claude-code"];
        assert!(k.per_kind && k.complete());
        assert_eq!(k.rates.output_per_mtok, Some(15.0));
        assert!(!t.entries["gpt-5"].per_kind);
    }

    #[test]
    fn a_bad_rate_is_a_warning_and_stays_unset() {
        let (t, w) = parse(
            "token_rates:\n  claude-code: {input_per_mtok: -1, output_per_mtok: cheap, cache_per_mtok: 1}\n  x: 5\n",
        );
        let e = t.entries["claude-code"];
        assert_eq!(e.rates.input_per_mtok, None);
        assert_eq!(e.rates.output_per_mtok, None);
        assert!(!t.entries.contains_key("x"));
        let fields: Vec<&str> = w.iter().map(|w| w.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "token_rates.claude-code.input_per_mtok",
                "token_rates.claude-code.output_per_mtok",
                "token_rates.claude-code.cache_per_mtok",
                "token_rates.x",
            ]
        );
    }

    #[test]
    fn a_reload_keeps_the_previous_rate_of_a_rate_it_makes_invalid() {
        let load = |yaml: &str| {
            let text = format!(
                "---\ntracker: {{kind: file, active_states: [To Do], terminal_states: [Done]}}\n{yaml}---\nx\n"
            );
            crate::config::parse_workflow(
                &text,
                std::path::Path::new("/w/WORKFLOW.md"),
                &Default::default(),
            )
            .unwrap()
            .config
        };
        let first = load("token_rates:\n  claude-code: {input_per_mtok: 3, output_per_mtok: 15}\n");
        let mut next = load(
            "token_rates:\n  claude-code: {input_per_mtok: bad, output_per_mtok: 16, cache_read_per_mtok: -1}\n",
        );
        next.keep_previous_rates(&first.token_rates);
        let e = next.token_rates.entries["claude-code"];
        assert_eq!(e.rates.input_per_mtok, Some(3.0), "kept");
        assert_eq!(e.rates.output_per_mtok, Some(16.0), "replaced");
        assert_eq!(
            e.rates.cache_read_per_mtok, None,
            "no previous rate to keep"
        );
        let mut removed = load("token_rates:\n  claude-code: {output_per_mtok: 16}\n");
        removed.keep_previous_rates(&first.token_rates);
        assert_eq!(
            removed.token_rates.entries["claude-code"]
                .rates
                .input_per_mtok,
            None,
            "a rate the reload leaves out is unset, not kept"
        );
    }
}
