//! WORKFLOW.md loading and the typed service configuration.
//!
//! [`load_workflow`] reads the file, splits front matter from the prompt, applies `.env` and
//! `SORTIE_*` overrides, builds the typed [`ServiceConfig`] and runs the promotion rules. The
//! process environment is injected through [`LoadOptions`] so tests never touch the real one.
//! The result is one immutable [`Workflow`]; reload builds a new one and swaps the `Arc`.
//!
//! Adapter kinds are never named here: defaults, a tracker's local data file and the
//! kind-specific preflight checks come from the descriptors in `crate::registry`.
//!
//! Where Go Sortie's behaviour is left open or is a trap, this crate decides:
//! - `polling.interval_ms` ≤ 0 after defaults is rejected (`must be positive`), not a busy loop.
//! - A tracker's local data file resolves against the workflow file's directory, not the
//!   process CWD, and `tracker.<key>` is accepted as a fallback for `<kind>.<key>`.
//! - Negative `agent.max_turns` is clamped to 1 at load with a `clamped` warning; negative
//!   `max_concurrent_agents`, `turn_timeout_ms`, `read_timeout_ms`, `max_tokens`,
//!   `max_sessions` are errors; `max_retry_backoff_ms` ≤ 0 reads as the default.
//! - `$VAR` looks only at the real (injected) environment, never at `.env`.
//! - Type names in `expected X, got <type>` are Go's `%T` names for compatibility.
//! - WORKFLOW.md must be a regular file (checked on the opened descriptor, opened with
//!   `O_NONBLOCK` so a FIFO cannot hang the open) of at most [`MAX_WORKFLOW_BYTES`]; it is
//!   UTF-8 (a BOM is dropped) or UTF-16 with a BOM; NUL bytes are refused with their line; CR-only
//!   line ends read as LF. A file whose first line is not `---` fails as "no front matter found"
//!   when it lacks the states it would need, naming a `---` that blank lines pushed down.

mod adapter_maps;
mod agent_env_build;
mod build;
mod coerce;
mod context;
pub mod daemon;
pub mod dispatch;
mod dispatch_build;
mod dotenv;
mod env;
mod error;
mod host_capacity;
pub mod kubernetes;
pub mod label_capability;
pub mod notifications;
mod overrides;
mod price_table;
pub mod reactions;
mod reactions_build;
mod sandbox;
mod schema;
mod self_review_build;
mod server_bind;
mod token_rates;
mod validate;
pub mod worker;
mod workflow_file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use build::{
    DEFAULT_AGENT_KIND, DEFAULT_DB_FILE, DEFAULT_HOOK_TIMEOUT_MS, DEFAULT_MAX_CONCURRENT_AGENTS,
    DEFAULT_MAX_RETRY_BACKOFF_MS, DEFAULT_MAX_SAME_FAILURES, DEFAULT_MAX_TURNS,
    DEFAULT_POLL_INTERVAL_MS, DEFAULT_READ_TIMEOUT_MS, DEFAULT_STALL_TIMEOUT_MS,
    DEFAULT_TURN_TIMEOUT_MS,
};
pub use dotenv::parse_dotenv;
pub use env::{Expanded, expand_env, expand_path, resolve_env_ref};
pub use error::{ConfigError, ConfigWarning, PreflightProblem};
pub use host_capacity::{Capacity, HOST_CAPACITY_CHECK, HostLimits};
pub use overrides::override_vars;
pub use price_table::is_replace_file_error;
pub use schema::{
    AgentConfig, HandoffEvidence, HooksConfig, LogFormat, LogLevel, LoggingConfig, PollingConfig,
    ServerConfig, ServiceConfig, TrackerComments, TrackerConfig, WorkspaceConfig,
};
pub use server_bind::{BindFlagError, DEFAULT_PORT, ServerBind};
pub use validate::{AGENT_COMMAND_CHECK, SANDBOX_CHECK, TRACKER_DATA_FILE_CHECK};
pub use workflow_file::{
    FileReadError, MAX_WORKFLOW_BYTES, SplitWorkflow, decode_text, read_regular_file,
    split_front_matter,
};

