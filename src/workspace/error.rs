//! Typed workspace and hook errors. The `workspace <op>` / `hook <op>` prefixes match the error
//! catalogue so operators see the same wording as the original implementation.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::hook_kind::HookKind;

/// How much of a hook's captured output an error message shows: enough for the failing
/// command's message, small enough to stay one readable log line.
pub(crate) const DISPLAY_OUTPUT_TAIL: usize = 2 * 1024;

/// Everything that can go wrong while deriving, creating, removing a workspace or running a hook.
#[derive(Debug)]
pub enum WorkspaceError {
    /// The identifier cannot become a directory name (empty, `.` or `..`).
    Sanitize {
        identifier: String,
        reason: &'static str,
    },
    /// The root could not be made absolute or resolved.
    Resolve { root: PathBuf, source: io::Error },
    /// The derived path is not a real directory directly under the root.
    Containment {
        root: PathBuf,
        identifier: String,
        reason: &'static str,
    },
    /// Creating the root or the workspace directory failed.
    Create { path: PathBuf, source: io::Error },
    /// Inspecting an existing path failed.
    Stat { path: PathBuf, source: io::Error },
    /// Something that is not a directory occupies the workspace path.
    Conflict { path: PathBuf },
    /// Listing the root failed.
    ReadDir { path: PathBuf, source: io::Error },
    /// Deleting a workspace failed.
    Remove { path: PathBuf, source: io::Error },
    /// The root is not writable (startup preflight).
    Preflight { path: PathBuf, source: io::Error },
    /// A hook was asked to run somewhere it cannot (missing or non-directory cwd).
    HookValidate { hook: HookKind, reason: String },
    /// The hook's shell could not be started.
    HookStart { hook: HookKind, source: io::Error },
    /// The hook outlived `hooks.timeout_ms`; its whole process group was killed.
    HookTimeout {
        hook: HookKind,
        timeout_ms: u64,
        /// Masked output captured before the kill.
        output: String,
    },
    /// Another session (or process) holds the workspace's lock (`.sortie/lock`).
    Locked {
        path: PathBuf,
        /// The pid the holder wrote into the lock file, when readable.
        holder_pid: Option<u32>,
    },
    /// The workspace's lock file could not be created, opened or locked.
    Lock { path: PathBuf, source: io::Error },
    /// The caller cancelled the hook (worker cancellation); its process group was killed.
    HookCancelled { hook: HookKind },
    /// The hook exited non-zero or was killed by a signal.
    HookFailed {
        hook: HookKind,
        /// `None` when a signal ended the shell.
        exit_code: Option<i32>,
        signal: Option<i32>,
        /// Masked output (the last bytes, up to the capture cap).
        output: String,
        /// True when earlier output was dropped by the capture cap.
        output_truncated: bool,
    },
}

/// The last `DISPLAY_OUTPUT_TAIL` bytes of `output`, cut on a char boundary.
pub(crate) fn output_tail(output: &str) -> (&str, bool) {
    if output.len() <= DISPLAY_OUTPUT_TAIL {
        return (output, false);
    }
    let mut start = output.len() - DISPLAY_OUTPUT_TAIL;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    (&output[start..], true)
}

fn write_output(f: &mut fmt::Formatter<'_>, output: &str, truncated: bool) -> fmt::Result {
    let trimmed = output.trim_end();
    if trimmed.is_empty() {
        return Ok(());
    }
    let (tail, cut) = output_tail(trimmed);
    if cut || truncated {
        write!(f, ": output (truncated): …{tail}")
    } else {
        write!(f, ": output: {tail}")
    }
}

