//! One session's pod, from creation to end: waiting for it to start (image pull failures and
//! pods no node takes are failures with their reason), following its log, and reading how its
//! agent container ended.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{Group, KubeClient};
use super::logs::{Line, LineReader, LogCursor, ReadLine};
use super::objects::{self, CONTAINER};
use super::settings::KubeSettings;

/// The pause between two reads of a pod's state, and between two log stream attempts.
const POLL: Duration = Duration::from_millis(500);
/// Log stream attempts in a row that may fail before the run fails.
const MAX_STREAM_FAILURES: u32 = 60;
/// The longest log line passed on (as a local agent's stdout line cap).
const MAX_LINE_BYTES: usize = 10 << 20;
/// The words an image pull failure's message starts with: the classifier holds such a run.
pub const IMAGE_PULL_WORDS: &str = "the agent image cannot be pulled";

/// How the pod ended for the relay.
#[derive(Debug, PartialEq)]
pub enum PodEnd {
    /// The agent container exited with this status.
    Exited(i32),
    /// The pod could not run the agent to an end: why, in words a person understands.
    Failed(String),
}

/// Whether a Job is still active (not Complete, not Failed).
pub fn job_active(job: &Value) -> bool {
    !conditions(job, "/status/conditions")
        .iter()
        .any(|c| matches!(c.0.as_str(), "Complete" | "Failed") && c.1 == "True")
}

