//! Agent supervision as the orchestrator sees it, through the real binary: stall detection,
//! the per-issue token budget, the `.sortie/status` stop protocol, live reload.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Agent work", "state": "To Do", "priority": 1}]));
}

fn retry_row(p: &Project) -> Option<(String, String)> {
    if !p.db().exists() {
        return None;
    }
    p.db_conn()
        .query_row(
            "SELECT COALESCE(retry_trigger, ''), COALESCE(error, '') FROM retry_entries WHERE issue_id = '1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()
}

#[test]
fn a_stalled_agent_is_cancelled_and_retried() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("  stall_timeout_ms: 700", "");
    let _d = p.start();
    let (trigger, error) = wait_for("a stall retry", Duration::from_secs(30), || retry_row(&p));
    assert_eq!(trigger, "stall");
    assert_eq!(error, "stall timeout exceeded");
    wait_for(
        "the cancelled run recorded",
        Duration::from_secs(20),
        || (p.run_statuses("1") == vec!["cancelled".to_string()]).then_some(()),
    );
}

#[test]
fn max_tokens_stops_a_running_session_and_holds_the_issue() {
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "msg_1", "text": "one", "input_tokens": 1000, "output_tokens": 5}}),
            json!({"sleep_ms": 100}),
            json!({"assistant": {"id": "msg_2", "text": "two", "input_tokens": 1000, "output_tokens": 5}}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow("  max_tokens: 1500", "");
    let d = p.start();
    let s = d.wait_state("the token budget hold", Duration::from_secs(30), |s| {
        s["budget_exhausted"]
            .as_array()
            .is_some_and(|b| b.iter().any(|e| e["reason"] == "token_budget"))
    });
    assert_eq!(s["counts"]["running"], 0);
    assert_eq!(p.run_statuses("1"), vec!["budget_stopped"]);
    let tokens = p.db_i64("SELECT input_tokens FROM run_history WHERE issue_id = '1'");
    assert_eq!(tokens, 2000);
}

fn declaring(token: &str) -> Vec<serde_json::Value> {
    vec![
        json!({"init": {}}),
        json!({"write_file": {"path": ".sortie/status", "content": format!("{token}\nThe statement for a person.\n")}}),
        json!({"assistant": {"text": "stopping", "input_tokens": 10, "output_tokens": 2}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn agent_text(p: &Project) -> (String, String) {
    p.db_conn()
        .query_row(
            "SELECT COALESCE(declared_outcome, ''), COALESCE(agent_text, '') FROM run_history WHERE issue_id = '1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

#[test]
fn blocked_parks_the_issue_with_a_label() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &declaring("blocked"));
    p.fake_agent_workflow("  max_turns: 3", "");
    let d = p.start();
    let s = d.wait_state("the park", Duration::from_secs(30), |s| {
        s["counts"]["parked"] == 1
    });
    assert_eq!(s["parked"][0]["reason"], "agent_blocked");
    assert_eq!(s["parked"][0]["label_applied"], true);
    let issues = p.read_issues();
    assert_eq!(issues[0]["labels"], json!(["needs-human"]));
    assert_eq!(
        issues[0]["state"], "To Do",
        "a parked issue is not handed off"
    );
    assert_eq!(
        agent_text(&p),
        ("blocked".into(), "The statement for a person.".into())
    );
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);

    // The park holds: no further session while the label stays.
    d.wait_state("a later completed poll", Duration::from_secs(10), |s| {
        s["health"]["poll"]["outcome"] == "succeeded" && s["counts"]["parked"] == 1
    });
    assert_eq!(p.run_statuses("1").len(), 1);

    // A person removes the label: the park lifts and the issue is dispatched again (the
    // scripted agent declares itself blocked again, so it ends parked a second time).
    let mut v = p.read_issues();
    v[0]["labels"] = json!([]);
    p.issues(v);
    wait_for("a second run", Duration::from_secs(30), || {
        (p.run_statuses("1").len() == 2).then_some(())
    });
}

#[test]
fn needs_human_review_hands_off_and_no_change_uses_its_own_state() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "Review me", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "A-2", "title": "Nothing to do", "state": "To Do", "priority": 2}
    ]));
    p.scenario("A-1", &declaring("needs-human-review"));
    p.scenario("A-2", &declaring("no-change-needed"));
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  no_change_state: Won't Do",
        "  max_turns: 3",
        "",
    );
    let _d = p.start();
    wait_for("both moved", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review" && p.issue_state("2") == "Won't Do").then_some(())
    });
    // One turn each: the declaration ended the loop early.
    let argv = std::fs::read_to_string(p.path("argv.log")).unwrap();
    assert_eq!(argv.lines().count(), 2);
}

#[test]
fn the_workflow_reloads_live_and_a_bad_edit_keeps_the_last_good_config() {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow("  max_concurrent_agents: 3", "");
    let d = p.start();
    d.wait_state("initial config", Duration::from_secs(20), |s| {
        s["config"]["agent"]["max_concurrent_agents"] == 3
    });
    let text = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &text.replace("max_concurrent_agents: 3", "max_concurrent_agents: 7"),
    );
    d.wait_state("reloaded config", Duration::from_secs(20), |s| {
        s["config"]["agent"]["max_concurrent_agents"] == 7
    });
    p.write("WORKFLOW.md", "---\ntracker: [not, a, map\n---\n");
    let s = d.wait_state(
        "the failed reload in health",
        Duration::from_secs(20),
        |s| s["health"]["workflow"]["status"] == "fail",
    );
    assert_eq!(
        s["config"]["agent"]["max_concurrent_agents"], 7,
        "last good config kept"
    );
    assert!(
        s["health"]["workflow"]["error"]
            .as_str()
            .unwrap()
            .contains("YAML")
    );
}

#[test]
fn lifecycle_comments_are_written_to_the_tracker() {
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  comments: {on_dispatch: true, on_completion: true, on_failure: true}",
        "",
        "",
    );
    let _d = p.start();
    let comments = wait_for("two lifecycle comments", Duration::from_secs(30), || {
        let issues = p.read_issues();
        let c = issues[0]["comments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (c.len() == 2).then_some(c)
    });
    let bodies: Vec<&str> = comments
        .iter()
        .map(|c| c["body"].as_str().unwrap())
        .collect();
    assert!(
        bodies[0].starts_with("Sortie session started."),
        "{bodies:?}"
    );
    assert!(
        bodies[1].starts_with("Sortie session completed."),
        "{bodies:?}"
    );
    assert!(bodies[1].contains("Turns: 1"), "{bodies:?}");
    assert!(comments.iter().all(|c| c["author"] == "sortie"));
}

#[test]
fn turn_ending_events_carry_the_run_totals() {
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "m1", "text": "done", "input_tokens": 30, "output_tokens": 4}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    wait_for("the handoff", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let dispatch_id: String = p
        .db_conn()
        .query_row(
            "SELECT dispatch_id FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let body = d
        .get_ok(&format!("/api/v1/runs/{dispatch_id}/events"))
        .expect("run events");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let events = v["events"].as_array().expect("events array");
    let done = events
        .iter()
        .find(|e| e["event"] == "turn_completed")
        .expect("a turn_completed event");
    assert_eq!(done["usage"]["input_tokens"], 30, "{done}");
    assert_eq!(done["usage"]["output_tokens"], 4, "{done}");
    assert_eq!(done["usage"]["total_tokens"], 34, "{done}");
}
