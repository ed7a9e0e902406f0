//! The tracker adapter contract. Core code talks to every tracker through [`TrackerAdapter`];
//! names of a specific tracker appear only inside its adapter module, which exports a
//! [`TrackerDescriptor`] for `crate::registry` to list.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::clock::Clock;
use crate::domain::{Comment, Issue};
use crate::http_client::{ErrorClass, HttpError, RateLimitStatus};

pub mod bounded;
pub mod file;
pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod http_tuning;
pub mod jira;
pub mod label_state;
pub mod linear;
pub mod query_params;
pub mod rest_labels;
pub mod scope;
pub mod settings_check;
pub mod webhook;

/// What the answers of one tracker read (a poll's candidate list with all its pages, one
/// issue with its comments, …) may total by default: `tracker.max_poll_bytes`.
pub const DEFAULT_MAX_POLL_BYTES: u64 = 64 * 1024 * 1024;
/// The smallest `tracker.max_poll_bytes` accepted (one answer may take an eighth of it).
pub const MIN_POLL_BYTES: u64 = 1024 * 1024;

/// What went wrong in a tracker call; the kind decides whether a caller retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackerErrorKind {
    UnsupportedTrackerKind,
    MissingTrackerApiKey,
    MissingTrackerProject,
    Transport,
    Auth,
    Api,
    NotFound,
    Payload,
    MissingEndCursor,
    /// The id names no issue of the configured project, team or repository (and query
    /// filter), or is spelled so that it could change a request's path: refused.
    OutOfScope,
}

impl TrackerErrorKind {
    /// The stable snake_case code used in messages, logs and the API.
    pub fn code(self) -> &'static str {
        match self {
            TrackerErrorKind::UnsupportedTrackerKind => "unsupported_tracker_kind",
            TrackerErrorKind::MissingTrackerApiKey => "missing_tracker_api_key",
            TrackerErrorKind::MissingTrackerProject => "missing_tracker_project",
            TrackerErrorKind::Transport => "tracker_transport_error",
            TrackerErrorKind::Auth => "tracker_auth_error",
            TrackerErrorKind::Api => "tracker_api_error",
            TrackerErrorKind::NotFound => "tracker_not_found",
            TrackerErrorKind::Payload => "tracker_payload_error",
            TrackerErrorKind::MissingEndCursor => "tracker_missing_end_cursor",
            TrackerErrorKind::OutOfScope => "tracker_out_of_scope",
        }
    }

    /// Transport, API and cursor errors are worth retrying with backoff; the rest are not.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            TrackerErrorKind::Transport
                | TrackerErrorKind::Api
                | TrackerErrorKind::MissingEndCursor
        )
    }
}

impl From<ErrorClass> for TrackerErrorKind {
    fn from(class: ErrorClass) -> Self {
        match class {
            ErrorClass::Transport => TrackerErrorKind::Transport,
            ErrorClass::Auth => TrackerErrorKind::Auth,
            ErrorClass::Api => TrackerErrorKind::Api,
            ErrorClass::NotFound => TrackerErrorKind::NotFound,
            ErrorClass::Payload => TrackerErrorKind::Payload,
            ErrorClass::MissingEndCursor => TrackerErrorKind::MissingEndCursor,
            // A size cap: worth another try later (the tracker may have shrunk), never a sign
            // that the issue is gone.
            ErrorClass::TooLarge => TrackerErrorKind::Api,
        }
    }
}

/// A tracker failure: `tracker: <kind>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackerError {
    pub kind: TrackerErrorKind,
    /// Which adapter raised it (its kind name).
    pub tracker: String,
    pub message: String,
}

impl TrackerError {
    pub fn new(kind: TrackerErrorKind, tracker: &str, message: impl Into<String>) -> Self {
        TrackerError {
            kind,
            tracker: tracker.to_string(),
            message: message.into(),
        }
    }
}

impl TrackerError {
    /// A failed HTTP call of adapter `tracker`: `tracker: <kind>: <code>: <METHOD> <path>: <detail>`.
    pub fn from_http(tracker: &str, e: &HttpError) -> Self {
        TrackerError::new(e.class.into(), tracker, e.to_string())
    }
}

impl fmt::Display for TrackerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tracker: {}: {}: {}",
            self.tracker,
            self.kind.code(),
            self.message
        )
    }
}

impl std::error::Error for TrackerError {}

pub type TrackerResult<T> = Result<T, TrackerError>;

/// What a blocker read found: the references, and whether the tracker says the list is complete.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Blockers {
    pub refs: Vec<crate::domain::BlockerRef>,
    pub complete: bool,
}

