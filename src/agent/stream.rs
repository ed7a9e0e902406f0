//! The pure side of a fork-per-turn agent: a stream parser turns stdout lines into events and,
//! given how the process ended, decides the turn's outcome. No processes are involved, so
//! recorded fixtures replay straight through a parser.

use super::cancel::CancelReason;
use super::error::AgentErrorKind;
use super::event::{AgentEvent, TokenUsage, TurnOutcome};

/// How the agent process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitInfo {
    pub code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
}

/// `exit 3`, `signal 9`, or `unknown` (a log field's text).
impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit {c}"),
            (None, Some(s)) => write!(f, "signal {s}"),
            (None, None) => f.write_str("unknown"),
        }
    }
}

/// Why the process could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnError {
    /// The binary does not exist (or is not executable).
    NotFound(String),
    /// The workspace failed validation.
    InvalidCwd(String),
    Other(String),
}

/// Everything the supervisor knows once a turn's process is gone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TurnEnd {
    pub spawn_error: Option<SpawnError>,
    /// A stdout failure, e.g. a line over the cap.
    pub read_error: Option<String>,
    /// Set when the turn was cancelled from outside (or timed out).
    pub cancelled: Option<CancelReason>,
    pub exit: Option<ExitInfo>,
    /// The process's bounded stderr (head and tail), for kinds whose CLI reports some
    /// failures only there, in plain text.
    pub stderr: String,
    /// Set when the startup deadline ([`crate::agent::process::TurnLimits::first_line_timeout`])
    /// expired and the supervisor killed the agent for it.
    pub first_line_timeout: Option<std::time::Duration>,
}

/// A per-turn parser for one agent kind's stdout.
pub trait StreamParser: Send {
    /// The process started with `pid`.
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent>;
    /// One stdout line, without its newline. Never ends the turn.
    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent>;
    /// Decides the outcome; the returned events end with exactly one terminal event.
    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>);
    /// The session id the stream reported, if any.
    fn session_id(&self) -> Option<String>;
    /// The turn's total usage so far; `None` when nothing was reported.
    fn usage(&self) -> Option<TokenUsage>;
    /// The model the stream reported.
    fn model(&self) -> Option<String>;
    /// Whether the agent has printed what ends the startup deadline; by default any line does.
    fn started(&self) -> bool {
        true
    }
}

/// Arms 1–5 of the fork-per-turn decision tree, shared by every kind: spawn failure, stdout
/// read error, cancellation, exit 127, death by signal. `None` means the stream decides.
pub fn shared_outcome(end: &TurnEnd) -> Option<TurnOutcome> {
    if let Some(err) = &end.spawn_error {
        if let Some(reason) = end.cancelled {
            return Some(TurnOutcome::Cancelled { reason });
        }
        return Some(match err {
            SpawnError::NotFound(m) => TurnOutcome::Failed {
                message: format!("agent binary not found: {m}"),
                kind: AgentErrorKind::AgentNotFound,
            },
            SpawnError::InvalidCwd(m) => TurnOutcome::Failed {
                message: format!("invalid workspace: {m}"),
                kind: AgentErrorKind::InvalidWorkspaceCwd,
            },
            SpawnError::Other(m) => TurnOutcome::Failed {
                message: format!("agent spawn failed: {m}"),
                kind: AgentErrorKind::PortExit,
            },
        });
    }
    if let Some(err) = &end.read_error {
        if let Some(reason) = end.cancelled {
            return Some(TurnOutcome::Cancelled { reason });
        }
        return Some(TurnOutcome::Failed {
            message: format!("stdout read error: {err}"),
            kind: AgentErrorKind::PortExit,
        });
    }
    if let Some(reason) = end.cancelled {
        return Some(TurnOutcome::Cancelled { reason });
    }
    if let Some(t) = end.first_line_timeout {
        return Some(TurnOutcome::EndedWithError {
            message: format!("the agent printed no output within {} ms", t.as_millis()),
            kind: AgentErrorKind::ResponseTimeout,
        });
    }
    let exit = end.exit.unwrap_or_default();
    if exit.code == Some(127) {
        return Some(TurnOutcome::Failed {
            message: "agent binary not found".into(),
            kind: AgentErrorKind::AgentNotFound,
        });
    }
    // Not cancelled by sortie (that is `end.cancelled` above): something else killed the
    // agent (the OOM killer, a person). A failed turn, retried after the failure backoff.
    if let Some(signal) = exit.signal {
        return Some(TurnOutcome::Failed {
            message: format!("agent killed by signal {signal} not sent by sortie"),
            kind: AgentErrorKind::PortExit,
        });
    }
    None
}
