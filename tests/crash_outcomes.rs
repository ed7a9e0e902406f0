//! Crash safety, wrong outcomes: a park survives the in-progress transition, and a failed
//! issue refresh between turns ends the run into the failure backoff.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn ticks(p: &Project) -> usize {
    p.log().matches("tick completed").count()
}

fn launches(p: &Project) -> usize {
    std::fs::read_to_string(p.path("argv.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_blocked_issue_stays_parked_after_the_in_progress_transition() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "P-1", "title": "Needs a person", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"write_file": {"path": ".sortie/status", "content": "blocked\nI need credentials.\n"}}),
            json!({"assistant": {"text": "stopping", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  in_progress_state: In Progress",
        "  max_turns: 3",
        "",
    );
    let d = p.start();
    d.wait_state("the park", Duration::from_secs(30), |s| {
        s["counts"]["parked"] == 1
    });
    assert_eq!(p.issue_state("1"), "In Progress", "moved at dispatch");

    // Several polls later the park still holds: no second session.
    let seen = ticks(&p);
    wait_for("five more polls", Duration::from_secs(30), || {
        (ticks(&p) >= seen + 5).then_some(())
    });
    let s = d.state();
    assert_eq!(s["counts"]["parked"], 1, "park lifted: {}", s["parked"]);
    assert_eq!(launches(&p), 1, "the parked issue was dispatched again");
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);

    // A person moves the issue: the park lifts and the issue runs again.
    p.set_issue_state("1", "To Do");
    wait_for("a second session", Duration::from_secs(30), || {
        (launches(&p) >= 2).then_some(())
    });
}

#[test]
fn a_failed_issue_refresh_after_a_turn_ends_the_run_into_the_failure_backoff() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "R-1", "title": "Refresh fails", "state": "To Do", "priority": 1}
    ]));
    // The agent breaks the tracker's file during its first turn.
    let issues_file = p.path("issues.json");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working", "input_tokens": 10, "output_tokens": 2}}),
            json!({"write_file": {"path": issues_file.display().to_string(), "content": "{ not json"}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("  max_turns: 4\n  max_retry_backoff_ms: 600000", "");
    let d = p.start();
    wait_for("the run record", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    assert_eq!(p.run_statuses("1"), vec!["failed"]);
    assert_eq!(
        p.db_i64("SELECT turns_completed FROM run_history WHERE issue_id = '1'"),
        1
    );
    let error: String = p
        .db_conn()
        .query_row(
            "SELECT COALESCE(error, '') FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default();
    assert!(error.contains("tracker_refresh_failed"), "error: {error}");
    assert_eq!(launches(&p), 1, "no turn after the failed refresh");
    d.wait_state("the failure retry", Duration::from_secs(10), |s| {
        s["counts"]["retrying"] == 1
    });
}
