//! The client keys every HTTP tracker's block takes (`page_cap`, `timeout_ms`,
//! `retry_base_ms`), read through the shared `http_client` rules (a forge of the same kind reads
//! the same keys of the same block).

use super::{SettingProblem, TrackerSettings};
pub use crate::http_client::HttpTuning;

/// The block keys read here.
pub const KEYS: [&str; 3] = crate::http_client::TUNING_KEYS;

/// The kind's block values, defaults where absent or invalid.
pub fn from_settings(s: &TrackerSettings) -> HttpTuning {
    HttpTuning::from_block(&s.kind, &s.block)
}

/// A non-negative integer of the kind's block; `Ok(None)` when absent, the problem with
/// `<kind>.<key>` (`<kind>.<key> must be …`) otherwise.
pub fn block_number(s: &TrackerSettings, key: &str) -> Result<Option<u64>, SettingProblem> {
    crate::http_client::block_number(&s.kind, &s.block, key)
        .map_err(|e| SettingProblem::new(e.field.clone(), e.to_string()))
}
