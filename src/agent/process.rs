//! Generic fork-per-turn supervisor: runs one agent process per turn in its own process
//! group, feeds its stdout lines to a [`StreamParser`], enforces the line cap and the turn
//! deadline, and on cancel kills the whole group (SIGTERM, grace, SIGKILL, SIGKILL again) so
//! no grandchild survives. The direct child is always reaped.

use super::cancel::{CancelReason, CancelToken};
use super::error::{AgentError, AgentErrorKind};
use super::event::{AgentEvent, AgentEventKind, TurnOutcome};
use super::path_error::{PathError, PathProblem};
use super::pipes::{Flush, LineSplitter, PipeSink};
use super::stream::{ExitInfo, SpawnError, StreamParser, TurnEnd};
use crate::process_signal::{Signal, orphans, signal_group};
use crate::ssh::SshHost;
use crossbeam_channel::{Receiver, Sender, never, select};
use std::collections::VecDeque;
#[cfg(test)]
use std::io::Read;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest stdout line accepted; a longer one fails the turn cleanly.
pub const MAX_LINE_BYTES: usize = 10 << 20;
/// How long a group gets between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

const STDERR_HEAD_LINES: usize = 500;
const STDERR_TAIL_LINES: usize = 500;
const STDERR_MAX_BYTES: usize = 5 << 20;
const STDERR_MAX_LINE: usize = 64 << 10;
pub(crate) use super::pipe_hub::SMALL_STACK;
/// SIGKILL cannot be ignored; this only guards against a process stuck in the kernel.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(10);

/// One process to run for a turn.
#[derive(Debug, Clone, Default)]
pub struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    /// The workspace; verified before spawning.
    pub cwd: PathBuf,
    /// Written to stdin then closed; `None` gives a null stdin.
    pub stdin: Option<Vec<u8>>,
    /// The environment the process starts from (`agent::env::session_env`); `None` inherits
    /// sortie's whole environment (tests of the supervisor only). On an SSH host it is what is
    /// forwarded on the remote command line.
    pub base_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    /// Extra environment on top of the base.
    pub env: Vec<(String, String)>,
    /// Base variables removed before `env` is applied.
    pub env_remove: Vec<String>,
    pub max_line_bytes: usize,
    /// The SSH host the process runs on; `None` runs it here. On a host, `cwd` is the remote
    /// workspace, `env` is put on the remote command line and `env_remove` does not apply.
    pub remote: Option<crate::ssh::SshHost>,
    /// Runs the process under `bwrap` (`crate::sandbox`); only for a process run here.
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
}

/// Timing knobs for one turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// Whole-turn deadline; expiry cancels with [`CancelReason::TurnTimeout`].
    pub turn_timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
    /// How long to keep reading buffered output after the process exited.
    pub drain_timeout: Duration,
    /// Startup deadline: how long the agent may go without a line while the parser still
    /// awaits its first real one ([`StreamParser::started`]); each line restarts it. Expiry
    /// kills the group and sets [`TurnEnd::first_line_timeout`].
    pub first_line_timeout: Option<Duration>,
}

impl TurnLimits {
    /// The limits the agent settings set: the turn deadline, the output drain after exit
    /// (`read_timeout_ms`, 5 s when 0) and the stop grace.
    pub fn from_settings(settings: &super::AgentSettings) -> TurnLimits {
        TurnLimits {
            turn_timeout: (settings.turn_timeout_ms > 0)
                .then(|| Duration::from_millis(settings.turn_timeout_ms)),
            drain_timeout: Duration::from_millis(if settings.read_timeout_ms > 0 {
                settings.read_timeout_ms
            } else {
                5000
            }),
            grace: settings.stop_grace(),
            ..TurnLimits::default()
        }
    }
}

impl Default for TurnLimits {
    fn default() -> Self {
        TurnLimits {
            turn_timeout: None,
            grace: DEFAULT_GRACE,
            drain_timeout: Duration::from_secs(5),
            first_line_timeout: None,
        }
    }
}

/// What the supervisor hands back besides events.
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisedTurn {
    pub outcome: TurnOutcome,
    pub pid: Option<u32>,
    /// Bounded stderr (head and tail).
    pub stderr: String,
}

/// Checks that `workspace` is an absolute, existing directory (not a symlink) and returns
/// its canonical form, which becomes the agent's cwd.
pub fn verify_workspace(workspace: &Path) -> Result<PathBuf, PathError> {
    let refused = |problem| Err(PathError::new(workspace, problem));
    if !workspace.is_absolute() {
        return refused(PathProblem::NotAbsolute);
    }
    let meta = std::fs::symlink_metadata(workspace).map_err(|e| PathError::io(workspace, &e))?;
    if meta.file_type().is_symlink() {
        return refused(PathProblem::Symlink);
    }
    if !meta.is_dir() {
        return refused(PathProblem::NotDirectory);
    }
    workspace
        .canonicalize()
        .map_err(|e| PathError::io(workspace, &e))
}

/// Splits `agent.command` on whitespace into program and leading arguments.
pub fn split_command(command: &str) -> Option<(String, Vec<String>)> {
    let mut parts = command.split_whitespace().map(str::to_string);
    let program = parts.next()?;
    Some((program, parts.collect()))
}

/// The workspace as a session's cwd ([`verify_workspace`]), or `invalid_workspace_cwd`.
pub fn session_workspace(workspace: &Path) -> Result<PathBuf, AgentError> {
    verify_workspace(workspace)
        .map_err(|e| AgentError::new(AgentErrorKind::InvalidWorkspaceCwd, e.to_string()))
}

