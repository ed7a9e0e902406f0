//! Operator notifications: notices about what happened (attention raised, escalation, budget
//! or spend ceiling reached, repeated run failures, handoff, merge, a message the agent sent
//! with `notify_operator`) delivered to Slack incoming webhooks and generic signed webhooks.
//!
//! Each destination has a thread of its own (`notify-<name>`) and a bounded queue
//! ([`queue::Queue`]): the thread that raises a notice only pushes it, never waits on a
//! network call. A full queue drops its oldest notice and counts it. Delivery has a deadline
//! per request, retries with backoff, a per-destination rate limit, and bodies that pass the
//! secret masker before they are signed. A destination that still fails after its retries is
//! marked failing in [`status`] (served in the state document's health and as an attention
//! item) until a later delivery succeeds; the run records never depend on a delivery.

pub mod deliver;
pub mod observe;
pub mod operator;
pub mod payload;
pub mod queue;
pub mod rate;
pub mod status;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::notifications::{Destination, NotificationsConfig, NotifyEvent};

/// One thing to tell the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub event: NotifyEvent,
    pub issue_id: Option<String>,
    pub issue_identifier: Option<String>,
    /// One plain sentence (masked before it leaves).
    pub text: String,
    pub at_ms: i64,
    /// `run_failed`: failed runs in a row; the destination's `failures_threshold` filters on it.
    pub failures: Option<u32>,
    /// The attention item's id and kind when the notice comes from one.
    pub attention_id: Option<String>,
    pub attention_kind: Option<String>,
}

impl Notice {
    pub fn new(event: NotifyEvent, text: impl Into<String>, at_ms: i64) -> Notice {
        Notice {
            event,
            issue_id: None,
            issue_identifier: None,
            text: text.into(),
            at_ms,
            failures: None,
            attention_id: None,
            attention_kind: None,
        }
    }

    pub fn issue(mut self, id: &str, identifier: &str) -> Notice {
        self.issue_id = Some(id.to_string()).filter(|s| !s.is_empty());
        self.issue_identifier = Some(identifier.to_string()).filter(|s| !s.is_empty());
        self
    }

    /// Whether `dest` takes this notice.
    pub fn wanted_by(&self, dest: &Destination) -> bool {
        dest.events.contains(&self.event)
            && (self.event != NotifyEvent::RunFailed
                || self.failures.unwrap_or(0) >= dest.failures_threshold)
    }
}

struct Worker {
    dest: Destination,
    queue: Arc<queue::Queue>,
    stop: Arc<AtomicBool>,
}

/// The destinations in force and their delivery threads. Cheap to clone; every clone feeds
/// the same threads.
#[derive(Clone, Default)]
pub struct Notifier {
    workers: Arc<Mutex<BTreeMap<String, Worker>>>,
}

static GLOBAL: std::sync::OnceLock<Notifier> = std::sync::OnceLock::new();

impl Notifier {
    /// The process's notifier: one set of destinations per daemon, like [`status`].
    pub fn global() -> &'static Notifier {
        GLOBAL.get_or_init(Notifier::default)
    }

    /// Applies a (re)loaded configuration: unchanged destinations keep their thread and queue,
    /// changed or removed ones are stopped (their queued notices are dropped and counted),
    /// new ones start.
    pub fn configure(&self, cfg: &NotificationsConfig) {
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let keep: Vec<String> = cfg
            .destinations
            .iter()
            .filter(|d| workers.get(&d.name).is_some_and(|w| w.dest == **d))
            .map(|d| d.name.clone())
            .collect();
        let gone: Vec<String> = workers
            .keys()
            .filter(|n| !keep.contains(n))
            .cloned()
            .collect();
        // A disabled destination has a status row but no worker: drop the rows of those that
        // are no longer configured.
        for d in status::all() {
            if !workers.contains_key(&d.name) && !cfg.destinations.iter().any(|c| c.name == d.name)
            {
                status::remove(&d.name);
            }
        }
        for name in gone {
            if let Some(w) = workers.remove(&name) {
                w.stop.store(true, Ordering::SeqCst);
                w.queue.close();
                status::remove(&name);
            }
        }
        for dest in cfg.destinations.iter().filter(|d| !keep.contains(&d.name)) {
            if let Some(why) = &dest.disabled {
                log::error!(
                    destination:% = dest.name,
                    reason:% = why;
                    "notification destination skipped"
                );
                status::register_disabled(&dest.name, dest.kind, why, now_ms());
                continue;
            }
            match start_worker(dest.clone()) {
                Ok(w) => {
                    workers.insert(dest.name.clone(), w);
                }
                Err(e) => log::error!(
                    destination:% = dest.name,
                    error:% = e;
                    "notification thread not started"
                ),
            }
        }
    }

    /// Queues `notice` for every destination that takes it and says how many did; never
    /// blocks on delivery.
    pub fn send(&self, notice: &Notice) -> usize {
        let workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken = 0;
        for w in workers.values().filter(|w| notice.wanted_by(&w.dest)) {
            w.queue.push(notice.clone());
            taken += 1;
        }
        taken
    }

    /// How many destinations are configured.
    pub fn destinations(&self) -> usize {
        self.workers.lock().map(|w| w.len()).unwrap_or(0)
    }
}

fn now_ms() -> i64 {
    use crate::clock::Clock as _;
    crate::clock::SystemClock.now_ms()
}

fn start_worker(dest: Destination) -> std::io::Result<Worker> {
    status::register(&dest.name, dest.kind);
    let queue = Arc::new(queue::Queue::new(
        dest.name.clone(),
        crate::config::notifications::DEFAULT_QUEUE_CAPACITY,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let (q, s, d) = (queue.clone(), stop.clone(), dest.clone());
    std::thread::Builder::new()
        .name(format!("notify-{}", dest.name))
        .spawn(move || deliver::run(d, q, s))?;
    Ok(Worker { dest, queue, stop })
}
