//! `worker.kubernetes`: agent sessions as Kubernetes Jobs (`crate::kube`). Every problem is a
//! load error naming its field, so `sortie validate` reports it and a daemon never starts with
//! a block it would half honour: an unknown key, a kubeconfig that cannot be read or needs a
//! credential the client does not support, no cluster to reach, a root user, a `pvc` block
//! that does not go with `workspace: pvc`, and an agent kind that cannot run from a log stream (one that talks
//! to its agent over stdin for the whole session, or runs no command).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::coerce::{coerce_int, type_name};
use super::env::expand_path;
use super::error::ConfigError;
use crate::kube::settings::{
    DEFAULT_CLAIM_SIZE, DEFAULT_IMAGE, DEFAULT_PENDING_TIMEOUT_MS, DEFAULT_RUN_AS_USER,
    DEFAULT_TTL_SECONDS,
};
use crate::kube::{ClaimSettings, KubeAuth, KubeSettings, KubeWorker, Resources, WorkspaceVolume};

const KEYS: &[&str] = &[
    "namespace",
    "kubeconfig",
    "image",
    "images",
    "commands",
    "resources",
    "pending_timeout_ms",
    "ttl_seconds_after_finished",
    "workspace",
    "pvc",
    "max_jobs_per_namespace",
    "daemon_label",
    "run_as_user",
];
/// The key of a dispatch rule's settings block that names the image of the rule's Jobs
/// (`<kind>: {kubernetes: {image: …}}`).
pub const RULE_SETTINGS_KEY: &str = "kubernetes";
/// Where a pod's service account files are.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What the block is built from besides itself.
pub struct KubeInputs<'a> {
    pub home: Option<&'a Path>,
    pub env: &'a BTreeMap<String, String>,
    pub workflow_dir: &'a Path,
    pub db_path: &'a Path,
    /// `agent.turn_timeout_ms` and `agent.stop_grace_ms`.
    pub turn_timeout_ms: u64,
    pub stop_grace_ms: u64,
}

fn err(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::field(format!("worker.kubernetes.{field}"), message)
}

