//! Timestamp columns: run history keeps RFC 3339 text (readable in `sqlite3`, sortable because
//! every value has the same fixed UTC millisecond format); other tables keep epoch ms.

use super::error::StoreError;
use crate::clock::rfc3339_ms;

/// Formats epoch ms the way run history stores it.
pub(crate) fn to_text(ms: i64) -> String {
    rfc3339_ms(ms)
}

/// Parses a stored RFC 3339 timestamp back to epoch ms (any offset is accepted).
pub(crate) fn from_text(context: &'static str, value: &str) -> Result<i64, StoreError> {
    value
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| StoreError::Timestamp {
            context,
            value: value.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sorts_lexicographically() {
        let a = to_text(1_700_000_000_123);
        let b = to_text(1_700_000_001_000);
        assert_eq!(from_text("t", &a).ok(), Some(1_700_000_000_123));
        assert!(a < b);
        assert!(from_text("t", "yesterday").is_err());
    }
}
