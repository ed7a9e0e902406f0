//! The metric catalogue: names, help texts, label names, the label values
//! each label may take, and histogram buckets. One place so the dashboard JSON and the tests
//! can be checked against it.

use crate::domain::{HoldCode, RetryTrigger, RunStatus, SpendWindow};

/// Label values pre-created at zero so every series exists from the first scrape (a `rate()`
/// over a series that appears late misses its first increments).
pub const TOKEN_TYPES: &[&str] = &["input", "output", "cache_read", "cache_write"];
pub const DISPATCH_OUTCOMES: &[&str] = &["success", "error"];
pub const EXIT_TYPES: &[&str] = &["normal", "error", "cancelled", "soft_stop"];
pub const RETRY_TRIGGERS: &[&str] = &[
    RetryTrigger::Error.as_str(),
    RetryTrigger::Continuation.as_str(),
    RetryTrigger::Timer.as_str(),
    RetryTrigger::Stall.as_str(),
    RetryTrigger::CiFix.as_str(),
    RetryTrigger::UsageLimit.as_str(),
];
pub const RECONCILE_ACTIONS: &[&str] = &[
    "stop",
    "cleanup",
    "keep",
    "sweep_cleanup",
    "retention_cleanup",
];
pub const POLL_RESULTS: &[&str] = &["success", "error", "skipped"];
pub const TRACKER_OPERATIONS: &[&str] = &[
    "fetch_candidates",
    "fetch_issue",
    "fetch_comments",
    "transition",
    "comment",
    "fetch_by_states",
    "fetch_states_by_ids",
    "fetch_states_by_identifiers",
    "add_label",
    "fetch_blockers",
];
/// The `reason` label of `sortie_candidate_holds_total`: every hold reason a dispatch pass
/// gives (the API's `hold.reason` values).
pub const HOLD_REASONS: &[&str] = HoldCode::WORDS;
/// The `layer` label of `sortie_dispatch_rule_match_total`.
pub const RULE_MATCH_LAYERS: &[&str] = &["rule", "default", "fallback"];
pub const SUCCESS_ERROR: &[&str] = &["success", "error"];
pub const SUCCESS_ERROR_SKIPPED: &[&str] = &["success", "error", "skipped"];
pub const COMMENT_LIFECYCLES: &[&str] = &["dispatch", "completion", "failure"];
pub const CI_RESULTS: &[&str] = &["passing", "pending", "failing", "error"];
pub const ESCALATION_ACTIONS: &[&str] = &["label", "comment", "error"];
pub const REVIEW_RESULTS: &[&str] = &["dispatched", "error", "skipped"];
pub const SELF_REVIEW_VERDICTS: &[&str] = &["pass", "iterate", "none"];
/// The labels of `sortie_webhook_deliveries_total`: the route's kinds (the registry's), and
/// what became of a delivery.
pub const WEBHOOK_KINDS: &[&str] = crate::registry::WEBHOOK_KINDS;
pub const WEBHOOK_OUTCOMES: &[&str] = &[
    "accepted",
    "unverified",
    "replayed",
    "rate_limited",
    "too_large",
    "bad_payload",
    "not_configured",
    "busy",
];
/// The `reason` label of `sortie_http_connections_refused_total` (tiny_http's `ConnRefusal`).
pub const CONNECTION_REFUSALS: &[&str] = &[
    "too_many_connections",
    "too_many_client_connections",
    "not_a_probe",
    "no_thread",
];
/// The `window` label of the spend ceiling gauges.
pub const SPEND_WINDOWS: &[&str] = &[
    SpendWindow::Daily.as_str(),
    SpendWindow::Weekly.as_str(),
    SpendWindow::Monthly.as_str(),
];

/// Label value used for anything outside a label's known set, so a caller's typo or an
/// unexpected value can never create unbounded series.
pub const OTHER: &str = "other";