/// Candidate issues in dispatch order, each shared with the tracker that listed it.
pub type CandidateList = Arc<[Arc<Issue>]>;

/// One tracker. Implementations are shared between threads (the orchestrator and the
/// best-effort tracker-ops thread), so every method takes `&self`.
///
/// # Errors
///
/// Every method answers a [`TrackerError`] whose kind says what failed; building
/// ([`crate::registry::build_tracker`]) adds the settings kinds.
///
/// - `UnsupportedTrackerKind`, `MissingTrackerApiKey`, `MissingTrackerProject`: building only.
///   At start the daemon refuses to run; on a live reload the whole reload is refused and the
///   old adapter keeps serving.
/// - `Transport` (connection, deadline, 5xx, an unreadable or over-budget answer), `Auth`,
///   `Api`, `Payload`, `MissingEndCursor`: a read that failed. A failed candidate read skips
///   the poll's dispatch pass and records `TrackerFailed` in `health.poll`; a failed blocker
///   read holds the issue for that pass; a failed state read for a running or retrying issue
///   leaves it as it is until the next poll; a failed write (transition, comment, label) is
///   logged and counted, and the run's outcome stands. Nothing here is retried inside the
///   adapter beyond `http_client`'s own retries of idempotent reads.
/// - `NotFound`: the id names no issue. A retry whose issue is not found is released; reads
///   of several ids omit it instead of failing.
/// - `OutOfScope`: the id names an issue outside the configured project, team, repository or
///   query filter, or is spelled to change a request's path: the caller (an agent's tool
///   call) is refused and nothing is acted on.
pub trait TrackerAdapter: Send + Sync {
    /// Adapter kind, as written in `tracker.kind`.
    fn kind(&self) -> &'static str;
    /// Issues in the active states (comments not fetched: `None`).
    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>>;
    /// [`Self::fetch_candidate_issues`] in [`crate::domain::dispatch_order`], shared. A tracker
    /// that keeps its listing between calls answers the same issues (the same pointers) while
    /// they did not change, so a poll over a large backlog neither copies nor sorts them again
    /// and its pass tells an unchanged issue by pointer; the default sorts a fresh listing.
    fn fetch_sorted_candidates(&self) -> TrackerResult<CandidateList> {
        let mut issues = self.fetch_candidate_issues()?;
        issues.sort_by(crate::domain::dispatch_order);
        Ok(issues.into_iter().map(Arc::new).collect())
    }
    /// One issue with its comments; unknown id → `NotFound`.
    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue>;
    /// Several issues with their comments, each answered as [`Self::fetch_issue_by_id`] would
    /// (unknown id → `NotFound` for that id). Lets a tracker answer a batch with one read (the
    /// file tracker reads its file once); the default asks for one issue at a time.
    fn fetch_issues_by_ids(&self, ids: &[String]) -> BTreeMap<String, TrackerResult<Issue>> {
        ids.iter()
            .map(|id| (id.clone(), self.fetch_issue_by_id(id)))
            .collect()
    }
    /// Issues in any of `states` (case-insensitive); an empty list answers `[]` without I/O.
    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>>;
    /// `id → state`; unknown ids are omitted, not an error.
    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>>;
    /// `identifier → state`; unknown identifiers are omitted.
    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>>;
    /// Comments of one issue (`[]` when none); unknown id → `NotFound`.
    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>>;
    /// Moves the issue to the named state.
    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()>;
    /// Adds a plain-text comment.
    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()>;
    /// Adds a label (a label-less tracker answers `Ok`).
    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()>;
    /// Removes a label; removing an absent label is `Ok`.
    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()>;
    /// The blockers of one issue.
    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers>;
    /// The latest rate-limit figures of an HTTP tracker; `None` for trackers without one.
    fn rate_limit(&self) -> Option<RateLimitStatus> {
        None
    }
    /// The issue `id` names (its id and identifier as the tracker spells them), when the
    /// tracker's own answer says it belongs to the configured project, team or repository
    /// and, where one is configured, matches the query filter: the one check every path by
    /// which someone outside sortie names an issue (an agent's tool call) goes through before
    /// acting on it. An id spelled so that it could change a request's path (`/`, `..`, `%`,
    /// a URL) is refused before any request. Out of scope → [`TrackerErrorKind::OutOfScope`]
    /// with a message naming the rule; an issue that does not exist → `NotFound`. The default
    /// refuses every id, so an adapter that cannot tell its scope reaches nothing.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<crate::domain::IssueRef> {
        Err(scope::refusal(
            self.kind(),
            id,
            "this tracker kind cannot tell which issues lie in its scope",
        ))
    }
}

