//! Raw front-matter map → typed [`ServiceConfig`], applying defaults, coercion, `$VAR`/`~`
//! expansion and per-field rules. Adapter kinds are looked up in `crate::registry`, never
//! named here.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::coerce::{
    coerce_int, display_value, int_field, strict_string_field, string_field, string_list, sub_map,
    type_name,
};
use super::env::{expand_env, expand_path, resolve_env_ref};
use super::error::{ConfigError, ConfigWarning};
use super::schema::{
    AgentConfig, HandoffEvidence, HooksConfig, LogFormat, LogLevel, LoggingConfig, PollingConfig,
    ScmAccess, ServerConfig, ServiceConfig, ShutdownConfig, TrackerComments, TrackerConfig,
    WorkspaceConfig,
};
use super::validate::{validate_state_rules, validate_states_not_both_empty};
use crate::registry;

pub const DEFAULT_POLL_INTERVAL_MS: u64 = 30_000;
/// `polling.min_interval_ms`: at most one poll a second, however many refreshes ask.
pub const DEFAULT_MIN_POLL_INTERVAL_MS: u64 = 1_000;
pub use super::schema::DEFAULT_DRAIN_TIMEOUT_MS;
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_AGENT_KIND: &str = registry::DEFAULT_AGENT_KIND;
pub const DEFAULT_MAX_TURNS: u32 = 20;
pub const DEFAULT_MAX_CONCURRENT_AGENTS: u32 = 10;
pub const DEFAULT_TURN_TIMEOUT_MS: u64 = 3_600_000;
pub const DEFAULT_READ_TIMEOUT_MS: u64 = 5_000;
/// `agent.stop_grace_ms`: SIGTERM to SIGKILL when an agent is stopped.
pub const DEFAULT_STOP_GRACE_MS: u64 = 5_000;
pub const DEFAULT_STALL_TIMEOUT_MS: u64 = 300_000;
pub const DEFAULT_MAX_RETRY_BACKOFF_MS: u64 = 300_000;
/// `agent.max_same_failures` when absent.
pub const DEFAULT_MAX_SAME_FAILURES: u32 = 3;
pub const DEFAULT_DB_FILE: &str = ".sortie.db";

pub use super::context::BuildContext;

