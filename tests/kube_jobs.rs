//! Agent sessions as Kubernetes Jobs (`worker.kubernetes`) through the real binary against the
//! fake API server (`tests/fake_kube/server.py`), which validates every object sortie creates
//! with kubernetes-validate and runs the Job's container (the fake agent) as the pod: a
//! session runs as a Job and is handed off, a cancel deletes the Job, a restart deletes the
//! Jobs an earlier process left before it dispatches, a dropped log stream resumes with no
//! event repeated, and an image that cannot be pulled holds the issue with an attention item.

mod common;

use std::time::Duration;

use common::fake_kube::FakeKube;
use common::{FAKE_AGENT, Project};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

fn workflow(p: &Project, kube: &FakeKube, extra_kube: &str) {
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
agent:
  kind: claude-code
  command: {agent}
  max_turns: 1
  stall_timeout_ms: 60000
  env: [{{FAKE_AGENT_SCENARIO: {scenario}}}]
worker:
  kubernetes:
    kubeconfig: {kubeconfig}
    namespace: agents
    image: registry.example/agents/claude:1
    daemon_label: test-daemon
    pending_timeout_ms: 5000
    resources:
      requests: {{cpu: 500m, memory: 1Gi}}
      limits: {{memory: 2Gi}}
{extra_kube}server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}: {{{{ .issue.title }}}}
"#,
        root = p.path("ws").display(),
        agent = FAKE_AGENT,
        scenario = p.path("scenarios/default.jsonl").display(),
        kubeconfig = kube.kubeconfig().display(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
}

fn one_issue(p: &Project) {
    p.issues(json!([
        {"id": "101", "identifier": "K-1", "title": "Runs as a Job", "state": "To Do", "priority": 1}
    ]));
}

fn jobs(kube: &FakeKube) -> Vec<Value> {
    kube.state()["jobs"]
        .as_object()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

fn assert_all_valid(kube: &FakeKube) {
    let invalid = &kube.state()["invalid"];
    assert_eq!(
        invalid,
        &json!([]),
        "objects the API would refuse: {invalid:#}"
    );
}

fn events_with(p: &Project, text: &str) -> i64 {
    p.db_i64(&format!(
        "SELECT COUNT(*) FROM agent_events WHERE payload LIKE '%{text}%'"
    ))
}

#[test]
fn a_session_runs_as_a_job_and_is_handed_off() {
    let kube = FakeKube::start();
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working in the pod", "input_tokens": 10, "output_tokens": 5}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(&p, &kube, "");
    let d = p.start();
    d.wait_until("handed off", T, || p.issue_state("101") == "Review");
    assert_all_valid(&kube);
    let state = kube.state();
    let created: Vec<&Value> = state["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    assert_eq!(created.len(), 2, "one Job and one Secret: {created:#?}");
    assert!(
        created[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("/namespaces/agents/jobs")
    );
    assert!(
        created[1]["path"]
            .as_str()
            .unwrap()
            .ends_with("/namespaces/agents/secrets")
    );
    let job = &jobs(&kube)[0];
    let labels = &job["metadata"]["labels"];
    assert_eq!(labels["sortie.dev/daemon"], "test-daemon");
    assert_eq!(labels["sortie.dev/issue"], "101");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "sortie");
    let spec = &job["spec"];
    assert_eq!(spec["backoffLimit"], 0);
    assert!(spec["activeDeadlineSeconds"].as_u64().unwrap() > 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/agents/claude:1");
    assert_eq!(c["resources"]["limits"]["memory"], "2Gi");
    // The prompt and the session's variables travel in the Secret, never in the Job.
    let job_text = job.to_string();
    assert!(
        !job_text.contains("Runs as a Job"),
        "the prompt is not in the Job"
    );
    assert!(
        !job_text.contains("scenarios/default.jsonl"),
        "variables' values are not in the Job"
    );
    let secret = state["secrets"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .cloned();
    let secret = secret.expect("the Secret lives while its Job does");
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["uid"],
        job["metadata"]["uid"]
    );
    assert!(
        secret["stringData"]["stdin"]
            .as_str()
            .unwrap()
            .contains("Runs as a Job")
    );
    assert_eq!(secret["stringData"]["env.SORTIE_ISSUE_ID"], "101");
    assert_eq!(secret["stringData"]["env.SORTIE_WORKSPACE"], "/workspace");
    assert!(
        secret["stringData"].get("env.PATH").is_none(),
        "this machine's basics stay here"
    );
    assert_eq!(events_with(&p, "working in the pod"), 1);
    drop(d);
}
