//! Cross-field rules, advisory warnings and the config part of dispatch preflight.

use serde_json::{Map, Value};

use super::coerce::type_name;
use super::error::{ConfigError, ConfigWarning, PreflightProblem};
use super::schema::{ServiceConfig, TrackerConfig};
use crate::registry;

/// Core sections typed by this module, plus post-MVP core sections kept raw.
const CORE_KEYS: &[&str] = &[
    "tracker",
    "polling",
    "workspace",
    "hooks",
    "agent",
    "db_path",
    "ci_feedback",
    "self_review",
    "reactions",
    "dispatch",
    "notifications",
];

/// Extensions read by the CLI/orchestrator/server.
const EXTENSION_KEYS: &[&str] = &["server", "logging", "worker", "token_rates"];

/// Top-level keys whose value must be a map.
const MAP_SECTIONS: &[&str] = &[
    "tracker",
    "polling",
    "workspace",
    "hooks",
    "agent",
    "ci_feedback",
    "self_review",
    "reactions",
    "dispatch",
    "notifications",
    "server",
    "logging",
    "worker",
    "token_rates",
];

/// Known keys inside each typed section; anything else is reported as `unknown_key`.
const SECTION_KEYS: &[(&str, &[&str])] = &[
    (
        "tracker",
        &[
            "kind",
            "endpoint",
            "api_key",
            "project",
            "active_states",
            "terminal_states",
            "query_filter",
            "handoff_state",
            "in_progress_state",
            "no_change_state",
            "comments",
            "api_version",
            "handoff_evidence",
            "user_agent",
            "path",
        ],
    ),
    ("polling", &["interval_ms"]),
    ("workspace", &["root", "retention_days"]),
    (
        "hooks",
        &[
            "after_create",
            "before_run",
            "after_run",
            "before_remove",
            "timeout_ms",
        ],
    ),
    (
        "agent",
        &[
            "kind",
            "command",
            "max_turns",
            "max_sessions",
            "max_tokens",
            "max_cost_usd",
            "max_daily_cost_usd",
            "max_weekly_cost_usd",
            "max_monthly_cost_usd",
            "max_concurrent_agents",
            "max_concurrent_agents_by_state",
            "turn_timeout_ms",
            "read_timeout_ms",
            "stall_timeout_ms",
            "max_retry_backoff_ms",
        ],
    ),
    (
        "server",
        &["port", "host", "allowed_hosts", "max_connections"],
    ),
    ("logging", &["level", "format"]),
];

/// String fields whose non-string values read silently as `""`; worth a warning.
const STRING_FIELDS: &[(&str, &[&str])] = &[
    (
        "tracker",
        &["kind", "endpoint", "api_key", "project", "query_filter"],
    ),
    ("workspace", &["root"]),
    (
        "hooks",
        &["after_create", "before_run", "after_run", "before_remove"],
    ),
    ("agent", &["kind", "command"]),
];

const LIST_FIELDS: &[(&str, &str)] =
    &[("tracker", "active_states"), ("tracker", "terminal_states")];