impl fmt::Display for WorkspaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkspaceError::Sanitize { identifier, reason } => {
                write!(f, "workspace sanitize: identifier={identifier:?}: {reason}")
            }
            WorkspaceError::Resolve { root, source } => {
                write!(f, "workspace resolve: root={:?}: {source}", root.display())
            }
            WorkspaceError::Containment {
                root,
                identifier,
                reason,
            } => write!(
                f,
                "workspace containment: root={:?} identifier={identifier:?}: {reason}",
                root.display()
            ),
            WorkspaceError::Create { path, source } => {
                write!(f, "workspace create: path={:?}: {source}", path.display())
            }
            WorkspaceError::Stat { path, source } => {
                write!(f, "workspace stat: path={:?}: {source}", path.display())
            }
            WorkspaceError::Conflict { path } => write!(
                f,
                "workspace conflict: path={:?}: path exists but is not a directory",
                path.display()
            ),
            WorkspaceError::ReadDir { path, source } => {
                write!(f, "workspace readdir: path={:?}: {source}", path.display())
            }
            WorkspaceError::Remove { path, source } => {
                write!(f, "workspace remove: path={:?}: {source}", path.display())
            }
            WorkspaceError::Preflight { path, source } => write!(
                f,
                "workspace root not writable: path={:?}: {source}",
                path.display()
            ),
            WorkspaceError::Locked { path, holder_pid } => {
                write!(f, "workspace locked: path={:?}: held by ", path.display())?;
                match holder_pid {
                    Some(pid) => write!(f, "pid {pid}"),
                    None => write!(f, "another process"),
                }
            }
            WorkspaceError::Lock { path, source } => {
                write!(f, "workspace lock: path={:?}: {source}", path.display())
            }
            WorkspaceError::HookValidate { hook, reason } => {
                write!(f, "hook validate: hook={hook}: {reason}")
            }
            WorkspaceError::HookStart { hook, source } => {
                write!(f, "hook start: hook={hook}: {source}")
            }
            WorkspaceError::HookTimeout {
                hook,
                timeout_ms,
                output,
            } => {
                write!(
                    f,
                    "hook timeout: hook={hook}: exceeded timeout_ms={timeout_ms}"
                )?;
                write_output(f, output, false)
            }
            WorkspaceError::HookCancelled { hook } => {
                write!(f, "hook cancelled: hook={hook}: process group killed")
            }
            WorkspaceError::HookFailed {
                hook,
                exit_code,
                signal,
                output,
                output_truncated,
            } => {
                match (exit_code, signal) {
                    (Some(code), _) => write!(f, "hook failed: hook={hook} exit_code={code}")?,
                    (None, Some(sig)) => {
                        write!(f, "hook failed: hook={hook} killed by signal {sig}")?
                    }
                    (None, None) => write!(f, "hook failed: hook={hook}")?,
                }
                write_output(f, output, *output_truncated)
            }
        }
    }
}

impl std::error::Error for WorkspaceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkspaceError::Resolve { source, .. }
            | WorkspaceError::Create { source, .. }
            | WorkspaceError::Stat { source, .. }
            | WorkspaceError::ReadDir { source, .. }
            | WorkspaceError::Remove { source, .. }
            | WorkspaceError::Preflight { source, .. }
            | WorkspaceError::Lock { source, .. }
            | WorkspaceError::HookStart { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_hook_message_shows_code_and_output_tail() {
        let err = WorkspaceError::HookFailed {
            hook: HookKind::BeforeRun,
            exit_code: Some(3),
            signal: None,
            output: format!("{}END", "x".repeat(10_000)),
            output_truncated: false,
        };
        let text = err.to_string();
        assert!(
            text.starts_with("hook failed: hook=before_run exit_code=3: output (truncated): …")
        );
        assert!(text.ends_with("END"));
        assert!(text.len() < DISPLAY_OUTPUT_TAIL + 100);
    }

    #[test]
    fn output_tail_respects_char_boundaries() {
        let s = "é".repeat(DISPLAY_OUTPUT_TAIL);
        let (tail, cut) = output_tail(&s);
        assert!(cut);
        assert!(tail.chars().all(|c| c == 'é'));
    }
}
