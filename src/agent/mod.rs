//! The agent runtime: the adapter contract every agent kind implements, normalized events,
//! the process supervisor, the per-kind stream parsers, and the agent → orchestrator files
//! (`.sortie/status`, `.sortie/state.json`).
//!
//! Everything is synchronous: `run_turn` blocks the calling supervisor thread and streams
//! events into a crossbeam channel; another thread cancels through a [`CancelToken`].

pub mod acp;
pub mod block;
pub mod cancel;
pub mod claude;
pub mod codex;
pub mod command;
pub mod copilot;
pub mod env;
pub mod error;
pub mod event;
pub mod failure_class;
pub mod jsonrpc;
pub mod mcp_file;
pub mod mock;
pub mod opencode;
pub mod path_error;
pub mod per_turn;
mod pipe_hub;
mod pipes;
pub mod pr_record;
pub mod process;
pub mod sortie_file;
pub mod state_file;
pub mod status_file;
pub mod stream;
pub mod text;
pub mod tool_kind;

pub use cancel::{CancelReason, CancelToken};
pub use error::{AgentError, AgentErrorKind};
pub use event::{
    AgentEvent, AgentEventKind, RateLimitStatus, RateLimitWindow, TokenUsage, TurnOutcome,
};
pub use tool_kind::ToolKind;

use crate::clock::Clock;
pub use crate::domain::SettingProblem;
use crossbeam_channel::Sender;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

/// When a kind's token figures arrive (API `usage_arrival`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageArrival {
    /// One figure per LLM request, while the turn runs.
    Incremental,
    /// At most one figure per turn, after the turn's work.
    TurnEnd,
    /// Never.
    None,
}

/// What a kind's figures attribute to (API `usage_attribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageAttribution {
    PerModel,
    SessionTotal,
    None,
}

/// Where a kind's token figures come from (a run's `usage_provenance` source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// The agent protocol's own messages.
    Protocol,
    /// The runtime's own output, in a format of its own.
    Output,
    /// The runtime's session records on the host that ran it.
    Journal,
}

impl UsageSource {
    /// The word a log line carries (the serialized name).
    pub fn word(self) -> &'static str {
        match self {
            UsageSource::Protocol => "protocol",
            UsageSource::Output => "output",
            UsageSource::Journal => "journal",
        }
    }
}

/// How a source's figures were read (a run's `usage_provenance` strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageStrategy {
    /// Read as the reports arrived.
    Live,
    /// Read from the session records when the turn ended.
    Records,
}

impl UsageStrategy {
    /// The word a log line carries (the serialized name).
    pub fn word(self) -> &'static str {
        match self {
            UsageStrategy::Live => "live",
            UsageStrategy::Records => "records",
        }
    }
}

/// One source that settled a run's token figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UsageProvenance {
    pub source: UsageSource,
    pub strategy: UsageStrategy,
}

/// Static facts about a kind, frozen per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AdapterCaps {
    pub usage_arrival: UsageArrival,
    pub usage_attribution: UsageAttribution,
    /// Where its figures come from and how they are read; `None` for a kind that reports none.
    pub usage_provenance: Option<UsageProvenance>,
    /// A later dispatch can continue the same agent conversation.
    pub resumable: bool,
    /// The kind runs an external command (`agent.command`).
    pub requires_command: bool,
    /// The kind talks to its agent over stdin for the whole session (JSON-RPC), so it cannot
    /// run where only the agent's output comes back (a Kubernetes Job's log).
    pub stdin_session: bool,
}

impl AdapterCaps {
    /// The sources that settled a run's token figure: this kind's source when a figure
    /// arrived (`measured`), none otherwise.
    pub fn provenance(&self, measured: bool) -> Vec<UsageProvenance> {
        self.usage_provenance
            .filter(|_| measured)
            .into_iter()
            .collect()
    }
}

