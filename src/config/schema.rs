//! The typed, immutable configuration. Every value here is fully resolved: defaults applied,
//! `$VAR`/`~` expanded, paths absolute.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::pricing::TokenClass;
use crate::ssh::{SshHost, SshOptions};

/// `shutdown.drain_timeout_ms`: below the 30 s a service manager commonly waits before
/// SIGKILL (systemd's `TimeoutStopSec` default is 90 s, Kubernetes' grace period 30 s).
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 15_000;

/// The rates a load rejected as invalid, by entry key and class: a reload keeps the previous
/// rate of each (see [`ServiceConfig::keep_previous_rates`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectedRates(pub BTreeSet<(String, TokenClass)>);

/// `worker.*` as built.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkerConfig {
    /// Each host once, in the order written; empty runs every session on this machine.
    pub hosts: Vec<SshHost>,
    /// `max_concurrent_agents_per_host` when positive.
    pub max_per_host: Option<u32>,
    pub options: Arc<SshOptions>,
    /// `worker.sandbox` (`config::sandbox`); the paths it hides are filled in once the
    /// database and workspace paths are known.
    pub sandbox: crate::sandbox::Sandbox,
    /// `worker.kubernetes` (`config::kubernetes`): sessions run as Jobs through the relay.
    pub kubernetes: Option<crate::kube::KubeWorker>,
}

impl WorkerConfig {
    pub fn remote(&self) -> bool {
        !self.hosts.is_empty()
    }

    pub fn host(&self, name: &str) -> Option<&SshHost> {
        self.hosts.iter().find(|h| h.name() == name)
    }
}

/// The whole typed configuration of one workflow file. `Debug` shows only the raw block
/// names and no secret values, so a logged config never leaks a credential.
#[derive(Clone, PartialEq)]
pub struct ServiceConfig {
    pub tracker: TrackerConfig,
    pub polling: PollingConfig,
    pub shutdown: ShutdownConfig,
    pub workspace: WorkspaceConfig,
    pub hooks: HooksConfig,
    pub agent: AgentConfig,
    /// Absolute SQLite path; default `.sortie.db` beside WORKFLOW.md.
    pub db_path: PathBuf,
    pub server: ServerConfig,
    pub logging: LoggingConfig,
    /// The tracker's local data file, for kinds whose descriptor declares a `path_key`:
    /// `<kind>.<key>` (or `tracker.<key>`) resolved against the workflow file's directory, or
    /// against the process CWD (with a `data_path_from_cwd` warning) when only that one exists.
    pub tracker_path: Option<PathBuf>,
    /// The operator's `token_rates` entries (invalid rates already dropped with a warning).
    pub token_rates: crate::pricing::TokenRates,
    /// The `token_rates` rates this load rejected as invalid (a reload keeps their previous
    /// rates).
    pub token_rates_rejected: RejectedRates,
    /// `price_table`: the table layers and their sources.
    pub price_table: crate::pricing::PriceTableSettings,
    /// `reactions`: the pull-request reactions applied.
    pub reactions: super::reactions::ReactionsConfig,
    /// Where the reactions' provider is reached when it is not the tracker's kind: its own
    /// top-level block's `endpoint` and `api_key` (`None`: the tracker block's).
    pub scm_access: Option<ScmAccess>,
    /// `dispatch`: rules, stage chains and the hop ceiling.
    pub dispatch: super::dispatch::DispatchConfig,
    /// `self_review`.
    pub self_review: super::reactions::SelfReviewConfig,
    /// `worker`: SSH hosts and the per-host cap.
    pub worker: WorkerConfig,
    /// `notifications`: operator notification destinations.
    pub notifications: super::notifications::NotificationsConfig,
    /// Every top-level key as decoded (after `SORTIE_*` overrides): adapter pass-through blocks,
    /// extensions and post-MVP sections are read from here.
    pub raw: Map<String, Value>,
    /// Values that must be masked: the API key and every value `$VAR` put into it.
    pub secret_values: Vec<String>,
}

impl fmt::Debug for ServiceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceConfig")
            .field("tracker", &self.tracker)
            .field("polling", &self.polling)
            .field("shutdown", &self.shutdown)
            .field("workspace", &self.workspace)
            .field("hooks", &self.hooks)
            .field("agent", &self.agent)
            .field("db_path", &self.db_path)
            .field("server", &self.server)
            .field("logging", &self.logging)
            .field("tracker_path", &self.tracker_path)
            .field("raw_keys", &self.raw.keys().collect::<Vec<_>>())
            .field("secret_values", &self.secret_values.len())
            .finish()
    }
}

