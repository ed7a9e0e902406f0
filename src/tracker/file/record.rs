//! One issue record of the tracker file and its normalization into [`Issue`], lenient the way
//! Go Sortie's file tracker is so existing issue files keep loading. Pure: no I/O here.

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::domain::{BlockerRef, Comment, Issue, IssueRef};

/// The record as written in the file. Every field is optional and `null` counts as absent,
/// like the Go decoder's zero values; unknown keys are ignored (they are kept on write-back,
/// which works on the raw JSON, not on this struct).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FileRecord {
    id: Option<String>,
    identifier: Option<String>,
    title: Option<String>,
    description: Option<String>,
    state: Option<String>,
    /// Kept raw: only a true JSON integer is a priority; `"high"`, `2.5`, `true` are not.
    priority: Option<Value>,
    branch_name: Option<String>,
    url: Option<String>,
    assignee: Option<String>,
    issue_type: Option<String>,
    labels: Option<Vec<String>>,
    parent: Option<FileRef>,
    comments: Option<Vec<FileComment>>,
    blocked_by: Option<Vec<FileRef>>,
    /// `false` declares `blocked_by` incomplete: the dispatch pass holds the issue
    /// (`blockers_incomplete`) rather than trust a partial list. Absent or `true`: complete.
    blockers_complete: Option<bool>,
    created_at: Option<String>,
    updated_at: Option<String>,
}

/// `parent` and `blocked_by[]` entries (`state` only matters for blockers).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FileRef {
    id: Option<String>,
    identifier: Option<String>,
    state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FileComment {
    id: Option<String>,
    author: Option<String>,
    body: Option<String>,
    created_at: Option<String>,
}

/// A record that must be a JSON object: serde's derived struct decoding also accepts an array
/// (fields by position), which the file format does not allow. Lets the whole file be decoded
/// in one pass straight from its text, without building a `Value` per issue first.
pub struct ObjectRecord(FileRecord);

impl ObjectRecord {
    pub fn into_issue(self) -> Issue {
        into_issue(self.0)
    }
}

impl<'de> Deserialize<'de> for ObjectRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOnly;
        impl<'de> Visitor<'de> for ObjectOnly {
            type Value = ObjectRecord;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectRecord, A::Error> {
                FileRecord::deserialize(MapAccessDeserializer::new(map)).map(ObjectRecord)
            }
        }
        deserializer.deserialize_map(ObjectOnly)
    }
}

/// A record of the file that is not an issue; its text names the element (`issue [3] (id
/// x): …`) so a person can find it in a long file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The element's position in the top-level array.
    pub index: usize,
    /// The element's `id`, when it has a string one.
    pub id: Option<String>,
    /// What is wrong: not an object, or the first member of the wrong type.
    pub cause: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "issue [{}]", self.index)?;
        if let Some(id) = &self.id {
            write!(f, " (id {id})")?;
        }
        write!(f, ": {}", self.cause)
    }
}

impl std::error::Error for RecordError {}

/// Normalizes one element of the top-level array.
pub fn normalize_record(index: usize, raw: &Value) -> Result<Issue, RecordError> {
    if !raw.is_object() {
        return Err(RecordError {
            index,
            id: None,
            cause: "expected a JSON object".into(),
        });
    }
    let rec = FileRecord::deserialize(raw).map_err(|e| RecordError {
        index,
        id: raw.get("id").and_then(Value::as_str).map(str::to_string),
        cause: e.to_string(),
    })?;
    Ok(into_issue(rec))
}

fn into_issue(rec: FileRecord) -> Issue {
    Issue {
        id: rec.id.unwrap_or_default(),
        identifier: rec.identifier.unwrap_or_default(),
        display_identifier: String::new(),
        blockers_read: if rec.blockers_complete == Some(false) {
            crate::domain::BlockersRead::Incomplete
        } else {
            crate::domain::BlockersRead::Complete
        },
        title: rec.title.unwrap_or_default(),
        description: rec.description.unwrap_or_default(),
        state: rec.state.unwrap_or_default(),
        priority: rec.priority.as_ref().and_then(integer_priority),
        branch_name: rec.branch_name.unwrap_or_default(),
        url: rec.url.unwrap_or_default(),
        assignee: rec.assignee.unwrap_or_default(),
        issue_type: rec.issue_type.unwrap_or_default(),
        labels: rec
            .labels
            .unwrap_or_default()
            .into_iter()
            .map(|l| l.to_lowercase())
            .collect(),
        parent: rec.parent.map(|p| IssueRef {
            id: p.id.unwrap_or_default(),
            identifier: p.identifier.unwrap_or_default(),
        }),
        comments: rec.comments.map(|cs| {
            cs.into_iter()
                .map(|c| Comment {
                    id: c.id.unwrap_or_default(),
                    author: c.author.unwrap_or_default(),
                    body: c.body.unwrap_or_default(),
                    created_at: c.created_at.unwrap_or_default(),
                })
                .collect()
        }),
        blocked_by: rec
            .blocked_by
            .unwrap_or_default()
            .into_iter()
            .map(|b| BlockerRef {
                id: b.id.unwrap_or_default(),
                identifier: b.identifier.unwrap_or_default(),
                state: b.state.unwrap_or_default(),
            })
            .collect(),
        created_at: rec.created_at.unwrap_or_default(),
        updated_at: rec.updated_at.unwrap_or_default(),
    }
}

/// Only a JSON integer literal that fits `i64` is a priority.
fn integer_priority(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: Value) -> Issue {
        match normalize_record(0, &v) {
            Ok(i) => i,
            Err(e) => panic!("normalize failed: {e}"),
        }
    }

    #[test]
    fn priority_only_from_integers() {
        assert_eq!(norm(json!({"priority": 3})).priority, Some(3));
        assert_eq!(norm(json!({"priority": -1})).priority, Some(-1));
        assert_eq!(norm(json!({"priority": "high"})).priority, None);
        assert_eq!(norm(json!({"priority": 2.5})).priority, None);
        assert_eq!(norm(json!({"priority": 1.0})).priority, None);
        assert_eq!(norm(json!({"priority": true})).priority, None);
        assert_eq!(norm(json!({"priority": null})).priority, None);
        assert_eq!(norm(json!({"priority": [1]})).priority, None);
        assert_eq!(norm(json!({"priority": u64::MAX})).priority, None);
    }

    #[test]
    fn nulls_are_defaults_and_comments_keep_absence() {
        let i = norm(json!({"id": "1", "title": null, "labels": null, "comments": null}));
        assert_eq!(i.title, "");
        assert!(i.labels.is_empty());
        assert_eq!(i.comments, None);
        assert_eq!(norm(json!({"comments": []})).comments, Some(vec![]));
        let c = norm(json!({"comments": [{"body": "hi", "author": null}]}));
        assert_eq!(
            c.comments,
            Some(vec![Comment {
                body: "hi".into(),
                ..Comment::default()
            }])
        );
    }

    #[test]
    fn wrong_types_and_non_objects_are_errors() {
        let e = normalize_record(4, &json!({"id": "x", "title": 5})).map_err(|e| e.to_string());
        assert!(
            matches!(&e, Err(m) if m.starts_with("issue [4] (id x): ")),
            "{e:?}"
        );
        let e = normalize_record(2, &json!("just a string")).map_err(|e| e.to_string());
        assert_eq!(e, Err("issue [2]: expected a JSON object".to_string()));
        assert!(normalize_record(0, &json!({"labels": ["a", 1]})).is_err());
    }
}
