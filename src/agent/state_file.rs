//! `<workspace>/.sortie/state.json`: the run's progress (turn, tokens) kept current for tools
//! running inside the agent (the `sortie_status` MCP tool). Written atomically so a reader
//! never sees half a file.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// How often usage figures may rewrite the state file: each write is an fsync and a rename,
/// and an agent can report usage thousands of times a second.
pub const WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// The state file as a session keeps it, written at most once per [`WRITE_INTERVAL`].
///
/// The rule: a turn start and a turn or session end write at once ([`ThrottledStateFile::flush`]
/// or [`ThrottledStateFile::set_turn`]); usage figures only mark the content dirty and write
/// when the last write is at least [`WRITE_INTERVAL`] old. So agent-side tools see figures
/// at most a second stale while a turn runs and exact figures once it ends. Times come from
/// the caller (an injected clock), so the rule is tested without sleeping.
#[derive(Debug)]
pub struct ThrottledStateFile {
    workspace: PathBuf,
    state: StateFile,
    last_write: Option<Instant>,
    dirty: bool,
    writes: u64,
}

impl ThrottledStateFile {
    pub fn new(workspace: &Path, state: StateFile) -> ThrottledStateFile {
        ThrottledStateFile {
            workspace: workspace.to_path_buf(),
            state,
            last_write: None,
            dirty: true,
            writes: 0,
        }
    }

    /// The content as last updated (written or not).
    pub fn state(&self) -> &StateFile {
        &self.state
    }

    /// How many times the file was written.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// A new turn starts: written at once so tools see the turn number.
    pub fn set_turn(&mut self, turn: u32, now: Instant) {
        self.state.turn_number = turn;
        self.dirty = true;
        self.flush(now);
    }

    /// Adds one usage delta; writes only when the last write is old enough.
    pub fn add_usage(&mut self, usage: &crate::agent::TokenUsage, now: Instant) {
        let st = &mut self.state;
        st.input_tokens += usage.input_tokens;
        st.output_tokens += usage.output_tokens;
        st.total_tokens += usage.total_tokens;
        st.cache_read_tokens += usage.cache_read_tokens;
        st.cache_write_tokens += usage.cache_write_tokens;
        self.dirty = true;
        let due = self
            .last_write
            .is_none_or(|at| now.saturating_duration_since(at) >= WRITE_INTERVAL);
        if due {
            self.flush(now);
        }
    }

    /// Writes pending figures now (turn end, session end); nothing when already current.
    pub fn flush(&mut self, now: Instant) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.last_write = Some(now);
        self.writes += 1;
        if let Err(e) = write(&self.workspace, &self.state) {
            // A failure only costs agent-side tools their view.
            log::debug!(
                workspace:% = self.workspace.display(),
                error:% = e.to_string();
                "state file not written"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::TokenUsage;
    use crate::clock::{Clock, ManualClock};

    #[test]
    fn usage_writes_coalesce_and_the_turn_end_writes_the_final_figures() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::new(0);
        let mut file = ThrottledStateFile::new(dir.path(), StateFile::default());
        file.set_turn(1, clock.instant());
        assert_eq!(file.writes(), 1);
        for _ in 0..1_000 {
            file.add_usage(&TokenUsage::new(2, 1, 0, 0), clock.instant());
            clock.advance(Duration::from_millis(3));
        }
        // 3 s of figures: one write per elapsed second at most.
        assert!(file.writes() <= 4, "writes={}", file.writes());
        file.flush(clock.instant());
        let on_disk = read(dir.path()).expect("state file");
        assert_eq!(on_disk.input_tokens, 2_000);
        assert_eq!(on_disk.output_tokens, 1_000);
        assert_eq!(on_disk.turn_number, 1);
        let before = file.writes();
        file.flush(clock.instant());
        assert_eq!(file.writes(), before, "a clean file is not rewritten");
    }
}