/// The typed agent configuration the adapters need; config maps itself onto it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSettings {
    /// `agent.kind`.
    pub kind: String,
    /// `agent.command`; `None` means the kind's default binary.
    pub command: Option<String>,
    /// `agent.turn_timeout_ms`; 0 disables the per-turn deadline.
    pub turn_timeout_ms: u64,
    /// `agent.read_timeout_ms`; bounds output draining after exit and the stop budget.
    pub read_timeout_ms: u64,
    /// `agent.stop_grace_ms`; 0 means [`process::DEFAULT_GRACE`].
    pub stop_grace_ms: u64,
    /// The `<kind>:` pass-through block of WORKFLOW.md.
    pub block: serde_json::Map<String, serde_json::Value>,
    /// Directory of WORKFLOW.md, for relative paths in the block (e.g. `mcp_config`).
    pub workflow_dir: PathBuf,
    /// `agent.env` and `agent.inherit_env`, with the values never passed unasked (see
    /// [`env`]).
    pub env: crate::child_env::EnvPolicy,
    /// `worker.sandbox` when it runs this machine's sessions under `bwrap`.
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
}

impl AgentSettings {
    /// How long a stopped agent's process group has between SIGTERM and SIGKILL.
    pub fn stop_grace(&self) -> std::time::Duration {
        if self.stop_grace_ms == 0 {
            process::DEFAULT_GRACE
        } else {
            std::time::Duration::from_millis(self.stop_grace_ms)
        }
    }
}

/// What a session starts from.
#[derive(Debug, Clone, Default)]
pub struct StartSessionParams {
    /// Absolute workspace path; the agent's cwd.
    pub workspace: PathBuf,
    /// A session id from an earlier attempt to continue.
    pub resume_session_id: Option<String>,
    /// The tracker's id of the issue (log lines only).
    pub issue_id: String,
    pub issue_identifier: String,
    /// The worker-written MCP config (`.sortie/mcp.json`); wins over the block's `mcp_config`.
    pub mcp_config_path: Option<PathBuf>,
    /// The SSH host the session's processes run on; `None` runs them here.
    pub remote: Option<crate::ssh::SshHost>,
    /// The attempt, when known (`SORTIE_ATTEMPT` in the agent's environment).
    pub attempt: Option<u32>,
}

/// What one turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnResult {
    pub outcome: TurnOutcome,
    /// The session id after this turn (it may change per turn).
    pub session_id: Option<String>,
    /// The turn's total usage; `None` when the agent reported none (unmeasured, not zero).
    pub usage: Option<TokenUsage>,
    /// The model the agent reported running.
    pub model: Option<String>,
}

impl TurnResult {
    /// The answer to a turn asked of a session already stopped: an error outcome, its terminal
    /// event sent.
    pub fn session_stopped(
        clock: &dyn Clock,
        session_id: Option<String>,
        model: Option<String>,
        events: &Sender<AgentEvent>,
    ) -> TurnResult {
        let outcome = TurnOutcome::EndedWithError {
            message: "session already stopped".into(),
            kind: AgentErrorKind::ResponseError,
        };
        let _ = events.send(AgentEvent::new(
            clock.now_ms(),
            outcome.terminal_event(None),
        ));
        TurnResult {
            outcome,
            session_id,
            usage: None,
            model,
        }
    }
}

