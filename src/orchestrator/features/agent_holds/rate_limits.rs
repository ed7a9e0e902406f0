//! The usage limits agents report for their plan or account, held in memory per agent kind:
//! the latest report of each limit (by label) with when it arrived.

use std::collections::BTreeMap;

use crate::agent::RateLimitWindow;

/// One held limit: the latest report of it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldLimit {
    pub window: RateLimitWindow,
    pub reported_at_ms: i64,
}

/// The limits of every agent kind that has reported one since start: kind → label → limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimits {
    pub kinds: BTreeMap<String, BTreeMap<String, HeldLimit>>,
}

impl RateLimits {
    /// Records a report of `windows` by an agent of `kind` at `at_ms`; each replaces the
    /// earlier report of the same limit.
    pub fn record(&mut self, kind: &str, windows: &[RateLimitWindow], at_ms: i64) {
        if windows.is_empty() {
            return;
        }
        let held = self.kinds.entry(kind.to_string()).or_default();
        for w in windows {
            held.insert(
                w.label.clone(),
                HeldLimit {
                    window: w.clone(),
                    reported_at_ms: at_ms,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(label: &str, used: f64) -> RateLimitWindow {
        RateLimitWindow {
            label: label.into(),
            used_percent: Some(used),
            status: None,
            resets_at_ms: None,
            window_ms: None,
        }
    }

    #[test]
    fn a_later_report_of_a_limit_replaces_the_earlier_one() {
        let mut r = RateLimits::default();
        r.record("claude-code", &[window("5-hour limit", 10.0)], 1_000);
        r.record("claude-code", &[window("Weekly limit", 50.0)], 2_000);
        r.record("claude-code", &[window("5-hour limit", 20.0)], 3_000);
        let held = &r.kinds["claude-code"];
        assert_eq!(held.len(), 2);
        assert_eq!(held["5-hour limit"].window.used_percent, Some(20.0));
        assert_eq!(held["5-hour limit"].reported_at_ms, 3_000);
        assert_eq!(held["Weekly limit"].reported_at_ms, 2_000);
        r.record("mock", &[], 4_000);
        assert!(!r.kinds.contains_key("mock"));
    }
}
