//! The state document's `rate_limits` member: per agent kind, the usage limits its agents
//! reported that have not reset yet.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::agent::RateLimitStatus;
use crate::orchestrator::rate_limits::{HeldLimit, RateLimits};

use super::{Null, opt_ts, ts};

/// One agent kind's limits.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentRateLimitsView {
    /// The newest report among every limit held for the kind, reset or not.
    pub reported_at: String,
    /// The limits that have not reset: by window length (unstated last), then label.
    pub windows: Vec<AgentLimitView>,
}

/// One limit as the agent last reported it; a figure it did not report is null.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentLimitView {
    pub label: String,
    pub used_percent: Option<f64>,
    /// `allowed`, `warning` or `exhausted`.
    pub status: Option<String>,
    pub resets_at: Option<String>,
    pub reported_at: String,
    /// No agent kind of this build reports an amount in a vendor unit.
    pub amount: Null,
}

fn status_word(s: RateLimitStatus) -> &'static str {
    match s {
        RateLimitStatus::Allowed => "allowed",
        RateLimitStatus::Warning => "warning",
        RateLimitStatus::Exhausted => "exhausted",
    }
}

fn limit(h: &HeldLimit) -> AgentLimitView {
    AgentLimitView {
        label: h.window.label.clone(),
        used_percent: h.window.used_percent,
        status: h.window.status.map(|s| status_word(s).to_string()),
        resets_at: opt_ts(h.window.resets_at_ms),
        reported_at: ts(h.reported_at_ms),
        amount: Null,
    }
}

/// The served member at `now_ms`: a limit whose reset time has passed is left out.
pub fn build(limits: &RateLimits, now_ms: i64) -> BTreeMap<String, AgentRateLimitsView> {
    limits
        .kinds
        .iter()
        .filter_map(|(kind, held)| {
            let newest = held.values().map(|h| h.reported_at_ms).max()?;
            let mut live: Vec<&HeldLimit> = held
                .values()
                .filter(|h| h.window.resets_at_ms.is_none_or(|at| at > now_ms))
                .collect();
            live.sort_by(|a, b| {
                let len = |h: &HeldLimit| (h.window.window_ms.is_none(), h.window.window_ms);
                len(a)
                    .cmp(&len(b))
                    .then_with(|| a.window.label.cmp(&b.window.label))
            });
            Some((
                kind.clone(),
                AgentRateLimitsView {
                    reported_at: ts(newest),
                    windows: live.into_iter().map(limit).collect(),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::RateLimitWindow;

    fn window(label: &str, resets: Option<i64>, len: Option<u64>) -> RateLimitWindow {
        RateLimitWindow {
            label: label.into(),
            used_percent: None,
            status: Some(RateLimitStatus::Warning),
            resets_at_ms: resets,
            window_ms: len,
        }
    }

    #[test]
    fn reset_limits_leave_windows_and_the_rest_are_ordered_by_length() {
        let mut r = RateLimits::default();
        r.record(
            "claude-code",
            &[
                window("Weekly limit", Some(10_000), Some(7)),
                window("Other", None, None),
                window("5-hour limit", Some(10_000), Some(5)),
            ],
            1_000,
        );
        r.record(
            "claude-code",
            &[window("Gone", Some(1_500), Some(1))],
            1_200,
        );
        let v = super::super::to_value(&build(&r, 2_000));
        let labels: Vec<&str> = v["claude-code"]["windows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w["label"].as_str())
            .collect();
        assert_eq!(labels, ["5-hour limit", "Weekly limit", "Other"]);
        assert_eq!(v["claude-code"]["reported_at"], ts(1_200));
        assert_eq!(v["claude-code"]["windows"][0]["status"], "warning");
        assert_eq!(
            v["claude-code"]["windows"][0]["used_percent"],
            serde_json::Value::Null
        );
        assert_eq!(
            v["claude-code"]["windows"][0]["amount"],
            serde_json::Value::Null
        );
    }
}
