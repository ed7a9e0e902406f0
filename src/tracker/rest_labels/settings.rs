//! The settings every label-state REST tracker reads the same way: a token and a project that
//! must be set, the kind's HTTP tuning numbers, a `key=value&…` list filter, the state words
//! with their defaults, and the endpoint with its default. A kind states what differs in a
//! [`Rules`] and adds its own keys around these checks.

use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::label_state::StateWords;
use crate::tracker::query_params;
use crate::tracker::settings_check::{self, split_owner_repo};
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

/// State labels used when `tracker.active_states` is not set.
pub const DEFAULT_ACTIVE: &[&str] = &["backlog", "in-progress", "review"];
/// State labels used when `tracker.terminal_states` is not set.
pub const DEFAULT_TERMINAL: &[&str] = &["done", "wontfix"];

/// What a kind's token and project are, in the words its setting errors use.
pub struct Rules {
    pub kind: &'static str,
    /// What `tracker.api_key` should be set to: `$X_TOKEN (a token with …)`.
    pub token_hint: &'static str,
    /// What `tracker.project` names: `the repository as owner/repo`.
    pub project_hint: &'static str,
    /// Whether a project is well formed.
    pub project_ok: fn(&str) -> bool,
    /// The form a malformed project must take instead.
    pub project_form: &'static str,
}

/// The `owner/repo` project of a repository tracker.
pub fn owner_repo_ok(p: &str) -> bool {
    split_owner_repo(p).is_some()
}

/// How an `owner/repo` project must be written.
pub const OWNER_REPO_FORM: &str = "owner/repo (exactly one '/', no spaces)";

/// The missing token and the missing or malformed project, one line each.
pub fn required(s: &TrackerSettings, rules: &Rules) -> Vec<SettingProblem> {
    let kind = rules.kind;
    let mut out = Vec::new();
    if s.api_key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        out.push(SettingProblem::new(
            "tracker.api_key",
            format!(
                "tracker.api_key is required for tracker kind {kind:?}: set it to {}",
                rules.token_hint
            ),
        ));
    }
    match s.project.as_deref() {
        None => out.push(SettingProblem::new(
            "tracker.project",
            format!(
                "tracker.project is required for tracker kind {kind:?}: {}",
                rules.project_hint
            ),
        )),
        Some(p) if !(rules.project_ok)(p) => out.push(SettingProblem::new(
            "tracker.project",
            format!("tracker.project {p:?} must be {}", rules.project_form),
        )),
        Some(_) => {}
    }
    out
}

/// The kind block's numbers: `extra` first, then the HTTP tuning keys.
pub fn numbers(s: &TrackerSettings, extra: &[&str]) -> Vec<SettingProblem> {
    extra
        .iter()
        .copied()
        .chain(http_tuning::KEYS)
        .filter_map(|key| block_number(s, key).err())
        .collect()
}

/// A `tracker.query_filter` that is not `key=value&…` or sets a `reserved` key.
pub fn filter_problem(s: &TrackerSettings, reserved: &[&str]) -> Option<SettingProblem> {
    s.query_filter
        .as_deref()
        .and_then(|f| query_params::parse(f, reserved).err())
}

/// The `tracker.query_filter` pairs; blank (or malformed, which validation refuses) is none.
pub fn filter(s: &TrackerSettings, reserved: &[&str]) -> Vec<(String, String)> {
    s.query_filter
        .as_deref()
        .map(|f| query_params::parse(f, reserved))
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// `tracker.endpoint`, or `default` when it is unset or blank.
pub fn endpoint_or<'a>(s: &'a TrackerSettings, default: &'a str) -> &'a str {
    s.endpoint
        .as_deref()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or(default)
}

/// `tracker.project` split as `owner/repo` (empty when malformed, which validation refuses).
pub fn owner_repo(s: &TrackerSettings) -> (String, String) {
    s.project
        .as_deref()
        .and_then(split_owner_repo)
        .unwrap_or_default()
}

/// What every kind resolves alike once its problems are none.
pub struct Common {
    pub words: StateWords,
    pub tuning: HttpTuning,
}

/// The first of `problems` as the error that stops the adapter, else the state words (with the
/// shared defaults) and the tuning.
pub fn resolve(
    s: &TrackerSettings,
    kind: &str,
    problems: Vec<SettingProblem>,
) -> Result<Common, TrackerError> {
    settings_check::first_problem(kind, problems)?;
    Ok(Common {
        words: words(s),
        tuning: http_tuning::from_settings(s),
    })
}

/// The configured state words, the shared defaults for an empty list.
pub fn words(s: &TrackerSettings) -> StateWords {
    StateWords::configured(s, DEFAULT_ACTIVE, DEFAULT_TERMINAL)
}
