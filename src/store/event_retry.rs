//! Events of finished runs whose write failed. The run's history row was stored without them;
//! the events wait here (≤ 4 MiB across runs, oldest run dropped first) and are retried after
//! 4, 8, 16, 32 and 64 s, then dropped with a warning. Time comes from the caller's clock so
//! the schedule is testable without sleeping.

use std::collections::VecDeque;

use super::events::StoredEvent;

/// Waits before each successive retry, in ms.
pub const RETRY_DELAYS_MS: [i64; 5] = [4_000, 8_000, 16_000, 32_000, 64_000];
/// Memory held for failed event writes, across all runs.
pub const MAX_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// The events of one run awaiting a retried write.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvents {
    pub dispatch_id: String,
    pub run_id: Option<i64>,
    pub completed_at_ms: i64,
    pub events: Vec<StoredEvent>,
    /// Retries already attempted (0 after the original failure).
    pub retries: usize,
    /// When the next retry is due (epoch ms).
    pub due_at_ms: i64,
    bytes: usize,
}

impl PendingEvents {
    pub fn new(
        dispatch_id: String,
        run_id: Option<i64>,
        completed_at_ms: i64,
        events: Vec<StoredEvent>,
    ) -> Self {
        let bytes = events.iter().map(StoredEvent::size_bytes).sum();
        PendingEvents {
            dispatch_id,
            run_id,
            completed_at_ms,
            events,
            retries: 0,
            due_at_ms: 0,
            bytes,
        }
    }
}

/// A summary of one waiting run (health, tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSummary {
    pub dispatch_id: String,
    pub retries: usize,
    pub due_at_ms: i64,
    pub event_count: usize,
}

/// The FIFO of runs whose events await a retried write.
#[derive(Debug)]
pub struct EventRetryBuffer {
    queue: VecDeque<PendingEvents>,
    bytes: usize,
    max_bytes: usize,
}

impl Default for EventRetryBuffer {
    fn default() -> Self {
        Self::with_capacity(MAX_BUFFER_BYTES)
    }
}

impl EventRetryBuffer {
    pub fn with_capacity(max_bytes: usize) -> Self {
        EventRetryBuffer {
            queue: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// Queues a run after its first failed write; its first retry is due 4 s from `now_ms`.
    /// Drops the oldest runs (with a warning) until everything fits.
    pub fn push_failed(&mut self, mut p: PendingEvents, now_ms: i64) {
        p.retries = 0;
        p.due_at_ms = now_ms + RETRY_DELAYS_MS[0];
        self.bytes += p.bytes;
        self.queue.push_back(p);
        while self.bytes > self.max_bytes {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.bytes -= old.bytes;
            warn_dropped(&old, "retry buffer full");
        }
    }

    /// Removes and returns every run whose retry is due at `now_ms`, oldest first.
    pub fn take_due(&mut self, now_ms: i64) -> Vec<PendingEvents> {
        let mut due = Vec::new();
        let mut keep = VecDeque::with_capacity(self.queue.len());
        for p in self.queue.drain(..) {
            if p.due_at_ms <= now_ms {
                self.bytes -= p.bytes;
                due.push(p);
            } else {
                keep.push_back(p);
            }
        }
        self.queue = keep;
        due
    }

    /// Puts back a run whose retry failed at `now_ms`; after the fifth retry it is dropped.
    /// Returns whether it was kept.
    pub fn retry_failed(&mut self, mut p: PendingEvents, now_ms: i64) -> bool {
        p.retries += 1;
        match RETRY_DELAYS_MS.get(p.retries) {
            Some(delay) => {
                p.due_at_ms = now_ms + delay;
                // Re-insert in original order (oldest first) so dropping stays oldest-first.
                let pos = self
                    .queue
                    .iter()
                    .position(|q| q.completed_at_ms > p.completed_at_ms)
                    .unwrap_or(self.queue.len());
                self.bytes += p.bytes;
                self.queue.insert(pos, p);
                true
            }
            None => {
                warn_dropped(&p, "retries exhausted");
                false
            }
        }
    }

    /// When the earliest retry is due.
    pub fn next_due_ms(&self) -> Option<i64> {
        self.queue.iter().map(|p| p.due_at_ms).min()
    }

    pub fn summaries(&self) -> Vec<PendingSummary> {
        self.queue
            .iter()
            .map(|p| PendingSummary {
                dispatch_id: p.dispatch_id.clone(),
                retries: p.retries,
                due_at_ms: p.due_at_ms,
                event_count: p.events.len(),
            })
            .collect()
    }

    /// Drops everything (shutdown), warning for each run.
    pub fn drop_all(&mut self, why: &str) {
        for p in self.queue.drain(..) {
            warn_dropped(&p, why);
        }
        self.bytes = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

fn warn_dropped(p: &PendingEvents, why: &str) {
    log::warn!(
        dispatch_id:% = p.dispatch_id,
        run_id:% = p.run_id.unwrap_or(0),
        events:% = p.events.len(),
        retries:% = p.retries,
        reason:% = why;
        "dropped run events"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(id: &str, completed: i64, payload_len: usize) -> PendingEvents {
        let ev = StoredEvent {
            seq: 1,
            at_ms: completed,
            event_type: "notification".into(),
            payload: serde_json::json!({ "message": "x".repeat(payload_len) }),
        };
        PendingEvents::new(id.into(), Some(1), completed, vec![ev])
    }

    #[test]
    fn schedule_is_4_8_16_32_64_then_dropped() {
        let mut b = EventRetryBuffer::default();
        let mut now = 1_000_000;
        b.push_failed(pending("d1", now, 10), now);
        let mut waits = Vec::new();
        loop {
            let due = b.next_due_ms().expect("queued");
            assert!(b.take_due(due - 1).is_empty(), "nothing due early");
            waits.push(due - now);
            now = due;
            let mut got = b.take_due(now);
            assert_eq!(got.len(), 1);
            if !b.retry_failed(got.remove(0), now) {
                break;
            }
        }
        assert_eq!(waits, vec![4_000, 8_000, 16_000, 32_000, 64_000]);
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
    }

    #[test]
    fn oldest_run_dropped_when_over_capacity() {
        let one = pending("a", 1, 100).bytes;
        let mut b = EventRetryBuffer::with_capacity(one * 2);
        b.push_failed(pending("a", 1, 100), 0);
        b.push_failed(pending("b", 2, 100), 0);
        b.push_failed(pending("c", 3, 100), 0);
        let ids: Vec<_> = b.summaries().into_iter().map(|s| s.dispatch_id).collect();
        assert_eq!(ids, vec!["b", "c"]);
        assert!(b.bytes() <= one * 2);
    }
}