/// [`session_workspace`] for a session placed on `remote`: there the path names the remote
/// workspace, so it is only required to be absolute (the host resolves it).
pub fn session_workspace_on(
    workspace: &Path,
    remote: Option<&SshHost>,
) -> Result<PathBuf, AgentError> {
    match remote {
        None => session_workspace(workspace),
        Some(_) if workspace.is_absolute() => Ok(workspace.to_path_buf()),
        Some(host) => Err(AgentError::new(
            AgentErrorKind::InvalidWorkspaceCwd,
            format!(
                "{} is not absolute (remote workspace on {})",
                workspace.display(),
                host.name()
            ),
        )),
    }
}

/// [`agent_program`] for a session placed on `remote`: there the command is not looked up
/// here; the host's shell finds it (a missing one exits 127, `agent_not_found`).
pub fn agent_program_on(
    command: Option<&str>,
    default: &str,
    remote: Option<&SshHost>,
) -> Result<(String, Vec<String>), AgentError> {
    if remote.is_none() {
        return agent_program(command, default);
    }
    let command = command.filter(|c| !c.trim().is_empty()).unwrap_or(default);
    split_command(command)
        .ok_or_else(|| AgentError::new(AgentErrorKind::AgentNotFound, "empty agent.command"))
}

/// The program (resolved like `which`, see `agent::command`) and leading arguments a session
/// runs: `agent.command`, or the kind's `default` when it is unset or blank.
pub fn agent_program(
    command: Option<&str>,
    default: &str,
) -> Result<(String, Vec<String>), AgentError> {
    let command = command.filter(|c| !c.trim().is_empty()).unwrap_or(default);
    let (program, args) = split_command(command)
        .ok_or_else(|| AgentError::new(AgentErrorKind::AgentNotFound, "empty agent.command"))?;
    let program = super::command::resolve_command(&program)
        .map_err(|e| AgentError::new(AgentErrorKind::AgentNotFound, e.to_string()))?
        .to_string_lossy()
        .into_owned();
    Ok((program, args))
}

pub(crate) enum StdoutItem {
    Line(Vec<u8>),
    Error(String),
    Eof,
}

/// Room for stdout lines between the pipe thread and the consumer.
const STDOUT_CHANNEL: usize = 256;
/// Most queued stdout lines the supervisor takes in a row before it looks at the process's
/// exit, a cancel and the deadlines again.
const LINE_BURST: usize = 64;

/// The consumer's end of an agent's stdout: lines, then `Eof` (or the first error). Whoever
/// takes an item from [`Self::receiver`] calls [`Self::took`], which wakes the pipe thread when
/// the stdout sink holds lines and the channel has room for them again.
pub(crate) struct StdoutLines {
    rx: Receiver<StdoutItem>,
    resume: super::pipe_hub::Resume,
}

impl StdoutLines {
    /// The channel, for `select!`; follow each item taken with [`Self::took`].
    pub(crate) fn receiver(&self) -> &Receiver<StdoutItem> {
        &self.rx
    }

    /// An item was taken from [`Self::receiver`].
    pub(crate) fn took(&self) {
        self.resume.taken(self.rx.len(), STDOUT_CHANNEL);
    }

    pub(crate) fn recv_timeout(
        &self,
        timeout: Duration,
    ) -> Result<StdoutItem, crossbeam_channel::RecvTimeoutError> {
        let item = self.rx.recv_timeout(timeout)?;
        self.took();
        Ok(item)
    }
}

/// Runs one turn: spawn, stream, decide. Always emits exactly one terminal event.
pub fn run_turn(
    spec: &ProcessSpec,
    parser: &mut dyn StreamParser,
    events: &Sender<AgentEvent>,
    cancel: &CancelToken,
    limits: TurnLimits,
) -> SupervisedTurn {
    let emit = |evs: Vec<AgentEvent>| {
        for ev in evs {
            // A dropped receiver only means nobody listens any more.
            let _ = events.send(ev);
        }
    };
    let mut end = TurnEnd::default();
    let mut pid = None;
    let mut output = ProcessOutput::default();

    if let Some(reason) = cancel.reason() {
        end.spawn_error = Some(SpawnError::Other("cancelled before start".into()));
        end.cancelled = Some(reason);
    } else {
        match spawn(spec) {
            Err(e) => end.spawn_error = Some(e),
            Ok(running) => {
                pid = Some(running.pid);
                emit(parser.on_spawn(running.pid));
                output = supervise(running, spec, parser, &emit, cancel, limits, &mut end);
                end.stderr = output.stderr.clone();
            }
        }
    }

    let (mut outcome, mut evs) = parser.finish(&end);
    ssh_connection_outcome(spec, &end, &mut outcome, &mut evs);
    if end.cancelled.is_none()
        && (end.exit.is_some_and(|e| e.code.is_some_and(|c| c != 0))
            || end.first_line_timeout.is_some())
        && let Some(said) = output.reason()
    {
        add_reason(&mut outcome, &mut evs, &said);
    }
    emit(evs);
    let stderr_text = output.stderr;
    if !outcome.is_completed() {
        log::warn!(
            program:% = spec.program,
            pid:% = crate::log_field::opt(&pid),
            outcome:% = crate::log_field::opt(&outcome.error_kind().map(|k| k.code())),
            stderr:% = crate::mask::mask(&stderr_text);
            "agent turn failed"
        );
    }
    SupervisedTurn {
        outcome,
        pid,
        stderr: stderr_text,
    }
}

struct Running {
    pid: u32,
    /// Ties the process and every descendant (even one that left the group) to this turn.
    token: String,
    stdout: StdoutLines,
    exit_rx: Receiver<ExitInfo>,
    stderr_done: Receiver<()>,
    stderr: Arc<Mutex<StderrTail>>,
}

pub(crate) fn without_nul(s: &str) -> String {
    s.replace('\0', "_")
}

