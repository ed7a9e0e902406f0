//! Pods that cannot run their agent to an end, through the real binary against the fake API
//! server (`tests/fake_kube/server.py`), which reports each case as the API server does: a
//! container killed for memory, an evicted pod, a Job past its deadline and a pod no node
//! takes within `pending_timeout_ms`. Each ends the run with words a person understands, is
//! retried as a normal failure, and leaves no Job behind.

mod common;

use std::time::Duration;

use common::fake_kube::{FakeKube, assert_all_valid, one_issue, workflow};
use common::{Project, wait_for};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

fn hanging(p: &Project) {
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "started", "input_tokens": 1, "output_tokens": 1}}),
            json!({"hang": true}),
        ],
    );
}

/// Runs K-1 with `image`: its run fails with `words` in its error, a retry is queued with the
/// failure, the issue is not held, and the failed run's Job, pod and Secret are deleted.
fn failed_run(image: &str, words: &[&str]) {
    let kube = FakeKube::start();
    let p = Project::new();
    one_issue(&p);
    hanging(&p);
    workflow(
        &p,
        &kube,
        &format!("    images: {{claude-code: {image}}}\n"),
    );
    let d = p.start();
    let retry = wait_for("the failed run's retry", T, || {
        d.try_state()?["retrying"]
            .as_array()?
            .iter()
            .find(|r| r["issue_identifier"] == "K-1")
            .cloned()
    });
    let run = wait_for("the failed run is served", T, || {
        let runs = d.try_get("/api/v1/runs?issue=K-1")?.json()["runs"].clone();
        runs.as_array()?
            .iter()
            .find(|r| r["status"] == "failed")
            .cloned()
    });
    let error = run["error"].as_str().unwrap_or_default().to_string();
    for w in words {
        assert!(error.contains(w), "the run's error says {w:?}: {error}");
    }
    assert_eq!(retry["attempt"], 1, "{retry:#}");
    assert!(
        retry["error"]
            .as_str()
            .is_some_and(|e| e.contains(words[0])),
        "the retry row carries the failure: {retry:#}"
    );
    let s = d.state();
    assert!(
        !s["held"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["issue_identifier"] == "K-1")),
        "a retried failure, not a hold: {s:#}"
    );
    let first = kube.requests("POST", "/namespaces/agents/jobs");
    let name = kube.state()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "DELETE")
        .and_then(|r| r["path"].as_str().map(str::to_string));
    assert!(!first.is_empty());
    let name = name.expect("the failed run's Job is deleted");
    let job = name.rsplit('/').next().unwrap().to_string();
    wait_for("the failed run's Job is gone", T, || {
        let s = kube.state();
        (s["jobs"].get(&job).is_none()
            && !s["pods"]
                .as_object()
                .unwrap()
                .values()
                .any(|p| p["metadata"]["labels"]["job-name"] == job.as_str())
            && !s["secrets"].as_object().unwrap().contains_key(&job))
        .then_some(())
    });
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn a_container_killed_for_memory_fails_the_run_and_is_retried() {
    failed_run(
        "registry.example/oom-killed/claude:1",
        &[
            "killed for using more memory than its limit (OOMKilled)",
            "resources.limits.memory",
        ],
    );
}

#[test]
fn an_evicted_pod_fails_the_run_and_is_retried() {
    failed_run(
        "registry.example/evicted/claude:1",
        &[
            "the agent's pod was evicted from its node",
            "The node was low on resource: memory",
        ],
    );
}

#[test]
fn a_job_past_its_deadline_fails_the_run_and_is_retried() {
    failed_run(
        "registry.example/past-deadline/claude:1",
        &[
            "the Job ran past its activeDeadlineSeconds",
            "Job was active longer than specified deadline",
        ],
    );
}

#[test]
fn a_pod_no_node_takes_fails_the_run_after_the_pending_timeout_and_is_retried() {
    failed_run(
        "registry.example/unschedulable/claude:1",
        &[
            "no node could run the agent's pod within 5 s",
            "pending_timeout_ms",
            "0/3 nodes are available: 3 Insufficient cpu",
        ],
    );
}
