//! The orchestrator through the real binary: dispatch order and slot limits, handoff written
//! to the issues file, blockers, reconciliation of a terminal issue mid-run.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn issue(id: &str, ident: &str, pri: Option<i64>, created: &str) -> serde_json::Value {
    json!({"id": id, "identifier": ident, "title": format!("Issue {ident}"), "state": "To Do",
           "priority": pri, "created_at": created, "custom_field": {"keep": [1, 2]}})
}

fn slow_success(ms: u64) -> Vec<serde_json::Value> {
    vec![
        json!({"init": {}}),
        json!({"sleep_ms": ms}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        json!({"result": {"subtype": "success", "text": "ok", "input_tokens": 10, "output_tokens": 5}}),
    ]
}

#[test]
fn dispatches_in_order_one_at_a_time_and_writes_the_handoff_to_the_file() {
    let p = Project::new();
    p.issues(json!([
        issue("3", "T-3", None, "2026-01-01T00:00:00Z"),
        issue("2", "T-2", Some(2), "2026-01-01T00:00:00Z"),
        issue("1", "T-1", Some(1), "2026-02-01T00:00:00Z"),
        issue("0", "T-0", Some(1), "2026-01-15T00:00:00Z"),
    ]));
    p.scenario("default", &slow_success(300));
    p.fake_agent_workflow("  max_concurrent_agents: 1", "");
    let mut d = p.start();

    // While running, never more than one session.
    let mut max_running = 0;
    wait_for("all four handed off", Duration::from_secs(60), || {
        if let Some(s) = d.try_state() {
            max_running = max_running.max(s["counts"]["running"].as_u64().unwrap_or(0));
        }
        ["0", "1", "2", "3"]
            .iter()
            .all(|id| p.issue_state(id) == "Review")
            .then_some(())
    });
    assert_eq!(max_running, 1, "global limit exceeded");

    let conn = p.db_conn();
    let mut st = conn
        .prepare("SELECT identifier, started_at, completed_at, status FROM run_history ORDER BY id")
        .unwrap();
    let rows: Vec<(String, String, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let order: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(order, vec!["T-0", "T-1", "T-2", "T-3"]);
    for w in rows.windows(2) {
        assert!(w[1].1 >= w[0].2, "runs overlap: {w:?}");
    }
    assert!(rows.iter().all(|r| r.3 == "succeeded"));

    // Unknown fields survive the write-back.
    let issues = p.read_issues();
    assert_eq!(issues[0]["custom_field"], json!({"keep": [1, 2]}));
    assert_eq!(d.terminate(), Some(0));
}

#[test]
fn per_state_limit_holds_only_that_state() {
    let p = Project::new();
    let mut a = issue("1", "S-1", Some(1), "");
    a["state"] = json!("In Progress");
    let mut b = issue("2", "S-2", Some(2), "");
    b["state"] = json!("In Progress");
    let c = issue("3", "S-3", Some(3), "");
    p.issues(json!([a, b, c]));
    p.scenario("default", &slow_success(1500));
    p.fake_agent_workflow(
        "  max_concurrent_agents: 5\n  max_concurrent_agents_by_state: {\"in progress\": 1}",
        "",
    );
    let d = p.start();
    let s = d.wait_state("two running, one held", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 2 && s["counts"]["held"] == 1
    });
    let running: Vec<&str> = s["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["issue_identifier"].as_str().unwrap())
        .collect();
    assert_eq!(running, vec!["S-1", "S-3"]);
    let held = &s["held"][0];
    assert_eq!(held["issue_identifier"], "S-2");
    assert_eq!(held["hold"]["reason"], "agent_slots_full");
    assert_eq!(held["hold"]["slot"]["scope"], "state");
    assert_eq!(held["hold"]["slot"]["limit"], 1);
}

#[test]
fn a_blocked_issue_waits_until_its_blocker_is_terminal() {
    let p = Project::new();
    let blocker = issue("1", "B-1", Some(5), "");
    let mut blocked = issue("2", "B-2", Some(1), "");
    blocked["blocked_by"] = json!([{"id": "1", "identifier": "B-1", "state": "To Do"}]);
    p.issues(json!([blocker, blocked]));
    p.scenario("default", &slow_success(10));
    p.fake_agent_workflow("", "");
    let d = p.start();

    // The blocker runs and is handed off to Review (not terminal): B-2 stays held.
    wait_for("B-1 handed off", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let s = d.wait_state(
        "B-2 held by its blocker in Review",
        Duration::from_secs(10),
        |s| {
            s["held"].as_array().is_some_and(|h| {
                h.iter().any(|e| {
                    e["issue_identifier"] == "B-2" && e["hold"]["blockers"][0]["state"] == "Review"
                })
            })
        },
    );
    let hold = &s["held"][0]["hold"];
    assert_eq!(hold["reason"], "blocked_by");
    assert_eq!(hold["blockers"][0]["issue_identifier"], "B-1");
    assert_eq!(hold["blockers"][0]["state"], "Review");
    assert!(p.run_statuses("2").is_empty());

    // A person closes the blocker: the dependent is dispatched and handed off.
    p.set_issue_state("1", "Done");
    wait_for("B-2 handed off", Duration::from_secs(30), || {
        (p.issue_state("2") == "Review").then_some(())
    });
    assert_eq!(p.run_statuses("2"), vec!["succeeded"]);
}

#[test]
fn an_issue_moved_to_a_terminal_state_mid_run_is_stopped_and_its_workspace_removed() {
    let p = Project::new();
    p.issues(json!([issue("1", "R-1", Some(1), "")]));
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("R-1 running", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 1
    });
    // The worker makes the workspace and starts the agent after the session is listed.
    wait_for(
        "the agent started in its workspace",
        Duration::from_secs(30),
        || (p.workspace("R-1").is_dir() && p.path("argv.log").exists()).then_some(()),
    );

    p.set_issue_state("1", "Done");
    wait_for("the workspace removed", Duration::from_secs(30), || {
        (!p.workspace("R-1").exists()).then_some(())
    });
    d.wait_state("nothing running", Duration::from_secs(10), |s| {
        s["counts"]["running"] == 0 && s["counts"]["retrying"] == 0
    });
    assert_eq!(p.run_statuses("1"), vec!["cancelled"]);
    let removed = std::fs::read_to_string(p.path("markers/removed.log")).unwrap_or_default();
    assert_eq!(removed.trim(), "R-1", "before_remove did not run");
    // No fake-agent process of that run is left.
    let argv = std::fs::read_to_string(p.path("argv.log")).unwrap();
    assert_eq!(argv.lines().count(), 1);
}