fn spawn(spec: &ProcessSpec) -> Result<Running, SpawnError> {
    let mut cmd = match &spec.remote {
        None => {
            let cwd =
                verify_workspace(&spec.cwd).map_err(|e| SpawnError::InvalidCwd(e.to_string()))?;
            // An argument or environment value cannot hold a NUL byte (the spawn would fail
            // every time); tracker text reaches both (the prompt, the identifier), so NUL
            // becomes `_`.
            let mut cmd = local_command(
                spec.sandbox.as_deref(),
                &spec.program,
                &spec.args,
                &cwd,
                spec.base_env.as_deref(),
            )?;
            set_base_env(&mut cmd, spec.base_env.as_deref());
            for k in &spec.env_remove {
                cmd.env_remove(without_nul(k));
            }
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
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let token = orphans::new_token();
    cmd.env(orphans::TOKEN_ENV, &token);
    if let Some(host) = &spec.remote {
        register_remote(host, &spec.cwd, &token);
    }
    let spawned = cmd.spawn().inspect_err(|_| {
        orphans::end_token(&token);
    });
    let mut child = spawned.map_err(|e| spawn_error(spec.remote.as_ref(), &spec.program, &e))?;
    let pid = child.id();

    if let (Some(mut stdin), Some(data)) = (child.stdin.take(), spec.stdin.clone()) {
        // The agent may exit without reading; a broken pipe is not our failure.
        let writer = std::thread::Builder::new()
            .name("agent-stdin".into())
            .stack_size(SMALL_STACK)
            .spawn(move || {
                let _ = stdin.write_all(&data);
            });
        if let Err(e) = writer {
            log::warn!(pid:% = pid, error:% = e; "agent stdin writer not started");
        }
    }

    let (stdout, exit_rx, stderr_done, stderr) = watch_child(child, spec.max_line_bytes, None)
        .inspect_err(|_| {
            orphans::end_token(&token);
        })?;
    Ok(Running {
        pid,
        token,
        stdout,
        exit_rx,
        stderr_done,
        stderr,
    })
}

/// What [`watch_child`] hands back: stdout lines, the exit, the end of stderr, its tail.
pub(crate) type Watched = (
    StdoutLines,
    Receiver<ExitInfo>,
    Receiver<()>,
    Arc<Mutex<StderrTail>>,
);

/// Gives the child's pipes and exit to the shared pipe thread (`agent::pipe_hub`): stdout
/// lines wait in a bounded channel, stderr goes into a bounded tail. `pipes_done` is dropped
/// when both pipes have ended. Without both pipes the child is killed and the spawn fails.
pub(crate) fn watch_child(
    mut child: std::process::Child,
    max_line_bytes: usize,
    pipes_done: Option<Sender<()>>,
) -> Result<Watched, SpawnError> {
    let (stdout_tx, stdout_rx) = crossbeam_channel::bounded(STDOUT_CHANNEL);
    let resume = super::pipe_hub::Resume::default();
    let stderr = Arc::new(Mutex::new(StderrTail::default()));
    let (stderr_done_tx, stderr_done) = crossbeam_channel::bounded(1);
    let (exit_tx, exit_rx) = crossbeam_channel::bounded(1);
    let (Some(stdout), Some(stderr_pipe)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(SpawnError::Other("agent started without its pipes".into()));
    };
    super::pipe_hub::watch(super::pipe_hub::Watch {
        child,
        stdout,
        stderr: stderr_pipe,
        out_sink: Box::new(StdoutSink::new(max_line_bytes, stdout_tx, resume.clone())),
        err_sink: Box::new(StderrSink::new(Arc::clone(&stderr), stderr_done_tx)),
        exit_tx,
        pipes_done,
    })
    .map_err(|e| SpawnError::Other(e.to_string()))?;
    let stdout = StdoutLines {
        rx: stdout_rx,
        resume,
    };
    Ok((stdout, exit_rx, stderr_done, stderr))
}

/// The command that runs `program args` in `cwd` here: directly, or under `bwrap` when a
/// sandbox is given (a sandbox that cannot be set up fails the spawn, never runs the agent
/// unsandboxed).
pub(crate) fn local_command(
    sandbox: Option<&crate::sandbox::Sandbox>,
    program: &str,
    args: &[String],
    cwd: &Path,
    env: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> Result<Command, SpawnError> {
    let args: Vec<String> = args.iter().map(|a| without_nul(a)).collect();
    let mut cmd = match sandbox {
        Some(sb) => crate::sandbox::wrap_command(sb, program, &args, cwd, env)
            .map_err(|e| SpawnError::Other(format!("sandbox: {e}")))?,
        None => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    };
    cmd.current_dir(cwd);
    Ok(cmd)
}

/// Starts `cmd` from exactly `base` (when given) instead of sortie's environment. A NUL byte
/// cannot cross into an environment, so it becomes `_`.
pub(crate) fn set_base_env(
    cmd: &mut Command,
    base: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) {
    if let Some(base) = base {
        cmd.env_clear();
        for (k, v) in base {
            if k.as_encoded_bytes().contains(&0) || v.as_encoded_bytes().contains(&0) {
                cmd.env(
                    without_nul(&k.to_string_lossy()),
                    without_nul(&v.to_string_lossy()),
                );
            } else {
                cmd.env(k, v);
            }
        }
    }
}

/// What a remote agent gets on its command line: the forwarded base, then `extra`.
pub(crate) fn forwarded_env(
    base: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    for (k, v) in extra {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Tells the keeper how to stop the remote agent group of `workspace` on `host` should sortie
/// die while the turn `token` runs (`process_signal::keeper`); ending the token forgets it.
pub(crate) fn register_remote(host: &SshHost, workspace: &Path, token: &str) {
    crate::process_signal::keeper::register_remote(
        token,
        host.kill_remote_argv(workspace, Signal::TERM),
        host.kill_remote_argv(workspace, Signal::KILL),
    );
}

/// The local `ssh` that runs `program` on `host` in the remote workspace `cwd` (which must be
/// absolute), with `env` on the remote command line. The client runs from `/`: the local
/// directory plays no part in the remote run.
pub(crate) fn remote_command(
    host: &SshHost,
    cwd: &Path,
    env: &[(String, String)],
    program: &str,
    args: &[String],
) -> Result<Command, SpawnError> {
    if !cwd.is_absolute() {
        return Err(SpawnError::InvalidCwd(format!(
            "{} is not absolute",
            cwd.display()
        )));
    }
    let remote = crate::ssh::remote_agent_command(cwd, env, program, args);
    let mut cmd = host.command(&remote);
    cmd.current_dir("/");
    Ok(cmd)
}

/// A failed spawn as the turn sees it: a missing program (or a missing local `ssh`) is
/// `NotFound`.
pub(crate) fn spawn_error(
    remote: Option<&SshHost>,
    program: &str,
    e: &std::io::Error,
) -> SpawnError {
    match (e.kind(), remote) {
        (std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied, None) => {
            SpawnError::NotFound(format!("{program}: {e}"))
        }
        (std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied, Some(host)) => {
            SpawnError::NotFound(host.spawn_error(e).to_string())
        }
        (_, None) => SpawnError::Other(format!("{program}: {e}")),
        (_, Some(host)) => SpawnError::Other(host.spawn_error(e).to_string()),
    }
}

/// The process group a turn runs in: the local leader's (the agent, or the local `ssh`) and,
/// for a run on a host, the remote agent's group recorded in its workspace.
pub(crate) struct TurnGroup<'a> {
    pid: u32,
    remote: Option<(&'a SshHost, &'a Path)>,
    /// No more connections for signals: the remote group got SIGKILL (its record is gone), or
    /// the host could not be reached (a dead host must not stretch every stop step by a
    /// connect timeout).
    remote_done: std::cell::Cell<bool>,
}

impl<'a> TurnGroup<'a> {
    pub(crate) fn new(pid: u32, remote: Option<(&'a SshHost, &'a Path)>) -> TurnGroup<'a> {
        TurnGroup {
            pid,
            remote,
            remote_done: std::cell::Cell::new(false),
        }
    }

    /// Sends `signal` to the group, remote first. SIGTERM goes to the remote group only: the
    /// local client then ends with the remote agent and carries its last output; SIGKILL goes
    /// to both.
    pub(crate) fn signal(&self, signal: Signal) {
        let kill = signal == Signal::KILL;
        if let Some((host, workspace)) = self.remote {
            if !self.remote_done.get() {
                match host.kill_remote_group(workspace, signal) {
                    Ok(()) => self.remote_done.set(kill),
                    Err(e) => {
                        self.remote_done.set(true);
                        log::warn!(
                            ssh_host:% = host.name(),
                            pid:% = self.pid,
                            error:% = e;
                            "remote agent group not signalled"
                        );
                    }
                }
            }
            if !kill {
                return;
            }
        }
        kill_group(self.pid, signal);
    }
}

/// A run on a host that ssh ended with 255 (no connection, or a lost one): the turn fails
/// as `port_exit`, saying which host, whatever the stream parser made of the cut stream.
fn ssh_connection_outcome(
    spec: &ProcessSpec,
    end: &TurnEnd,
    outcome: &mut TurnOutcome,
    evs: &mut [AgentEvent],
) {
    let Some(host) = &spec.remote else { return };
    if end.cancelled.is_some()
        || end.exit.and_then(|e| e.code) != Some(crate::ssh::SSH_CONNECTION_FAILED)
    {
        return;
    }
    *outcome = TurnOutcome::Failed {
        message: format!("ssh to {} failed (exit 255)", host.name()),
        kind: AgentErrorKind::PortExit,
    };
    if let Some(ev) = evs.iter_mut().rev().find(|e| e.kind.is_terminal()) {
        ev.kind = outcome.terminal_event(None);
    }
}

/// Longest part of the agent's own words carried into a failure's message.
const REASON_CHARS: usize = 400;
/// Most stderr lines quoted in a failure's message.
const REASON_LINES: usize = 3;

/// What a turn's process said besides its stream.
#[derive(Debug, Default)]
struct ProcessOutput {
    /// Bounded stderr (head and tail).
    stderr: String,
    /// The last non-empty stdout line that is not a JSON object (a CLI's plain complaint).
    last_plain_stdout: Option<String>,
}

impl ProcessOutput {
    /// The CLI's own reason for failing: its most informative stderr lines
    /// ([`informative_lines`](crate::agent::failure_class::informative_lines)), else its last
    /// plain stdout line; masked and cut.
    fn reason(&self) -> Option<String> {
        let lines = crate::agent::failure_class::informative_lines(
            &self.stderr,
            REASON_LINES,
            REASON_CHARS,
        );
        let said = if lines.is_empty() {
            let line = crate::agent::text::strip_ansi(self.last_plain_stdout.as_ref()?);
            line.trim().to_string()
        } else {
            lines.join(" | ")
        };
        (!said.is_empty())
            .then(|| crate::agent::text::cut_chars(&crate::mask::mask(&said), REASON_CHARS))
    }

    /// Keeps a plain stdout line (cut, so a flood of long lines costs little).
    fn note_stdout(&mut self, line: &[u8]) {
        // A JSON object line (nearly every line) is not kept: known without decoding the text.
        if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            return;
        }
        let head = &line[..line.len().min(REASON_CHARS * 4)];
        let text = String::from_utf8_lossy(head);
        let text = text.trim();
        if !text.is_empty() && !text.starts_with('{') {
            self.last_plain_stdout = Some(crate::agent::text::cut_chars(text, REASON_CHARS));
        }
    }
}

/// Appends the CLI's reason to a failure's message (and to its terminal event), unless the
/// message already says it.
fn add_reason(outcome: &mut TurnOutcome, evs: &mut [AgentEvent], said: &str) {
    let message = match outcome {
        TurnOutcome::Failed { message, .. } | TurnOutcome::EndedWithError { message, .. } => {
            message
        }
        _ => return,
    };
    if message.contains(said) {
        return;
    }
    let old = message.clone();
    *message = format!("{old}: {said}");
    let new = message.clone();
    for ev in evs.iter_mut().rev() {
        match &mut ev.kind {
            AgentEventKind::TurnFailed { message, .. }
            | AgentEventKind::TurnEndedWithError { message } => {
                if *message == old {
                    *message = new;
                }
                return;
            }
            _ => {}
        }
    }
}

fn supervise(
    running: Running,
    spec: &ProcessSpec,
    parser: &mut dyn StreamParser,
    emit: &dyn Fn(Vec<AgentEvent>),
    cancel: &CancelToken,
    limits: TurnLimits,
    end: &mut TurnEnd,
) -> ProcessOutput {
    let mut output = ProcessOutput::default();
    let pid = running.pid;
    let group = TurnGroup::new(pid, spec.remote.as_ref().map(|h| (h, spec.cwd.as_path())));
    let deadline = limits.turn_timeout.map(|t| Instant::now() + t);
    let stdout_rx = running.stdout.receiver();
    let no_stdout = never();
    let mut stdout_open = true;
    let mut startup = limits.first_line_timeout.map(|t| (t, Instant::now() + t));

    let mut burst = 0;
    loop {
        // Lines already queued are taken without a select: the exit, a cancel and the deadlines
        // are looked at again after at most `LINE_BURST` of them.
        let queued = (stdout_open && burst < LINE_BURST)
            .then(|| stdout_rx.try_recv().ok())
            .flatten();
        burst = if queued.is_some() { burst + 1 } else { 0 };
        let item = match queued {
            Some(item) => Ok(item),
            None => {
                let timeout = until_next(deadline, startup.map(|(_, d)| d));
                let out = if stdout_open { stdout_rx } else { &no_stdout };
                select! {
                    recv(out) -> item => item,
                    recv(running.exit_rx) -> info => {
                        end.exit = Some(info.unwrap_or_default());
                        break;
                    },
                    recv(cancel.receiver()) -> _ => {
                        end.cancelled = Some(cancel.reason().unwrap_or(CancelReason::User));
                        end.exit = Some(terminate(&group, &running.exit_rx, limits.grace, cancel));
                        break;
                    },
                    default(timeout) => {
                        if let Some((t, d)) = startup
                            && Instant::now() >= d
                        {
                            log::warn!(
                                program:% = spec.program,
                                pid:% = pid,
                                timeout_ms:% = t.as_millis();
                                "agent printed nothing usable before the startup deadline, killing its group"
                            );
                            end.first_line_timeout = Some(t);
                            end.exit = Some(terminate(&group, &running.exit_rx, limits.grace, cancel));
                            break;
                        }
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            cancel.cancel(CancelReason::TurnTimeout);
                            end.cancelled = cancel.reason();
                            end.exit = Some(terminate(&group, &running.exit_rx, limits.grace, cancel));
                            break;
                        }
                        continue;
                    },
                }
            }
        };
        match item.inspect(|_| running.stdout.took()) {
            Ok(StdoutItem::Line(line)) => {
                output.note_stdout(&line);
                emit(parser.on_line(&line));
                startup = startup
                    .filter(|_| !parser.started())
                    .map(|(t, _)| (t, Instant::now() + t));
            }
            Ok(StdoutItem::Error(e)) => {
                end.read_error = Some(e);
                end.exit = Some(terminate(&group, &running.exit_rx, limits.grace, cancel));
                stdout_open = false;
                break;
            }
            Ok(StdoutItem::Eof) | Err(_) => {
                stdout_open = false;
            }
        }
    }
    let turn = Turn {
        running: &running,
        group: &group,
        spec,
        limits,
    };
    finish(&turn, parser, emit, end, stdout_open, &mut output);
    log::debug!(program:% = spec.program, pid:% = pid, exit:% = crate::log_field::opt(&end.exit); "agent process ended");
    output
}

/// How long until the earlier of the turn deadline and the startup deadline (an hour when
/// neither is set).
fn until_next(deadline: Option<Instant>, startup: Option<Instant>) -> Duration {
    let next = match (deadline, startup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    next.map(|d| d.saturating_duration_since(Instant::now()))
        .unwrap_or(Duration::from_secs(3600))
}

/// One supervised turn's process, its group, spec and limits.
struct Turn<'a, 'g> {
    running: &'a Running,
    group: &'a TurnGroup<'g>,
    spec: &'a ProcessSpec,
    limits: TurnLimits,
}

/// After the turn's process ended or was stopped: kills what is left of its group and the
/// processes that escaped it, drains stdout (when still open) within the drain deadline, and
/// keeps the stderr tail.
fn finish(
    turn: &Turn<'_, '_>,
    parser: &mut dyn StreamParser,
    emit: &dyn Fn(Vec<AgentEvent>),
    end: &mut TurnEnd,
    stdout_open: bool,
    output: &mut ProcessOutput,
) {
    let Turn {
        running,
        group,
        spec,
        limits,
    } = *turn;
    let pid = running.pid;
    let stdout = &running.stdout;
    // Every exit: kill whatever is left of the group (grandchildren, MCP sidecars; on a host
    // the remote group too), so the pipes close and nothing outlives the turn.
    group.signal(Signal::KILL);
    // Descendants that left the group (`setsid`) still carry the turn's token.
    let escaped = orphans::end_token(&running.token);
    if escaped > 0 {
        log::warn!(
            program:% = spec.program,
            pid:% = pid,
            count:% = escaped;
            "agent turn left processes outside its group, killed"
        );
    }

    if stdout_open && end.read_error.is_none() {
        let drain_until = Instant::now() + limits.drain_timeout;
        loop {
            let left = drain_until.saturating_duration_since(Instant::now());
            match stdout.recv_timeout(left) {
                Ok(StdoutItem::Line(line)) => {
                    output.note_stdout(&line);
                    emit(parser.on_line(&line));
                }
                Ok(StdoutItem::Error(e)) => {
                    end.read_error = Some(e);
                    break;
                }
                Ok(StdoutItem::Eof) | Err(_) => break,
            }
        }
    }
    let _ = running.stderr_done.recv_timeout(limits.drain_timeout);
    if let Ok(s) = running.stderr.lock() {
        output.stderr = s.render();
    }
}

/// SIGTERM the group, wait `grace` for the child (cut short when `cancel` is escalated), then
/// SIGKILL; returns the exit.
fn terminate(
    group: &TurnGroup<'_>,
    exit_rx: &Receiver<ExitInfo>,
    grace: Duration,
    cancel: &CancelToken,
) -> ExitInfo {
    let pid = group.pid;
    if !cancel.is_urgent() {
        group.signal(Signal::TERM);
        select! {
            recv(exit_rx) -> info => {
                if let Ok(info) = info {
                    group.signal(Signal::KILL);
                    return info;
                }
            },
            recv(cancel.urgent_receiver()) -> _ => {
                log::info!(pid:% = pid; "grace cut short, killing agent process group");
            },
            default(grace) => {},
        }
    }
    group.signal(Signal::KILL);
    exit_rx.recv_timeout(KILL_WAIT).unwrap_or(ExitInfo {
        code: None,
        signal: Some(9),
    })
}

/// Signals the whole process group led by `pid`. Best effort: the turn is ending either way,
/// and a failure here has nothing left to act on.
pub(crate) fn kill_group(pid: u32, signal: Signal) {
    if let Err(e) = signal_group(pid, signal) {
        log::debug!(pid:% = pid, error:% = e; "process group signal failed");
    }
}

/// The stdout rules on their own, over any reader (the daemon reads through `pipe_hub`).
#[cfg(test)]
fn read_capped_lines(stdout: impl Read, max: usize, tx: &Sender<StdoutItem>) {
    let resume = super::pipe_hub::Resume::default();
    read_all(stdout, &mut StdoutSink::new(max, tx.clone(), resume));
}

/// Reads one pipe to its end into `sink` (blocking; the test of the stdout rules only).
#[cfg(test)]
fn read_all(mut pipe: impl Read, sink: &mut dyn PipeSink) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {
                sink.end(None);
                break;
            }
            Ok(n) => {
                if !sink.data(&buf[..n]) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                sink.end(Some(e));
                break;
            }
        }
        sink.flush();
    }
    sink.flush();
}

