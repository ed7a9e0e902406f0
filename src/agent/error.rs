//! Agent error kinds. The code strings are part of the persisted and served contract, and
//! `retryable()` decides whether the generic backoff path may retry the attempt.

use std::fmt;

/// Why an agent attempt failed; drives the retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentErrorKind {
    AgentNotFound,
    InvalidWorkspaceCwd,
    TurnInputRequired,
    TurnCancelled,
    ResponseTimeout,
    TurnTimeout,
    PortExit,
    ResponseError,
    TurnFailed,
    /// The agent CLI is not logged in (or its credentials were refused): every session of the
    /// kind would fail the same way until a person logs it in.
    AgentAuthFailed,
}

impl AgentErrorKind {
    /// Every kind.
    pub const ALL: [AgentErrorKind; 10] = [
        AgentErrorKind::AgentNotFound,
        AgentErrorKind::InvalidWorkspaceCwd,
        AgentErrorKind::TurnInputRequired,
        AgentErrorKind::TurnCancelled,
        AgentErrorKind::ResponseTimeout,
        AgentErrorKind::TurnTimeout,
        AgentErrorKind::PortExit,
        AgentErrorKind::ResponseError,
        AgentErrorKind::TurnFailed,
        AgentErrorKind::AgentAuthFailed,
    ];

    /// The kind whose [`code`](Self::code) is `text`.
    pub fn from_code(text: &str) -> Option<AgentErrorKind> {
        Self::ALL.into_iter().find(|k| k.code() == text)
    }

    /// The stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            AgentErrorKind::AgentNotFound => "agent_not_found",
            AgentErrorKind::InvalidWorkspaceCwd => "invalid_workspace_cwd",
            AgentErrorKind::TurnInputRequired => "turn_input_required",
            AgentErrorKind::TurnCancelled => "turn_cancelled",
            AgentErrorKind::ResponseTimeout => "response_timeout",
            AgentErrorKind::TurnTimeout => "turn_timeout",
            AgentErrorKind::PortExit => "port_exit",
            AgentErrorKind::ResponseError => "response_error",
            AgentErrorKind::TurnFailed => "turn_failed",
            AgentErrorKind::AgentAuthFailed => "agent_auth_failed",
        }
    }

    /// Whether the generic backoff path retries this kind. Configuration-like failures
    /// (missing binary, bad workspace, agent asking for input) would fail the same way
    /// again; cancellations schedule their own retry where one is wanted.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            AgentErrorKind::ResponseTimeout
                | AgentErrorKind::TurnTimeout
                | AgentErrorKind::PortExit
                | AgentErrorKind::ResponseError
                | AgentErrorKind::TurnFailed
        )
    }
}

impl fmt::Display for AgentErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An agent failure with its kind and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub kind: AgentErrorKind,
    pub message: String,
}

impl AgentError {
    pub fn new(kind: AgentErrorKind, message: impl Into<String>) -> Self {
        AgentError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for AgentError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_policy_matches_the_contract() {
        let no_retry = [
            AgentErrorKind::AgentNotFound,
            AgentErrorKind::InvalidWorkspaceCwd,
            AgentErrorKind::TurnInputRequired,
            AgentErrorKind::TurnCancelled,
            AgentErrorKind::AgentAuthFailed,
        ];
        for k in no_retry {
            assert!(!k.retryable(), "{k}");
        }
        let retry = [
            AgentErrorKind::ResponseTimeout,
            AgentErrorKind::TurnTimeout,
            AgentErrorKind::PortExit,
            AgentErrorKind::ResponseError,
            AgentErrorKind::TurnFailed,
        ];
        for k in retry {
            assert!(k.retryable(), "{k}");
        }
        for k in AgentErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).ok(), Some(k.code().into()));
            assert_eq!(AgentErrorKind::from_code(k.code()), Some(k));
        }
        assert_eq!(
            serde_json::to_string(&AgentErrorKind::AgentNotFound).ok(),
            Some("\"agent_not_found\"".to_string())
        );
    }
}