/// Everything loading reads from the outside world besides the workflow file itself.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--env-file`; when `None`, `SORTIE_ENV_FILE` from `env` is used. Relative to `cwd`.
    pub env_file: Option<PathBuf>,
    /// The process environment (real env vars; they beat `.env`).
    pub env: BTreeMap<String, String>,
    /// Base for the workflow path, `workspace.root` and `--env-file`.
    pub cwd: PathBuf,
    /// Home directory for `~` expansion.
    pub home: Option<PathBuf>,
}

impl LoadOptions {
    /// Options from the real process: `std::env::vars()`, the current directory, `$HOME`.
    pub fn from_process(env_file: Option<PathBuf>) -> Self {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        LoadOptions {
            env_file,
            env,
            cwd,
            home,
        }
    }

    fn absolute(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }

    /// The `.env` path in effect: `--env-file` wins over `SORTIE_ENV_FILE`.
    pub fn effective_env_file(&self) -> Option<PathBuf> {
        let p = match &self.env_file {
            Some(p) => p.clone(),
            None => PathBuf::from(self.env.get("SORTIE_ENV_FILE").filter(|s| !s.is_empty())?),
        };
        Some(self.absolute(&p))
    }
}

/// One loaded workflow: typed config plus prompt template. Immutable; share as `Arc<Workflow>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// Absolute path of WORKFLOW.md.
    pub path: PathBuf,
    pub config: ServiceConfig,
    /// The prompt body (trimmed).
    pub prompt_template: String,
    /// Lines before the prompt body; add to template line numbers to get file lines.
    pub prompt_line_offset: usize,
    /// Advisory findings (`sortie validate` prints them; never block loading).
    pub warnings: Vec<ConfigWarning>,
}

/// Reads and loads a workflow file (front matter, typed config, promotion rules).
pub fn load_workflow(path: &Path, opts: &LoadOptions) -> Result<Workflow, ConfigError> {
    let abs = opts.absolute(path);
    let bytes =
        workflow_file::read_regular_file(&abs, workflow_file::MAX_WORKFLOW_BYTES).map_err(|e| {
            match e {
                FileReadError::NotFound(reason) => ConfigError::MissingFile {
                    path: abs.clone(),
                    reason,
                },
                FileReadError::Unreadable(reason) => ConfigError::Unreadable {
                    path: abs.clone(),
                    reason,
                },
            }
        })?;
    let content = workflow_file::decode_text(&bytes).map_err(|e| ConfigError::Unreadable {
        path: abs.clone(),
        reason: e.to_string(),
    })?;
    let wf = parse_workflow(&content, &abs, opts)?;
    // Every caller that loads a workflow from disk (run, validate, live reload) must mask its
    // credentials from then on, so registration happens here rather than at each caller.
    for s in wf.config.secrets() {
        crate::mask::register_secret(&s);
    }
    Ok(wf)
}

/// Loads a workflow from text already read. `path` (made absolute against `opts.cwd`) anchors
/// `db_path` and the tracker's data file and labels error messages.
pub fn parse_workflow(
    content: &str,
    path: &Path,
    opts: &LoadOptions,
) -> Result<Workflow, ConfigError> {
    let abs = opts.absolute(path);
    let path = abs.as_path();
    let split = split_front_matter(content);
    if split.yaml.is_none()
        && let Some(reason) = workflow_file::misplaced_opening(content)
    {
        return Err(ConfigError::NoFrontMatter {
            path: path.to_path_buf(),
            reason,
        });
    }
    let mut raw = match &split.yaml {
        Some(yaml) => workflow_file::decode_front_matter(yaml, path, 1)?,
        None => serde_json::Map::new(),
    };
    let mut warnings = Vec::new();
    let dotenv_values = read_dotenv(opts, &mut warnings)?;
    let overridden = overrides::apply_overrides(&mut raw, &opts.env, &dotenv_values)?;
    let workflow_dir = path.parent().unwrap_or(Path::new("/"));
    let ctx = build::BuildContext {
        env: &opts.env,
        home: opts.home.as_deref(),
        cwd: &opts.cwd,
        workflow_dir,
        overridden: &overridden,
    };
    let tracker_kind = coerce::string_field(
        coerce::sub_map(&raw, "tracker").unwrap_or(&serde_json::Map::new()),
        "kind",
    );
    let mut advisory = Vec::new();
    let mut config = build::build_service_config(raw, &ctx, &mut advisory).map_err(|e| {
        // Without front matter the empty state lists are a symptom, not the cause.
        if split.yaml.is_none() && e == ConfigError::NoStates {
            ConfigError::NoFrontMatter {
                path: path.to_path_buf(),
                reason: "line 1 is not '---'; a workflow file starts with YAML front matter between two '---' lines".to_string(),
            }
        } else {
            e
        }
    })?;
    // A secret-looking `.env` entry is masked like the same variable in the environment,
    // whether or not the front matter uses it.
    config.secret_values.extend(
        dotenv_values
            .iter()
            .filter(|(k, v)| crate::mask::is_secret_entry(k, v))
            .map(|(_, v)| v.clone()),
    );
    warnings.extend(validate::collect_warnings(
        &config.raw,
        &tracker_kind,
        &config.agent.kind,
        config.reactions.provider.as_deref(),
    ));
    warnings.extend(advisory);
    warnings.extend(label_capability::warnings(&config));
    Ok(Workflow {
        path: path.to_path_buf(),
        config,
        prompt_template: split.prompt,
        prompt_line_offset: split.front_matter_lines,
        warnings,
    })
}

