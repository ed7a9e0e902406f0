//! The strict OpenAPI validator of tests/http_openapi.rs, shared with the tests that validate
//! documents built from constructed snapshots: every object closed, every required member
//! present, no empty schema.

use serde_json::Value;

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// Validates `v` against `schema`, resolving `$ref` in `doc`; the error names the path.
///
/// Stricter than JSON Schema on purpose: an object member must be named in `properties` or
/// covered by an explicit `additionalProperties` schema (an absent `additionalProperties`
/// means `false`), and an empty or boolean schema is an error rather than "anything".
pub fn validate(schema: &Value, v: &Value, doc: &Value) -> Result<(), String> {
    validate_at(schema, v, doc, "$")
}

fn validate_at(schema: &Value, v: &Value, doc: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object().filter(|s| !s.is_empty()) else {
        return Err(format!(
            "{at}: empty or boolean schema {schema} documents nothing"
        ));
    };
    if let Some(reference) = s.get("$ref").and_then(Value::as_str) {
        let pointer = reference
            .strip_prefix('#')
            .ok_or_else(|| format!("{at}: non-local {reference}"))?;
        let target = doc
            .pointer(pointer)
            .ok_or_else(|| format!("{at}: unresolved {reference}"))?;
        return validate_at(target, v, doc, at);
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for sub in all {
            validate_at(sub, v, doc, at)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = s.get(key) {
            let passing = alts
                .iter()
                .filter(|a| validate_at(a, v, doc, at).is_ok())
                .count();
            let ok = if key == "oneOf" {
                passing == 1
            } else {
                passing > 0
            };
            if !ok {
                return Err(format!("{at}: {v} matches {passing} of the {key} schemas"));
            }
        }
    }
    check_type(s, v, at)?;
    if let Some(obj) = v.as_object() {
        check_object(s, obj, doc, at)?;
    }
    if let Some(arr) = v.as_array() {
        check_array(s, arr, doc, at)?;
    }
    Ok(())
}

fn check_type(s: &serde_json::Map<String, Value>, v: &Value, at: &str) -> Result<(), String> {
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(name) => type_matches(name, v),
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .any(|name| type_matches(name, v)),
            _ => false,
        };
        if !ok {
            return Err(format!("{at}: expected type {t}, got {v}"));
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {allowed:?}"));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return Err(format!("{at}: {v} is not {c}"));
    }
    Ok(())
}

fn check_object(
    s: &serde_json::Map<String, Value>,
    obj: &serde_json::Map<String, Value>,
    doc: &Value,
    at: &str,
) -> Result<(), String> {
    // Combinators validated the members already (each branch is held to the same rules).
    let combined = ["allOf", "anyOf", "oneOf"]
        .iter()
        .any(|k| s.contains_key(*k));
    if combined && !s.contains_key("properties") {
        return Ok(());
    }
    if let Some(Value::Array(req)) = s.get("required") {
        for k in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(k) {
                return Err(format!("{at}: missing required member {k}"));
            }
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    let extra = s.get("additionalProperties");
    for (k, child) in obj {
        let path = format!("{at}.{k}");
        match (props.and_then(|p| p.get(k)), extra) {
            (Some(sub), _) => validate_at(sub, child, doc, &path)?,
            // Declared open on purpose (JSON kept as recorded).
            (None, Some(Value::Bool(true))) => {}
            (None, Some(sub @ Value::Object(_))) => validate_at(sub, child, doc, &path)?,
            (None, _) => return Err(format!("{path}: undocumented member")),
        }
    }
    Ok(())
}

fn check_array(
    s: &serde_json::Map<String, Value>,
    arr: &[Value],
    doc: &Value,
    at: &str,
) -> Result<(), String> {
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && arr.len() as u64 > max
    {
        return Err(format!("{at}: more than {max} items"));
    }
    if arr.is_empty() {
        return Ok(());
    }
    let items = s
        .get("items")
        .ok_or_else(|| format!("{at}: array items are undocumented"))?;
    for (i, child) in arr.iter().enumerate() {
        validate_at(items, child, doc, &format!("{at}[{i}]"))?;
    }
    Ok(())
}