/// What a tracker adapter is built from: the resolved `tracker.*` values and the kind's
/// pass-through block. Config maps itself onto this, so adapters never see config types.
/// `Debug` hides the API key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TrackerSettings {
    /// `tracker.kind`.
    pub kind: String,
    pub endpoint: Option<String>,
    /// Secret; `None` when unset or empty after expansion.
    pub api_key: Option<String>,
    pub project: Option<String>,
    pub active_states: Vec<String>,
    pub terminal_states: Vec<String>,
    /// `tracker.query_filter`: extra tracker-native search terms for candidates.
    pub query_filter: Option<String>,
    /// `tracker.handoff_state`; label-state trackers also read issues in it.
    pub handoff_state: Option<String>,
    /// `tracker.in_progress_state`.
    pub in_progress_state: Option<String>,
    /// `tracker.api_version` as written; read by the kinds with API versions (Jira).
    pub api_version: Option<String>,
    /// `tracker.user_agent`; read by the kinds that send it (Jira).
    pub user_agent: Option<String>,
    /// `tracker.max_poll_bytes`; `None` = [`DEFAULT_MAX_POLL_BYTES`].
    pub max_poll_bytes: Option<u64>,
    /// The kind's local data file, absolute; set only for kinds with a
    /// [`TrackerDescriptor::path_key`].
    pub path: Option<PathBuf>,
    /// The top-level block named after the kind.
    pub block: Map<String, Value>,
}

impl fmt::Debug for TrackerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackerSettings")
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
            .field("api_version", &self.api_version)
            .field("user_agent", &self.user_agent)
            .field("max_poll_bytes", &self.max_poll_bytes)
            .field("path", &self.path)
            .field("block_keys", &self.block.keys().collect::<Vec<_>>())
            .finish()
    }
}

pub use crate::domain::SettingProblem;

/// Builds one kind's adapter from its settings.
pub type BuildTracker =
    fn(&TrackerSettings, Arc<dyn Clock>) -> TrackerResult<Arc<dyn TrackerAdapter>>;

/// Static facts about one tracker kind. Each adapter module exports one; `crate::registry`
/// lists them, and config, core and the CLI learn about kinds only from there.
#[derive(Clone, Copy)]
pub struct TrackerDescriptor {
    /// The name written in `tracker.kind`; also the name of the kind's pass-through block.
    pub kind: &'static str,
    /// A key naming a local file the kind reads, looked up in the kind's block and then in
    /// `tracker.*`; config resolves it against the workflow file's directory so a workflow
    /// works from any current directory. `None` for kinds without a local file.
    pub path_key: Option<&'static str>,
    /// The kind's checks over its settings, without I/O; empty when it can be built.
    pub validate: fn(&TrackerSettings) -> Vec<SettingProblem>,
    /// What the kind can do with issue labels; config checks the labels a workflow reads and
    /// writes against it (`config::label_capability`).
    pub labels: LabelSupport,
    /// The states assumed when the workflow sets none, so the orchestrator's dispatch and
    /// cleanup rules see the same lists as the adapter; `None` for kinds without defaults.
    pub default_states: Option<DefaultStates>,
    /// The optional kind-specific `tracker.<key>`s the kind reads (`api_version`,
    /// `user_agent`); configuration warns about one written for a kind that ignores it.
    pub reads_keys: &'static [&'static str],
    /// How the kind signs webhook deliveries; `None` when sortie accepts none from it. The
    /// route `POST /api/v1/webhooks/<kind>` serves every kind that has one.
    pub webhook: Option<webhook::WebhookScheme>,
    /// The kind's instantiation of the shared contract suite.
    pub contract: crate::domain::contract::Contract,
    pub build: BuildTracker,
}

/// The states a tracker kind assumes when the workflow sets none.
#[derive(Debug, Clone, Copy)]
pub struct DefaultStates {
    pub active: &'static [&'static str],
    pub terminal: &'static [&'static str],
}

/// What a tracker kind can do with issue labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelSupport {
    /// Issues come with their labels (dispatch rules and stage labels can read them).
    pub read: bool,
    /// [`TrackerAdapter::add_label`] and [`TrackerAdapter::remove_label`] change them.
    pub write: bool,
    /// Adding a label the tracker does not know yet creates it; otherwise a person creates it
    /// in the tracker first.
    pub creates_missing: bool,
    /// A label may contain white space.
    pub spaces: bool,
}

impl LabelSupport {
    /// Reads and writes labels, creating new ones, with any characters.
    pub const FULL: LabelSupport = LabelSupport {
        read: true,
        write: true,
        creates_missing: true,
        spaces: true,
    };
}
