//! The records an attempt leaves: how it ended, what the supervisor read of its workspace,
//! where its self-review phase stands, and why a database call about it failed. A leaf:
//! the message enum, persistence, the state and the exit step all speak these words, and
//! this module imports nothing else of the orchestrator.

use crate::agent::status_file::DeclaredOutcome;
use crate::agent::{AgentErrorKind, CancelReason};
use crate::store::StoreError;
use crate::workspace::evidence::{EvidenceError, Observed};

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
    /// (`tracker.handoff_evidence`); `missing` says what the run did not show.
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
    pub evidence: Option<WorkspaceEvidence>,
}

/// A database call of the orchestrator that failed. The text is the store's own (the API
/// serves it as the database check's error, and a stored word outside its vocabulary is named
/// in it); `op` names the call for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistError {
    pub op: &'static str,
    pub message: String,
}

impl PersistError {
    pub fn store(op: &'static str) -> impl FnOnce(StoreError) -> PersistError {
        move |e| PersistError {
            op,
            message: e.to_string(),
        }
    }
}

impl std::fmt::Display for PersistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PersistError {}

/// What the supervisor read of the workspace after a normal exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceEvidence {
    /// What git showed, or why the workspace could not be read (git missing or failing, a
    /// timeout, the SSH host).
    pub git: Result<Observed, EvidenceError>,
    /// The run left a pull-request record other than the one the session started with.
    pub new_pr_record: bool,
}

/// What the orchestrator hears about a running phase (the running row's self-review facts and,
/// at its end, the run's audit trail).
#[derive(Debug, Clone, PartialEq)]
pub enum SelfReviewPhase {
    /// The phase began.
    Started,
    /// Sortie takes the diff and runs the verification commands (no agent turn runs).
    Checking,
    /// This many iterations have completed.
    Iteration(u32),
    /// The phase ended; its audit trail, stored as the run's `review_metadata`.
    Done(Option<Box<serde_json::Value>>),
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
}
