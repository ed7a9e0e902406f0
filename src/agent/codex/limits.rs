//! Codex's rate-limit reports (`account/rateLimits/updated`, and the same `rateLimits` shape
//! elsewhere): `primary` / `secondary` windows with `usedPercent`, `windowDurationMins` and
//! `resetsAt` (epoch seconds), turned into labelled windows.

use crate::agent::event::{RateLimitStatus, RateLimitWindow};
use serde_json::Value;

const MINUTE_MS: u64 = 60_000;

/// A window's label from its length: 300 → `5-hour limit`, 10080 → `Weekly limit`.
pub fn window_label(minutes: Option<u64>) -> String {
    match minutes {
        Some(10_080) => "Weekly limit".into(),
        Some(1_440) => "Daily limit".into(),
        Some(m) if m > 0 && m % 1_440 == 0 => format!("{}-day limit", m / 1_440),
        Some(m) if m > 0 && m % 60 == 0 => format!("{}-hour limit", m / 60),
        Some(m) if m > 0 => format!("{m}-minute limit"),
        _ => "Rate limit".into(),
    }
}

fn window(v: &Value) -> Option<RateLimitWindow> {
    if !v.is_object() {
        return None;
    }
    let minutes = v.get("windowDurationMins").and_then(Value::as_u64);
    let used_percent = v.get("usedPercent").and_then(Value::as_f64);
    let status = used_percent.map(|p| {
        if p >= 100.0 {
            RateLimitStatus::Exhausted
        } else {
            RateLimitStatus::Allowed
        }
    });
    Some(RateLimitWindow {
        label: window_label(minutes),
        used_percent,
        status,
        resets_at_ms: v
            .get("resetsAt")
            .and_then(Value::as_i64)
            .map(|s| s.saturating_mul(1000)),
        window_ms: minutes.map(|m| m.saturating_mul(MINUTE_MS)),
    })
}

/// The windows of one `rateLimits` object (`primary`, then `secondary`).
pub fn windows(rate_limits: &Value) -> Vec<RateLimitWindow> {
    ["primary", "secondary"]
        .iter()
        .filter_map(|k| rate_limits.get(*k).and_then(window))
        .collect()
}

/// When a usage limit lifts, from the newest report: the latest reset among exhausted windows,
/// else the latest reset of any window.
pub fn usage_limit_reset(windows: &[RateLimitWindow]) -> Option<i64> {
    let exhausted = windows
        .iter()
        .filter(|w| w.status == Some(RateLimitStatus::Exhausted))
        .filter_map(|w| w.resets_at_ms)
        .max();
    exhausted.or_else(|| windows.iter().filter_map(|w| w.resets_at_ms).max())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_come_from_the_window_length() {
        assert_eq!(window_label(Some(300)), "5-hour limit");
        assert_eq!(window_label(Some(10_080)), "Weekly limit");
        assert_eq!(window_label(Some(45)), "45-minute limit");
        assert_eq!(window_label(None), "Rate limit");
    }

    #[test]
    fn the_exhausted_window_sets_the_reset() {
        let w = windows(&json!({
            "primary": {"usedPercent": 40.0, "windowDurationMins": 300, "resetsAt": 1000},
            "secondary": {"usedPercent": 100.0, "windowDurationMins": 10080, "resetsAt": 900},
        }));
        assert_eq!(w.len(), 2);
        assert_eq!(w[1].status, Some(RateLimitStatus::Exhausted));
        assert_eq!(usage_limit_reset(&w), Some(900_000));
    }
}
