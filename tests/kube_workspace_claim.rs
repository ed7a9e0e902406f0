//! `worker.kubernetes.workspace: pvc` through the real binary against the fake API server
//! (`tests/fake_kube/server.py`, which validates the claim with kubernetes-validate and keeps
//! a claim's files in a directory while it exists): the issue's claim is created once,
//! labelled with the daemon and the issue, mounted as the workspace of every turn's pod so a
//! continuation turn finds the files of the one before, prepared by `after_create` only while
//! new, and deleted with the issue's workspace, never while a Job still uses it.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::fake_kube::{FakeKube, assert_all_valid, events_with, jobs, one_issue, workflow};
use common::{Project, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// The workflow with a claim, the hook counting its runs in the workspace, and the agent
/// reading its script from there (only the hook puts it there).
fn claim_workflow(p: &Project, kube: &FakeKube, max_turns: u32) {
    workflow(
        p,
        kube,
        "    workspace: pvc\n    pvc: {size: 2Gi, storage_class: fast-ssd}\n",
    );
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    let scenario = p.path("scenarios/default.jsonl").display().to_string();
    let wf = wf
        .replace(
            &format!("FAKE_AGENT_SCENARIO: {scenario}"),
            "FAKE_AGENT_SCENARIO: .scenario",
        )
        .replace("max_turns: 1", &format!("max_turns: {max_turns}"))
        .replace(
            "agent:\n",
            &format!(
                "hooks:\n  after_create: |\n    echo ran >> .hook-runs\n    cp '{scenario}' .scenario\nagent:\n"
            ),
        );
    p.write("WORKFLOW.md", &wf);
}

fn claims(kube: &FakeKube) -> serde_json::Map<String, Value> {
    kube.state()["pvcs"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn claim_dir(kube: &FakeKube, name: &str) -> PathBuf {
    kube.dir.path().join("claims").join(name)
}

fn lines(path: PathBuf) -> usize {
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .count()
}

#[test]
fn continuation_turns_keep_their_files_on_the_issues_claim() {
    let kube = FakeKube::start();
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"sh": "echo turn >> turns.log"}),
            json!({"assistant": {"text": "found the prepared workspace", "input_tokens": 1, "output_tokens": 1}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    claim_workflow(&p, &kube, 2);
    let d = p.start();
    d.wait_until("handed off", T, || p.issue_state("101") == "Review");
    assert_eq!(
        kube.requests("POST", "/namespaces/agents/persistentvolumeclaims")
            .len(),
        1,
        "the claim is created once"
    );
    let all = claims(&kube);
    assert_eq!(all.len(), 1, "{all:#?}");
    let (name, claim) = all.iter().next().unwrap();
    let labels = &claim["metadata"]["labels"];
    assert_eq!(labels["sortie.dev/daemon"], "test-daemon");
    assert_eq!(labels["sortie.dev/issue"], "101");
    assert_eq!(claim["spec"]["storageClassName"], "fast-ssd");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "2Gi");
    assert!(
        claim["metadata"].get("ownerReferences").is_none(),
        "no Job owns the claim"
    );
    let jobs = jobs(&kube);
    assert_eq!(jobs.len(), 2, "one Job per turn");
    for j in &jobs {
        let vols = &j["spec"]["template"]["spec"]["volumes"];
        assert!(
            vols.as_array()
                .unwrap()
                .iter()
                .any(|v| v["persistentVolumeClaim"]["claimName"] == name.as_str()),
            "{vols}"
        );
    }
    let dir = claim_dir(&kube, name);
    assert_eq!(
        lines(dir.join("workspace/turns.log")),
        2,
        "both turns wrote there"
    );
    assert_eq!(
        lines(dir.join("workspace/.hook-runs")),
        1,
        "after_create ran on the new claim only"
    );
    assert!(dir.join("after-create.done").exists());
    assert!(
        !dir.join("workspace/after-create.done").exists(),
        "the marker is out of the agent's sight"
    );
    assert_eq!(events_with(&p, "found the prepared workspace"), 2);

    // A terminal issue's workspace is removed at the next start, and its claim with it.
    drop(d);
    p.set_issue_state("101", "Done");
    let d = p.start();
    wait_for("the claim is deleted", T, || {
        claims(&kube).is_empty().then_some(())
    });
    assert_eq!(
        kube.requests("DELETE", &format!("/persistentvolumeclaims/{name}"))
            .len(),
        1
    );
    assert_eq!(kube.state()["claims_deleted_in_use"], json!([]));
    assert_all_valid(&kube);
    drop(d);
}

#[test]
fn a_cancelled_issues_claim_is_deleted_once_its_job_is_gone() {
    let kube = FakeKube::start();
    kube.deletion_grace_ms(1500);
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "started", "input_tokens": 1, "output_tokens": 1}}),
            json!({"hang": true}),
        ],
    );
    claim_workflow(&p, &kube, 1);
    let d = p.start();
    wait_for("the agent's pod runs", T, || {
        let s = kube.state();
        s["pods"]
            .as_object()?
            .values()
            .any(|p| p["status"]["phase"] == "Running")
            .then_some(())
    });
    d.wait_until("the agent's first line is seen", T, || {
        events_with(&p, "started") > 0 || d.log_text().contains("started")
    });
    let name = claims(&kube).keys().next().cloned().expect("the claim");
    p.set_issue_state("101", "Done");
    wait_for("the claim is deleted", T, || {
        (claims(&kube).is_empty()
            && !kube
                .requests("DELETE", &format!("/persistentvolumeclaims/{name}"))
                .is_empty())
        .then_some(())
    });
    assert_eq!(
        kube.state()["claims_deleted_in_use"],
        json!([]),
        "the claim was deleted while its Job still ran"
    );
    assert!(jobs(&kube).is_empty());
    assert_all_valid(&kube);
    drop(d);
}
