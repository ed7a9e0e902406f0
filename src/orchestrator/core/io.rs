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

use crossbeam_channel::{Receiver, Sender};

use crate::orchestrator::core::io_pool::{IoPool, Outstanding};

/// What `orch` applies (to `T`, the orchestrator) when a call comes back.
pub(crate) type Apply<T> = Box<dyn FnOnce(&mut T) + Send>;

/// Threads of the `work` pool.
const WORK_THREADS: usize = 4;

/// Which pool a call runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    Poll,
    Work,
}

/// The two pools and the channel their results come back on.
pub(crate) struct Lanes<T> {
    poll: IoPool<Apply<T>>,
    work: IoPool<Apply<T>>,
    pub(crate) rx: Receiver<Apply<T>>,
    /// For calls on threads of their own (`Orchestrator::spawn_thread`).
    pub(crate) tx: Sender<Apply<T>>,
}

impl<T: 'static> Lanes<T> {
    pub(crate) fn spawn() -> Lanes<T> {
        let (tx, rx) = crossbeam_channel::unbounded();
        Lanes {
            poll: IoPool::spawn("tracker-poll", 1, tx.clone()),
            work: IoPool::spawn("tracker-io", WORK_THREADS, tx.clone()),
            rx,
            tx,
        }
    }

    pub(crate) fn pool(&mut self, lane: Lane) -> &mut IoPool<Apply<T>> {
        match lane {
            Lane::Poll => &mut self.poll,
            Lane::Work => &mut self.work,
        }
    }

    /// Calls queued or running on either pool.
    pub(crate) fn outstanding(&self) -> Vec<Outstanding> {
        let mut all = self.poll.outstanding();
        all.extend(self.work.outstanding());
        all
    }

    pub(crate) fn busy(&self) -> bool {
        !self.poll.is_empty() || !self.work.is_empty()
    }

    /// Takes no more calls; what is still out is abandoned with the process.
    pub(crate) fn close(&mut self) {
        self.poll.close();
        self.work.close();
    }
}