/// Builds the typed config. Warnings for silently-ignored values are appended to `warnings`.
pub fn build_service_config(
    raw: Map<String, Value>,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ServiceConfig, ConfigError> {
    build_inner(raw, ctx, warnings).map_err(|e| ctx.overridden.annotate(e))
}

fn build_inner(
    raw: Map<String, Value>,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ServiceConfig, ConfigError> {
    let empty = Map::new();
    let section = |name: &str| sub_map(&raw, name).unwrap_or(&empty);

    let mut secret_values = Vec::new();
    let tracker = build_tracker(section("tracker"), ctx, &mut secret_values)?;
    validate_state_rules(&tracker)?;
    let polling = build_polling(section("polling"))?;
    let shutdown = build_shutdown(section("shutdown"))?;
    let workspace = build_workspace(section("workspace"), ctx)?;
    let hooks = build_hooks(section("hooks"), warnings);
    let agent = agent_with_env(
        section("agent"),
        ctx,
        &tracker,
        warnings,
        &mut secret_values,
    )?;
    let db_path = build_db_path(&raw, ctx)?;
    let server = build_server(section("server"))?;
    let logging = build_logging(section("logging"))?;
    let mut worker = sealed_worker(section("worker"), ctx, &db_path, &workspace.root, warnings)?;
    let tracker_path = tracker_data_path(&raw, &tracker.kind, ctx, warnings)?;
    validate_states_not_both_empty(&tracker)?;
    let (token_rates, token_rates_rejected) = super::token_rates::build_token_rates(&raw, warnings);
    let price_table =
        super::price_table::build_price_table(&raw, ctx, warnings, &mut secret_values)?;

    let (reactions, provider_field) = super::reactions_build::build_reactions(&raw, warnings)?;
    let scm_access = reactions_scm_access(
        &raw,
        (reactions.provider.as_deref(), provider_field),
        &tracker.kind,
        ctx,
        &mut secret_values,
    )?;
    let self_review = super::self_review_build::build_self_review(&raw, warnings)?;
    let notifications =
        super::notifications::build_notifications(&raw, ctx.env, &mut secret_values, warnings)?;
    warnings.extend(self_review_local_only(self_review.enabled, worker.remote()));
    let dispatch = super::dispatch_build::build_dispatch(
        &raw,
        &super::dispatch_build::DispatchInputs {
            tracker: &tracker,
            agent: &agent,
            reactions: &reactions,
            workflow_dir: ctx.workflow_dir,
            env: ctx.env,
        },
        warnings,
        &mut secret_values,
    )?;
    super::kubernetes::attach(
        &mut worker,
        section("worker"),
        (ctx, &db_path),
        (&hooks, &agent, &dispatch),
    )?;
    super::sandbox::add_default_hosts(
        &mut worker.sandbox,
        &[
            tracker.endpoint.as_deref(),
            scm_access.as_ref().and_then(|s| s.endpoint.as_deref()),
        ],
        &super::sandbox::agent_kinds(&agent.kind, &dispatch),
    );

    let mut cfg = ServiceConfig {
        worker,
        notifications,
        dispatch,
        reactions,
        scm_access,
        self_review,
        token_rates,
        token_rates_rejected,
        price_table,
        tracker,
        polling,
        shutdown,
        workspace,
        hooks,
        agent,
        db_path,
        server,
        logging,
        tracker_path,
        raw,
        secret_values,
    };
    cfg.price_table.needs = Some(cfg.model_needs());
    Ok(cfg)
}

/// The `worker` block, its sandbox sealed against the paths it must never show (the database,
/// the workflow's `.env`, the workspace root, the daemon's home).
fn sealed_worker(
    m: &Map<String, Value>,
    ctx: &BuildContext<'_>,
    db_path: &Path,
    workspace_root: &Path,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<super::schema::WorkerConfig, ConfigError> {
    let mut worker = super::worker::build_worker(m, ctx.home, ctx.env, ctx.workflow_dir, warnings)?;
    super::sandbox::seal(
        &mut worker.sandbox,
        db_path,
        ctx.workflow_dir,
        workspace_root,
        ctx.home,
    )?;
    Ok(worker)
}

/// The data file of a tracker kind that reads one (its descriptor's `path_key`), resolved
/// against the workflow's directory; `None` for the other kinds.
fn tracker_data_path(
    raw: &Map<String, Value>,
    kind: &str,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Option<PathBuf>, ConfigError> {
    match registry::tracker(kind).and_then(|d| d.path_key) {
        Some(key) => data_path(raw, kind, key, ctx, warnings),
        None => Ok(None),
    }
}

/// The `agent` section with its environment allowlist (the tracker's key kept out of it).
fn agent_with_env(
    section: &Map<String, Value>,
    ctx: &BuildContext<'_>,
    tracker: &TrackerConfig,
    warnings: &mut Vec<ConfigWarning>,
    secret_values: &mut Vec<String>,
) -> Result<AgentConfig, ConfigError> {
    let mut agent = build_agent(section, warnings)?;
    agent.env = super::agent_env_build::build_agent_env(
        section,
        ctx.env,
        tracker.api_key.as_deref(),
        warnings,
        secret_values,
    )?;
    Ok(agent)
}

/// Where the reactions' provider is reached: its own block ([`scm_access`]) when it is not
/// the tracker's kind, else the tracker block (`None`).
fn reactions_scm_access(
    raw: &Map<String, Value>,
    (provider, field): (Option<&str>, Option<String>),
    tracker_kind: &str,
    ctx: &BuildContext<'_>,
    secrets: &mut Vec<String>,
) -> Result<Option<ScmAccess>, ConfigError> {
    match (provider, field) {
        (Some(p), Some(field)) if p != tracker_kind => {
            scm_access(raw, (p, &field), tracker_kind, ctx, secrets).map(Some)
        }
        _ => Ok(None),
    }
}

/// Self-review never runs for a session on a worker host: the warning when it is enabled and
/// sessions run on hosts.
fn self_review_local_only(enabled: bool, remote: bool) -> Option<ConfigWarning> {
    (enabled && remote).then(|| {
        ConfigWarning::new(
            "self_review_local_only",
            "self_review",
            "self-review runs only for sessions on this machine; sessions on worker.ssh_hosts \
             end after their coding turns without it",
        )
    })
}

/// A reaction provider that is not the tracker's kind is reached through its own top-level
/// block, as the original builds its CI provider from the block `ci_feedback.kind` names:
/// `api_key` (required; `$VAR` expanded anywhere, like `tracker.api_key`) and `endpoint`
/// (whole-value `$VAR`; absent means the provider's public API). `provider` is the kind and the
/// field that named it.
fn scm_access(
    raw: &Map<String, Value>,
    (provider, field): (&str, &str),
    tracker_kind: &str,
    ctx: &BuildContext<'_>,
    secrets: &mut Vec<String>,
) -> Result<ScmAccess, ConfigError> {
    let empty = Map::new();
    let block = sub_map(raw, provider).unwrap_or(&empty);
    let key = expand_env(&string_field(block, "api_key"), ctx.env);
    let api_key = key.text.trim().to_string();
    if api_key.is_empty() {
        return Err(ConfigError::field(
            field,
            format!(
                "provider {provider:?} must equal tracker.kind ({tracker_kind:?}) unless its own \
                 top-level `{provider}:` block supplies `api_key` (and `endpoint` when not the \
                 provider's public API); otherwise the tracker block supplies the provider's \
                 endpoint and token"
            ),
        ));
    }
    secrets.extend(key.substituted);
    secrets.push(api_key.clone());
    let endpoint = resolve_env_ref(&string_field(block, "endpoint"), ctx.env).text;
    Ok(ScmAccess {
        endpoint: non_empty(endpoint.trim().to_string()),
        api_key,
    })
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

/// Whole-value `$VAR` resolution unless the field came from a `SORTIE_*` override.
fn whole_value(m: &Map<String, Value>, key: &str, ctx: &BuildContext<'_>) -> String {
    let v = string_field(m, key);
    if ctx.overridden.contains(&format!("tracker.{key}")) {
        v
    } else {
        resolve_env_ref(&v, ctx.env).text
    }
}

fn build_tracker(
    m: &Map<String, Value>,
    ctx: &BuildContext<'_>,
    secrets: &mut Vec<String>,
) -> Result<TrackerConfig, ConfigError> {
    let api_key_raw = string_field(m, "api_key");
    let api_key = if ctx.overridden.contains("tracker.api_key") {
        api_key_raw
    } else {
        let e = expand_env(&api_key_raw, ctx.env);
        secrets.extend(e.substituted);
        e.text
    };
    if !api_key.is_empty() {
        secrets.push(api_key.clone());
    }
    let kind = string_field(m, "kind");
    let defaults = registry::default_tracker_states(&kind);
    // A kind with default states fills each list the workflow leaves empty.
    let states = |key: &str, default: fn(registry::DefaultStates) -> &'static [&'static str]| {
        let list = string_list(m.get(key));
        match defaults {
            Some(d) if list.is_empty() => default(d).iter().map(|s| s.to_string()).collect(),
            _ => list,
        }
    };
    Ok(TrackerConfig {
        kind: kind.clone(),
        endpoint: non_empty(whole_value(m, "endpoint", ctx)),
        api_key: non_empty(api_key),
        project: non_empty(whole_value(m, "project", ctx)),
        active_states: states("active_states", |d| d.active),
        terminal_states: states("terminal_states", |d| d.terminal),
        query_filter: non_empty(whole_value(m, "query_filter", ctx)),
        handoff_state: optional_state(m, "handoff_state", ctx)?,
        in_progress_state: optional_state(m, "in_progress_state", ctx)?,
        no_change_state: optional_state(m, "no_change_state", ctx)?,
        comments: build_comments(m)?,
        api_version: scalar_text(m.get("api_version")),
        user_agent: non_empty(whole_value(m, "user_agent", ctx).trim().to_string()),
        max_poll_bytes: build_max_poll_bytes(m)?,
        handoff_evidence: build_handoff_evidence(m)?,
    })
}

/// `tracker.handoff_evidence`: absent = `off`; else one of `observed`, `strict`, `off`.
fn build_handoff_evidence(m: &Map<String, Value>) -> Result<HandoffEvidence, ConfigError> {
    let field = "tracker.handoff_evidence";
    match m.get("handoff_evidence") {
        None | Some(Value::Null) => Ok(HandoffEvidence::Off),
        Some(Value::String(s)) => HandoffEvidence::parse(s).ok_or_else(|| {
            ConfigError::field(
                field,
                format!("must be one of observed, strict, off; got {s:?}"),
            )
        }),
        Some(other) => Err(ConfigError::field(
            field,
            format!("expected string, got {}", type_name(other)),
        )),
    }
}

/// A string or a number as text (`2` and `"2"` alike), trimmed; `None` when absent or blank.
fn scalar_text(v: Option<&Value>) -> Option<String> {
    let text = match v? {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    non_empty(text)
}

/// `tracker.max_poll_bytes`: absent = the default; an integer of at least
/// [`crate::tracker::MIN_POLL_BYTES`] otherwise.
fn build_max_poll_bytes(m: &Map<String, Value>) -> Result<Option<u64>, ConfigError> {
    let field = "tracker.max_poll_bytes";
    let Some(n) = int_field(m, "max_poll_bytes", field)? else {
        return Ok(None);
    };
    let min = crate::tracker::MIN_POLL_BYTES;
    match u64::try_from(n) {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(ConfigError::field(
            field,
            format!("must be at least {min} (1 MiB), got {n}"),
        )),
    }
}

/// `handoff_state`, `in_progress_state`, `no_change_state`: absent = off; must be a string;
/// explicit `""` and a `$VAR` that resolves to empty are errors.
fn optional_state(
    m: &Map<String, Value>,
    key: &str,
    ctx: &BuildContext<'_>,
) -> Result<Option<String>, ConfigError> {
    let field = format!("tracker.{key}");
    let Some(raw) = strict_string_field(m, key, &field)? else {
        return Ok(None);
    };
    if raw.trim().is_empty() {
        return Err(ConfigError::field(field, "must not be empty"));
    }
    let resolved = if ctx.overridden.contains(&field) {
        raw
    } else {
        resolve_env_ref(&raw, ctx.env).text
    };
    if resolved.trim().is_empty() {
        return Err(ConfigError::field(
            field,
            "resolved to empty (check environment variable)",
        ));
    }
    // Stored trimmed: it is written to the tracker and compared with trimmed states.
    Ok(Some(resolved.trim().to_string()))
}

fn build_comments(m: &Map<String, Value>) -> Result<TrackerComments, ConfigError> {
    let c = match m.get("comments") {
        None | Some(Value::Null) => return Ok(TrackerComments::default()),
        Some(Value::Object(c)) => c,
        Some(other) => {
            return Err(ConfigError::field(
                "tracker.comments",
                format!("expected map, got {}", type_name(other)),
            ));
        }
    };
    let flag = |key: &str| -> Result<bool, ConfigError> {
        match c.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(ConfigError::field(
                format!("tracker.comments.{key}"),
                format!("expected bool, got {}", type_name(other)),
            )),
        }
    };
    Ok(TrackerComments {
        on_dispatch: flag("on_dispatch")?,
        on_completion: flag("on_completion")?,
        on_failure: flag("on_failure")?,
    })
}

fn build_polling(m: &Map<String, Value>) -> Result<PollingConfig, ConfigError> {
    // Go Sortie accepts 0 and busy-loops; refused here, as the README says.
    let interval_ms = positive_ms(m, "interval_ms", "polling", DEFAULT_POLL_INTERVAL_MS)?;
    let min_interval_ms = positive_ms(
        m,
        "min_interval_ms",
        "polling",
        DEFAULT_MIN_POLL_INTERVAL_MS,
    )?;
    Ok(PollingConfig {
        interval_ms,
        min_interval_ms,
    })
}

fn build_shutdown(m: &Map<String, Value>) -> Result<ShutdownConfig, ConfigError> {
    Ok(ShutdownConfig {
        drain_timeout_ms: positive_ms(m, "drain_timeout_ms", "shutdown", DEFAULT_DRAIN_TIMEOUT_MS)?,
    })
}

/// A duration key of `section` that must be positive when set (`default` when absent).
fn positive_ms(
    m: &Map<String, Value>,
    key: &str,
    section: &str,
    default: u64,
) -> Result<u64, ConfigError> {
    let path = format!("{section}.{key}");
    match int_field(m, key, &path)? {
        None => Ok(default),
        Some(n) if n <= 0 => Err(ConfigError::field(path, "must be positive")),
        Some(n) => Ok(n.unsigned_abs()),
    }
}

fn absolute(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The OS temp dir as Go's `os.TempDir` sees it, read from the injected environment.
fn temp_dir(env: &BTreeMap<String, String>) -> PathBuf {
    match env.get("TMPDIR") {
        Some(t) if !t.is_empty() => PathBuf::from(t),
        _ => PathBuf::from("/tmp"),
    }
}

fn build_workspace(
    m: &Map<String, Value>,
    ctx: &BuildContext<'_>,
) -> Result<WorkspaceConfig, ConfigError> {
    let raw = string_field(m, "root");
    let expand_vars = !ctx.overridden.contains("workspace.root");
    let root = expand_path(&raw, ctx.home, expand_vars, ctx.env)
        .map_err(|e| ConfigError::field("workspace.root", e))?;
    let root = if root.is_empty() {
        temp_dir(ctx.env).join("sortie_workspaces")
    } else {
        absolute(ctx.cwd, &root)
    };
    let retention_days =
        match super::coerce::int_field(m, "retention_days", "workspace.retention_days")? {
            None => 0,
            Some(days) => match crate::workspace::retention::check_days(days) {
                None => u32::try_from(days).unwrap_or(0),
                Some(why) => return Err(ConfigError::field("workspace.retention_days", why)),
            },
        };
    Ok(WorkspaceConfig {
        root,
        retention_days,
    })
}

fn build_hooks(m: &Map<String, Value>, warnings: &mut Vec<ConfigWarning>) -> HooksConfig {
    let script = |key: &str| non_empty(string_field(m, key));
    let timeout_ms = match m.get("timeout_ms") {
        None | Some(Value::Null) => DEFAULT_HOOK_TIMEOUT_MS,
        Some(v) => match coerce_int(v) {
            Some(n) if n > 0 => n.unsigned_abs(),
            _ => {
                warnings.push(ConfigWarning::new(
                    "invalid_value",
                    "hooks.timeout_ms",
                    format!(
                        "{} is not a positive integer; using {DEFAULT_HOOK_TIMEOUT_MS}",
                        display_value(v)
                    ),
                ));
                DEFAULT_HOOK_TIMEOUT_MS
            }
        },
    };
    HooksConfig {
        after_create: script("after_create"),
        before_run: script("before_run"),
        after_run: script("after_run"),
        before_remove: script("before_remove"),
        timeout_ms,
    }
}

fn to_u32(n: i64, field: &str) -> Result<u32, ConfigError> {
    u32::try_from(n).map_err(|_| ConfigError::field(field, format!("value out of range: {n}")))
}

/// Non-negative integer where 0/absent means "use the default".
fn int_or_default(m: &Map<String, Value>, key: &str, default: u64) -> Result<u64, ConfigError> {
    let field = format!("agent.{key}");
    match int_field(m, key, &field)? {
        None | Some(0) => Ok(default),
        Some(n) if n < 0 => Err(ConfigError::field(field, "must be non-negative")),
        Some(n) => Ok(n.unsigned_abs()),
    }
}

/// Non-negative integer budget where 0/absent means "no limit".
fn budget(m: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigError> {
    let field = format!("agent.{key}");
    match int_field(m, key, &field)? {
        None | Some(0) => Ok(None),
        Some(n) if n < 0 => Err(ConfigError::field(field, "must be non-negative")),
        Some(n) => Ok(Some(n.unsigned_abs())),
    }
}

/// A USD ceiling: YAML number or numeric string; 0/absent = none; negative is an error.
pub(super) fn usd(m: &Map<String, Value>, key: &str) -> Result<Option<f64>, ConfigError> {
    let field = format!("agent.{key}");
    let v = match m.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
    .ok_or_else(|| {
        ConfigError::field(
            &field,
            format!("invalid number value: {}", display_value(v)),
        )
    })?;
    if n < 0.0 {
        return Err(ConfigError::field(field, "must be non-negative"));
    }
    Ok(if n == 0.0 { None } else { Some(n) })
}

fn build_agent(
    m: &Map<String, Value>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<AgentConfig, ConfigError> {
    let kind = non_empty(string_field(m, "kind")).unwrap_or_else(|| DEFAULT_AGENT_KIND.into());
    let max_turns = match int_field(m, "max_turns", "agent.max_turns")? {
        None | Some(0) => DEFAULT_MAX_TURNS,
        Some(n) if n < 0 => {
            warnings.push(ConfigWarning::new(
                "clamped",
                "agent.max_turns",
                format!("{n} is below 1; using 1"),
            ));
            1
        }
        Some(n) => to_u32(n, "agent.max_turns")?,
    };
    let max_concurrent_agents =
        match int_field(m, "max_concurrent_agents", "agent.max_concurrent_agents")? {
            None | Some(0) => DEFAULT_MAX_CONCURRENT_AGENTS,
            Some(n) if n < 0 => {
                return Err(ConfigError::field(
                    "agent.max_concurrent_agents",
                    "must be non-negative",
                ));
            }
            Some(n) => to_u32(n, "agent.max_concurrent_agents")?,
        };
    // Absent → default; explicit 0 → stall detection off, so a workflow can opt out of stall
    // kills for agents that think silently for long stretches; negative is an error.
    let stall_timeout_ms = match int_field(m, "stall_timeout_ms", "agent.stall_timeout_ms")? {
        None => Some(DEFAULT_STALL_TIMEOUT_MS),
        Some(0) => None,
        Some(n) if n < 0 => {
            return Err(ConfigError::field(
                "agent.stall_timeout_ms",
                "must be non-negative (0 turns stall detection off)",
            ));
        }
        Some(n) => Some(n.unsigned_abs()),
    };
    // Absent or 0 → the default cap; negative is an error.
    let max_retry_backoff_ms =
        int_or_default(m, "max_retry_backoff_ms", DEFAULT_MAX_RETRY_BACKOFF_MS)?;
    // Absent → default; explicit 0 → the same-cause count is off; negative is an error.
    let max_same_failures = match int_field(m, "max_same_failures", "agent.max_same_failures")? {
        None => DEFAULT_MAX_SAME_FAILURES,
        Some(n) if n < 0 => {
            return Err(ConfigError::field(
                "agent.max_same_failures",
                "must be a whole number of runs, 1 or more (0 turns the same-cause hold off)",
            ));
        }
        Some(n) => to_u32(n, "agent.max_same_failures")?,
    };
    Ok(AgentConfig {
        command: non_empty(string_field(m, "command").trim().to_string()),
        kind,
        max_turns,
        max_sessions: budget(m, "max_sessions")?,
        max_tokens: budget(m, "max_tokens")?,
        max_cost_usd: usd(m, "max_cost_usd")?,
        max_daily_cost_usd: usd(m, "max_daily_cost_usd")?,
        max_weekly_cost_usd: usd(m, "max_weekly_cost_usd")?,
        max_monthly_cost_usd: usd(m, "max_monthly_cost_usd")?,
        max_concurrent_agents,
        max_concurrent_agents_by_state: by_state(m.get("max_concurrent_agents_by_state"), warnings),
        turn_timeout_ms: int_or_default(m, "turn_timeout_ms", DEFAULT_TURN_TIMEOUT_MS)?,
        read_timeout_ms: int_or_default(m, "read_timeout_ms", DEFAULT_READ_TIMEOUT_MS)?,
        stop_grace_ms: int_or_default(m, "stop_grace_ms", DEFAULT_STOP_GRACE_MS)?,
        stall_timeout_ms,
        max_retry_backoff_ms,
        max_same_failures,
        env: Default::default(),
    })
}

/// Keys trimmed and lower-cased (`domain::state_key`, the form dispatch compares with), so
/// `" To Do "` caps `To Do`; non-numeric or ≤ 0 entries and blank keys are dropped (with a
/// warning); two keys naming the same state keep the smaller cap (with a warning).
fn by_state(v: Option<&Value>, warnings: &mut Vec<ConfigWarning>) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    let Some(Value::Object(m)) = v else {
        return out;
    };
    for (state, limit) in m {
        let field = format!("agent.max_concurrent_agents_by_state.{state}");
        let key = crate::domain::state_key(state);
        if key.is_empty() {
            warnings.push(ConfigWarning::new(
                "invalid_value",
                field,
                "blank state name; entry ignored",
            ));
            continue;
        }
        match coerce_int(limit)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
        {
            Some(n) => {
                if let Some(prev) = out.get(&key).copied() {
                    warnings.push(ConfigWarning::new(
                        "invalid_value",
                        field,
                        format!(
                            "names the same state as another entry ({key:?} after trimming and \
                             case folding); the smaller cap {} is used",
                            prev.min(n)
                        ),
                    ));
                    out.insert(key, prev.min(n));
                } else {
                    out.insert(key, n);
                }
            }
            None => warnings.push(ConfigWarning::new(
                "invalid_value",
                format!("agent.max_concurrent_agents_by_state.{state}"),
                format!(
                    "{} is not a positive integer; entry ignored",
                    display_value(limit)
                ),
            )),
        }
    }
    out
}

fn build_db_path(raw: &Map<String, Value>, ctx: &BuildContext<'_>) -> Result<PathBuf, ConfigError> {
    let default = || ctx.workflow_dir.join(DEFAULT_DB_FILE);
    let Some(s) = strict_string_field(raw, "db_path", "db_path")? else {
        return Ok(default());
    };
    if s.is_empty() {
        return Ok(default());
    }
    let expanded = expand_path(&s, ctx.home, !ctx.overridden.contains("db_path"), ctx.env)
        .map_err(|e| ConfigError::field("db_path", e))?;
    if expanded.is_empty() {
        return Err(ConfigError::field(
            "db_path",
            "resolved to empty (check environment variable)",
        ));
    }
    Ok(absolute(ctx.workflow_dir, &expanded))
}

pub(super) fn build_server(m: &Map<String, Value>) -> Result<ServerConfig, ConfigError> {
    let port = match m.get("port") {
        None | Some(Value::Null) => None,
        // Only a YAML int or integral float; a quoted port is refused so a typo is not
        // silently read as a number.
        Some(v @ Value::Number(_)) => Some(
            coerce_int(v)
                .and_then(|n| u16::try_from(n).ok())
                .ok_or_else(|| bad_port(v))?,
        ),
        Some(v) => return Err(bad_port(v)),
    };
    let host =
        match strict_string_field(m, "host", "server.host")? {
            None => None,
            Some(h) => Some(h.trim().parse::<IpAddr>().map_err(|_| {
                ConfigError::field("server.host", format!("invalid IP address: {h}"))
            })?),
        };
    let allowed_hosts = match m.get("allowed_hosts") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(h) if valid_host_name(h.trim()) => Ok(h.trim().to_ascii_lowercase()),
                other => Err(ConfigError::field(
                    "server.allowed_hosts",
                    format!(
                        "invalid host name {} (expected a name or IP address without port)",
                        display_value(other)
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(v) => {
            return Err(ConfigError::field(
                "server.allowed_hosts",
                format!("must be a list of host names, got {}", display_value(v)),
            ));
        }
    };
    let max_connections = connection_count(m, "max_connections")?;
    let max_connections_per_client = connection_count(m, "max_connections_per_client")?;
    if let (Some(all), Some(one)) = (max_connections, max_connections_per_client)
        && one > all
    {
        return Err(ConfigError::field(
            "server.max_connections_per_client",
            format!("{one} is more than server.max_connections ({all})"),
        ));
    }
    Ok(ServerConfig {
        port,
        host,
        allowed_hosts,
        max_connections,
        max_connections_per_client,
    })
}

/// `server.<key>`: a count of connections from 1 to 100000, or absent.
fn connection_count(m: &Map<String, Value>, key: &str) -> Result<Option<usize>, ConfigError> {
    let bad = |v: &Value| {
        ConfigError::field(
            format!("server.{key}"),
            format!(
                "invalid value: {} (must be an integer from 1 to 100000)",
                display_value(v)
            ),
        )
    };
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(_)) => coerce_int(v)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=100_000).contains(n))
            .map(Some)
            .ok_or_else(|| bad(v)),
        Some(v) => Err(bad(v)),
    }
}

/// A host name as the `Host` header carries it, without port: letters, digits, `-`, `.`, or a
/// bracketed IPv6 address.
fn valid_host_name(h: &str) -> bool {
    if let Some(inner) = h.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

fn bad_port(v: &Value) -> ConfigError {
    ConfigError::field(
        "server.port",
        format!(
            "invalid port value: {} (must be an integer from 0 to 65535)",
            display_value(v)
        ),
    )
}

pub(super) fn build_logging(m: &Map<String, Value>) -> Result<LoggingConfig, ConfigError> {
    let level = match strict_string_field(m, "level", "logging.level")? {
        None => None,
        Some(s) => Some(LogLevel::parse(&s).ok_or_else(|| {
            ConfigError::field(
                "logging.level",
                format!("invalid value {s:?} (expected debug, info, warn or error)"),
            )
        })?),
    };
    let format = match strict_string_field(m, "format", "logging.format")? {
        None => None,
        Some(s) => Some(LogFormat::parse(&s).ok_or_else(|| {
            ConfigError::field(
                "logging.format",
                format!("invalid value {s:?} (expected text or json)"),
            )
        })?),
    };
    Ok(LoggingConfig { level, format })
}

/// The warning check of a tracker data file found only relative to the working directory.
pub const DATA_PATH_FROM_CWD_CHECK: &str = "data_path_from_cwd";

/// A tracker kind's local data file: `<kind>.<key>`, else `tracker.<key>` (Go Sortie documents
/// that spelling but never reads it, so both are accepted), `~`-expanded and resolved against
/// the **workflow file's directory** — a deliberate deviation from Go, which uses the process
/// CWD, so a workflow works the same from any directory. When the file is not there but exists
/// relative to the CWD (Go's base), that one is used with a `data_path_from_cwd` warning.
fn data_path(
    raw: &Map<String, Value>,
    kind: &str,
    key: &str,
    ctx: &BuildContext<'_>,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Option<PathBuf>, ConfigError> {
    let candidates = [
        (kind, format!("{kind}.{key}")),
        ("tracker", format!("tracker.{key}")),
    ];
    for (block, field) in candidates {
        let Some(v) = sub_map(raw, block).and_then(|m| m.get(key)) else {
            continue;
        };
        let Value::String(s) = v else {
            warnings.push(ConfigWarning::new(
                "type_mismatch",
                field,
                format!("expected string, got {}", type_name(v)),
            ));
            continue;
        };
        if s.trim().is_empty() {
            continue;
        }
        let p = expand_path(s.trim(), ctx.home, false, ctx.env)
            .map_err(|e| ConfigError::field(&field, e))?;
        let beside_workflow = absolute(ctx.workflow_dir, &p);
        // The original Sortie resolves against the process CWD, and its own examples are run
        // from the repository root (`file.path: examples/issues.json`). When the file is not
        // beside the workflow but is there, use it and say so.
        let from_cwd = absolute(ctx.cwd, &p);
        if !beside_workflow.exists() && from_cwd != beside_workflow && from_cwd.exists() {
            warnings.push(ConfigWarning::new(
                DATA_PATH_FROM_CWD_CHECK,
                field,
                format!(
                    "{} does not exist; using {} (relative to the working directory, as the \
                     original Sortie resolves it). Write the path relative to the workflow \
                     file's folder so it works from any directory",
                    beside_workflow.display(),
                    from_cwd.display()
                ),
            ));
            return Ok(Some(from_cwd));
        }
        return Ok(Some(beside_workflow));
    }
    Ok(None)
}
