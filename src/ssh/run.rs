//! Blocking remote commands: a script run on a host with a deadline and bounded output, a
//! capped file read that refuses symlinks, and the signal that stops a remote agent's group.
//!
//! The local `ssh` runs as the leader of its own process group. The remote shell records its
//! pid (sshd makes it a session and group leader) in a file under the remote temp directory,
//! so a deadline kills what the script started on the host too, not only the local client.

use super::SshHost;
use super::command::{AGENT_PGID_FILE, quote};
use crate::process_signal::{Signal, signal_group};
use crossbeam_channel::{Receiver, bounded, never, select};
use rustix::io::Errno;
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// ssh's own exit status for "could not connect / connection lost".
pub const SSH_CONNECTION_FAILED: i32 = 255;
/// Bytes of stdout and of stderr a [`SshHost::run`] keeps (stdout's first, stderr's last).
pub const MAX_RUN_OUTPUT_BYTES: usize = 1 << 20;
/// How long the clean-up connections (remote kill) may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(15);
/// After the local client is gone, how long its output pipes may stay open (a process that
/// inherited them) before the capture is taken as it is.
const PIPE_GRACE: Duration = Duration::from_secs(3);

/// Exit codes of the remote read script.
const READ_ABSENT: i32 = 70;
const READ_REFUSED: i32 = 71;

/// What a remote command left.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemoteOutput {
    /// The remote command's exit status (`None` when a signal ended the local client).
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The first [`MAX_RUN_OUTPUT_BYTES`] of stdout (or the read cap).
    pub stdout: Vec<u8>,
    /// The last [`MAX_RUN_OUTPUT_BYTES`] of stderr.
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

impl RemoteOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The last non-blank stderr line, trimmed.
    pub fn last_stderr_line(&self) -> Option<String> {
        last_line(&self.stderr)
    }
}

fn last_line(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// Why a remote operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshErrorKind {
    /// No `ssh` client on `PATH`.
    ClientMissing(String),
    /// The local client could not be started or observed.
    Spawn(String),
    /// ssh exited 255: no connection (refused, unreachable, authentication) or a lost one;
    /// the text is ssh's last stderr line.
    Connection(String),
    /// The deadline passed; the local client and the remote group were killed.
    Timeout(Duration),
    /// The caller cancelled; the local client and the remote group were killed.
    Cancelled,
    /// The remote file is present but not read (symlink, not a regular file, over the cap).
    Refused(String),
    /// The remote command failed in a way the operation cannot accept.
    Failed { code: Option<i32>, stderr: String },
}

/// A failed remote operation: on which host and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshError {
    pub host: String,
    pub kind: SshErrorKind,
}

impl SshError {
    fn new(host: &SshHost, kind: SshErrorKind) -> SshError {
        SshError {
            host: host.name().to_string(),
            kind,
        }
    }
}

impl fmt::Display for SshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.host;
        match &self.kind {
            SshErrorKind::ClientMissing(e) => write!(f, "ssh to {h}: no ssh client on PATH ({e})"),
            SshErrorKind::Spawn(e) => write!(f, "ssh to {h}: cannot run ssh: {e}"),
            SshErrorKind::Connection(line) if line.is_empty() => {
                write!(f, "ssh to {h}: connection failed (exit 255)")
            }
            SshErrorKind::Connection(line) => {
                write!(f, "ssh to {h}: connection failed (exit 255): {line}")
            }
            SshErrorKind::Timeout(t) => {
                write!(f, "ssh to {h}: timed out after {} ms", t.as_millis())
            }
            SshErrorKind::Cancelled => write!(f, "ssh to {h}: cancelled"),
            SshErrorKind::Refused(why) => write!(f, "ssh to {h}: refused: {why}"),
            SshErrorKind::Failed { code, stderr } => {
                let code = code.map_or_else(|| "none".to_string(), |c| c.to_string());
                if stderr.is_empty() {
                    write!(f, "ssh to {h}: remote command failed (exit {code})")
                } else {
                    write!(
                        f,
                        "ssh to {h}: remote command failed (exit {code}): {stderr}"
                    )
                }
            }
        }
    }
}

impl std::error::Error for SshError {}

/// A name unique within this process for a remote temp file.
fn unique_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Bounded capture of one pipe.
#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    truncated: bool,
}

