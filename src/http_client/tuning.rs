//! The client keys every HTTP adapter's block takes (`page_cap`, `timeout_ms`,
//! `retry_base_ms`), read the same way for each kind so a workflow can tune any of them alike.
//! Trackers and forges of the same kind read the same block.

use std::time::Duration;

use serde_json::{Map, Value};

/// Pages read per list before the rest is left for later (200 pages of 50: 10,000 issues).
const DEFAULT_PAGE_CAP: u64 = 200;
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_RETRY_BASE_MS: u64 = 2_000;

/// The block keys read here.
pub const TUNING_KEYS: [&str; 3] = ["page_cap", "timeout_ms", "retry_base_ms"];

/// How an adapter's HTTP client pages, waits and backs off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTuning {
    /// Most pages read for one list; a capped list is partial (with a warning).
    pub page_cap: usize,
    pub timeout: Duration,
    /// The first backoff of a retried read (doubled per retry, ±30 % jitter).
    pub retry_base: Duration,
}

impl HttpTuning {
    /// The values of kind `kind`'s block, defaults where absent or invalid (invalid values are
    /// reported by [`block_number`] through the kind's validation).
    pub fn from_block(kind: &str, block: &Map<String, Value>) -> HttpTuning {
        let number = |key, default| {
            block_number(kind, block, key)
                .ok()
                .flatten()
                .unwrap_or(default)
        };
        HttpTuning {
            page_cap: usize::try_from(number("page_cap", DEFAULT_PAGE_CAP).max(1))
                .unwrap_or(usize::MAX),
            timeout: Duration::from_millis(number("timeout_ms", DEFAULT_TIMEOUT_MS).max(1)),
            retry_base: Duration::from_millis(number("retry_base_ms", DEFAULT_RETRY_BASE_MS)),
        }
    }
}

/// A block key whose value is not a non-negative integer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadNumber {
    /// `<kind>.<key>`.
    pub field: String,
}

impl std::fmt::Display for BadNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} must be a non-negative integer", self.field)
    }
}

impl std::error::Error for BadNumber {}

/// A non-negative integer of kind `kind`'s block; `Ok(None)` when absent, the field that is
/// wrong otherwise (shown as the one-line problem `<kind>.<key> must be …`).
pub fn block_number(
    kind: &str,
    block: &Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, BadNumber> {
    match block.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| BadNumber {
            field: format!("{kind}.{key}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(v: serde_json::Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn defaults_values_and_bad_values() {
        let t = HttpTuning::from_block("k", &block(serde_json::json!({})));
        assert_eq!(t.page_cap, 200);
        assert_eq!(t.timeout, Duration::from_secs(30));
        let b = block(serde_json::json!({"page_cap": 0, "timeout_ms": 5, "retry_base_ms": "x"}));
        let t = HttpTuning::from_block("k", &b);
        assert_eq!((t.page_cap, t.timeout), (1, Duration::from_millis(5)));
        assert_eq!(t.retry_base, Duration::from_secs(2));
        assert_eq!(
            block_number("k", &b, "retry_base_ms").map_err(|e| e.to_string()),
            Err("k.retry_base_ms must be a non-negative integer".into())
        );
    }
}