/// `(type, status, reason, message)` of an object's conditions at `pointer`.
fn conditions(obj: &Value, pointer: &str) -> Vec<(String, String, String, String)> {
    let s = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|c| {
                    (
                        s(c, "type"),
                        s(c, "status"),
                        s(c, "reason"),
                        s(c, "message"),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits for the pod, copies its log to `out`, and reads how it ended.
pub fn follow(
    client: &KubeClient,
    settings: &KubeSettings,
    job: &str,
    out: &mut dyn Write,
) -> PodEnd {
    let pod = match wait_started(client, settings, job) {
        Ok(p) => p,
        Err(end) => return end,
    };
    let mut cursor = LogCursor::default();
    let mut failures = 0u32;
    let mut last_error = String::new();
    // The end seen after a stream closed; the stream read after it is the whole rest of the
    // log (a stream that dropped before the container ended may have left lines unread).
    let mut end_seen: Option<PodEnd> = None;
    loop {
        match stream_once(client, &pod, &mut cursor, out) {
            Ok(true) => failures = 0,
            Ok(false) => failures += 1,
            Err(end) => return end,
        }
        if let Some(end) = end_seen.take() {
            return end;
        }
        match ended(client, job, &pod) {
            Some(end) => {
                end_seen = Some(end);
                continue;
            }
            None if failures >= MAX_STREAM_FAILURES => {
                return PodEnd::Failed(format!(
                    "the log of pod {pod} could not be read {failures} times in a row: {last_error}"
                ));
            }
            None => last_error = "the stream ended while the agent ran".into(),
        }
        std::thread::sleep(POLL);
    }
}

/// One log stream: true when it carried at least one new line.
fn stream_once(
    client: &KubeClient,
    pod: &str,
    cursor: &mut LogCursor,
    out: &mut dyn Write,
) -> Result<bool, PodEnd> {
    let since = cursor.since_time();
    let mut query = vec![
        ("container", CONTAINER),
        ("follow", "true"),
        ("timestamps", "true"),
    ];
    if let Some(s) = since.as_deref() {
        query.push(("sinceTime", s));
    }
    let Ok(reader) = client.log_stream(pod, &query) else {
        return Ok(false);
    };
    cursor.restart();
    let mut lines = LineReader::new(reader, MAX_LINE_BYTES + 40);
    let mut progressed = false;
    loop {
        match lines.next_line() {
            ReadLine::End => return Ok(progressed),
            ReadLine::TooLong => {
                return Err(PodEnd::Failed(format!(
                    "a log line of pod {pod} is longer than 10 MiB"
                )));
            }
            ReadLine::Line(raw) => {
                if let Line::New(text) = cursor.admit(&raw) {
                    progressed = true;
                    let written = out
                        .write_all(text)
                        .and_then(|()| out.write_all(b"\n"))
                        .and_then(|()| out.flush());
                    if written.is_err() {
                        return Err(PodEnd::Failed("sortie stopped reading the log".into()));
                    }
                }
            }
        }
    }
}

/// Waits until the Job's pod runs or has ended; a pod that cannot start is a failure.
fn wait_started(client: &KubeClient, settings: &KubeSettings, job: &str) -> Result<String, PodEnd> {
    let since = Instant::now();
    let limit = Duration::from_millis(settings.pending_timeout_ms.max(1_000));
    let pods = client.path(Group::Core, "pods", None);
    loop {
        let listed = client.list(&pods, &format!("job-name={job}"));
        let pod = listed.ok().and_then(|l| l.into_iter().next());
        if let Some(p) = &pod {
            if let Some(reason) = image_pull_failure(p).or_else(|| init_failure(p)) {
                return Err(PodEnd::Failed(reason));
            }
            let phase = p.pointer("/status/phase").and_then(Value::as_str);
            if matches!(phase, Some("Running" | "Succeeded" | "Failed")) {
                return Ok(name_of(p));
            }
        } else if let Some(end) = job_failed(client, job) {
            return Err(end);
        }
        if since.elapsed() >= limit {
            return Err(PodEnd::Failed(pending_reason(pod.as_ref(), limit)));
        }
        std::thread::sleep(POLL);
    }
}

fn name_of(pod: &Value) -> String {
    pod.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn agent_status(pod: &Value) -> Option<&Value> {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER))
}

fn image_pull_failure(pod: &Value) -> Option<String> {
    let waiting = agent_status(pod)?.pointer("/state/waiting")?;
    let reason = waiting.get("reason").and_then(Value::as_str)?;
    if !matches!(
        reason,
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"
    ) {
        return None;
    }
    let image = agent_status(pod)
        .and_then(|c| c.get("image"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let message = waiting.get("message").and_then(Value::as_str).unwrap_or("");
    Some(format!(
        "{IMAGE_PULL_WORDS}: {image} ({reason}: {message}); fix worker.kubernetes.image or the registry credentials"
    ))
}

/// The `after_create` init container ended with a failure.
fn init_failure(pod: &Value) -> Option<String> {
    let status = pod
        .pointer("/status/initContainerStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(objects::INIT_CONTAINER))?;
    let code = status
        .pointer("/state/terminated/exitCode")
        .and_then(Value::as_i64)?;
    (code != 0).then(|| format!("the after_create hook failed in the agent's pod (exit {code})"))
}

fn pending_reason(pod: Option<&Value>, limit: Duration) -> String {
    let secs = limit.as_secs();
    let Some(pod) = pod else {
        return format!("Kubernetes created no pod for the Job within {secs} s");
    };
    let unschedulable = conditions(pod, "/status/conditions")
        .into_iter()
        .find(|c| c.0 == "PodScheduled" && c.1 == "False");
    match unschedulable {
        Some((_, _, reason, message)) => format!(
            "no node could run the agent's pod within {secs} s (worker.kubernetes.pending_timeout_ms): {reason}: {message}"
        ),
        None => format!(
            "the agent's pod did not start within {secs} s (worker.kubernetes.pending_timeout_ms)"
        ),
    }
}

/// How the run ended, once its agent container has; `None` while it runs.
fn ended(client: &KubeClient, job: &str, pod_name: &str) -> Option<PodEnd> {
    let pod = match client.get(&client.path(Group::Core, "pods", Some(pod_name))) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Some(job_failed(client, job).unwrap_or_else(|| {
                PodEnd::Failed(format!("pod {pod_name} was deleted while the agent ran"))
            }));
        }
        Err(_) => return None,
    };
    if let Some(reason) = init_failure(&pod) {
        return Some(PodEnd::Failed(reason));
    }
    if pod.pointer("/status/reason").and_then(Value::as_str) == Some("Evicted") {
        let message = pod
            .pointer("/status/message")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Some(PodEnd::Failed(format!(
            "the agent's pod was evicted from its node: {message}"
        )));
    }
    let terminated = agent_status(&pod)?.pointer("/state/terminated")?.clone();
    let code = terminated
        .get("exitCode")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if terminated.get("reason").and_then(Value::as_str) == Some("OOMKilled") {
        return Some(PodEnd::Failed(
            "the agent's container was killed for using more memory than its limit (OOMKilled); raise worker.kubernetes.resources.limits.memory".into(),
        ));
    }
    if code == 0 {
        return Some(PodEnd::Exited(0));
    }
    Some(job_failed(client, job).unwrap_or(PodEnd::Exited(i32::try_from(code).unwrap_or(1))))
}

/// The Job's own failure when Kubernetes stopped it (its deadline).
fn job_failed(client: &KubeClient, job: &str) -> Option<PodEnd> {
    let j = client
        .get(&client.path(Group::Batch, "jobs", Some(job)))
        .ok()??;
    let failed = conditions(&j, "/status/conditions")
        .into_iter()
        .find(|c| c.0 == "Failed" && c.1 == "True")?;
    Some(PodEnd::Failed(match failed.2.as_str() {
        "DeadlineExceeded" => format!(
            "the Job ran past its activeDeadlineSeconds and Kubernetes stopped it: {}",
            failed.3
        ),
        reason => format!("the Job failed: {reason}: {}", failed.3),
    }))
}
