//! Template helper functions of the prompt contract (`toJSON`, `join`, `lower`) and the strict
//! field accessor the engine rewrites every field chain into.
//!
//! Why a custom accessor: gotmpl turns a field of nil into nil, while the contract says reading
//! `.issue.parent.identifier` with no parent is a render error. Routing field chains through
//! [`FIELD_FN`] keeps Go's strictness and lets the error name the whole path.

use std::sync::Arc;

use gotmpl::{FuncMap, TemplateError, Value};

/// Name of the internal accessor inserted by the AST rewrite (not callable from templates: the
/// unknown-function check rejects it in user source).
pub(crate) const FIELD_FN: &str = "__sortie_field";

/// Go builtins provided by gotmpl, plus the contract's helpers; any other identifier in a
/// template is a parse error.
pub(crate) const KNOWN_FUNCTIONS: &[&str] = &[
    "and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "print", "printf",
    "println", "slice", "call", "html", "js", "urlquery", "toJSON", "join", "lower",
];

/// The functions registered on every prompt template.
pub(crate) fn function_map() -> FuncMap {
    let mut map = FuncMap::new();
    map.insert("toJSON".to_string(), Arc::new(to_json));
    map.insert("join".to_string(), Arc::new(join));
    map.insert("lower".to_string(), Arc::new(lower));
    map.insert(FIELD_FN.to_string(), Arc::new(strict_field));
    map
}

fn exec_error(message: String) -> TemplateError {
    TemplateError::Exec(message)
}

fn expect_args(name: &str, args: &[Value], expected: usize) -> Result<(), TemplateError> {
    if args.len() == expected {
        Ok(())
    } else {
        Err(TemplateError::ArgCount {
            name: name.to_string(),
            expected,
            got: args.len(),
        })
    }
}

/// Go `%T` spelling of a value's type, as the contract's error messages use it.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "<nil>",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Uint(_) => "uint",
        Value::Float(_) => "float64",
        Value::String(_) => "string",
        Value::List(_) => "[]interface {}",
        Value::Map(_) => "map[string]interface {}",
        Value::Function(_) => "func",
    }
}

/// `toJSON v`: compact JSON like Go's `json.Marshal` (sorted map keys, `<>&` escaped).
fn to_json(args: &[Value]) -> Result<Value, TemplateError> {
    expect_args("toJSON", args, 1)?;
    let json = to_serde_json(&args[0]).map_err(|e| exec_error(format!("toJSON: {e}")))?;
    let text = serde_json::to_string(&json).map_err(|e| exec_error(format!("toJSON: {e}")))?;
    Ok(Value::String(go_html_escape_json(&text).into()))
}

/// A template value JSON cannot carry, worded as Go's encoder words it.
#[derive(Debug, Clone, PartialEq)]
enum Unencodable {
    /// NaN or an infinity.
    Float(f64),
    Function,
}

impl std::fmt::Display for Unencodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unencodable::Float(x) => write!(f, "json: unsupported value: {x}"),
            Unencodable::Function => f.write_str("json: unsupported type: func"),
        }
    }
}

fn to_serde_json(v: &Value) -> Result<serde_json::Value, Unencodable> {
    Ok(match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(n) => serde_json::Value::from(*n),
        Value::Uint(n) => serde_json::Value::from(*n),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or(Unencodable::Float(*f))?,
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::List(items) => serde_json::Value::Array(
            items
                .iter()
                .map(to_serde_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, item) in map.iter() {
                out.insert(k.to_string(), to_serde_json(item)?);
            }
            serde_json::Value::Object(out)
        }
        Value::Function(_) => return Err(Unencodable::Function),
    })
}

/// Go's encoder escapes these for HTML safety; they only occur inside JSON strings, where the
/// `\uXXXX` form is equivalent, so templates ported from Go render byte-identically.
fn go_html_escape_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}

/// `join sep list`: items formatted like Go's `%v`; the piped list arrives as the last argument.
fn join(args: &[Value]) -> Result<Value, TemplateError> {
    expect_args("join", args, 2)?;
    let sep = match &args[0] {
        Value::String(s) => s.clone(),
        other => {
            return Err(exec_error(format!(
                "join: separator must be a string, got {}",
                go_type_name(other)
            )));
        }
    };
    match &args[1] {
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
            Ok(Value::String(parts.join(&sep).into()))
        }
        other => Err(exec_error(format!(
            "join: unsupported type {}, want []string or []any",
            go_type_name(other)
        ))),
    }
}

/// `lower s`: Unicode lowercase of a string.
fn lower(args: &[Value]) -> Result<Value, TemplateError> {
    expect_args("lower", args, 1)?;
    match &args[0] {
        Value::String(s) => Ok(Value::String(s.to_lowercase().into())),
        other => Err(exec_error(format!(
            "lower: wrong type for value; expected string; got {}",
            go_type_name(other)
        ))),
    }
}

/// `__sortie_field base label key...`: walks `key...` from `base` with Go's strictness: an absent
/// map key and a field of nil are errors; `label` is how the base is spelled in the source.
fn strict_field(args: &[Value]) -> Result<Value, TemplateError> {
    let (base, label, keys) = match args {
        [base, Value::String(label), keys @ ..] => (base, label, keys),
        _ => return Err(exec_error(format!("{FIELD_FN}: malformed call"))),
    };
    let full = keys.iter().fold(label.to_string(), |mut path, k| {
        path.push('.');
        path.push_str(&k.to_string());
        path
    });
    let mut current = base.clone();
    let mut walked = label.to_string();
    for key in keys {
        let key = match key {
            Value::String(k) => k,
            _ => return Err(exec_error(format!("{FIELD_FN}: malformed call"))),
        };
        current = match &current {
            Value::Map(map) => match map.get(key.as_ref()) {
                Some(v) => v.clone(),
                None => {
                    return Err(exec_error(format!(
                        "map has no entry for key \"{key}\" (in {full})"
                    )));
                }
            },
            Value::Nil => {
                let what = if walked.is_empty() { "." } else { &walked };
                return Err(exec_error(format!(
                    "nil pointer evaluating {full}: {what} is nil"
                )));
            }
            other => {
                return Err(exec_error(format!(
                    "can't evaluate field {key} in type {} (in {full})",
                    go_type_name(other)
                )));
            }
        };
        walked.push('.');
        walked.push_str(key);
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn join_formats_any_items_like_go() {
        let list = Value::List(vec![s("a"), Value::Int(2), Value::Nil].into());
        let out = join(&[s(", "), list]).map(|v| v.to_string()).ok();
        assert_eq!(out.as_deref(), Some("a, 2, <nil>"));
    }

    #[test]
    fn join_rejects_non_lists_with_go_type() {
        let err = join(&[s(","), s("x")]).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("execution error: join: unsupported type string, want []string or []any")
        );
    }

    #[test]
    fn to_json_escapes_html_like_go() {
        let out = to_json(&[s("<a & b>")]).map(|v| v.to_string()).ok();
        assert_eq!(out.as_deref(), Some(r#""\u003ca \u0026 b\u003e""#));
    }

    #[test]
    fn to_json_rejects_functions_and_nan() {
        let f: gotmpl::ValueFunc = Arc::new(|_| Ok(Value::Nil));
        assert!(to_json(&[Value::Function(f)]).is_err());
        assert!(to_json(&[Value::Float(f64::NAN)]).is_err());
    }

    #[test]
    fn strict_field_reports_nil_path() {
        let err = strict_field(&[Value::Nil, s(".issue.parent"), s("identifier")])
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "execution error: nil pointer evaluating .issue.parent.identifier: .issue.parent is nil"
            )
        );
    }
}
