//! The objects a session creates: its Job, the Secret that carries its prompt and environment
//! (owned by the Job, so deleting the Job deletes it), and with `workspace: pvc` its issue's
//! workspace claim (kept across turns and runs, deleted with the issue's workspace).

use serde_json::{Map, Value, json};

use super::settings::KubeSettings;

/// Where the session Secret is mounted in the agent container (the prompt is its `stdin` key).
pub const SECRET_MOUNT: &str = "/var/run/sortie";
/// The workspace volume's mount path and the agent's working directory.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// Where the init container sees the whole workspace claim; the workspace is its `workspace`
/// directory, so the marker of a prepared claim stays out of the agent's sight.
pub const CLAIM_ROOT_MOUNT: &str = "/var/run/sortie-claim";
/// The claim's directory the workspace lives in.
pub const CLAIM_WORKSPACE_DIR: &str = "workspace";
/// The marker `after_create` leaves in a claim once it succeeded there.
pub const CLAIM_PREPARED_MARKER: &str = "after-create.done";
/// The agent container's name.
pub const CONTAINER: &str = "agent";
/// The init container running `hooks.after_create`.
pub const INIT_CONTAINER: &str = "after-create";
/// The label every Job sortie creates carries, with [`MANAGED_BY_VALUE`].
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "sortie";
/// The label naming the daemon a Job belongs to.
pub const DAEMON_LABEL: &str = "sortie.dev/daemon";

/// What one session's Job is built from.
pub struct SessionJob<'a> {
    pub name: String,
    pub image: &'a str,
    pub kind: &'a str,
    pub argv: &'a [String],
    /// The variables the agent gets (through the Secret).
    pub env: &'a [(String, String)],
    pub stdin: Option<&'a str>,
    pub issue_id: &'a str,
    pub issue_identifier: &'a str,
    pub attempt: &'a str,
    /// The issue's workspace claim (`workspace: pvc`); `None`: an `emptyDir`.
    pub claim: Option<String>,
}

/// A name fit for a label value: at most 63 characters of `[A-Za-z0-9._-]`, starting and
/// ending alphanumeric; empty when nothing of `s` fits.
pub fn label_value(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// A Job name: `sortie-<identifier>-<attempt>-<suffix>`, a DNS label of at most 63 characters
/// (the `job-name` label on its pods must fit one).
pub fn job_name(identifier: &str, attempt: &str, suffix: &str) -> String {
    let ident: String = identifier
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let tail = format!("-{attempt}-{suffix}");
    let room = 63usize.saturating_sub("sortie-".len() + tail.len());
    let ident: String = ident.chars().take(room).collect();
    let ident = ident.trim_matches('-');
    let name = format!("sortie-{ident}{tail}");
    name.replace("--", "-")
}

/// The workspace claim of the issue `identifier` for `daemon`: keyed like the local workspace
/// directory, a DNS label with a digest that keeps two daemons' and two identifiers' apart.
pub fn claim_name(daemon: &str, identifier: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{daemon}\0{identifier}").as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let ident: String = identifier
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63 - "sortie-ws--".len() - hex.len())
        .collect();
    let ident = ident.trim_matches('-');
    format!("sortie-ws-{ident}-{hex}").replace("--", "-")
}

/// The issue's workspace claim: labelled with the daemon and the issue, not owned by any Job.
pub fn claim(settings: &KubeSettings, job: &SessionJob<'_>, name: &str) -> Value {
    let mut labels = Map::new();
    labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
    labels.insert(DAEMON_LABEL.into(), label_value(&settings.daemon).into());
    labels.insert(ISSUE_LABEL.into(), label_value(job.issue_id).into());
    labels.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": settings.claim.size}},
    });
    if let (Some(sc), Some(m)) = (&settings.claim.storage_class, spec.as_object_mut()) {
        m.insert("storageClassName".into(), sc.clone().into());
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {"sortie.dev/issue-identifier": job.issue_identifier},
        },
        "spec": spec,
    })
}

/// The label naming the issue a Job or claim is for.
pub const ISSUE_LABEL: &str = "sortie.dev/issue";

/// The labels of a session's Job, pods and Secret.
pub fn labels(settings: &KubeSettings, job: &SessionJob<'_>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
    m.insert(DAEMON_LABEL.into(), label_value(&settings.daemon).into());
    m.insert(ISSUE_LABEL.into(), label_value(job.issue_id).into());
    m.insert("sortie.dev/attempt".into(), label_value(job.attempt).into());
    m.insert("sortie.dev/agent-kind".into(), label_value(job.kind).into());
    m.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
    m
}

/// The session's Job.
pub fn job(settings: &KubeSettings, job: &SessionJob<'_>) -> Value {
    let labels = labels(settings, job);
    let env: Vec<Value> = job
        .env
        .iter()
        .map(|(k, _)| {
            json!({"name": k, "valueFrom": {"secretKeyRef": {"name": job.name, "key": env_key(k)}}})
        })
        .collect();
    let script = if job.stdin.is_some() {
        format!("exec \"$@\" < {SECRET_MOUNT}/stdin")
    } else {
        "exec \"$@\" < /dev/null".to_string()
    };
    let mut spec = json!({
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
        "template": {
            "metadata": {"labels": labels},
            "spec": pod_spec(settings, job, env, script),
        }
    });
    if let (Some(d), Some(m)) = (settings.active_deadline_seconds, spec.as_object_mut()) {
        m.insert("activeDeadlineSeconds".into(), d.into());
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {"sortie.dev/issue-identifier": job.issue_identifier},
        },
        "spec": spec,
    })
}