/// Stdout: capped lines to the supervisor, then `Eof` (or the first error). Lines the
/// supervisor's bounded channel cannot take yet wait here ([`Flush::Held`]); their pipe is not
/// read meanwhile, so a flooding agent blocks on its pipe instead of growing our memory.
pub(crate) struct StdoutSink {
    split: LineSplitter,
    tx: Sender<StdoutItem>,
    pending: VecDeque<StdoutItem>,
    /// Marked while lines are held, so the consumer wakes the pipe thread when it has room.
    resume: super::pipe_hub::Resume,
}

impl StdoutSink {
    pub(crate) fn new(
        max: usize,
        tx: Sender<StdoutItem>,
        resume: super::pipe_hub::Resume,
    ) -> StdoutSink {
        StdoutSink {
            split: LineSplitter::new(max),
            tx,
            pending: VecDeque::new(),
            resume,
        }
    }

    /// Passes `item` on; a full channel is marked for a wake and offered once more.
    fn send(&self, item: StdoutItem) -> Result<(), crossbeam_channel::TrySendError<StdoutItem>> {
        match self.tx.try_send(item) {
            Err(crossbeam_channel::TrySendError::Full(item)) => {
                self.resume.hold();
                self.tx.try_send(item)
            }
            other => other,
        }
    }
}