/// Distinct free-form values (tool names, verification commands) kept per label before new
/// ones fold into [`OTHER`].
pub const FREE_LABEL_CAP: usize = 64;
/// Free-form label values are cut to this many characters.
pub const FREE_LABEL_CHARS: usize = 64;

/// `sortie_poll_duration_seconds`: 0.1·2^k, k = 0..9 (0.1 … 51.2).
pub fn poll_buckets() -> Vec<f64> {
    (0..10).map(|k| 0.1 * f64::from(1u32 << k)).collect()
}

/// `sortie_dispatch_pass_duration_seconds`: 0.001·2^k, k = 0..15 (1 ms … 32.8 s: a pass that
/// dispatches hundreds of issues at once takes seconds). The store's
/// `sortie_store_command_duration_seconds` keeps its buckets with the writer
/// (`store::write_latency::buckets`), which starts before this registry.
pub fn dispatch_pass_buckets() -> Vec<f64> {
    (0..16).map(|k| 0.001 * f64::from(1u32 << k)).collect()
}

/// `sortie_worker_duration_seconds` and the verification histogram: 10·2^k, k = 0..11.
pub fn worker_buckets() -> Vec<f64> {
    (0..12).map(|k| 10.0 * f64::from(1u32 << k)).collect()
}

/// The `exit_type` label value of a run status. Statuses that are not a session ending one of
/// the label's ways (a CI result, a hand-over to a person, a provider usage limit) count as
/// [`OTHER`].
pub fn exit_type_of(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Succeeded => "normal",
        RunStatus::Failed => "error",
        RunStatus::Cancelled | RunStatus::BudgetStopped => "cancelled",
        RunStatus::CiFailed | RunStatus::NeedsPerson | RunStatus::UsageLimited => OTHER,
    }
}

/// Maps a key of the stored exit counts to the `exit_type` label value: a run status, or an
/// `exit_type` value itself (the stored keys are text any build may have written).
pub fn exit_type(stored: &str) -> &'static str {
    if let Ok(status) = stored.parse::<RunStatus>() {
        return exit_type_of(status);
    }
    match stored {
        "normal" => "normal",
        "error" => "error",
        "cancelled" | "stalled" => "cancelled",
        "soft_stop" => "soft_stop",
        _ => OTHER,
    }
}

/// `value` when it is one of `allowed`, else [`OTHER`].
pub fn bounded<'a>(value: &'a str, allowed: &[&str]) -> &'a str {
    if allowed.contains(&value) {
        value
    } else {
        OTHER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_the_catalogue() {
        let p = poll_buckets();
        assert_eq!(p.len(), 10);
        assert!((p[0] - 0.1).abs() < 1e-9 && (p[9] - 51.2).abs() < 1e-9);
        let w = worker_buckets();
        assert_eq!(w.len(), 12);
        assert_eq!((w[0], w[11]), (10.0, 20480.0));
        let d = dispatch_pass_buckets();
        assert_eq!(d.len(), 16);
        assert!((d[0] - 0.001).abs() < 1e-12 && (d[15] - 32.768).abs() < 1e-9);
    }

    #[test]
    fn exit_types_map_run_statuses() {
        assert_eq!(exit_type_of(RunStatus::Succeeded), "normal");
        assert_eq!(exit_type_of(RunStatus::CiFailed), OTHER);
        assert_eq!(exit_type("normal"), "normal");
        assert_eq!(exit_type("succeeded"), "normal");
        assert_eq!(exit_type("failed"), "error");
        assert_eq!(exit_type("budget_stopped"), "cancelled");
        assert_eq!(exit_type("cancelled"), "cancelled");
        assert_eq!(exit_type("weird"), OTHER);
    }

    #[test]
    fn unknown_label_values_fold_into_other() {
        assert_eq!(bounded("stall", RETRY_TRIGGERS), "stall");
        assert_eq!(RETRY_TRIGGERS.len(), RetryTrigger::ALL.len());
        assert_eq!(bounded("MT-649", RETRY_TRIGGERS), OTHER);
    }
}
