//! `<workspace>/.sortie/state.json`: the run's progress (turn, tokens) kept current for tools
//! running inside the agent (the `sortie_status` MCP tool). Written atomically so a reader
//! never sees half a file.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Largest state file a reader accepts.
pub const MAX_STATE_BYTES: u64 = 4096;

/// The file's content.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StateFile {
    pub turn_number: u32,
    pub max_turns: u32,
    pub attempt: Option<u32>,
    /// RFC 3339 start of the session.
    pub started_at: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl StateFile {
    /// The file for a turn; `usage` is the run so far (`None` before any figure: zeros).
    pub fn new(
        turn_number: u32,
        max_turns: u32,
        attempt: Option<u32>,
        started_at_ms: i64,
        usage: Option<&crate::agent::TokenUsage>,
    ) -> StateFile {
        let u = usage.copied().unwrap_or_default();
        StateFile {
            turn_number,
            max_turns,
            attempt,
            started_at: crate::clock::rfc3339_ms(started_at_ms),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.total_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

/// The state file path inside a workspace.
pub fn state_path(workspace: &Path) -> PathBuf {
    workspace.join(".sortie").join("state.json")
}

/// Writes the state file: temp file in `.sortie/`, then rename. Refuses a symlinked `.sortie`.
pub fn write(workspace: &Path, state: &StateFile) -> io::Result<()> {
    let dir = workspace.join(".sortie");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(io::Error::other(format!("{} is a symlink", dir.display())));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(&dir)?,
        Err(e) => return Err(e),
    }
    let body = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
    let tmp = dir.join(format!(".state.json.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, state_path(workspace))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads the state file (no symlinks, at most [`MAX_STATE_BYTES`]).
pub fn read(workspace: &Path) -> io::Result<StateFile> {
    let path = state_path(workspace);
    for p in [workspace.join(".sortie"), path.clone()] {
        if std::fs::symlink_metadata(&p)?.file_type().is_symlink() {
            return Err(io::Error::other(format!("{} is a symlink", p.display())));
        }
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)?;
    let mut buf = Vec::new();
    f.take(MAX_STATE_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_STATE_BYTES {
        return Err(io::Error::other("state file over the size limit"));
    }
    serde_json::from_slice(&buf).map_err(io::Error::other)
}