impl PipeSink for StdoutSink {
    fn data(&mut self, chunk: &[u8]) -> bool {
        let pending = &mut self.pending;
        match self.split.feed(chunk, &mut |line| {
            pending.push_back(StdoutItem::Line(line));
            true
        }) {
            Ok(go_on) => go_on,
            Err(too_long) => {
                pending.push_back(StdoutItem::Error(too_long.to_string()));
                false
            }
        }
    }

    fn end(&mut self, error: Option<std::io::Error>) {
        if let Some(e) = error {
            self.pending.push_back(StdoutItem::Error(e.to_string()));
            return;
        }
        if let Some(rest) = self.split.finish() {
            self.pending.push_back(StdoutItem::Line(rest));
        }
        self.pending.push_back(StdoutItem::Eof);
    }

    fn flush(&mut self) -> Flush {
        while let Some(item) = self.pending.pop_front() {
            match self.send(item) {
                Ok(()) => {}
                Err(crossbeam_channel::TrySendError::Full(item)) => {
                    self.pending.push_front(item);
                    return Flush::Held;
                }
                Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                    self.pending.clear();
                    return Flush::Gone;
                }
            }
        }
        Flush::Clear
    }
}

/// Stderr: lines of at most `STDERR_MAX_LINE` bytes into the bounded tail (and the debug
/// log); `done` is signalled at its end.
pub(crate) struct StderrSink {
    line: Vec<u8>,
    tail: Arc<Mutex<StderrTail>>,
    done: Sender<()>,
}

