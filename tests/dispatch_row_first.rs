//! A dispatch's session row is committed before anything of its session starts, and the
//! orchestrator thread does not wait for that commit. Here another connection holds SQLite's
//! write lock, so the row cannot commit: the daemon still publishes the dispatch as running
//! (the pass that dispatched it did not wait for the disk), while no workspace and no agent
//! exist. When the row's write fails (the lock outlasts the writer's busy timeout) the session
//! is undone and retried, its agent never started; once the lock is gone the retry's row
//! commits and the agent runs.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

#[test]
fn a_session_row_that_cannot_commit_holds_its_agent_not_the_loop() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "D-1", "title": "First", "state": "Backlog", "priority": 1}
    ]));
    p.scenario(
        "D-1",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("  max_retry_backoff_ms: 1000", "");
    let d = p.start();
    d.wait_until("a first tick", Duration::from_secs(30), || {
        p.log().contains("tick completed")
    });

    // Another connection takes the write lock, then the issue becomes active.
    let blocker = rusqlite::Connection::open(p.db()).expect("open db");
    blocker
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("take the write lock");
    p.set_issue_state("1", "To Do");

    d.wait_state(
        "D-1 published as running while its row waits",
        Duration::from_secs(30),
        |s| s["running"][0]["issue_identifier"] == "D-1",
    );
    d.wait_until(
        "the row's write to fail on the lock",
        Duration::from_secs(60),
        || p.log().contains("session not recorded, agent not started"),
    );
    assert!(
        !p.workspace("D-1").exists(),
        "no workspace before the session's row is on record"
    );
    assert!(
        !p.path("argv.log").exists(),
        "no agent before the session's row is on record"
    );
    assert_eq!(p.run_statuses("1"), Vec::<String>::new());

    // The lock is gone: the retry's row commits, then its agent runs and hands off.
    blocker.execute_batch("ROLLBACK").expect("release the lock");
    drop(blocker);
    wait_for("D-1 handed off", Duration::from_secs(90), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    assert_eq!(p.run_statuses("1"), vec!["succeeded".to_string()]);
    let launches = std::fs::read_to_string(p.path("argv.log")).unwrap_or_default();
    assert_eq!(launches.lines().count(), 1, "one agent launch: {launches}");
}
