//! The pending-retry timer: a min-heap of `(due_at_ms, issue_id, generation)`. The
//! orchestrator derives its `select!` timeout from [`RetryQueue::next_due`] instead of
//! keeping one timer per retry; a rescheduled or cancelled entry leaves a stale heap item
//! behind that is recognised by its generation and skipped.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

#[derive(Debug, Default)]
pub struct RetryQueue {
    heap: BinaryHeap<Reverse<(i64, String, u64)>>,
    current: HashMap<String, (i64, u64)>,
    next_generation: u64,
}

impl RetryQueue {
    /// Schedules (or reschedules) the issue's retry at `due_at_ms`.
    pub fn schedule(&mut self, issue_id: &str, due_at_ms: i64) {
        self.next_generation += 1;
        let generation = self.next_generation;
        self.current
            .insert(issue_id.to_string(), (due_at_ms, generation));
        self.heap
            .push(Reverse((due_at_ms, issue_id.to_string(), generation)));
    }

    /// Forgets the issue's retry, if any.
    pub fn cancel(&mut self, issue_id: &str) -> bool {
        self.current.remove(issue_id).is_some()
    }

    pub fn contains(&self, issue_id: &str) -> bool {
        self.current.contains_key(issue_id)
    }

    pub fn due_at(&self, issue_id: &str) -> Option<i64> {
        self.current.get(issue_id).map(|(d, _)| *d)
    }

    pub fn len(&self) -> usize {
        self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// The earliest live due time.
    pub fn next_due(&mut self) -> Option<i64> {
        self.drop_stale();
        self.heap.peek().map(|Reverse((d, _, _))| *d)
    }

    /// Removes and returns the ids of every retry due at or before `now_ms`, earliest first.
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            self.drop_stale();
            match self.heap.peek() {
                Some(Reverse((due, _, _))) if *due <= now_ms => {
                    if let Some(Reverse((_, id, _))) = self.heap.pop() {
                        self.current.remove(&id);
                        out.push(id);
                    }
                }
                _ => break,
            }
        }
        out
    }

    fn drop_stale(&mut self) {
        while let Some(Reverse((due, id, generation))) = self.heap.peek() {
            match self.current.get(id) {
                Some((d, g)) if d == due && g == generation => break,
                _ => {
                    self.heap.pop();
                }
            }
        }
    }
}

/// A retry-now request in progress: the due time its retry had before, and who waits for
/// the answer.
pub(crate) struct RetryNowPutBack {
    /// `None` when the request found its retry already starting: nothing to put back.
    pub(crate) due_at_ms: Option<i64>,
    pub(crate) reply:
        Option<crossbeam_channel::Sender<crate::orchestrator::core::msg::RetryNowOutcome>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_due_order_and_skips_rescheduled() {
        let mut q = RetryQueue::default();
        q.schedule("a", 300);
        q.schedule("b", 100);
        q.schedule("c", 200);
        q.schedule("b", 400); // rescheduled: the 100 entry is stale
        assert_eq!(q.next_due(), Some(200));
        assert_eq!(q.pop_due(300), vec!["c".to_string(), "a".to_string()]);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next_due(), Some(400));
    }

    #[test]
    fn cancelled_entries_never_fire() {
        let mut q = RetryQueue::default();
        q.schedule("a", 10);
        assert!(q.cancel("a"));
        assert!(q.pop_due(1_000).is_empty());
        assert_eq!(q.next_due(), None);
    }
}