/// Builds `worker.kubernetes` into `worker`: the block, `hooks.after_create` for its init
/// container, and the checks against the sandbox and the agent kinds a dispatch can run.
pub(crate) fn attach(
    worker: &mut super::schema::WorkerConfig,
    section: &Map<String, Value>,
    (ctx, db_path): (&super::context::BuildContext<'_>, &Path),
    (hooks, agent, dispatch): (
        &super::schema::HooksConfig,
        &super::schema::AgentConfig,
        &super::dispatch::DispatchConfig,
    ),
) -> Result<(), ConfigError> {
    check_rule_images(dispatch, &agent.kind, section)?;
    let inputs = KubeInputs {
        home: ctx.home,
        env: ctx.env,
        workflow_dir: ctx.workflow_dir,
        db_path,
        turn_timeout_ms: agent.turn_timeout_ms,
        stop_grace_ms: agent.stop_grace_ms,
    };
    worker.kubernetes = build_kubernetes(section, &inputs)?;
    let Some(k) = &mut worker.kubernetes else {
        return Ok(());
    };
    k.settings.after_create = hooks.after_create.clone();
    if worker.sandbox.enabled() {
        return Err(ConfigError::field(
            "worker.sandbox",
            "the sandbox runs sessions on this machine only; remove worker.kubernetes or set worker.sandbox to none",
        ));
    }
    check_kinds(
        k,
        &super::sandbox::agent_kinds(&agent.kind, dispatch),
        &agent.kind,
        agent.command.as_deref(),
    )
}

/// The image a dispatch rule names for its Jobs of `kind` (`None`: the kind's image).
pub fn rule_image(
    dispatch: &super::dispatch::DispatchConfig,
    kind: &str,
    rule_name: &str,
    workflow_kind: &str,
) -> Option<String> {
    let rule = dispatch
        .rule(rule_name)
        .filter(|r| dispatch.rule_kind(r, workflow_kind) == kind)?;
    rule.settings
        .as_ref()?
        .get(RULE_SETTINGS_KEY)?
        .get("image")?
        .as_str()
        .map(|s| s.trim().to_string())
}

/// Each rule's `<kind>.kubernetes`: a map whose only key is `image`, a non-empty string, and
/// only where sessions run as Jobs.
fn check_rule_images(
    dispatch: &super::dispatch::DispatchConfig,
    workflow_kind: &str,
    worker: &Map<String, Value>,
) -> Result<(), ConfigError> {
    let kube_on = worker.get("kubernetes").is_some_and(|v| !v.is_null());
    for (i, rule) in dispatch.rules.iter().enumerate() {
        let kind = dispatch.rule_kind(rule, workflow_kind);
        let Some(v) = rule
            .settings
            .as_ref()
            .and_then(|s| s.get(RULE_SETTINGS_KEY))
        else {
            continue;
        };
        if v.is_null() {
            continue;
        }
        let field = format!("dispatch.rules[{i}].{kind}.{RULE_SETTINGS_KEY}");
        if !kube_on {
            return Err(ConfigError::field(
                field,
                "names the image of the rule's Kubernetes Jobs, but sessions do not run as Jobs (no worker.kubernetes)",
            ));
        }
        let Value::Object(m) = v else {
            return Err(ConfigError::field(
                field,
                format!("expected a map, got {}", type_name(v)),
            ));
        };
        if let Some(k) = m.keys().find(|k| k.as_str() != "image") {
            return Err(ConfigError::field(
                format!("{field}.{k}"),
                "unknown key (known: image)",
            ));
        }
        match m.get("image") {
            Some(Value::String(s)) if image_ok(s.trim()) => {}
            other => {
                return Err(ConfigError::field(
                    format!("{field}.image"),
                    format!(
                        "expected an image reference (e.g. ghcr.io/acme/agent:1), got {}",
                        other.map_or("nothing".to_string(), |v| v.to_string())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// An image reference as a container's `image` takes it: non-empty, no white space.
fn image_ok(s: &str) -> bool {
    !s.is_empty() && !s.contains(char::is_whitespace)
}

/// The block, or `None` when absent.
pub fn build_kubernetes(
    worker: &Map<String, Value>,
    inputs: &KubeInputs<'_>,
) -> Result<Option<KubeWorker>, ConfigError> {
    let m = match worker.get("kubernetes") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(v) => {
            return Err(ConfigError::field(
                "worker.kubernetes",
                format!("expected a map, got {}", type_name(v)),
            ));
        }
    };
    if let Some(k) = m.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(err(k, format!("unknown key (known: {})", KEYS.join(", "))));
    }
    if worker.get("ssh_hosts").is_some_and(|v| !v.is_null()) {
        return Err(ConfigError::field(
            "worker.kubernetes",
            "worker.kubernetes and worker.ssh_hosts are exclusive: sessions run either as Jobs or on SSH hosts",
        ));
    }
    let pending_timeout_ms =
        positive(m, "pending_timeout_ms")?.unwrap_or(DEFAULT_PENDING_TIMEOUT_MS);
    let settings = KubeSettings {
        namespace: string(m, "namespace")?.unwrap_or_else(|| "default".into()),
        auth: auth(m, inputs)?,
        images: string_map(m, "images")?,
        image: string(m, "image")?.unwrap_or_else(|| DEFAULT_IMAGE.into()),
        resources: resources(m)?,
        pending_timeout_ms,
        ttl_seconds_after_finished: u32::try_from(
            non_negative(m, "ttl_seconds_after_finished")?.unwrap_or(DEFAULT_TTL_SECONDS.into()),
        )
        .unwrap_or(u32::MAX),
        active_deadline_seconds: (inputs.turn_timeout_ms > 0).then(|| {
            (inputs.turn_timeout_ms + inputs.stop_grace_ms + pending_timeout_ms).div_ceil(1000)
        }),
        workspace: workspace(m)?,
        claim: claim(m)?,
        max_jobs_per_namespace: positive(m, "max_jobs_per_namespace")?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        daemon: match string(m, "daemon_label")? {
            Some(d) => checked_label(&d)?,
            None => default_daemon_label(inputs.db_path),
        },
        after_create: None,
        run_as_user: i64::try_from(
            positive(m, "run_as_user")?.unwrap_or(DEFAULT_RUN_AS_USER as u64),
        )
        .unwrap_or(DEFAULT_RUN_AS_USER),
    };
    check_namespace(&settings.namespace)?;
    let relay_exe = std::env::current_exe()
        .map_err(|e| err("", format!("the path of this binary is unknown: {e}")))?;
    if relay_exe.to_string_lossy().contains(char::is_whitespace) {
        return Err(err(
            "",
            "this binary's path holds a space; the relay cannot be started from it",
        ));
    }
    Ok(Some(KubeWorker {
        settings,
        commands: string_map(m, "commands")?,
        relay_exe,
    }))
}

/// `daemon_label` when absent: a digest of the database path, the same across restarts and
/// different for two daemons sharing a namespace.
fn default_daemon_label(db: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(db.to_string_lossy().as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("sortie-{hex}")
}

fn checked_label(d: &str) -> Result<String, ConfigError> {
    if d.is_empty() || crate::kube::objects::label_value(d) != d {
        return Err(err(
            "daemon_label",
            format!(
                "{d:?} is not a label value (1-63 of [A-Za-z0-9._-], alphanumeric at both ends)"
            ),
        ));
    }
    Ok(d.to_string())
}

fn check_namespace(ns: &str) -> Result<(), ConfigError> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(err(
            "namespace",
            format!("{ns:?} is not a namespace name (a DNS label)"),
        ))
    }
}

fn auth(m: &Map<String, Value>, inputs: &KubeInputs<'_>) -> Result<KubeAuth, ConfigError> {
    if let Some(raw) = string(m, "kubeconfig")? {
        let expanded = expand_path(raw.trim(), inputs.home, true, inputs.env)
            .map_err(|e| err("kubeconfig", e))?;
        let path = inputs.workflow_dir.join(expanded);
        crate::kube::auth::from_kubeconfig(&path).map_err(|e| err("kubeconfig", e.to_string()))?;
        return Ok(KubeAuth::Kubeconfig { path });
    }
    let (Some(host), Some(port)) = (
        inputs.env.get("KUBERNETES_SERVICE_HOST"),
        inputs.env.get("KUBERNETES_SERVICE_PORT"),
    ) else {
        return Err(err(
            "kubeconfig",
            "sortie does not run in a cluster (no KUBERNETES_SERVICE_HOST); name a kubeconfig file",
        ));
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    Ok(KubeAuth::InCluster {
        server: format!("https://{host}:{port}"),
        token_file: Path::new(SA_DIR).join("token"),
        ca_file: Path::new(SA_DIR).join("ca.crt"),
    })
}

fn workspace(m: &Map<String, Value>) -> Result<WorkspaceVolume, ConfigError> {
    let volume = match string(m, "workspace")?.as_deref() {
        None | Some("emptydir") => WorkspaceVolume::EmptyDir,
        Some("pvc") => WorkspaceVolume::Pvc,
        Some(other) => {
            return Err(err(
                "workspace",
                format!("{other:?}: expected emptydir or pvc"),
            ));
        }
    };
    if volume == WorkspaceVolume::EmptyDir && m.get("pvc").is_some_and(|v| !v.is_null()) {
        return Err(err(
            "pvc",
            "the claim's settings apply only with workspace: pvc",
        ));
    }
    Ok(volume)
}

/// `pvc`: `size` (a quantity) and `storage_class` (absent: the cluster's default class).
fn claim(m: &Map<String, Value>) -> Result<ClaimSettings, ConfigError> {
    let Some(v) = m.get("pvc").filter(|v| !v.is_null()) else {
        return Ok(ClaimSettings::default());
    };
    let Value::Object(c) = v else {
        return Err(err("pvc", format!("expected a map, got {}", type_name(v))));
    };
    if let Some(k) = c
        .keys()
        .find(|k| !matches!(k.as_str(), "size" | "storage_class"))
    {
        return Err(err(
            &format!("pvc.{k}"),
            "unknown key (known: size, storage_class)",
        ));
    }
    let size = match c.get("size").filter(|v| !v.is_null()) {
        None => DEFAULT_CLAIM_SIZE.to_string(),
        Some(Value::String(s)) if quantity_ok(s.trim()) => s.trim().to_string(),
        Some(other) => {
            return Err(err(
                "pvc.size",
                format!("{other} is not a Kubernetes quantity (e.g. 10Gi)"),
            ));
        }
    };
    let storage_class = string(c, "storage_class")
        .map_err(|_| err("pvc.storage_class", "expected a storage class name"))?;
    if let Some(sc) = &storage_class
        && (sc.len() > 253
            || !sc.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            }))
    {
        return Err(err(
            "pvc.storage_class",
            format!("{sc:?} is not a storage class name (a DNS subdomain)"),
        ));
    }
    Ok(ClaimSettings {
        storage_class,
        size,
    })
}

fn resources(m: &Map<String, Value>) -> Result<Resources, ConfigError> {
    let Some(v) = m.get("resources").filter(|v| !v.is_null()) else {
        return Ok(Resources::default());
    };
    let Value::Object(r) = v else {
        return Err(err(
            "resources",
            format!("expected a map, got {}", type_name(v)),
        ));
    };
    if let Some(k) = r
        .keys()
        .find(|k| !matches!(k.as_str(), "requests" | "limits"))
    {
        return Err(err(
            &format!("resources.{k}"),
            "unknown key (known: requests, limits)",
        ));
    }
    Ok(Resources {
        requests: quantities(r, "requests")?,
        limits: quantities(r, "limits")?,
    })
}

fn quantities(r: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let field = format!("resources.{key}");
    let Some(v) = r.get(key).filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(q) = v else {
        return Err(err(&field, format!("expected a map, got {}", type_name(v))));
    };
    q.iter()
        .map(|(name, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(err(
                        &format!("{field}.{name}"),
                        format!("expected a quantity, got {}", type_name(other)),
                    ));
                }
            };
            if !quantity_ok(&text) {
                return Err(err(
                    &format!("{field}.{name}"),
                    format!("{text:?} is not a Kubernetes quantity (e.g. 500m, 2, 4Gi)"),
                ));
            }
            Ok((name.clone(), text))
        })
        .collect()
}

/// A quantity as the API accepts it: a decimal number with an optional SI or binary suffix.
fn quantity_ok(s: &str) -> bool {
    const SUFFIXES: &[&str] = &[
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(digits_end);
    !num.is_empty() && num.parse::<f64>().is_ok() && SUFFIXES.contains(&suffix)
}

fn string(m: &Map<String, Value>, key: &str) -> Result<Option<String>, ConfigError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(v) => Err(err(key, format!("expected string, got {}", type_name(v)))),
    }
}

fn string_map(m: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) if !s.trim().is_empty() => Ok((k.clone(), s.trim().to_string())),
                other => Err(err(
                    &format!("{key}.{k}"),
                    format!("expected a non-empty string, got {}", type_name(other)),
                )),
            })
            .collect(),
        Some(v) => Err(err(key, format!("expected a map, got {}", type_name(v)))),
    }
}

