//! The orchestrator's side of its I/O lanes ([`super::io`]): a blocking call is submitted to
//! a lane or a thread of its own, and its result comes back as a closure applied on `orch`.

use std::time::{Duration, Instant};

use crate::orchestrator::core::io::{Apply, Lane};
use crate::orchestrator::core::io_pool::{CallPanicked, JobLabel, panic_text};
use crate::orchestrator::core::orchestrator::Orchestrator;

impl Orchestrator {
    /// Runs `io` on `lane` and hands its result to `apply` on `orch`. A panic in `io` (a bug)
    /// reaches `apply` as `Err` with its message, so whatever `apply` must release (an
    /// in-flight flag, a claim) is released.
    pub(crate) fn spawn_io<R: Send + 'static>(
        &mut self,
        lane: Lane,
        label: JobLabel,
        io: impl FnOnce() -> R + Send + 'static,
        apply: impl FnOnce(&mut Orchestrator, Result<R, CallPanicked>) + Send + 'static,
    ) {
        self.lanes.pool(lane).submit(label, move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(io)).map_err(|p| {
                CallPanicked {
                    message: panic_text(&*p),
                }
            });
            Box::new(move |o: &mut Orchestrator| apply(o, r)) as Apply<Orchestrator>
        });
    }

    /// Runs `io` on a thread of its own named `name` and hands its result to `apply` on `orch`,
    /// like [`Orchestrator::spawn_io`]: for a call that may take minutes (an agent turn), which
    /// would hold a pool thread that short calls wait for. The caller bounds how many run.
    pub(crate) fn spawn_thread<R: Send + 'static>(
        &mut self,
        name: String,
        io: impl FnOnce() -> R + Send + 'static,
        apply: impl FnOnce(&mut Orchestrator, Result<R, CallPanicked>) + Send + 'static,
    ) -> std::io::Result<()> {
        let tx = self.lanes.tx.clone();
        let workflow = crate::log_field::thread_workflow();
        std::thread::Builder::new().name(name).spawn(move || {
            crate::log_field::set_thread_workflow(workflow);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(io)).map_err(|p| {
                CallPanicked {
                    message: panic_text(&*p),
                }
            });
            let _ =
                tx.send(Box::new(move |o: &mut Orchestrator| apply(o, r)) as Apply<Orchestrator>);
        })?;
        Ok(())
    }

    /// Test driver: applies results until no call is out (or `wait` has passed), so a step
    /// of a manually clocked orchestrator ends with its calls answered, as before they left
    /// the thread.
    pub(crate) fn settle_io(&mut self, wait: Duration) {
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
    pub(crate) fn abandon_io(&mut self) {
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