fn drain(mut pipe: impl Read, cap: usize, keep_head: bool, into: &Mutex<Capture>) {
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
                if keep_head {
                    let room = cap.saturating_sub(c.bytes.len());
                    c.bytes.extend_from_slice(&chunk[..room.min(n)]);
                    c.truncated |= n > room;
                } else {
                    c.bytes.extend_from_slice(&chunk[..n]);
                    if c.bytes.len() > cap {
                        let excess = c.bytes.len() - cap;
                        c.bytes.drain(..excess);
                        c.truncated = true;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// How [`SshHost::exec`] ended.
enum Ended {
    Exited(RemoteOutput),
    TimedOut,
    Cancelled,
}

impl SshHost {
    /// A local `ssh` command that runs `remote_command` on this host (see [`SshHost::argv`]).
    pub fn command(&self, remote_command: &str) -> Command {
        let mut cmd = Command::new("ssh");
        // The client needs the basics (its config under `HOME`, `SSH_AUTH_SOCK`, proxies),
        // never sortie's secrets.
        cmd.args(self.argv(remote_command))
            .env_clear()
            .envs(crate::child_env::basics(std::env::vars_os()));
        cmd
    }

    /// The error for a local `ssh` that did not start.
    pub fn spawn_error(&self, e: &io::Error) -> SshError {
        match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
                SshError::new(self, SshErrorKind::ClientMissing(e.to_string()))
            }
            _ => SshError::new(self, SshErrorKind::Spawn(e.to_string())),
        }
    }

    /// Runs `remote_command` through the local client in its own process group, feeding
    /// `stdin`, with stdout (head) and stderr (tail) capped at `cap`; at `timeout` the group is
    /// killed.
    fn exec(
        &self,
        remote_command: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
        cap: usize,
        cancel: &Receiver<()>,
    ) -> Result<Ended, SshError> {
        let mut cmd = self.command(remote_command);
        cmd.process_group(0)
            .current_dir("/")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::process_signal::orphans::tag_helper(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| self.spawn_error(&e))?;
        drop(cmd);
        let pid = child.id();
        if let (Some(mut pipe), Some(data)) = (child.stdin.take(), stdin) {
            let data = data.to_vec();
            std::thread::spawn(move || {
                // The remote side may exit without reading; that is its business.
                let _ = pipe.write_all(&data);
            });
        }
        let (out, err, done_rx) = capture_output(&mut child, cap);
        let exit_rx = watch_exit(&child);
        let stopped = select! {
            recv(exit_rx) -> _ => None,
            recv(cancel) -> _ => Some(Ended::Cancelled),
            default(timeout) => Some(Ended::TimedOut),
        };
        if stopped.is_some() {
            let _ = signal_group(pid, Signal::KILL);
        }
        let status = child.wait();
        let _ = signal_group(pid, Signal::KILL);
        let deadline = Instant::now() + PIPE_GRACE;
        for _ in 0..2 {
            if done_rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
        }
        if let Some(stopped) = stopped {
            return Ok(stopped);
        }
        let status = status.map_err(|e| SshError::new(self, SshErrorKind::Spawn(e.to_string())))?;
        Ok(Ended::Exited(output(&status, &out, &err)))
    }

    /// Runs `script` with the remote user's shell on this host, feeding it `stdin`. Any exit
    /// status of the script is returned; ssh's own 255 (no connection) is an error, as is the
    /// deadline, at which the local client and everything the script started on the host are
    /// killed.
    pub fn run(
        &self,
        script: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<RemoteOutput, SshError> {
        self.run_cancellable(script, stdin, timeout, &never())
    }

    /// [`SshHost::run`] that a message on `cancel` (or its sender dropped) also stops, with
    /// [`SshErrorKind::Cancelled`].
    pub fn run_cancellable(
        &self,
        script: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
        cancel: &Receiver<()>,
    ) -> Result<RemoteOutput, SshError> {
        let pgid_file = format!("\"${{TMPDIR:-/tmp}}\"/sortie-ssh-{}.pgid", unique_token());
        let wrapped = format!(
            "echo $$ > {pgid_file}; sh -c {}; s=$?; rm -f {pgid_file}; exit $s",
            quote(script)
        );
        let started = Instant::now();
        let stopped = match self.exec(&wrapped, stdin, timeout, MAX_RUN_OUTPUT_BYTES, cancel)? {
            Ended::Exited(out) if out.code == Some(SSH_CONNECTION_FAILED) => {
                return Err(SshError::new(
                    self,
                    SshErrorKind::Connection(out.last_stderr_line().unwrap_or_default()),
                ));
            }
            Ended::Exited(out) => return Ok(out),
            Ended::TimedOut => SshErrorKind::Timeout(timeout),
            Ended::Cancelled => SshErrorKind::Cancelled,
        };
        let kill = format!(
            "f={pgid_file}; p=$(cat \"$f\" 2>/dev/null); rm -f \"$f\"; \
                     case $p in ''|*[!0-9]*) ;; *) kill -KILL -- -\"$p\" 2>/dev/null;; esac; exit 0"
        );
        if let Err(e) = self.exec(&kill, None, CLEANUP_TIMEOUT, 4096, &never()) {
            log::warn!(
                ssh_host:% = self.name(),
                error:% = e;
                "remote command group not killed after its stop"
            );
        }
        log::warn!(
            ssh_host:% = self.name(),
            reason:% = if stopped == SshErrorKind::Cancelled {
                "cancelled"
            } else {
                "timeout"
            },
            elapsed_ms:% = started.elapsed().as_millis();
            "remote command stopped"
        );
        Err(SshError::new(self, stopped))
    }

    /// Reads the regular file `path` on this host, at most `max_bytes`: `Ok(None)` when it (or
    /// its directory) is absent; refused when the file or its directory is a symlink, when it
    /// is not a regular file or when it holds more than `max_bytes`.
    pub fn read_file(&self, path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, SshError> {
        let p = quote(&path.to_string_lossy());
        let dir = quote(
            &path
                .parent()
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_else(|| "/".into()),
        );
        let script = format!(
            "if [ -L {dir} ]; then echo \"{{dir}} is a symlink\" >&2; exit {READ_REFUSED}; fi; \
             if [ -e {dir} ] && [ ! -d {dir} ]; then echo \"{{dir}} is not a directory\" >&2; exit {READ_REFUSED}; fi; \
             if [ -L {p} ]; then echo \"{{file}} is a symlink\" >&2; exit {READ_REFUSED}; fi; \
             if [ ! -e {p} ]; then exit {READ_ABSENT}; fi; \
             if [ ! -f {p} ]; then echo \"{{file}} is not a regular file\" >&2; exit {READ_REFUSED}; fi; \
             exec head -c {} -- {p}",
            max_bytes.saturating_add(1)
        );
        let cap = usize::try_from(max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
        let out = match self.exec(&script, None, self.file_timeout(), cap, &never())? {
            Ended::TimedOut | Ended::Cancelled => {
                return Err(SshError::new(
                    self,
                    SshErrorKind::Timeout(self.file_timeout()),
                ));
            }
            Ended::Exited(out) => out,
        };
        let shown = |s: String| {
            s.replace(
                "{dir}",
                &path.parent().unwrap_or(path).display().to_string(),
            )
            .replace("{file}", &path.display().to_string())
        };
        match out.code {
            Some(0) if out.stdout.len() as u64 > max_bytes || out.stdout_truncated => {
                Err(SshError::new(
                    self,
                    SshErrorKind::Refused(format!(
                        "{} is over the {max_bytes}-byte limit",
                        path.display()
                    )),
                ))
            }
            Some(0) => Ok(Some(out.stdout)),
            Some(READ_ABSENT) => Ok(None),
            Some(READ_REFUSED) => Err(SshError::new(
                self,
                SshErrorKind::Refused(shown(out.last_stderr_line().unwrap_or_default())),
            )),
            Some(SSH_CONNECTION_FAILED) => Err(SshError::new(
                self,
                SshErrorKind::Connection(out.last_stderr_line().unwrap_or_default()),
            )),
            code => Err(SshError::new(
                self,
                SshErrorKind::Failed {
                    code,
                    stderr: out.last_stderr_line().unwrap_or_default(),
                },
            )),
        }
    }

    /// A file read takes at most the connect timeout plus a margin for the transfer.
    fn file_timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.options.connect_timeout_s) + 30)
    }

    /// The command line (program first) that sends `signal` to the remote agent group of
    /// `workspace` like [`SshHost::kill_remote_group`], for a process that outlives sortie (the
    /// keeper) to run; the local client gets the system basics of its environment.
    pub fn kill_remote_argv(&self, workspace: &Path, signal: Signal) -> Vec<String> {
        let mut argv = vec!["ssh".to_string()];
        argv.extend(self.argv(&kill_group_script(workspace, signal)));
        argv
    }

    /// Sends `signal` to the remote agent group recorded in `<workspace>/.sortie/agent.pgid`
    /// (see [`super::remote_agent_command`]). A missing file or a group that is gone is fine;
    /// with SIGKILL the record is removed, since the group is over.
    pub fn kill_remote_group(&self, workspace: &Path, signal: Signal) -> Result<(), SshError> {
        let script = kill_group_script(workspace, signal);
        match self.exec(&script, None, CLEANUP_TIMEOUT, 4096, &never())? {
            Ended::TimedOut | Ended::Cancelled => {
                Err(SshError::new(self, SshErrorKind::Timeout(CLEANUP_TIMEOUT)))
            }
            Ended::Exited(out) if out.success() => Ok(()),
            Ended::Exited(out) if out.code == Some(SSH_CONNECTION_FAILED) => Err(SshError::new(
                self,
                SshErrorKind::Connection(out.last_stderr_line().unwrap_or_default()),
            )),
            Ended::Exited(out) => Err(SshError::new(
                self,
                SshErrorKind::Failed {
                    code: out.code,
                    stderr: out.last_stderr_line().unwrap_or_default(),
                },
            )),
        }
    }
}

/// The remote script that signals the agent group recorded in the workspace (see
/// [`SshHost::kill_remote_group`]).
fn kill_group_script(workspace: &Path, signal: Signal) -> String {
    let name = if signal == Signal::KILL {
        "KILL"
    } else if signal == Signal::INT {
        "INT"
    } else if signal == Signal::HUP {
        "HUP"
    } else {
        "TERM"
    };
    let file = quote(&workspace.join(AGENT_PGID_FILE).to_string_lossy());
    let dir = quote(&workspace.join(".sortie").to_string_lossy());
    let forget = if signal == Signal::KILL {
        format!("rm -f -- {file}; ")
    } else {
        String::new()
    };
    // A symlinked record is never followed (the workspace's lstat rule).
    format!(
        "if [ -L {dir} ] || [ -L {file} ]; then exit 0; fi; \
         p=$(cat -- {file} 2>/dev/null); {forget}\
         case $p in ''|*[!0-9]*) exit 0;; esac; kill -{name} -- -\"$p\" 2>/dev/null; exit 0"
    )
}

/// One capture a pipe is drained into.
type Sink = Arc<Mutex<Capture>>;

/// Drains the child's stdout (its head) and stderr (its tail), each capped at `cap`, on two
/// threads; the receiver hears once per pipe drained.
fn capture_output(child: &mut std::process::Child, cap: usize) -> (Sink, Sink, Receiver<()>) {
    let out = Arc::new(Mutex::new(Capture::default()));
    let err = Arc::new(Mutex::new(Capture::default()));
    let (done_tx, done_rx) = bounded::<()>(2);
    let stdout = child
        .stdout
        .take()
        .map(|p| Box::new(p) as Box<dyn Read + Send>);
    let stderr = child
        .stderr
        .take()
        .map(|p| Box::new(p) as Box<dyn Read + Send>);
    for (pipe, sink, head) in [
        (stdout, Arc::clone(&out), true),
        (stderr, Arc::clone(&err), false),
    ] {
        let tx = done_tx.clone();
        std::thread::spawn(move || {
            if let Some(p) = pipe {
                drain(p, cap, head, &sink);
            }
            let _ = tx.send(());
        });
    }
    (out, err, done_rx)
}

/// Hears when the child exits, without reaping it (WNOWAIT), so the group id stays ours while
/// it may be signalled.
fn watch_exit(child: &std::process::Child) -> Receiver<()> {
    let (exit_tx, exit_rx) = bounded::<()>(1);
    let raw = Pid::from_child(child);
    std::thread::spawn(move || {
        while let Err(Errno::INTR) = waitid(
            WaitId::Pid(raw),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {}
        let _ = exit_tx.send(());
    });
    exit_rx
}

/// The exited child's status with what its pipes captured.
fn output(status: &std::process::ExitStatus, out: &Sink, err: &Sink) -> RemoteOutput {
    let take = |c: &Mutex<Capture>| {
        let c = c.lock().unwrap_or_else(|p| p.into_inner());
        (c.bytes.clone(), c.truncated)
    };
    let (stdout, stdout_truncated) = take(out);
    let (stderr, stderr_truncated) = take(err);
    RemoteOutput {
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_host_and_the_reason() {
        let e = SshError {
            host: "ci@build1".into(),
            kind: SshErrorKind::Connection("Connection refused".into()),
        };
        assert_eq!(
            e.to_string(),
            "ssh to ci@build1: connection failed (exit 255): Connection refused"
        );
        let t = SshError {
            host: "b".into(),
            kind: SshErrorKind::Timeout(Duration::from_millis(1500)),
        };
        assert_eq!(t.to_string(), "ssh to b: timed out after 1500 ms");
    }

    #[test]
    fn the_last_stderr_line_skips_blank_lines() {
        assert_eq!(last_line(b"a\nb  \n\n").as_deref(), Some("b"));
        assert_eq!(last_line(b""), None);
    }
}
