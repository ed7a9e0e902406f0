//! Agent sessions as Kubernetes Jobs (`worker.kubernetes`) through the real binary against the
//! fake API server (`tests/fake_kube/server.py`), which validates every object sortie creates
//! with kubernetes-validate and runs the Job's container (the fake agent) as the pod: a
//! session runs as a Job and is handed off, a cancel deletes the Job, a restart deletes the
//! Jobs an earlier process left before it dispatches, a dropped log stream resumes with no
//! event repeated, and an image that cannot be pulled holds the issue with an attention item.
//! The fake itself stops the pods it still runs when a test drops it.

mod common;

use std::time::Duration;

use common::fake_kube::{FakeKube, assert_all_valid, events_with, jobs, one_issue, workflow};
use common::{Daemon, Project, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

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
    assert!(
        !c["args"].to_string().contains("mcp"),
        "no MCP file of this machine is named to the pod: {}",
        c["args"]
    );
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

/// K-1 dispatched to the fake cluster, its agent hanging after its first line.
fn hanging_session() -> (FakeKube, Project, Daemon) {
    let kube = FakeKube::start();
    let p = Project::new();
    one_issue(&p);
    hanging(&p);
    workflow(&p, &kube, "");
    let d = p.start();
    (kube, p, d)
}

fn running_job(kube: &FakeKube) -> String {
    wait_for("the agent's pod runs", T, || {
        let s = kube.state();
        let pods = s["pods"].as_object()?.values().cloned().collect::<Vec<_>>();
        let running = pods.iter().find(|p| p["status"]["phase"] == "Running")?;
        running["metadata"]["labels"]["job-name"]
            .as_str()
            .map(str::to_string)
    })
}

/// Pods run in sessions of their own, as a cluster's are not the server's children: the fake
/// cluster dropped at a test's end stops the pods still running (one agent a suite run
/// outlived its test before).
#[test]
fn dropping_the_fake_cluster_stops_the_pods_it_runs() {
    let (kube, _project, d) = hanging_session();
    running_job(&kube);
    let dir = kube.workdir().to_path_buf();
    let pods = wait_for("the pod's process", T, || {
        let pids = common::procs::processes_in(&dir);
        (!pids.is_empty()).then_some(pids)
    });
    drop(kube);
    wait_for("the pods end with the fake cluster", T, || {
        pods.iter()
            .all(|pid| pid.parse().is_ok_and(|pid| !common::procs::alive(pid)))
            .then_some(())
    });
    drop(d);
}

fn deleted(kube: &FakeKube, job: &str) -> Vec<Value> {
    kube.requests("DELETE", &format!("/jobs/{job}"))
}

#[test]
fn a_cancelled_session_deletes_its_job_with_foreground_propagation() {
    let (kube, p, d) = hanging_session();
    let job = running_job(&kube);
    d.wait_until("the agent's first line is seen", T, || {
        events_with(&p, "started") > 0 || d.log_text().contains("started")
    });
    p.set_issue_state("101", "Done");
    let del = wait_for("the Job is deleted", T, || {
        deleted(&kube, &job).into_iter().next()
    });
    assert_eq!(del["query"]["propagationPolicy"], "Foreground");
    assert!(jobs(&kube).is_empty(), "the Job is gone");
    assert!(
        kube.state()["secrets"].as_object().unwrap().is_empty(),
        "its Secret went with it"
    );
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn a_restart_deletes_the_jobs_an_earlier_process_left_before_it_dispatches() {
    let kube = FakeKube::start();
    let orphan = |name: &str, daemon: &str| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "agents", "labels": {
                "app.kubernetes.io/managed-by": "sortie", "sortie.dev/daemon": daemon}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}
        })
    };
    kube.seed_job(&orphan("sortie-k-0-1-aaaaaa", "test-daemon"));
    kube.seed_job(&orphan("sortie-other-1-bbbbbb", "another-daemon"));
    let p = Project::new();
    one_issue(&p);
    hanging(&p);
    workflow(&p, &kube, "");
    let mut d = p.start();
    let first = running_job(&kube);
    // SIGKILL: the relay is left to the keeper, the Job to the next start.
    d.kill9();
    let d = p.start();
    wait_for("a new Job after the restart", T, || {
        (kube.requests("POST", "/namespaces/agents/jobs").len() >= 2).then_some(())
    });
    let journal = kube.state()["requests"].as_array().cloned().unwrap();
    let at = |pred: &dyn Fn(&Value) -> bool| journal.iter().position(pred);
    let posts: Vec<usize> = journal
        .iter()
        .enumerate()
        .filter(|(_, r)| r["method"] == "POST" && r["path"].as_str().unwrap().ends_with("/jobs"))
        .map(|(i, _)| i)
        .collect();
    let orphan_deleted = at(&|r| {
        r["method"] == "DELETE"
            && r["path"]
                .as_str()
                .unwrap()
                .ends_with("/jobs/sortie-k-0-1-aaaaaa")
    })
    .expect("the orphan is deleted");
    assert!(
        orphan_deleted < posts[0],
        "deleted before the first dispatch"
    );
    let first_deleted = at(&|r| {
        r["method"] == "DELETE"
            && r["path"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/jobs/{first}"))
    })
    .expect("the killed daemon's Job is deleted");
    assert!(
        first_deleted < posts[1],
        "the killed daemon's Job is deleted before the restart dispatches"
    );
    assert!(
        deleted(&kube, "sortie-other-1-bbbbbb").is_empty(),
        "another daemon's Job is left alone"
    );
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn a_dropped_log_stream_resumes_without_repeating_an_event() {
    let kube = FakeKube::start();
    kube.drop_log_after(2);
    let p = Project::new();
    one_issue(&p);
    let mut lines = vec![json!({"init": {}})];
    for i in 1..=4 {
        lines.push(json!({"assistant": {"text": format!("step-{i}-done"), "input_tokens": 1, "output_tokens": 1}}));
    }
    lines.push(json!({"result": {"subtype": "success", "text": "ok"}}));
    p.scenario("default", &lines);
    workflow(&p, &kube, "");
    let d = p.start();
    d.wait_until("handed off", T, || p.issue_state("101") == "Review");
    let logs = kube.requests("GET", "/log");
    assert!(logs.len() >= 2, "the stream was asked again: {logs:#?}");
    assert!(
        logs[1]["query"]["sinceTime"].is_string(),
        "the resumed stream starts at the last line's second"
    );
    for i in 1..=4 {
        assert_eq!(
            events_with(&p, &format!("step-{i}-done")),
            1,
            "step {i} once"
        );
    }
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn an_image_that_cannot_be_pulled_holds_the_issue_with_an_attention_item() {
    let kube = FakeKube::start();
    let p = Project::new();
    one_issue(&p);
    hanging(&p);
    workflow(
        &p,
        &kube,
        "    images: {claude-code: registry.example/pull-fails/claude:9}\n",
    );
    let d = p.start();
    let held = wait_for("the issue is held", T, || {
        let s = d.try_state()?;
        s["held"]
            .as_array()?
            .iter()
            .find(|h| h["issue_identifier"] == "K-1")
            .cloned()
    });
    assert_eq!(held["hold"]["reason"], "failure_held", "{held:#}");
    let s = d.state();
    let item = s["attention"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "failure_held")
        .cloned()
        .expect("an attention item");
    assert_eq!(
        item["evidence"]["cause"], "agent_image_unavailable",
        "{item:#}"
    );
    assert!(
        item.to_string()
            .contains("registry.example/pull-fails/claude:9"),
        "the item names the image: {item:#}"
    );
    assert_eq!(
        kube.requests("POST", "/namespaces/agents/jobs").len(),
        1,
        "no retry loop"
    );
    assert!(
        jobs(&kube).is_empty(),
        "the Job that could not start is deleted"
    );
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn after_create_prepares_the_pods_workspace_in_an_init_container() {
    let kube = FakeKube::start();
    let p = Project::new();
    p.issues(json!([
        {"id": "101", "identifier": "K-1", "title": "Prepared", "state": "To Do", "priority": 1},
        {"id": "102", "identifier": "K-2", "title": "Hook fails", "state": "To Do", "priority": 2}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "found the prepared workspace", "input_tokens": 1, "output_tokens": 1}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(&p, &kube, "");
    // The agent reads its script from the workspace, where only the hook in the pod puts it.
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    let scenario = p.path("scenarios/default.jsonl").display().to_string();
    let wf = wf
        .replace(&format!("FAKE_AGENT_SCENARIO: {scenario}"), "FAKE_AGENT_SCENARIO: .scenario")
        .replace(
            "agent:\n",
            &format!(
                "hooks:\n  after_create: |\n    test \"$SORTIE_ISSUE_IDENTIFIER\" != K-2 || exit 3\n    cp '{scenario}' .scenario\nagent:\n"
            ),
        );
    p.write("WORKFLOW.md", &wf);
    let d = p.start();
    d.wait_until("K-1 handed off", T, || p.issue_state("101") == "Review");
    assert_eq!(events_with(&p, "found the prepared workspace"), 1);
    assert!(
        !p.workspace("K-1").join(".scenario").exists(),
        "the hook ran in the pod, not here"
    );
    let err = wait_for("K-2's run fails", T, || {
        let conn = p.db_conn();
        conn.query_row(
            "SELECT error FROM run_history WHERE issue_id = '102' AND error IS NOT NULL",
            [],
            |r| r.get::<_, String>(0),
        )
        .ok()
    });
    assert!(
        err.contains("the after_create hook failed in the agent's pod"),
        "{err}"
    );
    assert_all_valid(&kube);
    drop(d);
}

/// The relay's command line is readable by every user of this machine
/// (`/proc/<pid>/cmdline`): it carries the image's command and the block's settings, never
/// the prompt, the issue's text, the session's variables or the cluster credential; those
/// reach the pod through the session's Secret.
#[test]
fn the_relays_command_line_carries_no_secret() {
    const KEY: &str = "ak-relay-argv-4f2c9e";
    const TITLE_TOKEN: &str = "ghp_RELAYTITLE0123456789abcdef";
    let kube = FakeKube::start();
    let p = Project::new();
    p.issues(
        json!([{"id": "101", "identifier": "K-1", "priority": 1, "state": "To Do",
        "title": format!("Rotate {TITLE_TOKEN}")}]),
    );
    hanging(&p);
    workflow(&p, &kube, "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace(
            "env: [{FAKE_AGENT_SCENARIO",
            "env: [ANTHROPIC_API_KEY, {FAKE_AGENT_SCENARIO",
        ),
    );
    let d = p.start_with_env(&[("ANTHROPIC_API_KEY", KEY)]);
    running_job(&kube);
    let relay = wait_for("the relay runs", T, || {
        common::procs::processes_in(&p.path("ws"))
            .into_iter()
            .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .find(|c| c.contains("__sortie-kube-run"))
    });
    for secret in [KEY, TITLE_TOKEN, "Rotate", common::fake_kube::TOKEN] {
        assert!(
            !relay.contains(secret),
            "{secret:?} in the relay's argv: {relay}"
        );
    }
    let encoded = relay
        .split(' ')
        .skip_while(|a| *a != "__sortie-kube-run")
        .nth(1)
        .expect("the settings argument");
    let settings = data_encoding::BASE64URL_NOPAD
        .decode(encoded.as_bytes())
        .expect("base64url");
    let settings = String::from_utf8_lossy(&settings);
    for secret in [KEY, TITLE_TOKEN, common::fake_kube::TOKEN] {
        assert!(
            !settings.contains(secret),
            "{secret:?} in the relay's settings: {settings}"
        );
    }
    let s = kube.state();
    let secret = s["secrets"].as_object().unwrap().values().next().cloned();
    let secret = secret.expect("the session's Secret");
    assert_eq!(secret["stringData"]["env.ANTHROPIC_API_KEY"], KEY);
    assert!(
        secret["stringData"]["stdin"]
            .as_str()
            .unwrap()
            .contains(TITLE_TOKEN)
    );
    drop(d);
}

/// A dispatch rule's settings block names the image of its Jobs (`kubernetes.image`); the
/// issues it does not route keep the kind's image, and the adapter never sees the key.
#[test]
fn a_dispatch_rule_runs_its_jobs_from_its_own_image() {
    let kube = FakeKube::start();
    let p = Project::new();
    p.issues(json!([
        {"id": "101", "identifier": "K-1", "title": "Big", "state": "To Do", "priority": 1, "labels": ["big"]},
        {"id": "102", "identifier": "K-2", "title": "Small", "state": "To Do", "priority": 2}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(
        &p,
        &kube,
        "dispatch:\n  rules:\n    - name: big\n      match: {labels: [big]}\n      claude-code: {kubernetes: {image: registry.example/agents/claude-big:2}}\n",
    );
    let d = p.start();
    d.wait_until("both handed off", T, || {
        p.issue_state("101") == "Review" && p.issue_state("102") == "Review"
    });
    let image_of = |issue: &str| {
        jobs(&kube)
            .into_iter()
            .find(|j| j["metadata"]["labels"]["sortie.dev/issue"] == issue)
            .map(|j| j["spec"]["template"]["spec"]["containers"][0]["image"].clone())
    };
    assert_eq!(
        image_of("101").unwrap(),
        "registry.example/agents/claude-big:2"
    );
    assert_eq!(image_of("102").unwrap(), "registry.example/agents/claude:1");
    assert!(
        !jobs(&kube)
            .iter()
            .any(|j| j.to_string().contains("\"kubernetes\"")),
        "the key stays out of the agent's command line"
    );
    assert!(
        !d.log_text().contains("unknown_key"),
        "the key is known: {}",
        d.log_text()
    );
    assert_all_valid(&kube);
    drop(d);
}

/// A kubeconfig whose user is a client certificate and key (the fake API over HTTPS requires
/// one, and no token): the daemon and the relay present it and verify the server by the
/// kubeconfig's CA.
#[test]
fn a_session_runs_as_a_job_over_tls_with_a_client_certificate() {
    let kube = FakeKube::start_tls();
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working over tls", "input_tokens": 1, "output_tokens": 1}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(&p, &kube, "");
    let d = p.start();
    d.wait_until("handed off", T, || p.issue_state("101") == "Review");
    assert_eq!(events_with(&p, "working over tls"), 1);
    assert_eq!(
        kube.requests("POST", "/namespaces/agents/jobs").len(),
        1,
        "the Job was created over HTTPS"
    );
    assert_all_valid(&kube);
    drop(d);
}
