//! One operator shell snippet (`sh -c`) run in a workspace: its own process group, a scrubbed
//! environment, merged capped output, a deadline and a cancel channel. Hooks and other operator
//! commands (self-review's verification commands, the workspace diff) all run through it, so a
//! timeout or a cancel always kills the whole group.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::output_capture::{Keep, attach_merged_output_keeping};
use super::process_group::{WaitOutcome, spawn_in_new_group};

/// After the shell exits (or is killed), how long to wait for its output pipe to close; a
/// background process that inherited the pipe must not hang the caller.
const PIPE_GRACE: Duration = Duration::from_secs(3);

/// One command to run.
pub struct ShellRun<'a> {
    pub script: &'a str,
    /// The working directory (must be a directory).
    pub workspace: &'a Path,
    /// The whole environment of the shell.
    pub env: Vec<(OsString, OsString)>,
    pub timeout_ms: u64,
    /// A message (or a dropped sender) kills the group early.
    pub cancel: &'a Receiver<()>,
    /// Bytes of merged output kept.
    pub output_cap: usize,
    pub keep: Keep,
    /// Runs the shell under `bwrap` with this profile (the workspace read-write).
    pub sandbox: Option<&'a crate::sandbox::Sandbox>,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEnd {
    /// The shell exited (or a signal ended it) by itself.
    Exited(ExitStatus),
    /// The deadline passed; the group was killed.
    TimedOut,
    /// The cancel channel fired; the group was killed.
    Cancelled,
}

/// What a finished command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    pub end: ShellEnd,
    /// The kept output, not masked (callers decide; see `crate::mask`).
    pub output: Vec<u8>,
    /// Bytes the command wrote in total.
    pub total_bytes: u64,
    /// True when the cap dropped output.
    pub truncated: bool,
    pub duration_ms: u64,
}

impl ShellOutcome {
    /// The exit code of a shell that exited by itself (`None` for a signal, a timeout, a cancel).
    pub fn exit_code(&self) -> Option<i32> {
        match self.end {
            ShellEnd::Exited(status) => status.code(),
            ShellEnd::TimedOut | ShellEnd::Cancelled => None,
        }
    }

    /// Whether the shell exited 0.
    pub fn success(&self) -> bool {
        matches!(self.end, ShellEnd::Exited(status) if status.success())
    }
}

/// Runs `run.script` and waits for it (bounded by its timeout plus the pipe grace). `Err` when
/// the shell could not be started or observed (a missing workspace directory included).
pub fn run_shell(run: ShellRun<'_>) -> io::Result<ShellOutcome> {
    if !std::fs::metadata(run.workspace)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", run.workspace.display()),
        ));
    }
    let mut cmd = shell_command(&run)?;
    cmd.current_dir(run.workspace)
        .env_clear()
        .envs(run.env)
        .stdin(Stdio::null());
    // Tagged, so the keeper stops it (and what it left behind) if sortie dies.
    crate::process_signal::orphans::tag_helper(&mut cmd);
    let capture = attach_merged_output_keeping(&mut cmd, run.output_cap, run.keep)?;
    let started = Instant::now();
    let mut child = spawn_in_new_group(cmd)?;
    let timeout = Duration::from_millis(run.timeout_ms);
    let end = match child.wait_timeout_or_cancel(timeout, run.cancel) {
        Ok(WaitOutcome::Exited(status)) => ShellEnd::Exited(status),
        Ok(stop @ (WaitOutcome::TimedOut | WaitOutcome::Cancelled)) => {
            let _ = child.kill_and_reap();
            if stop == WaitOutcome::TimedOut {
                ShellEnd::TimedOut
            } else {
                ShellEnd::Cancelled
            }
        }
        Err(e) => {
            // Cannot observe the child any more: kill it rather than leave it unsupervised.
            let _ = child.kill_and_reap();
            return Err(e);
        }
    };
    let captured = capture.finish(PIPE_GRACE);
    Ok(ShellOutcome {
        end,
        output: captured.bytes,
        total_bytes: captured.total_bytes,
        truncated: captured.truncated,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// `sh -c script`, directly or under the sandbox (a sandbox that cannot be set up fails the
/// start: the command never runs outside it).
fn shell_command(run: &ShellRun<'_>) -> io::Result<Command> {
    let args = ["-c".to_string(), run.script.to_string()];
    match run.sandbox {
        Some(sb) => {
            crate::sandbox::wrap_command(sb, "sh", &args, run.workspace, Some(run.env.as_slice()))
                .map_err(io::Error::other)
        }
        None => {
            let mut cmd = Command::new("sh");
            cmd.args(args);
            Ok(cmd)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(script: &str, timeout_ms: u64, cap: usize, keep: Keep) -> ShellOutcome {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        run_shell(ShellRun {
            script,
            workspace: dir.path(),
            env,
            timeout_ms,
            cancel: &crossbeam_channel::never(),
            output_cap: cap,
            keep,
            sandbox: None,
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn exit_codes_and_capped_output_are_reported() {
        let out = run(
            "echo hello; echo oops >&2; exit 3",
            30_000,
            1024,
            Keep::Tail,
        );
        assert_eq!(out.exit_code(), Some(3));
        assert!(!out.success());
        assert_eq!(String::from_utf8_lossy(&out.output), "hello\noops\n");
        let head = run("printf abcdefgh", 30_000, 3, Keep::Head);
        assert!(head.success());
        assert_eq!(
            (head.output.as_slice(), head.truncated),
            (&b"abc"[..], true)
        );
        assert_eq!(head.total_bytes, 8);
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_its_group() {
        let out = run("sleep 30 & sleep 30", 100, 1024, Keep::Tail);
        assert_eq!(out.end, ShellEnd::TimedOut);
        assert_eq!(out.exit_code(), None);
    }
}
