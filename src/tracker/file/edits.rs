//! Edits of one raw issue object for write-back. Each touches only the keys it names, keeps
//! existing keys in place (`preserve_order`), and reports whether anything changed so an
//! idempotent call does not rewrite the file.

use serde_json::{Map, Value, json};

use super::document::payload;
use crate::tracker::TrackerResult;

/// The author written on comments the daemon adds.
pub const COMMENT_AUTHOR: &str = "sortie";

/// Sets `state` and stamps `updated_at`. Setting the state it already has changes nothing.
pub fn set_state(issue: &mut Map<String, Value>, state: &str, now: &str) -> bool {
    if issue.get("state").and_then(Value::as_str) == Some(state) {
        return false;
    }
    issue.insert("state".into(), Value::String(state.to_string()));
    issue.insert("updated_at".into(), Value::String(now.to_string()));
    true
}

/// Appends `{id, author, body, created_at}` to `comments`, creating the array when it is
/// absent or null. The id `sortie-<epoch ms>` (suffixed on collision) is unique in the issue.
pub fn append_comment(
    issue: &mut Map<String, Value>,
    body: &str,
    now: &str,
    now_ms: i64,
) -> TrackerResult<bool> {
    let comments = array_field(issue, "comments")?;
    let taken = |id: &str| {
        comments
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
    };
    let base = format!("{COMMENT_AUTHOR}-{now_ms}");
    let mut id = base.clone();
    let mut n = 2;
    while taken(&id) {
        id = format!("{base}-{n}");
        n += 1;
    }
    comments.push(json!({
        "id": id,
        "author": COMMENT_AUTHOR,
        "body": body,
        "created_at": now,
    }));
    Ok(true)
}

/// Adds `label` unless a label equal to it ignoring case is already there.
pub fn add_label(issue: &mut Map<String, Value>, label: &str) -> TrackerResult<bool> {
    if label.trim().is_empty() {
        return Err(payload("label must not be empty"));
    }
    let labels = array_field(issue, "labels")?;
    let wanted = label.to_lowercase();
    if labels.iter().any(|l| label_matches(l, &wanted)) {
        return Ok(false);
    }
    labels.push(Value::String(label.to_string()));
    Ok(true)
}

/// Removes every label equal to `label` ignoring case; an absent label changes nothing.
pub fn remove_label(issue: &mut Map<String, Value>, label: &str) -> TrackerResult<bool> {
    let wanted = label.to_lowercase();
    match issue.get_mut("labels") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Array(labels)) => {
            let before = labels.len();
            labels.retain(|l| !label_matches(l, &wanted));
            Ok(labels.len() != before)
        }
        Some(_) => Err(payload("field labels is not an array")),
    }
}

fn label_matches(value: &Value, wanted_lower: &str) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.to_lowercase() == wanted_lower)
}

/// The array under `key`, created (in place of an absent key or `null`) when needed. Any other
/// type is refused rather than overwritten: it is a person's data.
fn array_field<'a>(
    issue: &'a mut Map<String, Value>,
    key: &str,
) -> TrackerResult<&'a mut Vec<Value>> {
    let slot = issue
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    match slot {
        Value::Array(items) => Ok(items),
        _ => Err(payload(format!("field {key} is not an array"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn set_state_keeps_key_position_and_stamps_updated_at() {
        let mut m = obj(json!({"id": "1", "state": "To Do", "x": 1}));
        assert!(set_state(&mut m, "Review", "2026-01-01T00:00:00Z"));
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(keys, ["id", "state", "x", "updated_at"]);
        assert_eq!(m["state"], "Review");
        assert!(!set_state(&mut m, "Review", "later"));
        assert_eq!(m["updated_at"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn comments_are_created_and_ids_stay_unique() {
        let mut m = obj(json!({"id": "1", "comments": null}));
        assert!(matches!(append_comment(&mut m, "a", "T", 5), Ok(true)));
        assert!(matches!(append_comment(&mut m, "b", "T", 5), Ok(true)));
        assert_eq!(
            m["comments"],
            json!([
                {"id": "sortie-5", "author": "sortie", "body": "a", "created_at": "T"},
                {"id": "sortie-5-2", "author": "sortie", "body": "b", "created_at": "T"}
            ])
        );
        let mut bad = obj(json!({"comments": "nope"}));
        assert!(append_comment(&mut bad, "a", "T", 5).is_err());
        assert_eq!(bad["comments"], "nope");
    }

    #[test]
    fn labels_are_idempotent_and_case_insensitive() {
        let mut m = obj(json!({"id": "1"}));
        assert!(matches!(remove_label(&mut m, "x"), Ok(false)));
        assert!(!m.contains_key("labels"));
        assert!(matches!(add_label(&mut m, "Needs-Human"), Ok(true)));
        assert!(matches!(add_label(&mut m, "needs-human"), Ok(false)));
        assert_eq!(m["labels"], json!(["Needs-Human"]));
        assert!(matches!(remove_label(&mut m, "NEEDS-HUMAN"), Ok(true)));
        assert_eq!(m["labels"], json!([]));
        assert!(add_label(&mut m, " ").is_err());
        let mut bad = obj(json!({"labels": {"a": 1}}));
        assert!(add_label(&mut bad, "a").is_err());
        assert!(remove_label(&mut bad, "a").is_err());
    }
}
