//! Building template values: the leaf both the issue data ([`super::data`]) and the reaction
//! context ([`super::reaction`]) use.

use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::Value;

pub(super) type Entries = Vec<(&'static str, Value)>;

pub(super) fn map(entries: Entries) -> Value {
    let map: BTreeMap<Arc<str>, Value> = entries
        .into_iter()
        .map(|(k, v)| (Arc::from(k), v))
        .collect();
    Value::Map(Arc::new(map))
}

pub(super) fn text(s: &str) -> Value {
    Value::String(s.into())
}
