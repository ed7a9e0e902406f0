//! The objects a session creates: its Job and the Secret that carries its prompt and
//! environment (owned by the Job, so deleting the Job deletes it).

use serde_json::{Map, Value, json};

use super::settings::KubeSettings;

/// Where the session Secret is mounted in the agent container (the prompt is its `stdin` key).
pub const SECRET_MOUNT: &str = "/var/run/sortie";
/// The workspace volume's mount path and the agent's working directory.
pub const WORKSPACE_MOUNT: &str = "/workspace";
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

/// The labels of a session's Job, pods and Secret.
pub fn labels(settings: &KubeSettings, job: &SessionJob<'_>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
    m.insert(DAEMON_LABEL.into(), label_value(&settings.daemon).into());
    m.insert("sortie.dev/issue".into(), label_value(job.issue_id).into());
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
            {"name": "workspace", "mountPath": WORKSPACE_MOUNT},
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
            {"name": "workspace", "emptyDir": {}},
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

/// `hooks.after_create` in the pod: the agent's image, its variables and workspace, `sh -c`.
fn init_containers(settings: &KubeSettings, job: &SessionJob<'_>, agent: &Value) -> Value {
    let Some(script) = &settings.after_create else {
        return json!([]);
    };
    json!([{
        "name": INIT_CONTAINER,
        "image": job.image,
        "command": ["/bin/sh", "-c", script],
        "workingDir": WORKSPACE_MOUNT,
        "env": agent["env"],
        "securityContext": agent["securityContext"],
        "volumeMounts": [{"name": "workspace", "mountPath": WORKSPACE_MOUNT}],
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
    fn label_values_keep_to_the_label_alphabet() {
        assert_eq!(label_value("gid://x/Issue/12"), "gid___x_Issue_12");
        assert_eq!(label_value("--"), "");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }
}
