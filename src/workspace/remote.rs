//! Workspaces of runs placed on an SSH host. The host holds the real workspace (same path as
//! the local one); the local directory and its lock stay sortie's bookkeeping, so one issue
//! is still worked on by one session. Hooks run on the host in the remote workspace with the
//! hook's `SORTIE_*` variables (and `SORTIE_SSH_HOST`) on the remote command line.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::error::{WorkspaceError, output_tail};
use super::hooks::{
    HookEnv, HookKind, HookOutput, MAX_HOOK_OUTPUT_BYTES, MAX_SCRIPT_DISPLAY_BYTES, injected_vars,
    truncate_for_display,
};
use super::{DIR_MODE, Workspace, WorkspaceLock, WorkspaceManager, lock, sanitize_key};
use crate::domain::Issue;
use crate::mask::mask;
use crate::ssh::{SshError, SshErrorKind, SshHost, env_assignments, quote};

/// How long the workspace bookkeeping commands on a host (mkdir, stale status, removal) may
/// take beyond the connect timeout.
const REMOTE_OP_MARGIN: Duration = Duration::from_secs(120);

/// Exit codes of the remote workspace scripts.
const REMOTE_SYMLINK: i32 = 70;
const REMOTE_CONFLICT: i32 = 71;

fn op_timeout(host: &SshHost) -> Duration {
    Duration::from_secs(u64::from(host.options.connect_timeout_s)) + REMOTE_OP_MARGIN
}

fn ssh_io(e: &SshError) -> io::Error {
    io::Error::other(e.to_string())
}