/// One agent kind.
///
/// # Errors
///
/// Errors are [`AgentError`]s whose [`AgentErrorKind`] the orchestrator reads
/// (`orchestrator::exit_step`): a kind that is [`AgentErrorKind::retryable`] is retried after
/// the failure backoff; any other is retried after the same backoff but logged as unfixable
/// (releasing the claim would dispatch the issue again at the next tick). Either counts
/// towards the failure breaker, which may hold the issue for a person instead.
///
/// - Building ([`crate::registry::adapter_for`]): `AgentNotFound` for an unregistered kind or
///   settings it cannot run with; the daemon refuses to start, a reload is refused whole.
/// - [`AgentAdapter::start_session`] and a first turn: `AgentNotFound` (the CLI is missing)
///   and `InvalidWorkspaceCwd` (the workspace is not a directory under the root) are a session
///   that did not start: reported to the operator, not retryable.
/// - [`AgentSession::run_turn`] reports failures in its [`TurnResult`]: `ResponseTimeout`,
///   `TurnTimeout`, `PortExit`, `ResponseError` and `TurnFailed` are retryable;
///   `TurnCancelled` ends the run as cancelled; `TurnInputRequired` is not retryable;
///   `AgentAuthFailed` is never retried: the agent kind is held for a person and the claim
///   released.
/// - [`AgentSession::stop`] failing is logged; the run's outcome stands.
pub trait AgentAdapter: Send + Sync {
    fn kind(&self) -> &'static str;
    fn caps(&self) -> AdapterCaps;
    /// Validates the workspace and prepares a session. Fork-per-turn kinds spawn nothing yet.
    fn start_session(
        &self,
        params: StartSessionParams,
    ) -> Result<Box<dyn AgentSession>, AgentError>;
    /// `Some` for a kind that takes the worker-written MCP file (`.sortie/mcp.json`, through
    /// [`StartSessionParams::mcp_config_path`]): the settings whose `mcp_config` is merged
    /// into it ([`mcp_file::prepare`]). `None`: the kind takes no such file.
    fn worker_mcp_settings(&self) -> Option<&AgentSettings> {
        None
    }
}

/// One agent conversation; `&mut self` serializes turns.
pub trait AgentSession: Send {
    fn session_id(&self) -> Option<String>;
    /// Runs one turn, blocking. Events go to `events` as they happen, ending with exactly one
    /// terminal event that matches the returned outcome. A cancel makes it return promptly
    /// with the agent's whole process group killed.
    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult;
    /// Ends the session; idempotent.
    fn stop(&mut self) -> Result<(), AgentError>;
}

/// Builds one kind's adapter from its settings, with event timestamps from the clock.
pub type BuildAgent =
    fn(&AgentSettings, Arc<dyn Clock>) -> Result<Arc<dyn AgentAdapter>, AgentError>;

/// Static facts about one agent kind. Each adapter module exports one; `crate::registry`
/// lists them, and config, core and the CLI learn about kinds only from there.
#[derive(Clone, Copy)]
pub struct AgentDescriptor {
    /// The name written in `agent.kind`; also the name of the kind's pass-through block.
    pub kind: &'static str,
    /// Known without building an adapter, so validation and the API can read them.
    pub caps: AdapterCaps,
    /// The keys the kind's pass-through block understands; `validate` warns about others.
    pub block_keys: &'static [&'static str],
    /// The variables of sortie's environment the kind's agent needs (names, or prefixes
    /// ending in `*`), on top of the system basics (see [`env`]).
    pub env_vars: &'static [&'static str],
    /// The hosts the kind's CLI reaches on its own (its model API), in `allow_hosts` pattern
    /// form: allowed by default under `worker.sandbox.network: allowlist`. Empty for a kind
    /// whose provider the operator chooses.
    pub egress_hosts: &'static [&'static str],
    /// The kind's checks over its settings, without I/O beyond asking who the process runs
    /// as; empty when it can run. Both `sortie validate` and the dispatch preflight report them.
    pub validate: fn(&AgentSettings) -> Vec<SettingProblem>,
    /// Recognises, in a failed run's message (which quotes the CLI's own words), a cause that
    /// will not heal by itself: the kind's own phrases, then the common ones
    /// ([`failure_class::classify_common`]).
    pub classify_failure: fn(&str) -> Option<failure_class::FailureClass>,
    /// The kind's instantiation of the shared contract suite, or the daemon test that runs it.
    pub contract: crate::domain::contract::Contract,
    pub build: BuildAgent,
}

/// For kinds whose settings need no checks beyond the shared ones.
pub fn no_setting_problems(_: &AgentSettings) -> Vec<SettingProblem> {
    Vec::new()
}