impl StderrSink {
    pub(crate) fn new(tail: Arc<Mutex<StderrTail>>, done: Sender<()>) -> StderrSink {
        StderrSink {
            line: Vec::new(),
            tail,
            done,
        }
    }

    fn flush(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end_matches(['\n', '\r']);
        log::debug!(stderr:% = crate::mask::mask(text); "agent stderr");
        if let Ok(mut s) = self.tail.lock() {
            s.push(text);
        }
        self.line.clear();
    }
}

impl PipeSink for StderrSink {
    fn data(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            self.line.push(b);
            // A newline-free flood is cut into capped pieces instead of buffered whole.
            if b == b'\n' || self.line.len() >= STDERR_MAX_LINE {
                self.flush();
            }
        }
        true
    }

    fn end(&mut self, _error: Option<std::io::Error>) {
        if !self.line.is_empty() {
            self.flush();
        }
        let _ = self.done.send(());
    }
}

/// Bounded stderr: the first and the last lines, with a count of what was dropped between.
#[derive(Debug, Default)]
pub struct StderrTail {
    head: Vec<String>,
    tail: VecDeque<String>,
    bytes: usize,
    discarded: usize,
}

impl StderrTail {
    pub fn push(&mut self, line: &str) {
        let line = if line.len() > STDERR_MAX_LINE {
            let mut end = STDERR_MAX_LINE;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            &line[..end]
        } else {
            line
        };
        if self.head.len() < STDERR_HEAD_LINES && self.bytes + line.len() <= STDERR_MAX_BYTES {
            self.bytes += line.len();
            self.head.push(line.to_string());
            return;
        }
        self.tail.push_back(line.to_string());
        self.bytes += line.len();
        while self.tail.len() > STDERR_TAIL_LINES || self.bytes > STDERR_MAX_BYTES {
            match self.tail.pop_front() {
                Some(old) => {
                    self.bytes -= old.len();
                    self.discarded += 1;
                }
                None => break,
            }
        }
    }

