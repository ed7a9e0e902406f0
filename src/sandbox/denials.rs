//! Connections the allowlist proxy refused: a daemon-wide total (the metric) and a count per
//! issue attempt (the running row), kept in memory for this process's life. The per-attempt
//! table is bounded: at most [`MAX_ISSUES`] issues, the least recently started dropped first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Issues whose counts are kept.
const MAX_ISSUES: usize = 4096;

static TOTAL: AtomicU64 = AtomicU64::new(0);

struct Entry {
    attempt: Option<u32>,
    /// The agent's session id, once the orchestrator learns it ([`note_session`]).
    session_id: String,
    /// Order of the last start, for eviction.
    started: u64,
    count: Arc<AtomicU64>,
}

struct Table {
    by_issue: HashMap<String, Entry>,
    starts: u64,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Refusals since the daemon started, all sessions.
pub fn denied_total() -> u64 {
    TOTAL.load(Ordering::Relaxed)
}

/// Refusals of `issue_id`'s sessions in `attempt` (0 when the issue has none here).
pub fn denied_for(issue_id: &str, attempt: u32) -> u64 {
    let Ok(t) = TABLE.lock() else {
        return 0;
    };
    t.as_ref()
        .and_then(|t| t.by_issue.get(issue_id))
        .filter(|e| e.attempt.unwrap_or(0) == attempt)
        .map_or(0, |e| e.count.load(Ordering::Relaxed))
}

/// The counter a proxy of `issue_id`'s `attempt` adds to: the attempt's existing one (a
/// session runs one process per turn), or a fresh one when the attempt changed.
pub(super) fn counter_for(issue_id: &str, attempt: Option<u32>) -> Arc<AtomicU64> {
    // A process of no issue (the readiness check) counts toward the total only.
    if issue_id.is_empty() {
        return Arc::new(AtomicU64::new(0));
    }
    let Ok(mut guard) = TABLE.lock() else {
        return Arc::new(AtomicU64::new(0));
    };
    let t = guard.get_or_insert_with(|| Table {
        by_issue: HashMap::new(),
        starts: 0,
    });
    t.starts += 1;
    let started = t.starts;
    if let Some(e) = t.by_issue.get_mut(issue_id)
        && e.attempt == attempt
    {
        e.started = started;
        return e.count.clone();
    }
    if t.by_issue.len() >= MAX_ISSUES && !t.by_issue.contains_key(issue_id) {
        let oldest = t
            .by_issue
            .iter()
            .min_by_key(|(_, e)| e.started)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            t.by_issue.remove(&k);
        }
    }
    let count = Arc::new(AtomicU64::new(0));
    t.by_issue.insert(
        issue_id.to_string(),
        Entry {
            attempt,
            session_id: String::new(),
            started,
            count: count.clone(),
        },
    );
    count
}

/// Records `session_id` as the session of `issue_id`'s proxies: a session id is known only
/// once the agent reports it, after its process (and its proxy) started. Only an issue with a
/// proxy is recorded, so sessions outside an allowlisted sandbox cost nothing here.
pub fn note_session(issue_id: &str, session_id: &str) {
    let Ok(mut guard) = TABLE.lock() else {
        return;
    };
    if let Some(e) = guard.as_mut().and_then(|t| t.by_issue.get_mut(issue_id))
        && e.session_id != session_id
    {
        e.session_id = session_id.to_string();
    }
}

/// The session id last noted for `issue_id` (empty when none).
pub(super) fn session_of(issue_id: &str) -> String {
    let Ok(t) = TABLE.lock() else {
        return String::new();
    };
    t.as_ref()
        .and_then(|t| t.by_issue.get(issue_id))
        .map(|e| e.session_id.clone())
        .unwrap_or_default()
}

/// Records one refusal on `count` and the total.
pub(super) fn record(count: &AtomicU64) {
    count.fetch_add(1, Ordering::Relaxed);
    TOTAL.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_attempt() {
        let before = denied_total();
        let c = counter_for("denials-test-1", Some(0));
        record(&c);
        record(&counter_for("denials-test-1", Some(0)));
        assert_eq!(denied_for("denials-test-1", 0), 2);
        assert_eq!(denied_for("denials-test-1", 1), 0);
        record(&counter_for("denials-test-1", Some(1)));
        assert_eq!(denied_for("denials-test-1", 1), 1);
        assert_eq!(denied_for("denials-test-1", 0), 0);
        assert!(denied_total() >= before + 3);
        assert_eq!(session_of("denials-test-1"), "");
        note_session("denials-test-1", "s-1");
        assert_eq!(session_of("denials-test-1"), "s-1");
        // A session id noted for an issue without a proxy is not kept.
        note_session("denials-test-none", "s-2");
        assert_eq!(session_of("denials-test-none"), "");
    }
}
