//! Messages into the orchestrator thread (ARCHITECTURE.md, "Threads": threads talk only through channels).

use crossbeam_channel::Sender;

use crate::agent::AgentEvent;

pub use crate::orchestrator::core::run_record::{
    ErrorCode, SupervisorExit, SupervisorResult, UsageLimit,
};
use crate::orchestrator::core::run_record::{PersistError, SelfReviewPhase};

/// Answer to a refresh request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// A tick was queued.
    Queued,
    /// A tick was already queued; this request joined it.
    Coalesced,
    /// The orchestrator is shutting down.
    Draining,
}

/// Why a request sent to the orchestrator got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Shutdown had begun before the request was taken; nothing changed.
    ShuttingDown,
    /// No answer within the deadline; nothing changed.
    NotTaken,
}

/// Answer to a retry-now request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryNowOutcome {
    /// No queued retry for that identifier.
    NotFound,
    /// The retry started a session.
    Started { dispatch_id: String },
    /// The retry could not start; it is back in the queue at its previous attempt.
    StillWaiting { reason: String, due_at_ms: i64 },
    /// The orchestrator is shutting down.
    Draining,
}

/// Answer to a request to check a pending reaction now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckNowOutcome {
    /// No pending reaction of that kind for that identifier.
    NotFound,
    /// The reaction's next check is due now (it may have been already).
    Due(DueReaction),
    /// The orchestrator is shutting down.
    Draining,
}

/// The pending reaction a check-now request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueReaction {
    pub issue_id: String,
    pub issue_identifier: String,
    pub display_identifier: String,
    pub kind: crate::domain::ReactionKind,
    pub pr: crate::scm::PullRequestRef,
}

/// Why an acknowledgement was not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckError {
    /// The orchestrator is shutting down and takes no new acknowledgements.
    Draining,
    /// The database write failed.
    NotSaved(PersistError),
}