    /// The newest non-blank line kept, e.g. the error an agent printed before it died.
    pub fn last_line(&self) -> Option<String> {
        self.tail
            .iter()
            .rev()
            .chain(self.head.iter().rev())
            .find(|l| !l.trim().is_empty())
            .cloned()
    }

    pub fn render(&self) -> String {
        let mut out: Vec<String> = self.head.clone();
        if self.discarded > 0 {
            out.push(format!("... ({} lines discarded) ...", self.discarded));
        }
        out.extend(self.tail.iter().cloned());
        out.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_agent_settings() {
        let settings = crate::agent::AgentSettings {
            turn_timeout_ms: 60_000,
            read_timeout_ms: 0,
            stop_grace_ms: 750,
            ..Default::default()
        };
        let limits = TurnLimits::from_settings(&settings);
        assert_eq!(limits.turn_timeout, Some(Duration::from_secs(60)));
        assert_eq!(limits.drain_timeout, Duration::from_secs(5));
        assert_eq!(limits.grace, Duration::from_millis(750));
        let unset = crate::agent::AgentSettings::default();
        assert_eq!(TurnLimits::from_settings(&unset).turn_timeout, None);
        assert_eq!(TurnLimits::from_settings(&unset).grace, DEFAULT_GRACE);
    }

    #[test]
    fn a_failure_carries_the_informative_stderr_lines_else_the_last_plain_stdout_line() {
        let mut out = ProcessOutput::default();
        out.note_stdout(br#"{"type":"system"}"#);
        assert_eq!(out.reason(), None);
        out.note_stdout(b"refused for root");
        assert_eq!(out.reason().as_deref(), Some("refused for root"));
        let mut tail = StderrTail::default();
        tail.push("first");
        tail.push("\u{1b}[31mlast words\u{1b}[0m");
        tail.push("   ");
        out.stderr = tail.render();
        assert_eq!(out.reason().as_deref(), Some("last words"));
        tail.push("Error: Classic tokens are not supported");
        tail.push("  • Unset the token and log in");
        out.stderr = tail.render();
        assert_eq!(
            out.reason().as_deref(),
            Some("Error: Classic tokens are not supported | Unset the token and log in")
        );

        let mut outcome = TurnOutcome::Failed {
            message: "non-zero exit (code 1)".into(),
            kind: crate::agent::AgentErrorKind::PortExit,
        };
        let mut evs = vec![AgentEvent::new(
            0,
            AgentEventKind::TurnFailed {
                message: "non-zero exit (code 1)".into(),
                api_duration_ms: None,
            },
        )];
        add_reason(&mut outcome, &mut evs, "last words");
        assert_eq!(outcome.message(), "non-zero exit (code 1): last words");
        assert_eq!(evs[0].kind.message(), "non-zero exit (code 1): last words");
        add_reason(&mut outcome, &mut evs, "last words");
        assert_eq!(outcome.message(), "non-zero exit (code 1): last words");
    }

    #[test]
    fn stderr_keeps_head_and_tail() {
        let mut t = StderrTail::default();
        for i in 0..1500 {
            t.push(&format!("line {i}"));
        }
        let r = t.render();
        assert!(r.starts_with("line 0\n"));
        assert!(r.contains("... (500 lines discarded) ..."));
        assert!(r.ends_with("line 1499"));
    }

    #[test]
    fn capped_reader_splits_lines_and_rejects_overlong_ones() {
        let (tx, rx) = crossbeam_channel::unbounded();
        read_capped_lines(&b"a\r\nbb\nccc"[..], 16, &tx);
        let got: Vec<String> = rx
            .try_iter()
            .map(|i| match i {
                StdoutItem::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                StdoutItem::Error(e) => format!("error {e}"),
                StdoutItem::Eof => "eof".into(),
            })
            .collect();
        assert_eq!(got, ["a", "bb", "ccc", "eof"]);

        let (tx, rx) = crossbeam_channel::unbounded();
        let long = [b'x'; 100];
        read_capped_lines(&long[..], 16, &tx);
        assert!(matches!(rx.try_recv(), Ok(StdoutItem::Error(_))));
    }

    #[test]
    fn stdout_lines_far_beyond_the_channel_arrive_by_the_consumer_s_wakes() {
        // The pipe thread's fallback timer is off: each refill of the 256-line channel comes
        // from the consumer's wake as it takes the channel down to half.
        super::super::pipe_hub::retry_timer_off();
        let child = Command::new("seq")
            .args(["1", "20000"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn seq");
        let (lines, exit, _, _) = watch_child(child, 1 << 10, None).expect("watch");
        let mut n = 0u32;
        loop {
            match lines.recv_timeout(Duration::from_secs(30)) {
                Ok(StdoutItem::Line(l)) => {
                    n += 1;
                    assert_eq!(l, n.to_string().into_bytes());
                }
                Ok(StdoutItem::Eof) => break,
                Ok(StdoutItem::Error(e)) => panic!("read error: {e}"),
                Err(e) => panic!("stuck after {n} lines: {e}"),
            }
        }
        assert_eq!(n, 20_000);
        let exit = exit.recv_timeout(Duration::from_secs(30)).expect("exit");
        assert_eq!(exit.code, Some(0));
    }

    /// A parser that counts lines and starts only on a line `go`.
    #[derive(Default)]
    struct StartOnGo {
        lines: Vec<String>,
        go: bool,
    }

    impl StreamParser for StartOnGo {
        fn on_spawn(&mut self, _pid: u32) -> Vec<AgentEvent> {
            Vec::new()
        }
        fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
            let l = String::from_utf8_lossy(line).into_owned();
            self.go |= l == "go";
            self.lines.push(l);
            Vec::new()
        }
        fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
            let o = super::super::stream::shared_outcome(end).unwrap_or(TurnOutcome::Completed {
                message: String::new(),
            });
            (o, Vec::new())
        }
        fn session_id(&self) -> Option<String> {
            None
        }
        fn usage(&self) -> Option<super::super::event::TokenUsage> {
            None
        }
        fn model(&self) -> Option<String> {
            None
        }
        fn started(&self) -> bool {
            self.go
        }
    }

    fn sh(script: &str) -> ProcessSpec {
        ProcessSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: PathBuf::from("/"),
            max_line_bytes: MAX_LINE_BYTES,
            ..ProcessSpec::default()
        }
    }

    fn with_startup(ms: u64) -> TurnLimits {
        TurnLimits {
            first_line_timeout: Some(Duration::from_millis(ms)),
            grace: Duration::from_millis(200),
            ..TurnLimits::default()
        }
    }

    #[test]
    fn the_startup_deadline_kills_a_silent_agent_and_lines_restart_it() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut p = StartOnGo::default();
        // Three lines 50 ms apart each restart a 1 s deadline; then silence.
        let spec = sh("for i in 1 2 3; do echo wait; sleep 0.05; done; exec sleep 30");
        let turn = run_turn(&spec, &mut p, &tx, &CancelToken::new(), with_startup(1000));
        assert_eq!(p.lines, ["wait", "wait", "wait"]);
        assert_eq!(
            turn.outcome.error_kind(),
            Some(super::super::AgentErrorKind::ResponseTimeout)
        );
        assert!(turn.outcome.message().contains("no output within 1000 ms"));
    }