fn eq_ci(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

fn collides(field: &str, value: &str, list: &[String], what: &str) -> Result<(), ConfigError> {
    match list.iter().find(|s| eq_ci(s, value)) {
        Some(s) => Err(ConfigError::field(
            field,
            format!("{value:?} collides with {what} state {s:?}"),
        )),
        None => Ok(()),
    }
}

/// Handoff / in-progress / no-change collisions (case-insensitive). `no_change_state` follows
/// the handoff rules (it is written at the same moment, so it may equal `handoff_state`).
pub fn validate_state_rules(t: &TrackerConfig) -> Result<(), ConfigError> {
    for (field, value) in [
        ("tracker.handoff_state", &t.handoff_state),
        ("tracker.no_change_state", &t.no_change_state),
    ] {
        if let Some(v) = value {
            collides(field, v, &t.active_states, "active")?;
            collides(field, v, &t.terminal_states, "terminal")?;
        }
    }
    if let Some(v) = &t.in_progress_state {
        let field = "tracker.in_progress_state";
        collides(field, v, &t.terminal_states, "terminal")?;
        if !t.active_states.iter().any(|s| eq_ci(s, v)) {
            return Err(ConfigError::field(
                field,
                format!(
                    "{v:?} is not in active_states; reconciliation would immediately cancel the worker"
                ),
            ));
        }
        if let Some(h) = &t.handoff_state
            && eq_ci(h, v)
        {
            return Err(ConfigError::field(
                field,
                format!("{v:?} collides with handoff_state {h:?}"),
            ));
        }
    }
    Ok(())
}

/// The promotion cross-rule: at least one state list must be configured.
pub fn validate_states_not_both_empty(t: &TrackerConfig) -> Result<(), ConfigError> {
    if t.active_states.is_empty() && t.terminal_states.is_empty() {
        Err(ConfigError::NoStates)
    } else {
        Ok(())
    }
}

/// Advisory warnings over the raw map: unknown top-level keys (adapter blocks named by
/// `tracker.kind` / `agent.kind` are known), unknown keys inside typed sections, sections that
/// are not maps, and wrongly-typed string/list fields that read as empty.
pub fn collect_warnings(
    raw: &Map<String, Value>,
    tracker_kind: &str,
    agent_kind: &str,
) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    for (key, value) in raw {
        let known = CORE_KEYS.contains(&key.as_str())
            || EXTENSION_KEYS.contains(&key.as_str())
            || (!tracker_kind.is_empty() && key == tracker_kind)
            || key == agent_kind;
        if !known {
            out.push(ConfigWarning::new(
                "unknown_key",
                key.clone(),
                "not a recognised top-level key; ignored",
            ));
        }
        let sectioned = MAP_SECTIONS.contains(&key.as_str())
            || (!tracker_kind.is_empty() && key == tracker_kind)
            || key == agent_kind;
        if sectioned && !value.is_object() && !value.is_null() {
            out.push(ConfigWarning::new(
                "type_mismatch",
                key.clone(),
                format!("expected map, got {}; section ignored", type_name(value)),
            ));
        }
    }
    for (section, keys) in SECTION_KEYS {
        let Some(m) = raw.get(*section).and_then(Value::as_object) else {
            continue;
        };
        for key in m.keys() {
            if !keys.contains(&key.as_str()) {
                out.push(ConfigWarning::new(
                    "unknown_key",
                    format!("{section}.{key}"),
                    "not a recognised key; ignored",
                ));
            }
        }
    }
    if let Some(c) = raw
        .get("tracker")
        .and_then(|t| t.get("comments"))
        .and_then(Value::as_object)
    {
        for key in c.keys() {
            if !["on_dispatch", "on_completion", "on_failure"].contains(&key.as_str()) {
                out.push(ConfigWarning::new(
                    "unknown_key",
                    format!("tracker.comments.{key}"),
                    "not a recognised key; ignored",
                ));
            }
        }
    }
    for (section, keys) in STRING_FIELDS {
        let Some(m) = raw.get(*section).and_then(Value::as_object) else {
            continue;
        };
        for key in *keys {
            if let Some(v) = m.get(*key)
                && !v.is_string()
                && !v.is_null()
            {
                out.push(ConfigWarning::new(
                    "type_mismatch",
                    format!("{section}.{key}"),
                    format!("expected string, got {}; treated as empty", type_name(v)),
                ));
            }
        }
    }
    for (section, key) in LIST_FIELDS {
        if let Some(v) = raw.get(*section).and_then(|m| m.get(*key))
            && !v.is_array()
            && !v.is_null()
        {
            out.push(ConfigWarning::new(
                "type_mismatch",
                format!("{section}.{key}"),
                format!("expected list, got {}; treated as absent", type_name(v)),
            ));
        }
    }
    out
}

/// The check id of [`ServiceConfig::agent_command_problem`].
pub const AGENT_COMMAND_CHECK: &str = "agent_command";

impl ServiceConfig {
    /// The pure config checks of dispatch preflight, in order; empty when all pass. The
    /// tracker and agent kinds are looked up in the registry: an unknown kind is reported as
    /// unsupported, a known one by its own descriptor's checks. Adapter construction and
    /// workspace writability are checked elsewhere.
    pub fn preflight(&self) -> Vec<PreflightProblem> {
        let mut out = Vec::new();
        let kind = self.tracker.kind.as_str();
        if kind.is_empty() {
            out.push(PreflightProblem::new(
                "config.tracker.kind",
                "tracker.kind is required",
            ));
        } else {
            match registry::tracker(kind) {
                None => out.push(PreflightProblem::new(
                    "tracker_adapter",
                    registry::unsupported_tracker(kind),
                )),
                Some(d) => out.extend(
                    (d.validate)(&self.tracker_settings())
                        .into_iter()
                        .map(|p| PreflightProblem::new(format!("config.{}", p.field), p.message)),
                ),
            }
        }
        let agent = self.agent.kind.as_str();
        match registry::agent(agent) {
            None => out.push(PreflightProblem::new(
                "agent_adapter",
                registry::unsupported_agent(agent),
            )),
            Some(d) if d.caps.requires_command && self.agent.command.is_none() => {
                out.push(PreflightProblem::new(
                    "config.agent.command",
                    format!("agent.command is required for agent kind {agent:?}"),
                ));
            }
            Some(_) => {}
        }
        out
    }

    /// Whether the agent command resolves to an executable program (`PATH` lookup like
    /// `which`, see `agent::command`), for kinds that run one. Not part of the pure
    /// [`Self::preflight`]: it reads the filesystem, and a missing binary can appear without a
    /// config change. A missing `agent.command` is [`Self::preflight`]'s to report.
    pub fn agent_command_problem(&self) -> Option<PreflightProblem> {
        let descriptor = registry::agent(&self.agent.kind)?;
        let command = self.agent.command.as_deref()?;
        if !descriptor.caps.requires_command {
            return None;
        }
        crate::agent::command::resolve_command(command)
            .err()
            .map(|e| PreflightProblem::new(AGENT_COMMAND_CHECK, e.to_string()))
    }

    /// The messages of [`Self::preflight`], for callers that join them into one line.
    pub fn config_preflight(&self) -> Vec<String> {
        self.preflight().into_iter().map(|p| p.message).collect()
    }
}
