//! Cross-thread turn cancellation. The token's receiver disconnects when cancelled, so a
//! supervisor blocked in `select!` wakes immediately without polling.

use crossbeam_channel::{Receiver, Sender};
use std::sync::{Arc, Mutex};

/// Why a turn was cancelled from outside the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// No agent event for `stall_timeout_ms`.
    Stall,
    /// `agent.turn_timeout_ms` elapsed.
    TurnTimeout,
    /// The daemon is shutting down.
    Shutdown,
    /// The tracker says the issue is no longer active.
    Reconcile,
    /// A token, cost or session budget ran out.
    Budget,
    /// An operator asked for it.
    User,
    /// The agent died of a signal nobody here sent (e.g. the OOM killer).
    Signal,
}

impl CancelReason {
    /// Every reason.
    pub const ALL: [CancelReason; 7] = [
        CancelReason::Stall,
        CancelReason::TurnTimeout,
        CancelReason::Shutdown,
        CancelReason::Reconcile,
        CancelReason::Budget,
        CancelReason::User,
        CancelReason::Signal,
    ];

    /// The stable snake_case text (the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Stall => "stall",
            CancelReason::TurnTimeout => "turn_timeout",
            CancelReason::Shutdown => "shutdown",
            CancelReason::Reconcile => "reconcile",
            CancelReason::Budget => "budget",
            CancelReason::User => "user",
            CancelReason::Signal => "signal",
        }
    }

    /// The reason whose [`as_str`](Self::as_str) is `text`.
    pub fn from_code(text: &str) -> Option<CancelReason> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

struct Inner {
    reason: Mutex<Option<CancelReason>>,
    trigger: Mutex<Option<Sender<()>>>,
    fired: Receiver<()>,
    /// Dropped by [`CancelToken::escalate`]: the SIGTERM grace ends now.
    urgent_trigger: Mutex<Option<Sender<()>>>,
    urgent: Receiver<()>,
}

/// A cloneable cancellation handle; the first `cancel` wins.
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("reason", &self.reason())
            .finish()
    }
}

impl CancelToken {
    pub fn new() -> Self {
        let (tx, rx) = crossbeam_channel::bounded(0);
        let (urgent_tx, urgent_rx) = crossbeam_channel::bounded(0);
        CancelToken {
            inner: Arc::new(Inner {
                reason: Mutex::new(None),
                trigger: Mutex::new(Some(tx)),
                fired: rx,
                urgent_trigger: Mutex::new(Some(urgent_tx)),
                urgent: urgent_rx,
            }),
        }
    }

    /// Cancels with `reason`; later calls keep the first reason.
    pub fn cancel(&self, reason: CancelReason) {
        {
            let mut r = self.inner.reason.lock().unwrap_or_else(|p| p.into_inner());
            if r.is_none() {
                *r = Some(reason);
            }
        }
        // Dropping the only sender disconnects `fired`, waking every waiter.
        self.inner
            .trigger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// Cancels with `reason` (if not cancelled yet) and ends any SIGTERM grace at once: a
    /// process group being stopped, or stopped later, gets SIGKILL without waiting.
    pub fn escalate(&self, reason: CancelReason) {
        self.cancel(reason);
        self.inner
            .urgent_trigger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// Whether [`escalate`](Self::escalate) was called.
    pub fn is_urgent(&self) -> bool {
        matches!(
            self.inner.urgent.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    /// A receiver that becomes ready (disconnected) once escalated; use it in `select!`.
    pub fn urgent_receiver(&self) -> &Receiver<()> {
        &self.inner.urgent
    }

    /// The reason, once cancelled.
    pub fn reason(&self) -> Option<CancelReason> {
        *self.inner.reason.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_cancelled(&self) -> bool {
        self.reason().is_some()
    }

    /// A receiver that becomes ready (disconnected) once cancelled; use it in `select!`.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.inner.fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_reason_text_is_the_serde_name_and_reads_back() {
        for r in CancelReason::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(r.as_str().into()));
            assert_eq!(CancelReason::from_code(r.as_str()), Some(r));
        }
        assert_eq!(CancelReason::from_code("nope"), None);
    }

    #[test]
    fn cancel_wakes_a_waiter_on_another_thread_and_keeps_first_reason() {
        let token = CancelToken::new();
        let waiter = token.clone();
        let handle = std::thread::spawn(move || {
            // Blocks until the token fires; a disconnect is the signal.
            let r = waiter.receiver().recv_timeout(Duration::from_secs(30));
            (
                matches!(r, Err(crossbeam_channel::RecvTimeoutError::Disconnected)),
                waiter.reason(),
            )
        });
        token.cancel(CancelReason::Stall);
        token.cancel(CancelReason::Shutdown);
        let (woke, reason) = handle.join().unwrap_or((false, None));
        assert!(woke);
        assert_eq!(reason, Some(CancelReason::Stall));
        assert!(token.is_cancelled());
        assert!(!token.is_urgent());
    }

    #[test]
    fn escalate_cancels_and_wakes_urgent_waiters() {
        let token = CancelToken::new();
        let waiter = token.clone();
        let handle = std::thread::spawn(move || {
            let r = waiter
                .urgent_receiver()
                .recv_timeout(Duration::from_secs(30));
            matches!(r, Err(crossbeam_channel::RecvTimeoutError::Disconnected))
        });
        token.escalate(CancelReason::Shutdown);
        assert!(handle.join().unwrap_or(false));
        assert!(token.is_urgent());
        assert_eq!(token.reason(), Some(CancelReason::Shutdown));
    }
}
