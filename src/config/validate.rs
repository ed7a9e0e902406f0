//! Cross-field rules, advisory warnings and the config part of dispatch preflight.

use serde_json::{Map, Value};
use std::path::Path;

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
const EXTENSION_KEYS: &[&str] = &[
    "name",
    "server",
    "logging",
    "worker",
    "token_rates",
    "price_table",
    "shutdown",
];

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
    "price_table",
    "shutdown",
];

/// The keys of `price_table`.
const PRICE_TABLE_KEYS: &[&str] = &[
    "fetch",
    "fetch_url",
    "embedded",
    "replace_file",
    "replace_url",
];

/// The keys `self_review` reads (for `unknown_key` warnings).
const SELF_REVIEW_KEYS: &[&str] = &[
    "enabled",
    "max_iterations",
    "verification_commands",
    "verification_timeout_ms",
    "max_diff_bytes",
    "reviewer",
];

/// The keys `worker` understands.
const WORKER_KEYS: &[&str] = &[
    "ssh_hosts",
    "max_concurrent_agents_per_host",
    "ssh_strict_host_key_checking",
    "ssh_config_file",
    "sandbox",
    "kubernetes",
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
            "max_poll_bytes",
            "handoff_evidence",
            "path",
        ],
    ),
    ("polling", &["interval_ms", "min_interval_ms"]),
    ("shutdown", &["drain_timeout_ms"]),
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
            "stop_grace_ms",
            "stall_timeout_ms",
            "max_retry_backoff_ms",
            "max_same_failures",
            "env",
            "inherit_env",
        ],
    ),
    (
        "server",
        &[
            "port",
            "host",
            "allowed_hosts",
            "max_connections",
            "max_connections_per_client",
        ],
    ),
    ("logging", &["level", "format"]),
    ("price_table", PRICE_TABLE_KEYS),
    ("self_review", SELF_REVIEW_KEYS),
    ("worker", WORKER_KEYS),
    ("notifications", &["destinations"]),
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

/// States compare trimmed and case-insensitively, as dispatch and reconciliation compare them.
fn eq_ci(a: &str, b: &str) -> bool {
    crate::domain::state_eq(a, b)
}

/// The warning check id of a key this build reads but does not act on.
pub const UNSUPPORTED_KEY_CHECK: &str = "unsupported_key";

/// Top-level sections of features this build does not have: accepted, never acted on.
const UNSUPPORTED_SECTIONS: &[(&str, &str)] = &[];

/// Keys inside typed sections that this build parses (or accepts) but never acts on.
const UNSUPPORTED_KEYS: &[(&str, &str, &str)] = &[];

/// Unknown keys inside each `notifications.destinations[i]`.
fn notification_key_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
    let keys = super::notifications::DESTINATION_KEYS;
    let list = raw
        .get("notifications")
        .and_then(|n| n.get("destinations"))
        .and_then(Value::as_array);
    for (i, d) in list.into_iter().flatten().enumerate() {
        for key in d.as_object().into_iter().flat_map(|m| m.keys()) {
            if !keys.contains(&key.as_str()) {
                out.push(ConfigWarning::new(
                    "unknown_key",
                    format!("notifications.destinations[{i}].{key}"),
                    unknown_message("not a recognised key", closest(key, keys.iter().copied())),
                ));
            }
        }
    }
}

fn unsupported(field: impl Into<String>, why: &str) -> ConfigWarning {
    ConfigWarning::new(
        UNSUPPORTED_KEY_CHECK,
        field,
        format!("not supported by this build ({why}); ignored"),
    )
}

/// Warnings for every key this build accepts but does not act on.
fn unsupported_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
    for (section, why) in UNSUPPORTED_SECTIONS {
        if raw.get(*section).is_some_and(|v| !v.is_null()) {
            out.push(unsupported(*section, why));
        }
    }
    for (section, key, why) in UNSUPPORTED_KEYS {
        if raw
            .get(*section)
            .and_then(|m| m.get(*key))
            .is_some_and(|v| !v.is_null())
        {
            out.push(unsupported(format!("{section}.{key}"), why));
        }
    }
    let tracker = raw.get("tracker");
    let kind = tracker
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("");
    for key in registry::tracker_kind_keys() {
        let set = tracker
            .and_then(|t| t.get(key))
            .is_some_and(|v| !v.is_null());
        if set && !registry::tracker_reads_key(kind, key) {
            out.push(unsupported(
                format!("tracker.{key}"),
                &format!("tracker kind {kind:?} does not read it"),
            ));
        }
    }
}

