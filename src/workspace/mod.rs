//! Per-issue workspaces: deterministic, contained directories under one root, and the lifecycle
//! hooks (`after_create`, `before_run`, `after_run`, `before_remove`) that prepare and tear
//! them down.
//!
//! The manager is cheap to clone (shared state behind `Arc`) so each worker thread can hold one.

mod cleanup;
mod command;
mod error;
pub mod evidence;
mod hook_kind;
mod hooks;
mod lock;
mod output_capture;
mod path;
mod preflight;
mod process_group;
mod remote;
pub mod retention;
mod status_file;

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::domain::Issue;

pub use command::{ShellEnd, ShellOutcome};
pub use error::WorkspaceError;
pub use hooks::{
    DEFAULT_HOOK_TIMEOUT_MS, HOOK_ENV_ALLOWLIST, HookEnv, HookKind, HookOutput, HookScripts,
    MAX_HOOK_OUTPUT_BYTES, MAX_SCRIPT_DISPLAY_BYTES, hook_environment,
};
pub use lock::WorkspaceLock;
pub use output_capture::{
    Captured, Keep, MergedOutput, attach_merged_output, attach_merged_output_keeping,
};
pub use path::sanitize_key;
pub use process_group::{GroupChild, WaitOutcome, spawn_in_new_group};

/// Directories (root and workspaces) are created owner+group only.
const DIR_MODE: u32 = 0o750;

/// A prepared workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Absolute path, under the symlink-resolved root.
    pub path: PathBuf,
    /// The sanitized directory name.
    pub key: String,
    /// True when this call created the directory (and `after_create` ran).
    pub created_now: bool,
}

/// A command for [`WorkspaceManager::run_command`].
#[derive(Debug, Clone, Copy)]
pub struct OperatorCommand<'a> {
    pub script: &'a str,
    pub timeout_ms: u64,
    /// Bytes of merged stdout and stderr kept.
    pub output_cap: usize,
    pub keep: Keep,
}

/// Creates, reuses and removes workspaces under one root and runs their hooks.
#[derive(Debug, Clone)]
pub struct WorkspaceManager {
    root: PathBuf,
    hooks: Arc<HookScripts>,
    /// `None`: hooks inherit from the live process environment. `Some`: this snapshot is the
    /// source instead (startup snapshots, tests).
    parent_env: Option<Arc<Vec<(OsString, OsString)>>>,
    /// Hooks run under `bwrap` with this profile (`worker.sandbox.hooks: true`).
    sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// What else a removed workspace had, removed after its directory.
    also_remove: Option<AlsoRemove>,
}

/// Removes what a workspace has besides its directory (a remote volume), given the issue id
/// and the workspace directory's name; it logs its own outcome.
#[derive(Clone)]
pub struct AlsoRemove(pub Arc<AlsoRemoveFn>);

/// The function behind [`AlsoRemove`]: `(issue_id, workspace directory name)`.
pub type AlsoRemoveFn = dyn Fn(&str, &str) + Send + Sync;

impl std::fmt::Debug for AlsoRemove {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AlsoRemove")
    }
}

impl WorkspaceManager {
    /// `root` may be relative (resolved against the process CWD now) and need not exist yet.
    pub fn new(root: PathBuf, hooks: HookScripts) -> Self {
        let root = path::absolute_clean(&root).unwrap_or(root);
        WorkspaceManager {
            root,
            hooks: Arc::new(hooks),
            parent_env: None,
            sandbox: None,
            also_remove: None,
        }
    }

    /// Runs `also` for every workspace removed here, after its directory is gone.
    pub fn with_also_remove(mut self, also: Option<AlsoRemove>) -> Self {
        self.also_remove = also;
        self
    }