impl std::fmt::Display for AckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AckError::Draining => f.write_str("draining"),
            AckError::NotSaved(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AckError {}

/// How many events of one session may wait in the orchestrator's queue.
pub const EVENTS_IN_FLIGHT: usize = 1_024;

/// Bounds one session's events queued for the orchestrator, whose channel is shared with
/// every other sender and so stays unbounded.
///
/// The shedding rule: when the session already has [`EVENTS_IN_FLIGHT`] events unhandled, a
/// sheddable event (`AgentEventKind::is_sheddable`: messages and tool chatter) is dropped
/// and counted; any other event (usage, rate limits, session start, turn end, failures) waits
/// for a slot, which pushes back through the bounded channels to the agent's stdout pipe.
///
/// Slots are a count under a lock rather than one channel operation each, so a batch of
/// events ([`OrchMsg::AgentBatch`]) takes and frees its slots together.
pub struct EventGate {
    slots: std::sync::Arc<Slots>,
    capacity: usize,
    shed: u64,
}

/// The count of a gate's taken slots, and the wake of a sender waiting for one.
#[derive(Default)]
struct Slots {
    count: std::sync::Mutex<Count>,
    freed: std::sync::Condvar,
}

#[derive(Default)]
struct Count {
    taken: usize,
    /// The sender waits for a slot: only then does freeing one signal (a futex call).
    waiting: bool,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Count> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Taken slots (one per event they cover); dropping them (the orchestrator handled or
/// discarded the message) frees them.
pub struct InFlight {
    slots: std::sync::Arc<Slots>,
    count: usize,
}

impl InFlight {
    /// How many events these slots cover.
    pub fn count(&self) -> usize {
        self.count
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        let mut count = self.slots.lock();
        count.taken = count.taken.saturating_sub(self.count);
        let waiting = std::mem::take(&mut count.waiting);
        drop(count);
        if waiting {
            self.slots.freed.notify_all();
        }
    }
}

/// What [`EventGate::try_admit`] did with one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// The event has its slot (added to the given [`InFlight`]).
    Taken,
    /// A sheddable event found the gate full: dropped and counted.
    Shed,
    /// An essential event found the gate full: it must wait ([`EventGate::admit`]).
    Full,
}

impl EventGate {
    pub fn new(capacity: usize) -> EventGate {
        EventGate {
            slots: std::sync::Arc::default(),
            capacity: capacity.max(1),
            shed: 0,
        }
    }

    /// No slots yet: the start of a batch.
    pub fn none(&self) -> InFlight {
        InFlight {
            slots: std::sync::Arc::clone(&self.slots),
            count: 0,
        }
    }

    /// A slot for one event, or `None` when a sheddable event is dropped. An essential event
    /// waits for a slot.
    pub fn admit(&mut self, sheddable: bool) -> Option<InFlight> {
        let mut slot = self.none();
        match self.try_admit(&mut slot, sheddable) {
            Admitted::Taken => Some(slot),
            Admitted::Shed => None,
            Admitted::Full => {
                self.wait_admit(&mut slot);
                Some(slot)
            }
        }
    }

    /// Adds a slot for one event to `batch` if one is free; never waits.
    pub fn try_admit(&mut self, batch: &mut InFlight, sheddable: bool) -> Admitted {
        let mut count = self.slots.lock();
        if count.taken < self.capacity {
            count.taken += 1;
            batch.count += 1;
            return Admitted::Taken;
        }
        if sheddable {
            self.shed += 1;
            return Admitted::Shed;
        }
        Admitted::Full
    }

    /// Waits until a slot is free and adds it to `batch`. The caller holds no unsent slots
    /// (they could be the ones it waits for).
    pub fn wait_admit(&mut self, batch: &mut InFlight) {
        let mut count = self.slots.lock();
        while count.taken >= self.capacity {
            count.waiting = true;
            count = self
                .slots
                .freed
                .wait(count)
                .unwrap_or_else(|p| p.into_inner());
        }
        count.taken += 1;
        batch.count += 1;
    }

    /// Sheddable events dropped so far.
    pub fn shed(&self) -> u64 {
        self.shed
    }
}

/// Everything the orchestrator thread reacts to.
pub enum OrchMsg {
    /// An agent event of a running dispatch.
    Agent {
        /// Shared by every event of the dispatch (no copy per event).
        dispatch_id: std::sync::Arc<str>,
        event: AgentEvent,
        /// The event's slot in its session's [`EventGate`], freed when the message is dropped.
        slot: InFlight,
    },
    /// Agent events of a running dispatch in the order they came: what the forwarder drained
    /// in one go, so the orchestrator takes a burst with one message.
    AgentBatch {
        dispatch_id: std::sync::Arc<str>,
        events: Vec<AgentEvent>,
        /// One [`EventGate`] slot per event, freed when the message is dropped.
        slots: InFlight,
    },
    /// A supervisor prepared the session's workspace at `path`.
    WorkspaceReady {
        dispatch_id: String,
        path: std::path::PathBuf,
    },
    /// A supervisor started turn `turn` of its session.
    TurnStarted { dispatch_id: String, turn: u32 },
    /// A supervisor moved the session's issue to `state` (`tracker.in_progress_state`): the
    /// running row serves the state the tracker now holds, not the one the dispatch read.
    IssueMoved { dispatch_id: String, state: String },
    /// A supervisor's self-review phase moved on.
    SelfReview {
        dispatch_id: String,
        phase: SelfReviewPhase,
    },
    /// A supervisor finished.
    Exit(Box<SupervisorResult>),
    /// The run record of this dispatch, kept for retry when the database could not take it,
    /// has committed (sent by the writer thread).
    RunRecorded { dispatch_id: String },
    /// The session row of this dispatch has committed (or failed) on the writer thread: its
    /// supervisor may start.
    SessionRecorded {
        dispatch_id: String,
        result: Result<(), PersistError>,
    },
    /// Run a tick now (coalesced).
    Refresh {
        reply: Option<Sender<RefreshOutcome>>,
    },
    /// Make the retry of the issue with this identifier due now (same path as the timer).
    RetryNow {
        identifier: String,
        reply: Sender<RetryNowOutcome>,
    },
    /// Make the next check of the issue's pending reaction of `kind` due now.
    ReactionCheck {
        identifier: String,
        kind: crate::domain::ReactionKind,
        reply: Sender<CheckNowOutcome>,
    },
    /// Store an attention acknowledgement; answers once it is committed.
    Acknowledge {
        ack: crate::store::AttentionAck,
        /// The issue whose failure hold the acknowledged item reports: acknowledging it
        /// releases the hold.
        release_issue: Option<String>,
        reply: Sender<Result<crate::store::AttentionAck, AckError>>,
    },
    /// The workflow file changed on disk.
    WorkflowChanged,
    /// Begin graceful shutdown.
    Shutdown,
    /// A second signal: shut down now. Agents still in their SIGTERM grace are killed
    /// (SIGKILL to their process groups) at once; their runs are still recorded.
    ShutdownNow,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_gate_sheds_chatter_but_never_usage_or_turn_ends() {
        let mut gate = EventGate::new(2);
        let held: Vec<InFlight> = (0..2).filter_map(|_| gate.admit(false)).collect();
        assert_eq!(held.len(), 2);
        assert!(gate.admit(true).is_none(), "chatter is shed while full");
        assert_eq!(gate.shed(), 1);
        // An essential event waits for a slot: freed here by the "orchestrator" handling one.
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let waiter = std::thread::spawn(move || {
            let slot = gate.admit(false);
            let _ = done_tx.send(slot.is_some());
            gate
        });
        let mut held = held;
        drop(held.pop());
        let admitted = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(admitted, Ok(true));
        let gate = waiter.join().expect("gate thread");
        assert_eq!(gate.shed(), 1);
    }
}