/// Optimal-string-alignment edit distance (a transposition counts as one edit), on chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The closest of `known` to a misspelled `key` (case-insensitive), when it is close enough
/// to be a typo: at most 2 edits, and fewer than half the key's length.
pub(super) fn closest<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let k = key.to_lowercase();
    known
        .into_iter()
        .map(|c| (edit_distance(&k, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= 2 && *d * 2 < k.chars().count().max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

pub(super) fn unknown_message(base: &str, suggestion: Option<&str>) -> String {
    match suggestion {
        Some(s) => format!("{base}; ignored (did you mean `{s}`?)"),
        None => format!("{base}; ignored"),
    }
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

/// The agent kinds `dispatch` routes to (`rules[].agent`, `default.agent`, the kinds rules
/// carry settings blocks for): their top-level blocks are read, not ignored.
fn dispatch_kinds(raw: &Map<String, Value>) -> Vec<&str> {
    let Some(d) = raw.get("dispatch").and_then(Value::as_object) else {
        return Vec::new();
    };
    let rules = d
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut out = Vec::new();
    for m in rules.chain(d.get("default")).filter_map(Value::as_object) {
        out.extend(m.get("agent").and_then(Value::as_str));
        out.extend(
            m.keys()
                .map(String::as_str)
                .filter(|k| registry::agent(k).is_some()),
        );
    }
    out
}

/// Advisory warnings over the raw map: unknown top-level keys (adapter blocks named by
/// `tracker.kind` / `agent.kind`, by dispatch rules and by the reactions' provider are known),
/// unknown keys inside typed sections, sections that are not maps, and wrongly-typed
/// string/list fields that read as empty.
pub fn collect_warnings(
    raw: &Map<String, Value>,
    tracker_kind: &str,
    agent_kind: &str,
    scm_kind: Option<&str>,
) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    top_level_warnings(raw, tracker_kind, agent_kind, scm_kind, &mut out);
    section_key_warnings(raw, &mut out);
    notification_key_warnings(raw, &mut out);
    agent_block_warnings(raw, agent_kind, &mut out);
    comment_key_warnings(raw, &mut out);
    string_field_warnings(raw, &mut out);
    unsupported_warnings(raw, &mut out);
    list_field_warnings(raw, &mut out);
    out
}

/// Unknown top-level keys, and selected sections that are not maps.
fn top_level_warnings(
    raw: &Map<String, Value>,
    tracker_kind: &str,
    agent_kind: &str,
    scm_kind: Option<&str>,
    out: &mut Vec<ConfigWarning>,
) {
    let routed = dispatch_kinds(raw);
    for (key, value) in raw {
        let known = CORE_KEYS.contains(&key.as_str())
            || EXTENSION_KEYS.contains(&key.as_str())
            || (!tracker_kind.is_empty() && key == tracker_kind)
            || key == agent_kind
            || scm_kind == Some(key.as_str())
            || routed.contains(&key.as_str());
        if !known {
            out.push(ConfigWarning::new(
                "unknown_key",
                key.clone(),
                unknown_top_level_message(key),
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
}

/// Why an unknown top-level key is ignored: the block of an adapter kind not selected, or a
/// key that is nothing (with the closest known key).
fn unknown_top_level_message(key: &str) -> String {
    let adapter_kind = registry::TRACKERS
        .iter()
        .map(|d| d.kind)
        .chain(registry::AGENTS.iter().map(|d| d.kind))
        .any(|k| k == key);
    if adapter_kind {
        // A pass-through block of a kind the workflow does not select.
        return "block of an adapter kind this workflow does not select; ignored".to_string();
    }
    let known_keys = CORE_KEYS
        .iter()
        .chain(EXTENSION_KEYS)
        .copied()
        .chain(registry::TRACKERS.iter().map(|d| d.kind))
        .chain(registry::AGENTS.iter().map(|d| d.kind));
    unknown_message("not a recognised top-level key", closest(key, known_keys))
}

/// Unknown keys inside the typed sections. `tracker` also takes the kind-specific keys the
/// registered tracker kinds read (their descriptors' `reads_keys`); one written for a kind that
/// ignores it is warned about by [`unsupported_warnings`].
fn section_key_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
    for (section, keys) in SECTION_KEYS {
        let Some(m) = raw.get(*section).and_then(Value::as_object) else {
            continue;
        };
        let kind_keys = if *section == "tracker" {
            registry::tracker_kind_keys()
        } else {
            Vec::new()
        };
        let known = || keys.iter().chain(&kind_keys).copied();
        for key in m.keys() {
            if !known().any(|k| k == key) {
                out.push(ConfigWarning::new(
                    "unknown_key",
                    format!("{section}.{key}"),
                    unknown_message("not a recognised key", closest(key, known())),
                ));
            }
        }
    }
}

/// Keys of the selected agent kind's block that the kind does not read.
fn agent_block_warnings(raw: &Map<String, Value>, agent_kind: &str, out: &mut Vec<ConfigWarning>) {
    let (Some(d), Some(block)) = (
        registry::agent(agent_kind),
        raw.get(agent_kind).and_then(Value::as_object),
    ) else {
        return;
    };
    for key in block.keys() {
        if !d.block_keys.contains(&key.as_str()) {
            out.push(ConfigWarning::new(
                "unknown_key",
                format!("{agent_kind}.{key}"),
                unknown_message(
                    "not a key this agent kind reads",
                    closest(key, d.block_keys.iter().copied()),
                ),
            ));
        }
    }
}

/// Unknown keys of `tracker.comments`.
fn comment_key_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
    let Some(c) = raw
        .get("tracker")
        .and_then(|t| t.get("comments"))
        .and_then(Value::as_object)
    else {
        return;
    };
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

/// String fields holding something else, which read as empty.
fn string_field_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
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
}

/// List fields holding something else, which read as absent.
fn list_field_warnings(raw: &Map<String, Value>, out: &mut Vec<ConfigWarning>) {
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
}

/// The check id of a dispatch route to a kind with no settings block.
pub const MISSING_BLOCK_CHECK: &str = "dispatch.agent.missing_block";

/// The check id of [`ServiceConfig::agent_command_problem`].
pub const AGENT_COMMAND_CHECK: &str = "agent_command";

/// The check id of [`ServiceConfig::sandbox_problem`].
pub const SANDBOX_CHECK: &str = "sandbox";

/// The check id of [`ServiceConfig::tracker_data_file_problem`].
pub const TRACKER_DATA_FILE_CHECK: &str = "tracker_data_file";

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
            out.extend(super::label_capability::problems(self));
        }
        let agent = self.agent.kind.as_str();
        match registry::agent(agent) {
            None => out.push(PreflightProblem::new(
                "agent_adapter",
                registry::unsupported_agent(agent),
            )),
            Some(d) => {
                if d.caps.requires_command && self.agent.command.is_none() {
                    out.push(PreflightProblem::new(
                        "config.agent.command",
                        format!("agent.command is required for agent kind {agent:?}"),
                    ));
                }
                out.extend(
                    (d.validate)(&self.agent_settings(Path::new(".")))
                        .into_iter()
                        .map(|p| PreflightProblem::new(format!("config.{}", p.field), p.message)),
                );
            }
        }
        out.extend(self.dispatch_preflight());
        out
    }

    /// The dispatch part of preflight: a rule or the default that routes to another
    /// registered kind than `agent.kind` needs that kind's top-level block or a settings block
    /// in the rule (`dispatch.agent.missing_block`); each rule's resolved block draws the
    /// kind's own checks, named for the rule.
    fn dispatch_preflight(&self) -> Vec<PreflightProblem> {
        let d = &self.dispatch;
        let mut out = Vec::new();
        let has_top = |k: &str| self.adapter_block(k).is_some();
        for (i, rule) in d.rules.iter().enumerate() {
            let kind = d.rule_kind(rule, &self.agent.kind);
            let Some(desc) = registry::agent(kind) else {
                continue;
            };
            if kind != self.agent.kind && !has_top(kind) && rule.settings.is_none() {
                let name = if rule.name.is_empty() {
                    "<none>"
                } else {
                    &rule.name
                };
                out.push(PreflightProblem::new(
                    MISSING_BLOCK_CHECK,
                    format!(
                        "dispatch rule {name:?} (dispatch.rules[{i}]) routes to agent kind {kind:?}, but neither a top-level {kind} block nor a settings block in the rule exists; add one, sortie does not fall back to another kind's settings"
                    ),
                ));
            }
            if rule.settings.is_some() {
                let settings = self.agent_settings_for(kind, &rule.name, Path::new("."));
                out.extend((desc.validate)(&settings).into_iter().map(|p| {
                    PreflightProblem::new(
                        format!("config.dispatch.rules[{i}].{kind}"),
                        format!(
                            "dispatch rule {:?} (dispatch.rules[{i}].{kind}): {}",
                            rule.name, p.message
                        ),
                    )
                }));
            }
        }
        if let Some(kind) = d.default.agent.as_deref()
            && kind != self.agent.kind
            && registry::agent(kind).is_some()
            && !has_top(kind)
        {
            out.push(PreflightProblem::new(
                MISSING_BLOCK_CHECK,
                format!(
                    "dispatch.default routes to agent kind {kind:?}, but no top-level {kind} block exists; add one, sortie does not fall back to another kind's settings"
                ),
            ));
        }
        out
    }

    /// Whether the agent command resolves to an executable program (`PATH` lookup like
    /// `which`, see `agent::command`), for kinds that run one. Not part of the pure
    /// [`Self::preflight`]: it reads the filesystem, and a missing binary can appear without a
    /// config change. A missing `agent.command` is [`Self::preflight`]'s to report. With SSH
    /// workers the command runs on the hosts, so it is not looked up here.
    pub fn agent_command_problem(&self) -> Option<PreflightProblem> {
        if self.worker.remote() {
            return None;
        }
        let descriptor = registry::agent(&self.agent.kind)?;
        let command = self.agent.command.as_deref()?;
        if !descriptor.caps.requires_command {
            return None;
        }
        crate::agent::command::resolve_command(command)
            .err()
            .map(|e| PreflightProblem::new(AGENT_COMMAND_CHECK, e.to_string()))
    }

    /// A tracker data file (the file tracker's issues file) that does not exist. Not part of
    /// the pure [`Self::preflight`]: it reads the filesystem, and the file may be created
    /// without a config change, so the daemon logs it and keeps running (each poll then fails
    /// and says so), while `sortie validate` reports it as an error.
    pub fn tracker_data_file_problem(&self) -> Option<PreflightProblem> {
        let path = self.tracker_path.as_ref()?;
        if path.exists() {
            return None;
        }
        let key = registry::tracker(&self.tracker.kind)
            .and_then(|d| d.path_key)
            .unwrap_or("path");
        Some(PreflightProblem::new(
            TRACKER_DATA_FILE_CHECK,
            format!(
                "{}.{key}: {} does not exist (a relative path resolves against the workflow file's directory)",
                self.tracker.kind,
                path.components().collect::<std::path::PathBuf>().display()
            ),
        ))
    }

    /// Whether `worker.sandbox` can start a sandbox here (`None` when no sandbox is set).
    /// `now` runs the check and waits for it (`sortie validate`, startup); otherwise the last
    /// result is read and a stale one refreshed in the background (`crate::sandbox::probe`),
    /// so the per-tick dispatch preflight never waits on a process.
    pub fn sandbox_problem(&self, now: bool) -> Option<PreflightProblem> {
        let sb = &self.worker.sandbox;
        if !sb.enabled() {
            return None;
        }
        let problem = if now {
            crate::sandbox::probe_now(sb).err()
        } else {
            crate::sandbox::cached_problem(sb)
        };
        problem.map(|m| PreflightProblem::new(SANDBOX_CHECK, format!("worker.sandbox: {m}")))
    }

    /// The messages of [`Self::preflight`], for callers that join them into one line.
    pub fn config_preflight(&self) -> Vec<String> {
        self.preflight().into_iter().map(|p| p.message).collect()
    }
}

#[cfg(test)]
mod kind_key_tests {
    use super::*;

    fn warnings_for(kind: &str, key: &str) -> Vec<ConfigWarning> {
        let mut tracker = Map::new();
        tracker.insert("kind".into(), Value::from(kind));
        tracker.insert(key.into(), Value::from("x"));
        let mut raw = Map::new();
        raw.insert("tracker".into(), Value::Object(tracker));
        collect_warnings(&raw, kind, "claude-code", None)
            .into_iter()
            .filter(|w| w.field == format!("tracker.{key}"))
            .collect()
    }

    #[test]
    fn a_key_a_tracker_kind_reads_is_accepted_for_that_kind_only() {
        let keys = registry::tracker_kind_keys();
        assert!(!keys.is_empty());
        for d in registry::TRACKERS {
            for key in d.reads_keys {
                assert!(keys.contains(key), "{key}");
                let w = warnings_for(d.kind, key);
                assert!(w.is_empty(), "{} reads tracker.{key}: {w:?}", d.kind);
            }
        }
        for key in keys {
            for d in registry::TRACKERS
                .iter()
                .filter(|d| !d.reads_keys.contains(&key))
            {
                let w = warnings_for(d.kind, key);
                let checks: Vec<&str> = w.iter().map(|w| w.check.as_str()).collect();
                assert_eq!(checks, [UNSUPPORTED_KEY_CHECK], "{} tracker.{key}", d.kind);
            }
        }
    }
}
