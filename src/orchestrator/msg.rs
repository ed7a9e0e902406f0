//! Messages into the orchestrator thread (ARCHITECTURE.md, "Threads": threads talk only through channels).

use crossbeam_channel::{Receiver, Sender};

use crate::agent::status_file::DeclaredOutcome;
use crate::agent::{AgentErrorKind, AgentEvent, CancelReason};

/// Why an attempt failed: the agent's own error kind, or a step the supervisor runs
/// around the agent. Its text starts the run's stored error (`code: message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Agent(AgentErrorKind),
    /// The workspace could not be prepared.
    Workspace,
    /// The `before_run` hook failed.
    Hook,
    /// The prompt template could not be rendered for a turn.
    PromptRender,
    /// The issue's tracker state could not be read between turns.
    TrackerRefresh,
    /// The supervisor thread panicked (a bug); the run failed and is retried with backoff.
    SupervisorPanic,
    /// The provider refused the session for a usage limit (the run's status is
    /// `usage_limited`).
    UsageLimited,
    /// The run would have handed its issue off but showed no evidence of work
    /// (`tracker.handoff_evidence`).
    HandoffWithheld,
}

impl ErrorCode {
    /// The stable snake_case text stored and served for this code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Agent(kind) => kind.code(),
            ErrorCode::Workspace => "workspace_error",
            ErrorCode::Hook => "hook_failed",
            ErrorCode::PromptRender => "prompt_render",
            ErrorCode::TrackerRefresh => "tracker_refresh_failed",
            ErrorCode::SupervisorPanic => "supervisor_panic",
            ErrorCode::UsageLimited => "usage_limited",
            ErrorCode::HandoffWithheld => "handoff_withheld",
        }
    }

    /// The code whose [`as_str`](Self::as_str) is `text`.
    pub fn from_code(text: &str) -> Option<ErrorCode> {
        if let Some(kind) = AgentErrorKind::from_code(text) {
            return Some(ErrorCode::Agent(kind));
        }
        [
            ErrorCode::Workspace,
            ErrorCode::Hook,
            ErrorCode::PromptRender,
            ErrorCode::TrackerRefresh,
            ErrorCode::SupervisorPanic,
            ErrorCode::UsageLimited,
            ErrorCode::HandoffWithheld,
        ]
        .into_iter()
        .find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SupervisorExit {
    /// The turn loop ended without an error: max turns reached, the issue left the active
    /// states, or the agent declared an outcome in `.sortie/status`.
    Normal {
        declared: Option<DeclaredOutcome>,
        statement: Option<String>,
    },
    /// The attempt failed.
    Error {
        code: ErrorCode,
        message: String,
        retryable: bool,
    },
    /// Cancelled on request (stall, reconciliation, budget, shutdown).
    Cancelled { reason: CancelReason },
    /// The provider refused the session for a usage limit before the agent did any work.
    UsageLimited(UsageLimit),
    /// A normal exit whose handoff Sortie withheld for want of evidence of work
    /// (`orchestrator::handoff_evidence`); `missing` says what the run did not show.
    HandoffWithheld {
        declared: Option<DeclaredOutcome>,
        statement: Option<String>,
        missing: String,
    },
}

/// A usage limit as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLimit {
    pub message: String,
    /// When the limit resets, epoch ms; `None` when the agent did not say.
    pub resets_at_ms: Option<i64>,
    /// The model the limit names; `None` for a limit on every model of the kind.
    pub model: Option<String>,
}

/// What a supervisor thread reports when its attempt is over.
#[derive(Debug, Clone)]
pub struct SupervisorResult {
    pub dispatch_id: String,
    pub issue_id: String,
    pub exit: SupervisorExit,
    pub turns_completed: u32,
    pub session_id: Option<String>,
    pub workspace_path: Option<std::path::PathBuf>,
    pub ended_at_ms: i64,
    /// The pull-request record (`.sortie/scm.json`) the worker left, read at its exit.
    pub pr_record: Option<crate::agent::pr_record::PrRecord>,
    /// What the workspace showed after a normal exit, read when `tracker.handoff_evidence`
    /// was set at dispatch.
    pub evidence: Option<super::handoff_evidence::WorkspaceEvidence>,
}

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
    NotSaved(super::persist::PersistError),
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
pub struct EventGate {
    slots: Sender<()>,
    release: Receiver<()>,
    shed: u64,
}

/// One taken slot; dropping it (the orchestrator handled or discarded the message) frees it.
pub struct InFlight(Receiver<()>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let _ = self.0.try_recv();
    }
}

impl EventGate {
    pub fn new(capacity: usize) -> EventGate {
        let (slots, release) = crossbeam_channel::bounded(capacity.max(1));
        EventGate {
            slots,
            release,
            shed: 0,
        }
    }

    /// A slot for one event, or `None` when a sheddable event is dropped.
    pub fn admit(&mut self, sheddable: bool) -> Option<InFlight> {
        let taken = if sheddable {
            self.slots.try_send(()).is_ok()
        } else {
            // The gate holds the receiving end, so this send only waits, it cannot fail.
            self.slots.send(()).is_ok()
        };
        if !taken {
            self.shed += 1;
            return None;
        }
        Some(InFlight(self.release.clone()))
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
        phase: super::self_review::SelfReviewPhase,
    },
    /// A supervisor finished.
    Exit(Box<SupervisorResult>),
    /// The run record of this dispatch, kept for retry when the database could not take it,
    /// has committed (sent by the writer thread).
    RunRecorded { dispatch_id: String },
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
    fn error_codes_keep_their_stored_text() {
        assert_eq!(
            ErrorCode::Agent(AgentErrorKind::AgentNotFound).as_str(),
            "agent_not_found"
        );
        assert_eq!(
            ErrorCode::Agent(AgentErrorKind::TurnFailed).to_string(),
            "turn_failed"
        );
        assert_eq!(ErrorCode::Workspace.as_str(), "workspace_error");
        assert_eq!(ErrorCode::Hook.as_str(), "hook_failed");
        assert_eq!(ErrorCode::PromptRender.as_str(), "prompt_render");
    }

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