impl WorkspaceManager {
    /// [`prepare`](Self::prepare) for a run on `host` (`None` is exactly `prepare`). On a host:
    /// the local directory is created (or reused) and locked as the session's bookkeeping,
    /// the remote directory at the same path is created with `mkdir -p` (`created_now` says
    /// whether the host did not have it), `after_create` runs on the host for a new one (a
    /// failure removes the remote directory again), and the stale `.sortie/status` is removed
    /// on both sides.
    pub fn prepare_on(
        &self,
        issue: &Issue,
        attempt: u32,
        host: Option<&SshHost>,
    ) -> Result<(Workspace, WorkspaceLock), WorkspaceError> {
        let Some(host) = host else {
            return self.prepare(issue, attempt);
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&self.root)
            .map_err(|source| WorkspaceError::Create {
                path: self.root.clone(),
                source,
            })?;
        let key = sanitize_key(&issue.identifier)?;
        let path = self.path_for(&issue.identifier)?;
        // A workspace sortie already keeps is locked before anything touches the host: the
        // lock is what keeps two sessions apart. A new one is locked once the host has it
        // (the local directory is created after the remote one, so a host that shares this
        // filesystem still gets `after_create` in an empty directory).
        let mut held = match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                self.check_existing_dir(&path, &issue.identifier)?;
                Some(lock::acquire(&path)?)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(WorkspaceError::Stat { path, source }),
        };
        let created_now = self.create_remote(host, &path, &issue.identifier)?;
        log::debug!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            ssh_host:% = host.name(),
            path:% = path.display(),
            created_now:% = created_now;
            "remote workspace ready"
        );
        if created_now && self.hooks.script(HookKind::AfterCreate).is_some() {
            let env = HookEnv {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                attempt,
                extra: Vec::new(),
            };
            if let Err(err) = self.run_hook_on(HookKind::AfterCreate, &path, &env, Some(host)) {
                if let Err(rm) = remove_remote_dir(host, &path) {
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        ssh_host:% = host.name(),
                        path:% = path.display(),
                        error:% = rm.to_string();
                        "remote workspace rollback failed"
                    );
                }
                return Err(err);
            }
        }
        let lock = match held.take() {
            Some(l) => l,
            None => {
                match std::fs::DirBuilder::new().mode(DIR_MODE).create(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        self.check_existing_dir(&path, &issue.identifier)?;
                    }
                    Err(source) => return Err(WorkspaceError::Create { path, source }),
                }
                lock::acquire(&path)?
            }
        };
        super::status_file::remove_stale_status(&path);
        remove_remote_stale_status(host, &path);
        Ok((
            Workspace {
                path,
                key,
                created_now,
            },
            lock,
        ))
    }

    /// Creates the remote workspace (its parents with `mkdir -p`, the workspace itself with a
    /// plain `mkdir`, so exactly one creator sees `true`). A symlink or a non-directory at the
    /// path is refused, as locally.
    fn create_remote(
        &self,
        host: &SshHost,
        path: &Path,
        identifier: &str,
    ) -> Result<bool, WorkspaceError> {
        let p = quote(&path.to_string_lossy());
        let parent = quote(&path.parent().unwrap_or(path).to_string_lossy());
        let script = format!(
            "if [ -L {p} ]; then exit {REMOTE_SYMLINK}; fi; \
             if [ -d {p} ]; then echo existing; exit 0; fi; \
             if [ -e {p} ]; then exit {REMOTE_CONFLICT}; fi; \
             mkdir -p -- {parent} || exit 1; \
             if mkdir -m 750 -- {p}; then echo created; \
             elif [ -d {p} ] && [ ! -L {p} ]; then echo existing; else exit 1; fi"
        );
        let out =
            host.run(&script, None, op_timeout(host))
                .map_err(|e| WorkspaceError::Create {
                    path: path.to_path_buf(),
                    source: ssh_io(&e),
                })?;
        match out.code {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout).trim() == "created"),
            Some(REMOTE_SYMLINK) => Err(WorkspaceError::Containment {
                root: self.root.clone(),
                identifier: identifier.to_string(),
                reason: "remote workspace path is a symlink",
            }),
            Some(REMOTE_CONFLICT) => Err(WorkspaceError::Conflict {
                path: path.to_path_buf(),
            }),
            code => Err(WorkspaceError::Create {
                path: path.to_path_buf(),
                source: io::Error::other(format!(
                    "mkdir on {} failed (exit {code:?}): {}",
                    host.name(),
                    out.last_stderr_line().unwrap_or_default()
                )),
            }),
        }
    }

    /// [`run_hook`](Self::run_hook) on `host` (`None` runs it here): the script runs with
    /// `sh -c` in the remote workspace, with the hook's injected variables plus
    /// `SORTIE_SSH_HOST` exported on the remote command line; same timeout, output capture
    /// and errors as a local hook (ssh's own failure is a failed hook with exit code 255).
    pub fn run_hook_on(
        &self,
        kind: HookKind,
        workspace: &Path,
        env: &HookEnv,
        host: Option<&SshHost>,
    ) -> Result<HookOutput, WorkspaceError> {
        self.run_hook_cancellable_on(kind, workspace, env, host, &crossbeam_channel::never())
    }

    /// [`run_hook_cancellable`](Self::run_hook_cancellable) on `host` (`None` runs it here).
    pub fn run_hook_cancellable_on(
        &self,
        kind: HookKind,
        workspace: &Path,
        env: &HookEnv,
        host: Option<&SshHost>,
        cancel: &Receiver<()>,
    ) -> Result<HookOutput, WorkspaceError> {
        let Some(host) = host else {
            return self.run_hook_cancellable(kind, workspace, env, cancel);
        };
        let Some(script) = self.hooks.script(kind) else {
            return Ok(HookOutput::default());
        };
        let mut vars = injected_vars(env, workspace);
        vars.push(("SORTIE_SSH_HOST".into(), host.name().to_string()));
        // Both streams go to stderr, whose tail the run keeps: one interleaved capture.
        let remote = format!(
            "cd -- {} && exec env{} sh -c {} 1>&2",
            quote(&workspace.to_string_lossy()),
            env_assignments(&vars),
            quote(script)
        );
        let timeout_ms = self.hooks.effective_timeout_ms();
        let script_shown = mask(&truncate_for_display(script, MAX_SCRIPT_DISPLAY_BYTES));
        log::debug!(
                   hook:% = kind,
        issue_id:% = env.issue_id,
        issue_identifier:% = env.issue_identifier,
                   ssh_host:% = host.name(),
                   workspace:% = workspace.display(),
                   script:% = script_shown;
                   "hook starting"
               );
        let started = std::time::Instant::now();
        let ran = host.run_cancellable(&remote, None, Duration::from_millis(timeout_ms), cancel);
        let run = RemoteHook {
            kind,
            env,
            host,
            duration_ms: started.elapsed().as_millis() as u64,
            timeout_ms,
            script_shown: &script_shown,
        };
        match ran {
            Ok(out) => run.finished(&out),
            Err(e) => Err(run.error(&e)),
        }
    }

    /// [`remove`](Self::remove) for a workspace on `host` (`None` is exactly `remove`):
    /// `before_remove` on the host (failure only warned), then the remote directory, then
    /// the local one. `Ok(false)` when neither existed.
    pub fn remove_on(
        &self,
        issue_id: &str,
        identifier: &str,
        host: Option<&SshHost>,
    ) -> Result<bool, WorkspaceError> {
        let Some(host) = host else {
            return self.remove(issue_id, identifier);
        };
        let path = self.path_for(identifier)?;
        let p = quote(&path.to_string_lossy());
        let probe = format!(
            "if [ -L {p} ]; then exit {REMOTE_SYMLINK}; fi; \
             if [ -d {p} ]; then echo present; elif [ -e {p} ]; then exit {REMOTE_CONFLICT}; fi"
        );
        let out = host
            .run(&probe, None, op_timeout(host))
            .map_err(|e| WorkspaceError::Stat {
                path: path.clone(),
                source: ssh_io(&e),
            })?;
        let remote_present = match out.code {
            Some(0) => String::from_utf8_lossy(&out.stdout).trim() == "present",
            Some(REMOTE_SYMLINK) => {
                return Err(WorkspaceError::Containment {
                    root: self.root.clone(),
                    identifier: identifier.to_string(),
                    reason: "remote workspace path is a symlink",
                });
            }
            Some(REMOTE_CONFLICT) => return Err(WorkspaceError::Conflict { path }),
            code => {
                return Err(WorkspaceError::Stat {
                    path,
                    source: io::Error::other(format!(
                        "probe on {} failed (exit {code:?})",
                        host.name()
                    )),
                });
            }
        };
        if remote_present {
            let env = HookEnv {
                issue_id: issue_id.to_string(),
                issue_identifier: identifier.to_string(),
                attempt: 0,
                extra: Vec::new(),
            };
            if let Err(err) = self.run_hook_on(HookKind::BeforeRemove, &path, &env, Some(host)) {
                log::warn!(
                                    ssh_host:% = host.name(),
                                    error:% = mask(&err.to_string()),
                 issue_id:% = issue_id,
                 issue_identifier:% = identifier;
                                    "before_remove hook failed, removing anyway"
                );
            }
            remove_remote_dir(host, &path)?;
        }
        let local_present = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => return Err(WorkspaceError::Stat { path, source }),
            Ok(_) => {
                self.check_existing_dir(&path, identifier)?;
                std::fs::remove_dir_all(&path).map_err(|source| WorkspaceError::Remove {
                    path: path.clone(),
                    source,
                })?;
                true
            }
        };
        if remote_present || local_present {
            log::info!(
                            ssh_host:% = host.name(),
                            path:% = path.display(),
             issue_id:% = issue_id,
             issue_identifier:% = identifier;
                            "workspace removed"
            );
        }
        Ok(remote_present || local_present)
    }
}

