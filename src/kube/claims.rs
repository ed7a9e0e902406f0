//! The per-issue workspace claim of `workspace: pvc`: created by the first session of an issue
//! and found again by the next (continuation turns and retries keep its files), deleted when
//! the workspace is removed, once no Job of this daemon uses it.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{Group, KubeClient};
use super::error::{KubeError, KubeErrorKind, RelayError};
use super::objects::{self, SessionJob};
use super::pod;
use super::settings::KubeSettings;

/// The collection of claims.
const RESOURCE: &str = "persistentvolumeclaims";
/// How long a removal waits for the Jobs still using a claim (a cancelled session's pod
/// takes its termination grace to stop) before it leaves the claim.
pub const RELEASE_WAIT: Duration = Duration::from_secs(120);
/// The pause between two looks at the Jobs using a claim.
const RELEASE_POLL: Duration = Duration::from_millis(500);

/// The claim for `job`, created when it does not exist; its name.
pub fn ensure(
    client: &KubeClient,
    settings: &KubeSettings,
    job: &SessionJob<'_>,
    workspace_key: &str,
) -> Result<String, RelayError> {
    let name = objects::claim_name(&settings.daemon, workspace_key);
    let path = client.path(Group::Core, RESOURCE, Some(&name));
    let found = client
        .get(&path)
        .map_err(|e| format!("reading the workspace claim {name}: {e}"))?;
    if let Some(c) = found {
        if c.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(RelayError(format!(
                "the issue's workspace claim {name} is being deleted; the run is retried later"
            )));
        }
        return Ok(name);
    }
    let collection = client.path(Group::Core, RESOURCE, None);
    match client.create(&collection, &objects::claim(settings, job, &name)) {
        Ok(_) => {
            eprintln!("sortie-kube: workspace claim {name} created");
            Ok(name)
        }
        Err(e) if e.status() == Some(409) => Ok(name),
        Err(e) => Err(RelayError(format!(
            "creating the workspace claim {name}: {e}"
        ))),
    }
}

/// Deletes the claim of the workspace `workspace_key` once no Job of this daemon uses it
/// (waiting up to [`RELEASE_WAIT`]); `Ok(false)` when there was none. A claim still in use
/// after the wait is left, and said so in the error.
pub fn remove(settings: &KubeSettings, workspace_key: &str) -> Result<bool, KubeError> {
    let client = KubeClient::new(settings)?;
    let name = objects::claim_name(&settings.daemon, workspace_key);
    let path = client.path(Group::Core, RESOURCE, Some(&name));
    if client.get(&path)?.is_none() {
        return Ok(false);
    }
    let since = Instant::now();
    loop {
        let users = users_of(&client, settings, &name)?;
        if users.is_empty() {
            break;
        }
        if since.elapsed() >= RELEASE_WAIT {
            return Err(KubeError::new(
                KubeErrorKind::InUse,
                format!(
                    "workspace claim {name} kept: Job {} still uses it after {} s",
                    users.join(", "),
                    RELEASE_WAIT.as_secs()
                ),
            ));
        }
        std::thread::sleep(RELEASE_POLL);
    }
    client.delete(&path)?;
    Ok(true)
}

/// This daemon's Jobs that mount `claim` and still run or are being deleted.
fn users_of(
    client: &KubeClient,
    settings: &KubeSettings,
    claim: &str,
) -> Result<Vec<String>, KubeError> {
    let selector = format!(
        "{}={},{}={}",
        objects::MANAGED_BY,
        objects::MANAGED_BY_VALUE,
        objects::DAEMON_LABEL,
        objects::label_value(&settings.daemon)
    );
    let jobs = client.list(&client.path(Group::Batch, "jobs", None), &selector)?;
    Ok(jobs
        .iter()
        .filter(|j| mounts(j, claim))
        .filter(|j| pod::job_active(j) || j.pointer("/metadata/deletionTimestamp").is_some())
        .filter_map(|j| j.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect())
}

fn mounts(job: &Value, claim: &str) -> bool {
    job.pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .is_some_and(|vols| {
            vols.iter().any(|v| {
                v.pointer("/persistentVolumeClaim/claimName")
                    .and_then(Value::as_str)
                    == Some(claim)
            })
        })
}
