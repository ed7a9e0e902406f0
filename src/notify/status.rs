//! What each destination's deliveries came to, process-wide: the health rows, the attention
//! item of a failing destination and `sortie_notifications_total` read it. A generation
//! counter moves with every change, so a cached document built from it knows when to rebuild.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::notifications::{DestinationKind, NotifyEvent};

/// The `result` label values of `sortie_notifications_total`.
pub const DELIVERED: &str = "delivered";
pub const FAILED: &str = "failed";
pub const DROPPED: &str = "dropped";
pub const RESULTS: [&str; 3] = [DELIVERED, FAILED, DROPPED];

/// One destination's state.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationStatus {
    pub name: String,
    pub kind: DestinationKind,
    pub last_success_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_ms: Option<i64>,
    /// Set while the latest notice could not be delivered after its retries.
    pub failing_since_ms: Option<i64>,
    /// Notices in a row that failed after their retries.
    pub consecutive_failures: u32,
    pub queued: usize,
    /// Why the destination sends nothing (its `url` or `secret` names an unset variable), and
    /// since when; such a destination has no thread and takes no notice.
    pub disabled: Option<(String, i64)>,
    /// (event, result) → count.
    pub counts: BTreeMap<(NotifyEvent, &'static str), u64>,
}

static STATUS: Mutex<BTreeMap<String, DestinationStatus>> = Mutex::new(BTreeMap::new());
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn with<T>(name: &str, f: impl FnOnce(&mut DestinationStatus) -> T) -> Option<T> {
    let mut all = STATUS.lock().unwrap_or_else(|p| p.into_inner());
    let r = all.get_mut(name).map(f);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    r
}

/// Moves whenever any destination's state changes.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

impl DestinationStatus {
    fn fresh(name: &str, kind: DestinationKind) -> DestinationStatus {
        DestinationStatus {
            name: name.to_string(),
            kind,
            last_success_ms: None,
            last_error: None,
            last_error_ms: None,
            failing_since_ms: None,
            consecutive_failures: 0,
            queued: 0,
            disabled: None,
            counts: BTreeMap::new(),
        }
    }
}

/// Adds a destination (kept as it was when it is already there with the same kind).
pub fn register(name: &str, kind: DestinationKind) {
    let mut all = STATUS.lock().unwrap_or_else(|p| p.into_inner());
    all.entry(name.to_string())
        .and_modify(|s| {
            if s.kind != kind || s.disabled.is_some() {
                *s = DestinationStatus::fresh(name, kind);
            }
        })
        .or_insert_with(|| DestinationStatus::fresh(name, kind));
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Adds (or keeps) a destination the configuration disabled, with the reason and since when.
pub fn register_disabled(name: &str, kind: DestinationKind, why: &str, now_ms: i64) {
    let mut all = STATUS.lock().unwrap_or_else(|p| p.into_inner());
    let entry = all
        .entry(name.to_string())
        .or_insert_with(|| DestinationStatus::fresh(name, kind));
    entry.kind = kind;
    let since = match &entry.disabled {
        Some((old, since)) if old == why => *since,
        _ => now_ms,
    };
    entry.disabled = Some((why.to_string(), since));
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

pub fn remove(name: &str) {
    STATUS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(name);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

pub fn count(name: &str, event: NotifyEvent, result: &'static str) {
    with(name, |s| *s.counts.entry((event, result)).or_default() += 1);
}

pub fn set_queued(name: &str, queued: usize) {
    with(name, |s| s.queued = queued);
}

/// A notice reached the destination.
pub fn delivered(name: &str, event: NotifyEvent, now_ms: i64) {
    with(name, |s| {
        *s.counts.entry((event, DELIVERED)).or_default() += 1;
        s.last_success_ms = Some(now_ms);
        s.failing_since_ms = None;
        s.consecutive_failures = 0;
    });
}

/// A notice failed after its retries (`error` already masked).
pub fn failed(name: &str, event: NotifyEvent, error: &str, now_ms: i64) {
    with(name, |s| {
        *s.counts.entry((event, FAILED)).or_default() += 1;
        s.last_error = Some(error.to_string());
        s.last_error_ms = Some(now_ms);
        s.failing_since_ms.get_or_insert(now_ms);
        s.consecutive_failures = s.consecutive_failures.saturating_add(1);
    });
}

/// Every destination, by name.
pub fn all() -> Vec<DestinationStatus> {
    STATUS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect()
}

/// One counter's value (tests and the exposition).
pub fn counted(name: &str, event: NotifyEvent, result: &'static str) -> u64 {
    STATUS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .and_then(|s| s.counts.get(&(event, result)).copied())
        .unwrap_or(0)
}

/// `sortie_notifications_total{destination,event,result}` and
/// `sortie_notifications_queued{destination}` in the Prometheus text format; every series of a
/// configured destination exists from the start, at zero. Nothing when no destination is set.
pub fn render_metrics() -> String {
    let all = all();
    if all.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    out.push_str(
        "# HELP sortie_notifications_total Operator notifications by destination, event and \
         result (delivered, failed after retries, dropped from a full queue).\n\
         # TYPE sortie_notifications_total counter\n",
    );
    for s in &all {
        for e in NotifyEvent::ALL {
            for r in RESULTS {
                let n = s.counts.get(&(e, r)).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "sortie_notifications_total{{destination=\"{}\",event=\"{}\",result=\"{r}\"}} {n}",
                    s.name,
                    e.as_str()
                );
            }
        }
    }
    out.push_str(
        "# HELP sortie_notifications_queued Notices waiting in a destination's queue.\n\
         # TYPE sortie_notifications_queued gauge\n",
    );
    for s in &all {
        let _ = writeln!(
            out,
            "sortie_notifications_queued{{destination=\"{}\"}} {}",
            s.name, s.queued
        );
    }
    out
}