/// `rm -rf` of a remote workspace (never through a symlink at its path).
fn remove_remote_dir(host: &SshHost, path: &Path) -> Result<(), WorkspaceError> {
    let p = quote(&path.to_string_lossy());
    let script = format!("if [ -L {p} ]; then exit {REMOTE_SYMLINK}; fi; rm -rf -- {p}");
    let remove_err = |source| WorkspaceError::Remove {
        path: path.to_path_buf(),
        source,
    };
    let out = host
        .run(&script, None, op_timeout(host))
        .map_err(|e| remove_err(ssh_io(&e)))?;
    if out.success() {
        return Ok(());
    }
    Err(remove_err(io::Error::other(format!(
        "rm on {} failed (exit {:?}): {}",
        host.name(),
        out.code,
        out.last_stderr_line().unwrap_or_default()
    ))))
}

/// Removes the stale `.sortie/status` of the remote workspace at `path` (a symlinked
/// `.sortie` is left alone); a failure is logged, the run goes on.
fn remove_remote_stale_status(host: &SshHost, path: &Path) {
    let dot = quote(&path.join(".sortie").to_string_lossy());
    let status = quote(&path.join(".sortie").join("status").to_string_lossy());
    let script = format!("if [ -d {dot} ] && [ ! -L {dot} ]; then rm -f -- {status}; fi");
    match host.run(&script, None, op_timeout(host)) {
        Ok(out) if out.success() => {}
        Ok(out) => log::warn!(
            ssh_host:% = host.name(),
            path:% = path.display(),
            exit_code:% = crate::log_field::opt(&out.code);
            "stale remote status file not removed"
        ),
        Err(e) => log::warn!(
            ssh_host:% = host.name(),
            path:% = path.display(),
            error:% = e;
            "stale remote status file not removed"
        ),
    }
}