/// The address and token of a source-control provider that is not the tracker's kind, read
/// from the provider's own block. `Debug` masks the token.
#[derive(Clone, PartialEq, Eq)]
pub struct ScmAccess {
    /// API base URL; the provider's default when `None`.
    pub endpoint: Option<String>,
    pub api_key: String,
}

impl fmt::Debug for ScmAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScmAccess")
            .field("endpoint", &self.endpoint)
            .field("api_key", &"[redacted]")
            .finish()
    }
}

/// `tracker.*`. `Debug` masks the API key.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TrackerConfig {
    /// Adapter kind, looked up in `crate::registry`; empty when unset (preflight reports it).
    pub kind: String,
    /// API base URL; `None` = adapter default.
    pub endpoint: Option<String>,
    /// Secret; `None` when unset or empty after expansion.
    pub api_key: Option<String>,
    pub project: Option<String>,
    pub active_states: Vec<String>,
    pub terminal_states: Vec<String>,
    pub query_filter: Option<String>,
    /// State written after a successful run; `None` = off.
    pub handoff_state: Option<String>,
    /// State written at the start of each worker attempt; `None` = off.
    pub in_progress_state: Option<String>,
    /// State written after a successful run whose agent declared `no-change-needed`; `None` = off.
    pub no_change_state: Option<String>,
    pub comments: TrackerComments,
    /// `tracker.api_version` as written (a number is read as its digits); the kinds with API
    /// versions check it.
    pub api_version: Option<String>,
    /// `tracker.user_agent`: the `User-Agent` the kinds that read it send.
    pub user_agent: Option<String>,
    /// `tracker.max_poll_bytes`: what the answers of one tracker read may total; `None` =
    /// the tracker layer's default.
    pub max_poll_bytes: Option<u64>,
    /// `tracker.handoff_evidence`: what a run must show before Sortie hands its issue off.
    pub handoff_evidence: HandoffEvidence,
}

/// `tracker.handoff_evidence`: the evidence of work a run that would hand its issue off must
/// show, else the handoff is withheld. `off` (the default) keeps every workflow written before
/// the key existed behaving as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandoffEvidence {
    /// No check: every handoff goes ahead.
    #[default]
    Off,
    /// A new commit on the workspace's branch since the run started, or a pull-request record.
    Strict,
    /// What `strict` accepts, or files the run changed in the workspace (committed or not).
    Observed,
}

impl HandoffEvidence {
    /// The value as written in WORKFLOW.md.
    pub fn as_str(self) -> &'static str {
        match self {
            HandoffEvidence::Off => "off",
            HandoffEvidence::Strict => "strict",
            HandoffEvidence::Observed => "observed",
        }
    }

    /// The policy `text` names (trimmed, case-insensitive).
    pub fn parse(text: &str) -> Option<HandoffEvidence> {
        [
            HandoffEvidence::Off,
            HandoffEvidence::Strict,
            HandoffEvidence::Observed,
        ]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

impl fmt::Debug for TrackerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackerConfig")
            .field("kind", &self.kind)
            .field("endpoint", &self.endpoint)
            .field(
                "api_key",
                &self.api_key.as_ref().map(|_| crate::mask::REDACTED),
            )
            .field("project", &self.project)
            .field("active_states", &self.active_states)
            .field("terminal_states", &self.terminal_states)
            .field("query_filter", &self.query_filter)
            .field("handoff_state", &self.handoff_state)
            .field("in_progress_state", &self.in_progress_state)
            .field("no_change_state", &self.no_change_state)
            .field("comments", &self.comments)
            .field("api_version", &self.api_version)
            .field("user_agent", &self.user_agent)
            .field("max_poll_bytes", &self.max_poll_bytes)
            .field("handoff_evidence", &self.handoff_evidence)
            .finish()
    }
}

/// `tracker.comments.*`: whether to comment at session lifecycle points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrackerComments {
    pub on_dispatch: bool,
    pub on_completion: bool,
    pub on_failure: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollingConfig {
    /// Always > 0: absent means 30000; 0 and negative are rejected (`must be positive`)
    /// rather than busy-looping as Go Sortie does.
    pub interval_ms: u64,
    /// `polling.min_interval_ms`, always > 0 (default 1000): the floor between two polls.
    /// Refreshes and webhook deliveries that arrive sooner coalesce into one poll at the
    /// floor, so a flood of them cannot turn into a flood of tracker requests.
    pub min_interval_ms: u64,
}

