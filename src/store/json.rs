//! JSON text columns (labels, provenance, model usage, event payloads).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StoreError;

pub(crate) fn encode<T: Serialize + ?Sized>(
    context: &'static str,
    value: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Json { context, source })
}

pub(crate) fn decode<T: DeserializeOwned>(
    context: &'static str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|source| StoreError::Json { context, source })
}

pub(crate) fn encode_opt(
    context: &'static str,
    value: &Option<serde_json::Value>,
) -> Result<Option<String>, StoreError> {
    value.as_ref().map(|v| encode(context, v)).transpose()
}

pub(crate) fn decode_opt(
    context: &'static str,
    text: Option<String>,
) -> Result<Option<serde_json::Value>, StoreError> {
    text.map(|t| decode(context, &t)).transpose()
}
