//! The server process of a JSON-RPC session: spawned in its own process group with piped
//! stdio, stdout read as capped lines and stderr into the bounded tail (the fork-per-turn
//! supervisor's sinks), stdin fed by a writer thread so a peer that stops reading never blocks
//! the session, and a stop that leaves nothing of the group behind.

use crate::agent::process::{
    KILL_WAIT, SMALL_STACK, StderrTail, StdoutLines, TurnGroup, forwarded_env, local_command,
    register_remote, remote_command, set_base_env, spawn_error, verify_workspace, watch_child,
    without_nul,
};
use crate::agent::stream::{ExitInfo, SpawnError};
use crate::process_signal::{Signal, orphans};
use crossbeam_channel::{Receiver, Sender, select};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a stopped session waits for its reader thread to see both pipes close.
const READER_JOIN: Duration = Duration::from_secs(2);

/// The server to run.
#[derive(Debug, Clone)]
pub struct RpcSpec {
    pub program: String,
    pub args: Vec<String>,
    /// The workspace; verified before spawning.
    pub cwd: PathBuf,
    /// The environment the server starts from (`agent::env::session_env`); `None` inherits
    /// sortie's whole environment (tests only). On an SSH host it is what is forwarded.
    pub base_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    /// Extra environment on top of the base.
    pub env: Vec<(String, String)>,
    /// The longest stdout line accepted; a longer one ends the stream with a read error.
    pub max_line_bytes: usize,
    /// The SSH host the server runs on; `None` runs it here. On a host, `cwd` is the remote
    /// workspace and `env` is put on the remote command line.
    pub remote: Option<crate::ssh::SshHost>,
    /// Runs the server under `bwrap` (`crate::sandbox`); only for a server run here.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
}

/// A running server process.
pub struct RpcChild {
    pid: u32,
    /// The host and remote workspace of a server run over ssh.
    remote: Option<(crate::ssh::SshHost, PathBuf)>,
    /// Ties every descendant (even one that left the group) to this session.
    token: String,
    stdin: Option<Sender<Vec<u8>>>,
    pub(super) stdout: StdoutLines,
    exit: Receiver<ExitInfo>,
    exit_info: Option<ExitInfo>,
    stderr: Arc<Mutex<StderrTail>>,
    stderr_done: Receiver<()>,
    reader_done: Receiver<()>,
    stopped: bool,
}

