//! Threads that make the orchestrator's blocking calls (tracker and forge reads and writes,
//! workspace removal) so that `orch` never waits on the network or a slow disk. A job runs on
//! a pool thread; what it returns is sent over the pool's result channel, which the
//! orchestrator's loop selects on beside its inbox.
//!
//! A pool never blocks its submitter: jobs queue without bound, so callers that could flood it
//! (the poll tick) keep their own "one in flight" rule. Every job carries a label, so what is
//! still queued or running when the process stops can be named in the log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

/// What a job is, for the log: the operation and the issue (or other subject) it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLabel {
    /// The operation, e.g. `handoff transition`.
    pub what: &'static str,
    /// The issue identifier (or what else the job concerns); may be empty.
    pub subject: String,
}

impl JobLabel {
    pub fn new(what: &'static str, subject: impl Into<String>) -> JobLabel {
        JobLabel {
            what,
            subject: subject.into(),
        }
    }
}

/// A job still queued or running.
#[derive(Debug, Clone)]
pub struct Outstanding {
    pub label: JobLabel,
    pub submitted: Instant,
    /// Whether a pool thread has taken it.
    pub started: bool,
}

type Job<T> = Box<dyn FnOnce() -> T + Send>;

struct Queued<T> {
    id: u64,
    job: Job<T>,
}

/// A fixed set of named threads running submitted jobs in submission order.
pub struct IoPool<T> {
    tx: Option<Sender<Queued<T>>>,
    outstanding: Arc<Mutex<BTreeMap<u64, Outstanding>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl<T: Send + 'static> IoPool<T> {
    /// Starts `threads` threads named `<name>-<n>` (just `<name>` for one) that send each
    /// job's result to `results`. A thread that cannot be started is logged; the pool runs
    /// with the others (with none, submitted jobs wait and are reported as outstanding).
    pub fn spawn(name: &str, threads: usize, results: Sender<T>) -> IoPool<T> {
        let (tx, rx) = crossbeam_channel::unbounded::<Queued<T>>();
        let outstanding = Arc::new(Mutex::new(BTreeMap::new()));
        for n in 0..threads.max(1) {
            let thread_name = if threads <= 1 {
                name.to_string()
            } else {
                format!("{name}-{n}")
            };
            let (rx, results, outstanding) = (rx.clone(), results.clone(), outstanding.clone());
            let workflow = crate::log_field::thread_workflow();
            let spawned = std::thread::Builder::new()
                .name(thread_name.clone())
                .spawn(move || {
                    crate::log_field::set_thread_workflow(workflow);
                    work(&rx, &results, &outstanding)
                });
            if let Err(e) = spawned {
                log::error!(
                    thread:% = thread_name,
                    error:% = e.to_string();
                    "cannot start an I/O thread"
                );
            }
        }
        IoPool {
            tx: Some(tx),
            outstanding,
            next_id: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Queues `job` (never blocks). After [`IoPool::close`] the job is dropped and logged.
    pub fn submit(&self, label: JobLabel, job: impl FnOnce() -> T + Send + 'static) {
        let Some(tx) = &self.tx else {
            log::warn!(
                what:% = label.what,
                subject:% = label.subject;
                "I/O job refused after shutdown"
            );
            return;
        };
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.outstanding).insert(
            id,
            Outstanding {
                label,
                submitted: Instant::now(),
                started: false,
            },
        );
        if tx
            .send(Queued {
                id,
                job: Box::new(job),
            })
            .is_err()
        {
            lock(&self.outstanding).remove(&id);
        }
    }

    /// Jobs queued or running now, oldest first.
    pub fn outstanding(&self) -> Vec<Outstanding> {
        lock(&self.outstanding).values().cloned().collect()
    }

    /// How many jobs are queued or running.
    pub fn len(&self) -> usize {
        lock(&self.outstanding).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes no more jobs; the threads end once the queue is empty (a thread blocked in a call
    /// ends when the call does, or with the process).
    pub fn close(&mut self) {
        self.tx = None;
    }
}

fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn work<T>(
    rx: &Receiver<Queued<T>>,
    results: &Sender<T>,
    outstanding: &Mutex<BTreeMap<u64, Outstanding>>,
) {
    for Queued { id, job } in rx.iter() {
        if let Some(o) = lock(outstanding).get_mut(&id) {
            o.started = true;
        }
        // The job's own code catches what it must answer for; a panic that escapes it is a
        // bug, logged here so the pool thread survives it.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        match result {
            Ok(r) => {
                // The receiver is gone only once the orchestrator stopped: nothing to tell.
                let _ = results.send(r);
                // Counted as outstanding until its result is in the channel, so a caller
                // that sees no outstanding job and an empty channel has every result.
                lock(outstanding).remove(&id);
            }
            Err(p) => {
                let label = lock(outstanding).remove(&id).map(|o| o.label);
                log::error!(
                    what:% = label.as_ref().map_or("", |l| l.what),
                    subject:% = label.as_ref().map_or("", |l| l.subject.as_str()),
                    panic:% = panic_text(&*p);
                    "I/O job panicked"
                )
            }
        }
    }
}

/// A call on an I/O lane or a thread of its own that panicked (a bug): what its `apply`
/// gets instead of the call's result, so whatever it must release is released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPanicked {
    /// The panic's message.
    pub message: String,
}

impl std::fmt::Display for CallPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallPanicked {}

/// The message of a caught panic.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn jobs_run_off_the_caller_and_report_through_the_channel() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pool = IoPool::spawn("test-io", 2, tx);
        for n in 0..10u32 {
            pool.submit(JobLabel::new("add", n.to_string()), move || n * 2);
        }
        let mut got: Vec<u32> = (0..10)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap_or(u32::MAX))
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..10).map(|n| n * 2).collect::<Vec<_>>());
        let deadline = Instant::now() + Duration::from_secs(5);
        while !pool.is_empty() && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(pool.is_empty());
    }

    #[test]
    fn a_blocked_job_is_outstanding_and_does_not_block_the_submitter() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pool = IoPool::spawn("test-io", 1, tx);
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
        pool.submit(JobLabel::new("hang", "A-1"), move || {
            let _ = release_rx.recv();
            1
        });
        pool.submit(JobLabel::new("after", "A-2"), || 2);
        let o = pool.outstanding();
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].label, JobLabel::new("hang", "A-1"));
        assert!(rx.try_recv().is_err());
        let _ = release_tx.send(());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).ok(), Some(1));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).ok(), Some(2));
    }

    #[test]
    fn a_panicking_job_is_logged_and_the_thread_goes_on() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut pool = IoPool::spawn("test-io", 1, tx);
        pool.submit(JobLabel::new("boom", ""), || -> u32 { panic!("boom") });
        pool.submit(JobLabel::new("ok", ""), || 7);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).ok(), Some(7));
        pool.close();
        pool.submit(JobLabel::new("late", ""), || 8);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    }
}
