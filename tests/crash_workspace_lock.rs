//! The per-workspace lock (`<workspace>/.sortie/lock`): while another process holds it, the
//! issue is held with reason `workspace_locked` and no agent is launched; once it is released
//! the issue is dispatched and handed off.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn succeeding() -> Vec<serde_json::Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn idle_ticks(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("tick completed") && l.contains("dispatched=0"))
        .count()
}

#[test]
fn a_workspace_locked_elsewhere_holds_the_issue_until_released() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "W-1", "title": "Locked", "state": "To Do", "priority": 1}]));
    p.scenario("default", &succeeding());
    p.fake_agent_workflow("", "");

    // Another process (this test) holds the workspace's lock.
    let dot = p.workspace("W-1").join(".sortie");
    std::fs::create_dir_all(&dot).expect("workspace dir");
    // The workspace exists already, so `after_create` will not copy the scenario in.
    std::fs::copy(
        p.path("scenarios/default.jsonl"),
        p.workspace("W-1").join(".scenario"),
    )
    .expect("scenario");
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dot.join("lock"))
        .expect("lock file");
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).expect("flock");
    writeln!(lock, "{}", std::process::id()).expect("write pid");

    let d = p.start();
    let s = d.wait_state("W-1 held by the lock", Duration::from_secs(20), |s| {
        s["held"]
            .as_array()
            .is_some_and(|h| h.iter().any(|e| e["issue_identifier"] == "W-1"))
    });
    let held = &s["held"][0];
    assert_eq!(held["hold"]["reason"], "workspace_locked");
    let text = held["hold"]["reason_text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&std::process::id().to_string()),
        "names the holder: {text}"
    );
    // Several more ticks pass: still nothing launched.
    let seen = idle_ticks(&p.log());
    d.wait_until("three more idle ticks", Duration::from_secs(20), || {
        idle_ticks(&p.log()) >= seen + 3
    });
    assert!(!p.path("argv.log").exists(), "no agent was launched");
    let s = d.state();
    assert_eq!(s["counts"]["running"], 0);
    assert_eq!(s["held"][0]["hold"]["reason"], "workspace_locked");
    assert_eq!(p.issue_state("1"), "To Do");

    // Released: dispatched, run and handed off; the hold is gone.
    drop(lock);
    wait_for("W-1 handed off", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    assert!(p.path("argv.log").exists(), "the agent ran");
    d.wait_state("hold cleared", Duration::from_secs(10), |s| {
        s["counts"]["held"] == 0
    });
    assert_eq!(p.run_statuses("1"), vec!["succeeded".to_string()]);
}