/// One hook run on a host, for its outcome and log lines.
struct RemoteHook<'a> {
    kind: HookKind,
    env: &'a HookEnv,
    host: &'a SshHost,
    duration_ms: u64,
    timeout_ms: u64,
    script_shown: &'a str,
}

impl RemoteHook<'_> {
    /// The hook's error for an ssh run that did not finish: timed out, cancelled, no
    /// connection (ssh's 255, as a failed hook), or not started.
    fn error(&self, e: &SshError) -> WorkspaceError {
        let (kind, env) = (self.kind, self.env);
        match e.kind {
            SshErrorKind::Timeout(_) => {
                log::warn!(
                    hook:% = kind,
                    issue_id:% = env.issue_id,
                    issue_identifier:% = env.issue_identifier,
                    ssh_host:% = self.host.name(),
                    duration_ms:% = self.duration_ms,
                    timeout_ms:% = self.timeout_ms,
                    script:% = self.script_shown;
                    "hook timed out"
                );
                WorkspaceError::HookTimeout {
                    hook: kind,
                    timeout_ms: self.timeout_ms,
                    output: String::new(),
                }
            }
            SshErrorKind::Cancelled => {
                log::warn!(
                    hook:% = kind,
                    issue_id:% = env.issue_id,
                    issue_identifier:% = env.issue_identifier,
                    ssh_host:% = self.host.name(),
                    duration_ms:% = self.duration_ms,
                    script:% = self.script_shown;
                    "hook cancelled"
                );
                WorkspaceError::HookCancelled { hook: kind }
            }
            SshErrorKind::Connection(_) => {
                let output = mask(&e.to_string());
                log::warn!(
                    hook:% = kind,
                    issue_id:% = env.issue_id,
                    issue_identifier:% = env.issue_identifier,
                    ssh_host:% = self.host.name(),
                    duration_ms:% = self.duration_ms,
                    exit_code:% = "255",
                    script:% = self.script_shown,
                    output:% = output;
                    "hook failed"
                );
                WorkspaceError::HookFailed {
                    hook: kind,
                    exit_code: Some(crate::ssh::SSH_CONNECTION_FAILED),
                    signal: None,
                    output,
                    output_truncated: false,
                }
            }
            _ => WorkspaceError::HookStart {
                hook: kind,
                source: ssh_io(e),
            },
        }
    }

    /// The outcome of a hook that ran to its end: its output's tail (both streams, masked),
    /// failed unless it exited 0.
    fn finished(&self, out: &crate::ssh::RemoteOutput) -> Result<HookOutput, WorkspaceError> {
        let (kind, env) = (self.kind, self.env);
        let (bytes, truncated) = if out.stderr.len() > MAX_HOOK_OUTPUT_BYTES {
            (
                &out.stderr[out.stderr.len() - MAX_HOOK_OUTPUT_BYTES..],
                true,
            )
        } else {
            (&out.stderr[..], out.stderr_truncated)
        };
        let output = mask(&String::from_utf8_lossy(bytes));
        if !out.success() {
            let log_output = output_tail(output.trim_end()).0;
            log::warn!(
                hook:% = kind,
                issue_id:% = env.issue_id,
                issue_identifier:% = env.issue_identifier,
                ssh_host:% = self.host.name(),
                duration_ms:% = self.duration_ms,
                exit_code:% = out.code
                    .map_or_else(|| "none".to_string(), |c| c.to_string()),
                script:% = self.script_shown,
                output:% = log_output;
                "hook failed"
            );
            return Err(WorkspaceError::HookFailed {
                hook: kind,
                exit_code: out.code,
                signal: out.signal,
                output,
                output_truncated: truncated,
            });
        }
        log::info!(
            hook:% = kind,
            issue_id:% = env.issue_id,
            issue_identifier:% = env.issue_identifier,
            ssh_host:% = self.host.name(),
            duration_ms:% = self.duration_ms,
            output_bytes:% = out.stderr.len();
            "hook completed"
        );
        Ok(HookOutput {
            ran: true,
            output,
            truncated,
            duration_ms: self.duration_ms,
        })
    }
}