/// The advisory key warnings of a workflow, read from its front matter alone: unknown keys
/// with the known key they look like, sections of the wrong type. For a workflow that does not
/// load, so `sortie validate` can list a misspelt key beside the error it causes (`agnet`
/// leaves `agent.command` unset). Empty when the front matter cannot be read or decoded.
pub fn key_warnings(path: &Path, opts: &LoadOptions) -> Vec<ConfigWarning> {
    let abs = opts.absolute(path);
    let Some(mut raw) = workflow_file::read_regular_file(&abs, workflow_file::MAX_WORKFLOW_BYTES)
        .ok()
        .and_then(|b| workflow_file::decode_text(&b).ok())
        .and_then(|text| split_front_matter(&text).yaml)
        .and_then(|yaml| workflow_file::decode_front_matter(&yaml, &abs, 1).ok())
    else {
        return Vec::new();
    };
    if overrides::apply_overrides(&mut raw, &opts.env, &BTreeMap::new()).is_err() {
        return Vec::new();
    }
    let text = |section: &str, key: &str| {
        raw.get(section)
            .and_then(|m| m.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let tracker_kind = text("tracker", "kind").unwrap_or_default();
    let agent_kind = text("agent", "kind").unwrap_or(DEFAULT_AGENT_KIND);
    let provider = text("ci_feedback", "kind").or_else(|| {
        reactions_build::REACTION_KEYS
            .iter()
            .find_map(|k| raw.get("reactions")?.get(*k)?.get("provider")?.as_str())
    });
    validate::collect_warnings(&raw, tracker_kind, agent_kind, provider)
}

/// Reads the opt-in `.env`; a missing file is a warning, any other read failure an error.
fn read_dotenv(
    opts: &LoadOptions,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let Some(path) = opts.effective_env_file() else {
        return Ok(BTreeMap::new());
    };
    // Read like WORKFLOW.md: a FIFO or device given as `--env-file` is refused, never waited on.
    let read = workflow_file::read_regular_file(&path, DOTENV_MAX_BYTES).and_then(|b| {
        String::from_utf8(b)
            .map_err(|_| workflow_file::FileReadError::Unreadable("not valid UTF-8".to_string()))
    });
    match read {
        Ok(text) => parse_dotenv(&text, &path),
        Err(workflow_file::FileReadError::NotFound(_)) => {
            warnings.push(ConfigWarning::new(
                "dotenv_missing",
                path.display().to_string(),
                "env file not found; continuing without it",
            ));
            Ok(BTreeMap::new())
        }
        Err(workflow_file::FileReadError::Unreadable(reason)) => Err(ConfigError::field(
            format!("dotenv {}", path.display()),
            reason,
        )),
    }
}

/// Largest `.env` file read; it holds a few `SORTIE_*` lines.
const DOTENV_MAX_BYTES: u64 = 1024 * 1024;

#[cfg(test)]
mod tests;
