//! Generic coercion rules over YAML decoded into `serde_json` values (integers given as floats
//! or strings, strings read leniently, lists with non-string items), with Go's error texts, so
//! existing Sortie WORKFLOW.md files load and fail exactly as they did.

use serde_json::{Map, Value};

use super::error::ConfigError;

/// Go's `%T` name of a decoded YAML value, so `expected string, got <type>` texts match
/// the Go implementation's messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// How a scalar prints in `invalid integer value: <v>` (Go `%v`: strings unquoted).
pub fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_string(),
        other => other.to_string(),
    }
}

/// Integer coercion: YAML int, float without fraction, or a string holding an int (trimmed).
pub fn coerce_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else if let Some(f) = n.as_f64() {
                // Integral and inside i64 range; anything else is not an integer.
                if f.fract() == 0.0 && f.abs() < 9.2e18 {
                    Some(f as i64)
                } else {
                    None
                }
            } else {
                None
            }
        }
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    }
}

/// Reads an integer field: `Ok(None)` when absent or null, an error naming `field` otherwise.
pub fn int_field(
    section: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<i64>, ConfigError> {
    match section.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => coerce_int(v).map(Some).ok_or_else(|| {
            ConfigError::field(
                field,
                format!("invalid integer value: {}", display_value(v)),
            )
        }),
    }
}

/// A string field: non-strings silently read as `""` (Go `extractString`).
pub fn string_field(section: &Map<String, Value>, key: &str) -> String {
    match section.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// A string field that must be a string when present (`expected string, got <type>`).
/// `Ok(None)` when absent or null.
pub fn strict_string_field(
    section: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, ConfigError> {
    match section.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(ConfigError::field(
            field,
            format!("expected string, got {}", type_name(v)),
        )),
    }
}

/// A list of strings: non-string items are stringified, a non-sequence reads as absent.
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => display_value(other),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A sub-map of `m`; `None` when absent or not a map (callers warn `type_mismatch`).
pub fn sub_map<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    m.get(key).and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_from_int_float_and_string() {
        assert_eq!(coerce_int(&json!(5)), Some(5));
        assert_eq!(coerce_int(&json!(-3)), Some(-3));
        assert_eq!(coerce_int(&json!(5.0)), Some(5));
        assert_eq!(coerce_int(&json!(" 42 ")), Some(42));
        assert_eq!(coerce_int(&json!(5.5)), None);
        assert_eq!(coerce_int(&json!("4x")), None);
        assert_eq!(coerce_int(&json!(true)), None);
        assert_eq!(coerce_int(&json!([1])), None);
    }

    #[test]
    fn int_field_error_text() {
        let m = json!({"n": "abc", "f": 1.5})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let e = int_field(&m, "n", "agent.max_turns").unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: agent.max_turns: invalid integer value: abc"
        );
        let e = int_field(&m, "f", "agent.max_turns").unwrap_err();
        assert_eq!(
            e.to_string(),
            "config: agent.max_turns: invalid integer value: 1.5"
        );
        assert_eq!(int_field(&m, "missing", "x").unwrap(), None);
    }

    #[test]
    fn strings_and_lists() {
        let m = json!({"s": "v", "n": 3, "l": ["a", 1, true], "bad": "x"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(string_field(&m, "s"), "v");
        assert_eq!(string_field(&m, "n"), "");
        assert_eq!(string_list(m.get("l")), vec!["a", "1", "true"]);
        assert!(string_list(m.get("bad")).is_empty());
        let e = strict_string_field(&m, "n", "db_path").unwrap_err();
        assert_eq!(e.to_string(), "config: db_path: expected string, got int");
    }

    #[test]
    fn go_type_names() {
        assert_eq!(type_name(&json!([1])), "[]interface {}");
        assert_eq!(type_name(&json!({})), "map[string]interface {}");
        assert_eq!(type_name(&json!(1.5)), "float64");
        assert_eq!(type_name(&json!(true)), "bool");
    }
}
