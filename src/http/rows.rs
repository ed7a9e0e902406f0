//! JSON helpers for bodies still assembled member by member (the attention list). The typed
//! rows live in `super::views`.

use serde_json::{Map, Value};

use crate::domain::Issue;

/// An RFC 3339 UTC timestamp with milliseconds, as a JSON string.
pub fn ts(ms: i64) -> Value {
    Value::String(super::views::ts(ms))
}

/// The issue members every row starts with, as a JSON map.
pub fn issue_fields(issue: &Issue) -> Map<String, Value> {
    super::views::issue_fields(issue)
}