    #[test]
    fn the_startup_deadline_ends_with_the_started_line() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut p = StartOnGo::default();
        let spec = sh("echo go; sleep 0.6; echo done");
        let turn = run_turn(&spec, &mut p, &tx, &CancelToken::new(), with_startup(300));
        assert!(turn.outcome.is_completed(), "{:?}", turn.outcome);
        assert_eq!(p.lines, ["go", "done"]);
    }

    #[test]
    fn removed_variables_are_not_inherited() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut p = StartOnGo::default();
        let mut spec = sh("echo \"${HOME:-unset} $X\"");
        spec.env_remove = vec!["HOME".into()];
        spec.env = vec![("X".into(), "set".into())];
        run_turn(
            &spec,
            &mut p,
            &tx,
            &CancelToken::new(),
            TurnLimits::default(),
        );
        assert_eq!(p.lines, ["unset set"]);
    }

    #[test]
    fn a_session_on_a_host_resolves_nothing_here() {
        let host = SshHost {
            target: crate::ssh::SshTarget::parse("build1").unwrap(),
            options: Arc::new(crate::ssh::SshOptions::default()),
        };
        let cli = "definitely-not-installed-agent-cli --flag";
        assert!(agent_program_on(Some(cli), "x", None).is_err());
        assert_eq!(
            agent_program_on(Some(cli), "x", Some(&host)).unwrap(),
            (
                "definitely-not-installed-agent-cli".to_string(),
                vec!["--flag".to_string()]
            )
        );
        let remote_ws = Path::new("/only/on/the/host");
        assert!(session_workspace_on(remote_ws, None).is_err());
        assert_eq!(
            session_workspace_on(remote_ws, Some(&host)).unwrap(),
            remote_ws
        );
        assert_eq!(
            session_workspace_on(Path::new("rel"), Some(&host))
                .unwrap_err()
                .kind,
            AgentErrorKind::InvalidWorkspaceCwd
        );
    }

    #[test]
    fn workspace_must_be_an_absolute_directory() {
        assert!(verify_workspace(Path::new("relative")).is_err());
        assert!(verify_workspace(Path::new("/definitely/not/here")).is_err());
        assert!(verify_workspace(Path::new("/")).is_ok());
    }
}