impl RpcChild {
    /// Spawns `spec` as the leader of a new process group.
    pub fn spawn(spec: &RpcSpec) -> Result<RpcChild, SpawnError> {
        let mut cmd = match &spec.remote {
            None => {
                let cwd = verify_workspace(&spec.cwd)
                    .map_err(|e| SpawnError::InvalidCwd(e.to_string()))?;
                let mut cmd = local_command(
                    spec.sandbox.as_deref(),
                    &spec.program,
                    &spec.args,
                    &cwd,
                    spec.base_env.as_deref(),
                )?;
                set_base_env(&mut cmd, spec.base_env.as_deref());
                for (k, v) in &spec.env {
                    cmd.env(without_nul(k), without_nul(v));
                }
                cmd
            }
            Some(host) => remote_command(
                host,
                &spec.cwd,
                &forwarded_env(spec.base_env.as_deref(), &spec.env),
                &spec.program,
                &spec.args,
            )?,
        };
        cmd.process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let token = orphans::new_token();
        cmd.env(orphans::TOKEN_ENV, &token);
        if let Some(host) = &spec.remote {
            register_remote(host, &spec.cwd, &token);
        }
        let mut child = cmd.spawn().map_err(|e| {
            orphans::end_token(&token);
            spawn_error(spec.remote.as_ref(), &spec.program, &e)
        })?;
        let pid = child.id();

        let (stdin_tx, stdin_rx) = crossbeam_channel::unbounded::<Vec<u8>>();
        if let Some(mut stdin) = child.stdin.take() {
            let writer = std::thread::Builder::new()
                .name("rpc-stdin".into())
                .stack_size(SMALL_STACK)
                .spawn(move || {
                    for bytes in stdin_rx.iter() {
                        // A peer that closed its stdin is gone; the reader reports how.
                        if stdin.write_all(&bytes).and_then(|_| stdin.flush()).is_err() {
                            return;
                        }
                    }
                });
            if let Err(e) = writer {
                let _ = child.kill();
                let _ = child.wait();
                orphans::end_token(&token);
                return Err(SpawnError::Other(format!("stdin writer thread: {e}")));
            }
        }

        let (reader_done_tx, reader_done) = crossbeam_channel::bounded::<()>(1);
        let (stdout_rx, exit_rx, stderr_done, stderr) =
            watch_child(child, spec.max_line_bytes, Some(reader_done_tx)).inspect_err(|_| {
                orphans::end_token(&token);
            })?;

        Ok(RpcChild {
            pid,
            remote: spec.remote.clone().map(|h| (h, spec.cwd.clone())),
            token,
            stdin: Some(stdin_tx),
            stdout: stdout_rx,
            exit: exit_rx,
            exit_info: None,
            stderr,
            stderr_done,
            reader_done,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Queues bytes for stdin; `false` once stdin is closed.
    pub fn write(&self, bytes: Vec<u8>) -> bool {
        self.stdin.as_ref().is_some_and(|tx| tx.send(bytes).is_ok())
    }

    /// The bounded stderr collected so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().map(|s| s.render()).unwrap_or_default()
    }

    /// The newest stderr line, after giving the reader up to `wait` to finish stderr (a
    /// server that just died usually said why on its way out).
    pub fn last_stderr_line(&self, wait: Duration) -> Option<String> {
        let _ = self.stderr_done.recv_timeout(wait);
        self.stderr.lock().ok().and_then(|s| s.last_line())
    }

    /// How the process ended, if it has.
    pub fn exit_info(&mut self) -> Option<ExitInfo> {
        if self.exit_info.is_none() {
            self.exit_info = self.exit.try_recv().ok();
        }
        self.exit_info
    }

    /// Closes stdin, SIGTERMs the group, waits `grace` (cut short by `urgent`), SIGKILLs it,
    /// reaps the leader, SIGKILLs the group again and kills any descendant that left it.
    /// Idempotent.
    pub fn stop(&mut self, grace: Duration, urgent: Option<&Receiver<()>>) -> Option<ExitInfo> {
        if self.stopped {
            return self.exit_info;
        }
        self.stopped = true;
        self.stdin = None;
        let remote = self.remote.clone();
        let group = TurnGroup::new(self.pid, remote.as_ref().map(|(h, w)| (h, w.as_path())));
        if self.exit_info().is_none() {
            group.signal(Signal::TERM);
            let never = crossbeam_channel::never();
            let urgent = urgent.unwrap_or(&never);
            select! {
                recv(self.exit) -> info => self.exit_info = info.ok(),
                recv(urgent) -> _ => {},
                default(grace) => {},
            }
        }
        if self.exit_info.is_none() {
            group.signal(Signal::KILL);
            self.exit_info = Some(self.exit.recv_timeout(KILL_WAIT).unwrap_or(ExitInfo {
                code: None,
                signal: Some(9),
            }));
        }
        group.signal(Signal::KILL);
        let escaped = orphans::end_token(&self.token);
        if escaped > 0 {
            log::warn!(
                pid:% = self.pid,
                count:% = escaped;
                "agent session left processes outside its group, killed"
            );
        }
        let _ = self.reader_done.recv_timeout(READER_JOIN);
        self.exit_info
    }
}

impl Drop for RpcChild {
    /// A session's server is never leaked: an owner that bailed out kills the group.
    fn drop(&mut self) {
        self.stop(Duration::ZERO, None);
    }
}
