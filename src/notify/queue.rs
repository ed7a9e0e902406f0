//! A destination's bounded queue: pushing never blocks; a full queue drops its oldest notice
//! (counted as `dropped`), because the newest news is the one an operator needs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::{Notice, status};

pub struct Queue {
    destination: String,
    cap: usize,
    inner: Mutex<(VecDeque<Notice>, bool)>,
    ready: Condvar,
    /// A popped notice the destination's thread holds back for the rate limit: still waiting,
    /// so the health row counts it as queued.
    held: AtomicBool,
}

impl Queue {
    pub fn new(destination: String, cap: usize) -> Queue {
        Queue {
            destination,
            cap: cap.max(1),
            inner: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
            held: AtomicBool::new(false),
        }
    }

    /// Adds a notice; when full, the oldest is dropped and counted first.
    pub fn push(&self, notice: Notice) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.1 {
            status::count(&self.destination, notice.event, status::DROPPED);
            return;
        }
        while g.0.len() >= self.cap {
            if let Some(old) = g.0.pop_front() {
                status::count(&self.destination, old.event, status::DROPPED);
                log::warn!(
                    destination:% = self.destination,
                    event:% = old.event.as_str();
                    "notification queue full; oldest notice dropped"
                );
            }
        }
        g.0.push_back(notice);
        self.publish(g.0.len());
        self.ready.notify_one();
    }

    /// The next notice, waiting up to `timeout`; `None` on timeout or once closed.
    pub fn pop(&self, timeout: Duration) -> Option<Notice> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (mut g, _) = self
            .ready
            .wait_timeout_while(g, timeout, |(q, closed)| q.is_empty() && !*closed)
            .unwrap_or_else(|p| p.into_inner());
        if g.1 {
            return None;
        }
        let n = g.0.pop_front();
        self.publish(g.0.len());
        n
    }

    /// Stops the queue: what it holds is dropped and counted, later pushes are dropped.
    pub fn close(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1 = true;
        for n in g.0.drain(..) {
            status::count(&self.destination, n.event, status::DROPPED);
        }
        self.ready.notify_all();
    }

    /// Marks the last popped notice as held back (or no longer), and republishes the count.
    pub fn hold(&self, held: bool) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.held.store(held, Ordering::SeqCst);
        self.publish(g.0.len());
    }

    /// The waiting notices as the health row shows them: the queue's and a held one.
    fn publish(&self, len: usize) {
        let held = usize::from(self.held.load(Ordering::SeqCst));
        status::set_queued(&self.destination, len + held);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.0.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::notifications::NotifyEvent;

    #[test]
    fn a_full_queue_drops_its_oldest_and_counts_it() {
        status::register(
            "queue-test",
            crate::config::notifications::DestinationKind::Webhook,
        );
        let q = Queue::new("queue-test".into(), 2);
        for t in ["a", "b", "c"] {
            q.push(Notice::new(NotifyEvent::Handoff, t, 0));
        }
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(Duration::ZERO).map(|n| n.text), Some("b".into()));
        assert_eq!(
            status::counted("queue-test", NotifyEvent::Handoff, status::DROPPED),
            1
        );
        q.close();
        assert_eq!(q.pop(Duration::ZERO), None);
    }
}