    /// Runs every hook under `bwrap` with `sandbox`'s profile: the hook's workspace read-write,
    /// the network as the profile says, the same timeout and cancel (the whole sandbox is in
    /// the hook's process group). Operator commands ([`Self::run_command`]) stay outside.
    pub fn with_sandbox(mut self, sandbox: Option<Arc<crate::sandbox::Sandbox>>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Uses `env` instead of the process environment as the parent environment hooks filter
    /// (the allowlist still applies).
    pub fn with_parent_env(mut self, env: Vec<(OsString, OsString)>) -> Self {
        self.parent_env = Some(Arc::new(env));
        self
    }

    /// The configured root (absolute, symlinks not resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configured hooks.
    pub fn hooks(&self) -> &HookScripts {
        &self.hooks
    }

    /// Sanitizes an identifier into a directory name (see [`sanitize_key`]).
    pub fn sanitize_key(identifier: &str) -> Result<String, WorkspaceError> {
        sanitize_key(identifier)
    }

    /// The workspace path for `identifier`: a direct child of the symlink-resolved root; an
    /// existing symlink at that path is rejected.
    pub fn path_for(&self, identifier: &str) -> Result<PathBuf, WorkspaceError> {
        path::contained_path(&self.root, identifier)
    }

    /// [`prepare`](Self::prepare) without keeping the workspace lock (tools and tests; a
    /// session must hold the lock, so supervisors use `prepare`).
    pub fn ensure(&self, issue: &Issue, attempt: u32) -> Result<Workspace, WorkspaceError> {
        self.prepare(issue, attempt).map(|(ws, _lock)| ws)
    }

    /// Whether another holder has the lock of `identifier`'s workspace right now: `Some(pid)`
    /// (the pid it wrote, when readable). Creates nothing; an underivable path is `None`.
    pub fn lock_holder(&self, identifier: &str) -> Option<Option<u32>> {
        let path = self.path_for(identifier).ok()?;
        lock::held_by_other(&path)
    }

    /// Takes the lock of `identifier`'s workspace when the directory already exists (a short
    /// job in a workspace a session left, such as a reaction's triage turn): creates nothing
    /// and runs no hook. [`WorkspaceError::Locked`] when someone else holds it.
    pub fn lock_existing(
        &self,
        identifier: &str,
    ) -> Result<(PathBuf, WorkspaceLock), WorkspaceError> {
        let path = self.path_for(identifier)?;
        if !path.is_dir() {
            return Err(WorkspaceError::Stat {
                source: io::Error::new(io::ErrorKind::NotFound, "no workspace directory"),
                path,
            });
        }
        let held = lock::acquire(&path)?;
        Ok((path, held))
    }

    /// Creates (or reuses) the issue's workspace and takes its lock (`.sortie/lock`), which the
    /// caller holds for the whole session. A reused workspace is locked first, so nothing
    /// touches a workspace another session holds ([`WorkspaceError::Locked`]); a newly created
    /// directory gets `after_create` (in an empty directory, so `git clone … .` works) and is
    /// locked right after; if `after_create` fails the directory is removed again so the next
    /// attempt starts clean. A stale `.sortie/status` from an earlier session is removed
    /// either way.
    pub fn prepare(
        &self,
        issue: &Issue,
        attempt: u32,
    ) -> Result<(Workspace, WorkspaceLock), WorkspaceError> {
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
        let (created_now, mut held) = match std::fs::DirBuilder::new().mode(DIR_MODE).create(&path)
        {
            Ok(()) => (true, None),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.check_existing_dir(&path, &issue.identifier)?;
                (false, Some(lock::acquire(&path)?))
            }
            Err(source) => return Err(WorkspaceError::Create { path, source }),
        };
        log::debug!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            path:% = path.display(),
            created_now:% = created_now;
            "workspace ready"
        );
        if created_now && self.hooks.script(HookKind::AfterCreate).is_some() {
            let env = HookEnv {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                attempt,
                extra: Vec::new(),
            };
            if let Err(err) = self.run_hook(HookKind::AfterCreate, &path, &env) {
                if let Err(rm) = std::fs::remove_dir_all(&path) {
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        path:% = path.display(),
                        error:% = rm.to_string();
                        "workspace rollback failed"
                    );
                }
                return Err(err);
            }
        }
        let lock = match held.take() {
            Some(l) => l,
            None => lock::acquire(&path)?,
        };
        status_file::remove_stale_status(&path);
        Ok((
            Workspace {
                path,
                key,
                created_now,
            },
            lock,
        ))
    }

    /// Something already exists at `path`: accept only a real directory.
    fn check_existing_dir(&self, path: &Path, identifier: &str) -> Result<(), WorkspaceError> {
        let meta = std::fs::symlink_metadata(path).map_err(|source| WorkspaceError::Stat {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(WorkspaceError::Containment {
                root: self.root.clone(),
                identifier: identifier.to_string(),
                reason: "workspace path is a symlink",
            });
        }
        if !meta.is_dir() {
            return Err(WorkspaceError::Conflict {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Runs one hook in `workspace`, bounded only by `hooks.timeout_ms` (use this for
    /// `after_run`/`before_remove`, which must not be cut short by worker cancellation). With no
    /// script configured it returns `ran: false`.
    pub fn run_hook(
        &self,
        kind: HookKind,
        workspace: &Path,
        env: &HookEnv,
    ) -> Result<HookOutput, WorkspaceError> {
        self.run_hook_cancellable(kind, workspace, env, &crossbeam_channel::never())
    }

    /// Like [`run_hook`](Self::run_hook), but a message on `cancel` (or dropping its sender)
    /// kills the hook's process group early and returns [`WorkspaceError::HookCancelled`].
    pub fn run_hook_cancellable(
        &self,
        kind: HookKind,
        workspace: &Path,
        env: &HookEnv,
        cancel: &crossbeam_channel::Receiver<()>,
    ) -> Result<HookOutput, WorkspaceError> {
        let Some(script) = self.hooks.script(kind) else {
            return Ok(HookOutput::default());
        };
        let injected = hooks::injected_vars(env, workspace);
        let environment = match &self.parent_env {
            Some(parent) => hook_environment(parent.iter().cloned(), script, &injected),
            None => hook_environment(std::env::vars_os(), script, &injected),
        };
        hooks::run_invocation(hooks::HookInvocation {
            kind,
            script,
            workspace,
            env: environment,
            timeout_ms: self.hooks.effective_timeout_ms(),
            issue_id: &env.issue_id,
            issue_identifier: &env.issue_identifier,
            cancel,
            sandbox: self.sandbox.as_deref(),
        })
    }

    /// Runs an operator command that is not a hook (a verification command, a git read) in
    /// `workspace` under the hooks' environment rules ([`hook_environment`]: the allowlist, the
    /// variables the command names, the injected `SORTIE_*` values), in its own process group,
    /// killed at `timeout_ms` or on `cancel`. The output is returned unmasked.
    pub fn run_command(
        &self,
        workspace: &Path,
        command: &OperatorCommand<'_>,
        env: &HookEnv,
        cancel: &crossbeam_channel::Receiver<()>,
    ) -> io::Result<ShellOutcome> {
        let injected = hooks::injected_vars(env, workspace);
        let environment = match &self.parent_env {
            Some(parent) => hook_environment(parent.iter().cloned(), command.script, &injected),
            None => hook_environment(std::env::vars_os(), command.script, &injected),
        };
        command::run_shell(command::ShellRun {
            script: command.script,
            workspace,
            env: environment,
            timeout_ms: command.timeout_ms,
            cancel,
            output_cap: command.output_cap,
            keep: command.keep,
            sandbox: None,
        })
    }

    /// Removes the workspace of `identifier`: `before_remove` first (failure only warned), then
    /// the directory. `Ok(false)` when there was nothing to remove. Refuses anything that is not
    /// a real directory directly under the root.
    pub fn remove(&self, issue_id: &str, identifier: &str) -> Result<bool, WorkspaceError> {
        let path = self.path_for(identifier)?;
        self.remove_checked(issue_id, identifier, &path)
    }

    /// Like [`remove`](Self::remove) but for a stored absolute path (reconcile cleanup). The
    /// path must still be a real directory directly under the current root.
    pub fn remove_path(
        &self,
        issue_id: &str,
        identifier: &str,
        path: &Path,
    ) -> Result<bool, WorkspaceError> {
        let resolved_root = path::resolve_root(&self.root)?;
        let candidate = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => match std::fs::canonicalize(parent) {
                Ok(parent) => parent.join(name),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(source) => {
                    return Err(WorkspaceError::Stat {
                        path: parent.to_path_buf(),
                        source,
                    });
                }
            },
            _ => path.to_path_buf(),
        };
        path::check_contained(&resolved_root, &candidate, identifier)?;
        self.remove_checked(issue_id, identifier, &candidate)
    }

    /// `path` is already known to be contained.
    fn remove_checked(
        &self,
        issue_id: &str,
        identifier: &str,
        path: &Path,
    ) -> Result<bool, WorkspaceError> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => {
                return Err(WorkspaceError::Stat {
                    path: path.to_path_buf(),
                    source,
                });
            }
            Ok(_) => self.check_existing_dir(path, identifier)?,
        }
        let env = HookEnv {
            issue_id: issue_id.to_string(),
            issue_identifier: identifier.to_string(),
            attempt: 0,
            extra: Vec::new(),
        };
        if let Err(err) = self.run_hook(HookKind::BeforeRemove, path, &env) {
            log::warn!(
                            error:% = crate::mask::mask(&err.to_string()),
             issue_id:% = issue_id,
             issue_identifier:% = identifier;
                            "before_remove hook failed, removing anyway"
            );
        }
        std::fs::remove_dir_all(path).map_err(|source| WorkspaceError::Remove {
            path: path.to_path_buf(),
            source,
        })?;
        log::info!(
                    path:% = path.display(),
         issue_id:% = issue_id,
         issue_identifier:% = identifier;
                    "workspace removed"
        );
        if let (Some(also), Some(key)) = (&self.also_remove, path.file_name()) {
            (also.0)(issue_id, &key.to_string_lossy());
        }
        Ok(true)
    }
}