fn pod_spec(
    settings: &KubeSettings,
    job: &SessionJob<'_>,
    env: Vec<Value>,
    script: String,
) -> Value {
    let uid = settings.run_as_user;
    let mut container = json!({
        "name": CONTAINER,
        "image": job.image,
        "command": ["/bin/sh", "-c", script, "sortie-agent"],
        "args": job.argv,
        "workingDir": WORKSPACE_MOUNT,
        "env": env,
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true,
        },
        "volumeMounts": [
            workspace_mount(job),
            {"name": "session", "mountPath": SECRET_MOUNT, "readOnly": true},
        ],
    });
    let r = &settings.resources;
    if (!r.requests.is_empty() || !r.limits.is_empty())
        && let Some(c) = container.as_object_mut()
    {
        let mut res = Map::new();
        if !r.requests.is_empty() {
            res.insert("requests".into(), json!(r.requests));
        }
        if !r.limits.is_empty() {
            res.insert("limits".into(), json!(r.limits));
        }
        c.insert("resources".into(), Value::Object(res));
    }
    json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": uid,
            "runAsGroup": uid,
            "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumes": [
            workspace_volume(job),
            {"name": "session", "secret": {
                "secretName": job.name,
                "defaultMode": 0o400,
                "items": [{"key": "stdin", "path": "stdin"}],
            }},
        ],
        "initContainers": init_containers(settings, job, &container),
        "containers": [container],
    })
}

/// The workspace volume: the issue's claim, or an `emptyDir` the pod's life long.
fn workspace_volume(job: &SessionJob<'_>) -> Value {
    match &job.claim {
        Some(c) => json!({"name": "workspace", "persistentVolumeClaim": {"claimName": c}}),
        None => json!({"name": "workspace", "emptyDir": {}}),
    }
}

/// The workspace at [`WORKSPACE_MOUNT`]: a claim's [`CLAIM_WORKSPACE_DIR`], or the whole
/// `emptyDir`.
fn workspace_mount(job: &SessionJob<'_>) -> Value {
    match job.claim {
        Some(_) => {
            json!({"name": "workspace", "mountPath": WORKSPACE_MOUNT, "subPath": CLAIM_WORKSPACE_DIR})
        }
        None => json!({"name": "workspace", "mountPath": WORKSPACE_MOUNT}),
    }
}

/// `hooks.after_create` in the pod: the agent's image, its variables and workspace, `sh -c`.
/// On a claim it runs until it has once succeeded there (the marker beside the workspace), as
/// a local workspace's hook runs when the directory is created.
fn init_containers(settings: &KubeSettings, job: &SessionJob<'_>, agent: &Value) -> Value {
    let Some(script) = &settings.after_create else {
        return json!([]);
    };
    let (command, mounts) = match job.claim {
        None => (
            json!(["/bin/sh", "-c", script]),
            json!([{"name": "workspace", "mountPath": WORKSPACE_MOUNT}]),
        ),
        Some(_) => {
            let marker = format!("{CLAIM_ROOT_MOUNT}/{CLAIM_PREPARED_MARKER}");
            let once =
                format!("[ -e '{marker}' ] && exit 0; /bin/sh -c \"$1\" || exit; : > '{marker}'");
            (
                json!(["/bin/sh", "-c", once, "sortie-after-create", script]),
                json!([
                    workspace_mount(job),
                    {"name": "workspace", "mountPath": CLAIM_ROOT_MOUNT},
                ]),
            )
        }
    };
    json!([{
        "name": INIT_CONTAINER,
        "image": job.image,
        "command": command,
        "workingDir": WORKSPACE_MOUNT,
        "env": agent["env"],
        "securityContext": agent["securityContext"],
        "volumeMounts": mounts,
    }])
}

/// The Secret key holding variable `name`.
pub fn env_key(name: &str) -> String {
    format!("env.{name}")
}

/// The session's Secret, owned by its Job (`uid` from the created Job).
pub fn secret(settings: &KubeSettings, job: &SessionJob<'_>, uid: &str) -> Value {
    let mut data = Map::new();
    data.insert("stdin".into(), job.stdin.unwrap_or("").into());
    for (k, v) in job.env {
        data.insert(env_key(k), v.clone().into());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": job.name,
            "namespace": settings.namespace,
            "labels": labels(settings, job),
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job.name,
                "uid": uid,
                "blockOwnerDeletion": true,
            }],
        },
        "type": "Opaque",
        "stringData": data,
    })
}

/// Whether `name` can be a container variable and a Secret key (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn env_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_dns_labels_of_at_most_63() {
        let n = job_name(&"Very/Long_Identifier ".repeat(10), "12", "a1b2c3");
        assert!(n.len() <= 63, "{n}");
        assert!(n.starts_with("sortie-very-long"));
        assert!(n.ends_with("-12-a1b2c3"));
        assert!(!n.contains("--"));
        assert_eq!(job_name("ABC-1", "1", "x"), "sortie-abc-1-1-x");
    }

    #[test]
    fn claim_names_are_dns_labels_apart_per_daemon_and_issue() {
        let n = claim_name("d", &"Very/Long_Identifier ".repeat(10));
        assert!(n.len() <= 63 && n.starts_with("sortie-ws-very-long"), "{n}");
        assert!(!n.contains("--") && !n.ends_with('-'), "{n}");
        assert_ne!(claim_name("a", "K-1"), claim_name("b", "K-1"));
        assert_ne!(claim_name("a", "K-1"), claim_name("a", "K_1"));
        assert_eq!(claim_name("a", "K-1"), claim_name("a", "K-1"));
    }

    #[test]
    fn label_values_keep_to_the_label_alphabet() {
        assert_eq!(label_value("gid://x/Issue/12"), "gid___x_Issue_12");
        assert_eq!(label_value("--"), "");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }
}