fn positive(m: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigError> {
    match non_negative(m, key)? {
        Some(0) => Err(err(key, "must be positive")),
        other => Ok(other),
    }
}

fn non_negative(m: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigError> {
    let Some(v) = m.get(key).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match coerce_int(v) {
        Some(n) if n >= 0 => Ok(Some(n as u64)),
        _ => Err(err(
            key,
            format!("expected a non-negative integer, got {v}"),
        )),
    }
}

/// Refuses the agent kinds `kinds` that cannot run as a Job, and a kind with no command to run
/// in its image.
pub fn check_kinds(
    kube: &KubeWorker,
    kinds: &[&str],
    workflow_kind: &str,
    workflow_command: Option<&str>,
) -> Result<(), ConfigError> {
    for kind in kinds {
        let kind = *kind;
        let Some(caps) = crate::registry::caps_for_kind(kind) else {
            continue;
        };
        if !caps.requires_command || caps.stdin_session {
            return Err(ConfigError::field(
                "worker.kubernetes",
                format!(
                    "agent kind {kind} cannot run as a Kubernetes Job: {}",
                    if caps.stdin_session {
                        "it talks to its agent over stdin for the whole session, and a Job gives back only its log"
                    } else {
                        "it runs no command"
                    }
                ),
            ));
        }
        let has_command = kube.commands.contains_key(kind)
            || (kind == workflow_kind && workflow_command.is_some_and(|c| !c.trim().is_empty()));
        if !has_command {
            return Err(err(
                &format!("commands.{kind}"),
                "required: the command line the agent image runs for this kind (or agent.command for the workflow's kind)",
            ));
        }
    }
    Ok(())
}
