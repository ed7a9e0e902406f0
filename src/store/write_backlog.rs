//! Writes that failed because the database could not take them (disk full, read-only,
//! locked, I/O error, corruption). They are kept in issue order and retried, oldest first,
//! after 0.5, 1, 2, 4, 8 then every 10 s until they succeed; while any is kept every later
//! write joins the queue behind it, so the database never sees writes out of order. Nothing
//! is dropped while sortie runs; what is left at shutdown is logged at ERROR.

use std::collections::VecDeque;

/// Waits before successive retries of the head, in ms; the last repeats.
pub const BACKLOG_DELAYS_MS: [i64; 6] = [500, 1_000, 2_000, 4_000, 8_000, 10_000];

/// Why the writer is not writing: the first failure's time, the latest error, what is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    pub since_ms: i64,
    pub error: String,
    pub pending: usize,
}

/// The FIFO of kept writes (`T` is the writer's own op type).
#[derive(Debug)]
pub struct WriteBacklog<T> {
    queue: VecDeque<T>,
    since_ms: Option<i64>,
    error: String,
    retries: usize,
    due_at_ms: i64,
}

impl<T> Default for WriteBacklog<T> {
    fn default() -> Self {
        WriteBacklog {
            queue: VecDeque::new(),
            since_ms: None,
            error: String::new(),
            retries: 0,
            due_at_ms: 0,
        }
    }
}

impl<T> WriteBacklog<T> {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Keeps a write that failed at `now_ms` with `error` (the first: retry due soon).
    pub fn push_failed(&mut self, op: T, error: String, now_ms: i64) {
        if self.queue.is_empty() {
            self.since_ms = Some(now_ms);
            self.retries = 0;
            self.due_at_ms = now_ms + BACKLOG_DELAYS_MS[0];
        }
        self.error = error;
        self.queue.push_back(op);
    }

    /// Queues a write behind the kept ones (it was not attempted).
    pub fn push_behind(&mut self, op: T) {
        self.queue.push_back(op);
    }

    /// When the head's next retry is due.
    pub fn next_due_ms(&self) -> Option<i64> {
        (!self.queue.is_empty()).then_some(self.due_at_ms)
    }

    /// The head, if its retry is due at `now_ms`.
    pub fn take_due(&mut self, now_ms: i64) -> Option<T> {
        if self.queue.is_empty() || self.due_at_ms > now_ms {
            return None;
        }
        self.queue.pop_front()
    }

    /// The head's retry succeeded: the next one is tried at once.
    pub fn succeeded(&mut self, now_ms: i64) {
        self.retries = 0;
        self.due_at_ms = now_ms;
        if self.queue.is_empty() {
            self.since_ms = None;
            self.error.clear();
        }
    }

    /// The head's retry failed at `now_ms`: it goes back in front, due after the next delay.
    pub fn failed_again(&mut self, op: T, error: String, now_ms: i64) {
        self.retries += 1;
        let delay = BACKLOG_DELAYS_MS[self.retries.min(BACKLOG_DELAYS_MS.len() - 1)];
        self.due_at_ms = now_ms + delay;
        self.error = error;
        self.queue.push_front(op);
    }

    /// The failure while anything is kept.
    pub fn failure(&self) -> Option<WriteFailure> {
        let since_ms = self.since_ms?;
        (!self.queue.is_empty()).then(|| WriteFailure {
            since_ms,
            error: self.error.clone(),
            pending: self.queue.len(),
        })
    }

    /// Empties the queue (shutdown), oldest first.
    pub fn drain(&mut self) -> Vec<T> {
        self.since_ms = None;
        self.queue.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_backs_off_and_clears_on_success() {
        let mut b = WriteBacklog::default();
        assert_eq!(b.failure(), None);
        b.push_failed(1, "disk full".into(), 1_000);
        b.push_behind(2);
        assert_eq!(b.next_due_ms(), Some(1_500));
        assert_eq!(b.take_due(1_499), None);
        let mut now = 1_500;
        let mut waits = Vec::new();
        for _ in 0..7 {
            let head = b.take_due(now).expect("due");
            assert_eq!(head, 1, "the oldest write is retried first");
            b.failed_again(head, "still full".into(), now);
            let due = b.next_due_ms().expect("kept");
            waits.push(due - now);
            now = due;
        }
        assert_eq!(
            waits,
            vec![1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000]
        );
        let f = b.failure().expect("failing");
        assert_eq!((f.since_ms, f.pending), (1_000, 2));
        assert_eq!(f.error, "still full");
        assert_eq!(b.take_due(now), Some(1));
        b.succeeded(now);
        assert_eq!(b.take_due(now), Some(2), "the next is tried at once");
        b.succeeded(now);
        assert_eq!(b.failure(), None);
        assert!(b.is_empty());
    }
}
