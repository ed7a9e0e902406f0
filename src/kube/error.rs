//! The errors of the Kubernetes client and the relay.

use std::path::Path;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeErrorKind {
    /// The settings or a credential file cannot be used.
    Config,
    /// No answer: connection, TLS or deadline.
    Transport,
    /// The API answered with this status.
    Status(u16),
    /// The answer was not the JSON expected, or too large.
    Decode,
    /// The object is still used by something that must end first.
    InUse,
}

/// A failed call, with what it was and what came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeError {
    pub kind: KubeErrorKind,
    pub message: String,
}

impl KubeError {
    pub fn new(kind: KubeErrorKind, message: impl Into<String>) -> KubeError {
        KubeError {
            kind,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self.kind {
            KubeErrorKind::Status(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for KubeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KubeError {}

/// A file path as the error messages show it.
pub(crate) fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// Why the relay could not run a session's Job to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayError(pub String);

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RelayError {}

impl From<String> for RelayError {
    fn from(s: String) -> RelayError {
        RelayError(s)
    }
}

impl From<&str> for RelayError {
    fn from(s: &str) -> RelayError {
        RelayError(s.to_string())
    }
}
