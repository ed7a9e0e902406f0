//! The typed shapes of every JSON body the API serves. Each response member is a field of a
//! `#[derive(Serialize, JsonSchema)]` struct here, and the OpenAPI document's component schemas
//! are generated from the same structs (`super::openapi`), so a member cannot be served without
//! being documented. Field order is the served member order.
//!
//! Conventions: a member that is sometimes absent is `Option<T>` with
//! `skip_serializing_if = "Option::is_none"` (schemars then leaves it out of `required`); a
//! member that is always present but may be null is a plain `Option<T>`; members this build
//! never fills (dispatch rules, stage chains, reactions, prices, SSH) use [`Null`],
//! [`EmptyList`] or [`EmptyObject`], so the schema says exactly what is served.

pub mod active;
pub mod attention;
pub mod between_stages;
pub mod budget;
pub mod config;
pub mod event;
pub mod health;
pub mod held;
pub mod issue;
pub mod issue_detail;
pub mod parked;
pub mod pending_reaction;
pub mod pr_loop;
pub mod prices;
pub mod probe;
pub mod rate_limits;
pub mod reply;
pub mod retry;
pub mod run;
pub mod running;
pub mod spend_ceiling;
pub mod stage;
pub mod state;
pub mod stats;
pub mod stream;
pub mod tokens;

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use crate::clock::rfc3339_ms;

pub use issue::{IssueFields, IssueRows, IssueStatus};

/// An RFC 3339 UTC timestamp with milliseconds.
pub fn ts(ms: i64) -> String {
    rfc3339_ms(ms)
}

pub fn opt_ts(ms: Option<i64>) -> Option<String> {
    ms.map(ts)
}

/// `Some(s)` unless `s` is empty: an empty tracker or config string is served as an absent
/// member, so clients test presence rather than compare with `""`.
pub fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The file name of a stored path (`/srv/x/WORKFLOW.md` → `WORKFLOW.md`); absent when empty.
pub fn base_name(path: &str) -> Option<String> {
    let name = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    nonempty(&name)
}

/// A member this build always serves as `null` (a feature it does not have).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Null;

impl Serialize for Null {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl JsonSchema for Null {
    fn schema_name() -> Cow<'static, str> {
        "Null".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "null"})
    }
}

/// A list this build always serves empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmptyList;

impl Serialize for EmptyList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        s.serialize_seq(Some(0))?.end()
    }
}

impl JsonSchema for EmptyList {
    fn schema_name() -> Cow<'static, str> {
        "EmptyList".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "array", "maxItems": 0})
    }
}

/// An object this build always serves without members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmptyObject;

impl Serialize for EmptyObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        s.serialize_map(Some(0))?.end()
    }
}

impl JsonSchema for EmptyObject {
    fn schema_name() -> Cow<'static, str> {
        "EmptyObject".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "properties": {}, "additionalProperties": false})
    }
}

/// JSON kept as stored (imported run records); the schema declares it open on purpose.
pub fn stored_json_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "JSON kept as recorded with the run; its members are not interpreted.",
        "type": ["object", "array", "null"],
        "additionalProperties": true,
        "items": {"type": ["object", "string", "number", "boolean", "null"], "additionalProperties": true},
    })
}

/// The short and long status sentences every row carries.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Sentences {
    pub status_text: String,
    pub status_text_full: String,
}

impl From<super::wording::Pair> for Sentences {
    fn from(p: super::wording::Pair) -> Sentences {
        Sentences {
            status_text: p.short,
            status_text_full: p.full,
        }
    }
}

/// Serializes a view to a JSON value; the views hold only strings, numbers and maps with
/// string keys, which cannot fail to serialize, so a failure reads as `null`.
pub fn to_value<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base_name_keeps_the_file_name_only() {
        assert_eq!(
            super::base_name("/srv/project/WORKFLOW.md").as_deref(),
            Some("WORKFLOW.md")
        );
        assert_eq!(
            super::base_name("WORKFLOW.md").as_deref(),
            Some("WORKFLOW.md")
        );
        assert_eq!(super::base_name(""), None);
    }
}