/// `shutdown.*`: how long a graceful stop may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownConfig {
    /// `shutdown.drain_timeout_ms`, always > 0 (default 15000): from the first SIGTERM to
    /// the process exit, whatever the agents or the tracker do. Agents are stopped and runs
    /// recorded within it; tracker writes still out at its end are logged as lost.
    pub drain_timeout_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_timeout_ms: DEFAULT_DRAIN_TIMEOUT_MS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceConfig {
    /// Absolute; relative values are resolved against the process CWD.
    pub root: PathBuf,
    /// `workspace.retention_days`: the periodic sweep removes a workspace whose newest run
    /// ended longer ago than this (`workspace::retention`); 0 keeps every workspace.
    pub retention_days: u32,
}

/// Hook scripts are literal shell text (no `$VAR` expansion by Sortie).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksConfig {
    pub after_create: Option<String>,
    pub before_run: Option<String>,
    pub after_run: Option<String>,
    pub before_remove: Option<String>,
    /// Shared by every hook; invalid or ≤ 0 falls back to 60000.
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub kind: String,
    /// Command line (split on whitespace by the adapter); `None` = adapter fallback.
    pub command: Option<String>,
    /// ≥ 1 (negative values are clamped to 1 with a warning, 0 means the default 20).
    pub max_turns: u32,
    /// `None` = unlimited.
    pub max_sessions: Option<u64>,
    /// Per-issue uncached-token budget; `None` = unlimited.
    pub max_tokens: Option<u64>,
    /// Per-issue estimated-cost ceiling in USD; `None` = none.
    pub max_cost_usd: Option<f64>,
    /// Instance-wide spend ceilings in USD over the UTC day, the UTC week from Monday and the
    /// UTC month; `None` = off (0). A reached one holds every dispatch
    /// (`orchestrator::spend_ceiling`).
    pub max_daily_cost_usd: Option<f64>,
    pub max_weekly_cost_usd: Option<f64>,
    pub max_monthly_cost_usd: Option<f64>,
    pub max_concurrent_agents: u32,
    /// Trimmed, lower-cased state (`domain::state_key`) → positive cap.
    pub max_concurrent_agents_by_state: BTreeMap<String, u32>,
    pub turn_timeout_ms: u64,
    pub read_timeout_ms: u64,
    /// How long a stopped agent's process group has between SIGTERM and SIGKILL; absent or 0
    /// means the default.
    pub stop_grace_ms: u64,
    /// `None` = stall detection off (explicit 0; negative is rejected).
    pub stall_timeout_ms: Option<u64>,
    /// Absent or 0 = the default; negative is rejected.
    pub max_retry_backoff_ms: u64,
    /// How many consecutive runs of one issue may end with the same cause before the issue is
    /// held for a person (`orchestrator::failure_holds`); 0 turns the count off (a cause that
    /// cannot heal still holds at once).
    pub max_same_failures: u32,
    /// `agent.env` and `agent.inherit_env` (what an agent gets from sortie's environment).
    pub env: crate::child_env::EnvPolicy,
}

/// `server.*` as written; [`super::ServerBind::resolve`] applies the flags and the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerConfig {
    /// `Some(0)` disables the server.
    pub port: Option<u16>,
    pub host: Option<IpAddr>,
    /// `server.allowed_hosts`: host names (without port) the `Host` header may name. Empty:
    /// loopback names only when bound to a loopback address, anything otherwise.
    pub allowed_hosts: Vec<String>,
    /// `server.max_connections`: client connections open at once (event streams and the
    /// connections kept for probes included); `None` is the server's default.
    pub max_connections: Option<usize>,
    /// `server.max_connections_per_client`: connections one client address may hold at once;
    /// `None` is the server's default (half of `max_connections`).
    pub max_connections_per_client: Option<usize>,
}

/// `logging.*` as written; the CLI flags win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoggingConfig {
    pub level: Option<LogLevel>,
    pub format: Option<LogFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// Case-insensitive parse of `debug`/`info`/`warn`/`error` (`warning` is taken as `warn`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(LogLevel::Debug),
            "info" => Some(LogLevel::Info),
            "warn" | "warning" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// Case-insensitive parse of `text`/`json`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

impl ServiceConfig {
    /// A raw top-level block as a JSON map (an adapter's pass-through block, named after its
    /// kind, or an extension such as `worker`). `None` when absent or not a map.
    pub fn adapter_block(&self, name: &str) -> Option<&Map<String, Value>> {
        self.raw.get(name).and_then(Value::as_object)
    }

    /// The tracker's local data file (absolute), when its kind reads one and a path is set.
    pub fn tracker_path(&self) -> Option<&std::path::Path> {
        self.tracker_path.as_deref()
    }

    /// Every value to register for masking.
    pub fn secrets(&self) -> Vec<String> {
        self.secret_values.clone()
    }
}
