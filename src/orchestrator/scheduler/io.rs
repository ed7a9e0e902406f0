//! The orchestrator's blocking calls, off its thread. Tracker and forge requests (and workspace
//! removal, which may run hooks or reach an SSH host) run on two [`IoPool`]s; each call's
//! result comes back as a closure that `orch` applies to its state, so the code that decides
//! what to do with an answer stays beside the code that asked.
//!
//! - `poll`: one thread for the poll tick's reads. A tick never queues behind a read that is
//!   still out: it is skipped and counted (`health.poll.ticks_skipped`).
//! - `work`: a few threads for everything tied to one issue or one pass (exits' hand-offs,
//!   parks and stage hops, due retries' reads, reaction checks, workspace sweeps), so a slow
//!   poll does not hold them up.
//!
//! While a call is out the issue it concerns stays claimed (a firing retry stays queued, an
//! exit stays `settling`), so nothing else is dispatched for it meanwhile.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::Orchestrator;
use crate::orchestrator::io_pool::{IoPool, JobLabel, Outstanding, panic_text};

/// What `orch` applies when a call comes back.
pub(super) type Apply = Box<dyn FnOnce(&mut Orchestrator) + Send>;

/// Threads of the `work` pool.
const WORK_THREADS: usize = 4;

/// Which pool a call runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    Poll,
    Work,
}

/// The two pools and the channel their results come back on.
pub(super) struct Lanes {
    poll: IoPool<Apply>,
    work: IoPool<Apply>,
    pub(super) rx: Receiver<Apply>,
    /// For calls on threads of their own ([`Orchestrator::spawn_thread`]).
    tx: Sender<Apply>,
}

impl Lanes {
    pub(super) fn spawn() -> Lanes {
        let (tx, rx) = crossbeam_channel::unbounded();
        Lanes {
            poll: IoPool::spawn("tracker-poll", 1, tx.clone()),
            work: IoPool::spawn("tracker-io", WORK_THREADS, tx.clone()),
            rx,
            tx,
        }
    }

    fn pool(&mut self, lane: Lane) -> &mut IoPool<Apply> {
        match lane {
            Lane::Poll => &mut self.poll,
            Lane::Work => &mut self.work,
        }
    }

    /// Calls queued or running on either pool.
    pub(super) fn outstanding(&self) -> Vec<Outstanding> {
        let mut all = self.poll.outstanding();
        all.extend(self.work.outstanding());
        all
    }

    fn busy(&self) -> bool {
        !self.poll.is_empty() || !self.work.is_empty()
    }

    /// Takes no more calls; what is still out is abandoned with the process.
    pub(super) fn close(&mut self) {
        self.poll.close();
        self.work.close();
    }
}

impl Orchestrator {
    /// Runs `io` on `lane` and hands its result to `apply` on `orch`. A panic in `io` (a bug)
    /// reaches `apply` as `Err` with its message, so whatever `apply` must release (an
    /// in-flight flag, a claim) is released.
    pub(super) fn spawn_io<R: Send + 'static>(
        &mut self,
        lane: Lane,
        label: JobLabel,
        io: impl FnOnce() -> R + Send + 'static,
        apply: impl FnOnce(&mut Orchestrator, Result<R, String>) + Send + 'static,
    ) {
        self.lanes.pool(lane).submit(label, move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(io))
                .map_err(|p| panic_text(&*p));
            Box::new(move |o: &mut Orchestrator| apply(o, r)) as Apply
        });
    }

    /// Runs `io` on a thread of its own named `name` and hands its result to `apply` on `orch`,
    /// like [`Orchestrator::spawn_io`]: for a call that may take minutes (an agent turn), which
    /// would hold a pool thread that short calls wait for. The caller bounds how many run.
    pub(super) fn spawn_thread<R: Send + 'static>(
        &mut self,
        name: String,
        io: impl FnOnce() -> R + Send + 'static,
        apply: impl FnOnce(&mut Orchestrator, Result<R, String>) + Send + 'static,
    ) -> std::io::Result<()> {
        let tx = self.lanes.tx.clone();
        std::thread::Builder::new().name(name).spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(io))
                .map_err(|p| panic_text(&*p));
            let _ = tx.send(Box::new(move |o: &mut Orchestrator| apply(o, r)) as Apply);
        })?;
        Ok(())
    }

    /// Test driver: applies results until no call is out (or `wait` has passed), so a step
    /// of a manually clocked orchestrator ends with its calls answered, as before they left
    /// the thread.
    pub(super) fn settle_io(&mut self, wait: Duration) {
        let deadline = Instant::now() + wait;
        loop {
            while let Ok(apply) = self.lanes.rx.try_recv() {
                apply(self);
            }
            if !self.lanes.busy() && self.lanes.rx.is_empty() {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            if let Ok(apply) = self
                .lanes
                .rx
                .recv_timeout(left.min(Duration::from_millis(20)))
            {
                apply(self);
            }
        }
    }

    /// At the end of shutdown: stops the pools and logs every call still out, with what it
    /// would have done, since it is lost with the process.
    pub(super) fn abandon_io(&mut self) {
        self.lanes.close();
        for o in self.lanes.outstanding() {
            log::warn!(
                operation:% = o.label.what,
                issue_identifier:% = o.label.subject,
                started:% = o.started,
                waited_ms:% = o.submitted.elapsed().as_millis();
                "tracker call abandoned at shutdown"
            );
        }
    }
}
