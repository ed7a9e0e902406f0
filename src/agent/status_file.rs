//! The stop protocol: an agent ends its run early by writing `<workspace>/.sortie/status`,
//! line 1 a token (`blocked`, `needs-human-review`, `no-change-needed`) and the following lines
//! an optional statement. The orchestrator deletes the file before each dispatch and reads it
//! after each successful turn. Symlinks, oversized, binary or unknown content count as absent
//! (with a warning), so a workspace cannot point the reader elsewhere.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// Largest status file accepted (token plus statement).
pub const MAX_STATUS_BYTES: u64 = 64 * 1024;
/// Longest statement kept, in chars.
pub const MAX_STATEMENT_CHARS: usize = 4000;

/// What the agent declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeclaredOutcome {
    #[serde(rename = "blocked")]
    Blocked,
    #[serde(rename = "needs-human-review")]
    NeedsHumanReview,
    #[serde(rename = "no-change-needed")]
    NoChangeNeeded,
}

impl DeclaredOutcome {
    /// The token as written in the file and served by the API.
    pub fn token(self) -> &'static str {
        match self {
            DeclaredOutcome::Blocked => "blocked",
            DeclaredOutcome::NeedsHumanReview => "needs-human-review",
            DeclaredOutcome::NoChangeNeeded => "no-change-needed",
        }
    }

    pub fn from_token(token: &str) -> Option<Self> {
        match token {
            "blocked" => Some(DeclaredOutcome::Blocked),
            "needs-human-review" => Some(DeclaredOutcome::NeedsHumanReview),
            "no-change-needed" => Some(DeclaredOutcome::NoChangeNeeded),
            _ => None,
        }
    }
}

/// The result of reading the status file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusRead {
    pub outcome: Option<DeclaredOutcome>,
    /// The cleaned statement; never `Some("")`.
    pub statement: Option<String>,
    /// Why a present file was refused (log it at warn).
    pub warning: Option<String>,
}

impl StatusRead {
    fn refused(reason: String) -> Self {
        StatusRead {
            warning: Some(reason),
            ..StatusRead::default()
        }
    }
}

use super::sortie_file::sortie_dir;

/// The status file path inside a workspace.
pub fn status_path(workspace: &Path) -> PathBuf {
    sortie_dir(workspace).join("status")
}

/// Deletes `.sortie/status` before a dispatch. Never follows a symlinked `.sortie`; a
/// symlinked `status` is removed as a link. A missing file is fine.
pub fn clear(workspace: &Path) -> io::Result<()> {
    let dir = sortie_dir(workspace);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(io::Error::other(format!(
                "{} is a symlink; not touching it",
                dir.display()
            )));
        }
        Ok(_) => {}
    }
    match std::fs::remove_file(status_path(workspace)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Reads and validates `.sortie/status`.
pub fn read(workspace: &Path) -> StatusRead {
    read_on(workspace, None)
}

/// [`read`] of a workspace on `host` (`None` reads here); parsed exactly alike.
pub fn read_on(workspace: &Path, host: Option<&crate::ssh::SshHost>) -> StatusRead {
    match super::sortie_file::read_on(workspace, "status", MAX_STATUS_BYTES, host) {
        Ok(None) => StatusRead::default(),
        Ok(Some(bytes)) => parse(&bytes),
        Err(reason) => StatusRead::refused(reason.to_string()),
    }
}

/// Parses status file content (pure).
pub fn parse(bytes: &[u8]) -> StatusRead {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return StatusRead::refused("status file is not UTF-8 text".into());
    };
    if text.contains('\0') {
        return StatusRead::refused("status file is binary".into());
    }
    let text = text.replace("\r\n", "\n");
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let token = first.trim_matches(['\t', '\n', '\r', ' ']);
    let Some(outcome) = DeclaredOutcome::from_token(token) else {
        let shown: String = token.chars().take(40).collect();
        return StatusRead::refused(if token.is_empty() {
            "status file is empty".into()
        } else {
            format!("unknown status token {shown:?}")
        });
    };
    StatusRead {
        outcome: Some(outcome),
        statement: clean_statement(rest),
        warning: None,
    }
}

/// Trims, drops ANSI codes and control characters other than newlines, bounds the length;
/// blank → `None`.
pub fn clean_statement(raw: &str) -> Option<String> {
    let kept: String = super::text::strip_ansi(raw)
        .replace('\r', "\n")
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    let trimmed = kept.trim();
    if trimmed.is_empty() {
        return None;
    }
    Some(super::text::cut_chars(trimmed, MAX_STATEMENT_CHARS))
}
