//! Copilot's quota snapshots (`assistant.usage.quotaSnapshots`) as rate-limit windows. Each
//! snapshot is keyed by quota (`premium_interactions`, `chat`, …) and says how much of a
//! monthly entitlement is left and when it resets. Field names vary between CLI releases, so
//! both the camelCase and the snake_case spellings are read.

use crate::agent::event::{RateLimitStatus, RateLimitWindow};
use serde_json::{Map, Value};

/// The premium-request quota's label on the API.
pub const PREMIUM_LABEL: &str = "Monthly premium request limit";
/// Quotas reset monthly; the length orders them among other windows.
const MONTH_MS: u64 = 30 * 24 * 3_600_000;

/// The windows of one `quotaSnapshots` object, in key order.
pub fn windows(snapshots: &Map<String, Value>) -> Vec<RateLimitWindow> {
    snapshots
        .iter()
        .filter_map(|(key, snap)| snap.as_object().map(|s| window(key, s)))
        .collect()
}

fn window(key: &str, s: &Map<String, Value>) -> RateLimitWindow {
    let num = |keys: &[&str]| keys.iter().find_map(|k| s.get(*k).and_then(Value::as_f64));
    let flag = |keys: &[&str]| {
        keys.iter()
            .any(|k| s.get(*k).and_then(Value::as_bool) == Some(true))
    };
    let unlimited = flag(&["isUnlimitedEntitlement", "unlimited"]);
    let entitlement = num(&["entitlementRequests", "entitlement"]);
    let used = num(&["usedRequests", "used"]);
    let remaining_pct = num(&["remainingPercentage", "percent_remaining"]);
    let used_percent = if unlimited {
        None
    } else if let Some(r) = remaining_pct {
        Some((100.0 - r).clamp(0.0, 100.0))
    } else {
        match (used, entitlement) {
            (Some(u), Some(e)) if e > 0.0 => Some((u / e * 100.0).clamp(0.0, 100.0)),
            _ => None,
        }
    };
    let status = if unlimited {
        Some(RateLimitStatus::Allowed)
    } else {
        used_percent.map(|p| {
            if p >= 100.0 {
                RateLimitStatus::Exhausted
            } else {
                RateLimitStatus::Allowed
            }
        })
    };
    let resets_at_ms = ["resetDate", "quota_reset_date", "resetsAt"]
        .iter()
        .find_map(|k| s.get(*k))
        .and_then(reset_ms);
    RateLimitWindow {
        label: label(key),
        used_percent,
        status,
        resets_at_ms,
        window_ms: Some(MONTH_MS),
    }
}

fn label(key: &str) -> String {
    if key.contains("premium") {
        return PREMIUM_LABEL.to_string();
    }
    format!("Monthly {} limit", key.replace('_', " "))
}

/// A reset time: an RFC 3339 timestamp, a calendar date (midnight UTC), or epoch seconds.
fn reset_ms(v: &Value) -> Option<i64> {
    if let Some(secs) = v.as_i64() {
        return Some(secs.saturating_mul(1000));
    }
    let text = v.as_str()?.trim();
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    let date = text.parse::<jiff::civil::Date>().ok()?;
    let ts = date.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(ts.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn premium_snapshot_becomes_the_monthly_window() {
        let snaps = json!({
            "premium_interactions": {"entitlementRequests": 300, "usedRequests": 75,
                "remainingPercentage": 75.0, "resetDate": "2026-04-01T00:00:00Z"},
            "chat": {"isUnlimitedEntitlement": true},
            "completions": {"entitlement": 10, "used": 10, "quota_reset_date": "2026-04-01"}
        });
        let w = windows(snaps.as_object().unwrap_or(&Map::new()));
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].label, PREMIUM_LABEL);
        assert_eq!(w[0].used_percent, Some(25.0));
        assert_eq!(w[0].status, Some(RateLimitStatus::Allowed));
        assert_eq!(w[0].resets_at_ms, Some(1_775_001_600_000));
        assert_eq!(w[1].label, "Monthly chat limit");
        assert_eq!(w[1].used_percent, None);
        assert_eq!(w[2].status, Some(RateLimitStatus::Exhausted));
        assert_eq!(w[2].resets_at_ms, Some(1_775_001_600_000));
    }
}
