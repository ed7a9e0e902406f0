//! Failed database writes are not silent. While the database cannot take writes (here:
//! another connection holds SQLite's write lock, so every write of the daemon fails with
//! SQLITE_BUSY after its busy timeout), a finished run's record is kept and retried, the issue
//! is not handed off, nothing new is dispatched, `/readyz` answers 503, `health.database`
//! fails with the error and an attention item says why. Once the lock is gone the record
//! is written, then the hand-off happens and dispatching resumes. A budget read that fails
//! (a corrupted run-history page) stops dispatching rather than failing open.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

fn gated_success(gate: &std::path::Path) -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"wait_file": gate.display().to_string()}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn quick_success() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn has_attention(s: &Value, kind: &str) -> bool {
    s["attention"]
        .as_array()
        .is_some_and(|a| a.iter().any(|i| i["kind"] == kind))
}

fn runs(p: &Project, issue_id: &str) -> i64 {
    p.db_i64(&format!(
        "SELECT COUNT(*) FROM run_history WHERE issue_id = '{issue_id}'"
    ))
}

#[test]
fn a_run_finished_while_writes_fail_is_recorded_then_handed_off_after_recovery() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "D-1", "title": "First", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "D-2", "title": "Second", "state": "To Do", "priority": 2}
    ]));
    let gate = p.path("gate");
    p.scenario("D-1", &gated_success(&gate));
    p.scenario("D-2", &quick_success());
    p.fake_agent_workflow("  max_concurrent_agents: 1", "");
    let d = p.start();
    d.wait_state("D-1 running", Duration::from_secs(20), |s| {
        s["running"][0]["issue_identifier"] == "D-1"
    });

    // Another connection takes the write lock: the daemon's writes now fail.
    let blocker = rusqlite::Connection::open(p.db()).expect("open db");
    blocker
        .busy_timeout(Duration::from_secs(20))
        .expect("busy timeout");
    blocker
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("take the write lock");
    std::fs::write(&gate, "go").expect("open the gate");

    let s = d.wait_state(
        "database check failing with an attention item",
        Duration::from_secs(40),
        |s| s["health"]["database"]["status"] == "fail" && has_attention(s, "database_failed"),
    );
    let error = s["health"]["database"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("locked") || error.contains("busy"),
        "the database's own error is served: {error}"
    );
    let item = s["attention"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["kind"] == "database_failed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(item["severity"], "critical");
    assert_eq!(d.get("/readyz").status, 503);
    assert_eq!(d.get("/readyz").json()["checks"]["database"], "fail");

    // The run ended, yet nothing is handed off and D-2 is not dispatched, over several ticks.
    d.wait_until("D-1's session ended", Duration::from_secs(20), || {
        p.log().contains("worker exiting\" issue_id=1")
    });
    let ticks = |log: &str| log.matches("tick completed").count();
    let seen = ticks(&p.log());
    d.wait_until("three more ticks", Duration::from_secs(60), || {
        ticks(&p.log()) >= seen + 3
    });
    assert_eq!(
        p.issue_state("1"),
        "To Do",
        "not handed off while unrecorded"
    );
    let s = d.state();
    assert_eq!(s["counts"]["running"], 0, "nothing new dispatched");
    assert!(!p.log().contains("dispatching issue_id=2"));
    assert_eq!(runs(&p, "1"), 0);

    // The database takes writes again: the kept record is written, then the hand-off.
    blocker.execute_batch("ROLLBACK").expect("release the lock");
    drop(blocker);
    wait_for("D-1 handed off", Duration::from_secs(60), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    assert_eq!(p.run_statuses("1"), vec!["succeeded".to_string()]);
    wait_for(
        "D-2 dispatched and handed off",
        Duration::from_secs(60),
        || (p.issue_state("2") == "Review").then_some(()),
    );
    let s = d.wait_state("database check passes", Duration::from_secs(20), |s| {
        s["health"]["database"]["status"] == "pass" && !has_attention(s, "database_failed")
    });
    assert_eq!(s["counts"]["attention"], 0);
    assert_eq!(d.get("/readyz").status, 200);
    assert_eq!(runs(&p, "2"), 1);
}

/// Overwrites the root page of `run_history` with garbage (the daemon is stopped).
fn corrupt_run_history(p: &Project) {
    let (page_size, root): (i64, i64) = {
        let c = rusqlite::Connection::open(p.db()).expect("open db");
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("checkpoint");
        let page_size = c
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("page size");
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'run_history'",
                [],
                |r| r.get(0),
            )
            .expect("root page");
        (page_size, root)
    };
    let mut bytes = std::fs::read(p.db()).expect("read db");
    let start = (page_size * (root - 1)) as usize;
    for b in &mut bytes[start..start + page_size as usize] {
        *b = 0xA5;
    }
    std::fs::write(p.db(), bytes).expect("write db");
}

#[test]
fn a_failing_budget_read_stops_dispatch_instead_of_failing_open() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "C-1", "title": "First", "state": "To Do", "priority": 1}
    ]));
    p.scenario("default", &quick_success());
    p.fake_agent_workflow("  max_sessions: 5", "");
    let mut d = p.start();
    wait_for("C-1 handed off", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    assert_eq!(d.terminate(), Some(0));

    corrupt_run_history(&p);
    p.issues(json!([
        {"id": "1", "identifier": "C-1", "title": "First", "state": "Review", "priority": 1},
        {"id": "2", "identifier": "C-2", "title": "Second", "state": "To Do", "priority": 2}
    ]));
    let d = p.start();
    let s = d.wait_state("database check failing", Duration::from_secs(20), |s| {
        s["health"]["database"]["status"] == "fail" && has_attention(s, "database_failed")
    });
    let error = s["health"]["database"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("malformed"), "the read's error: {error}");
    let ticks = |log: &str| log.matches("tick completed").count();
    let seen = ticks(&p.log());
    d.wait_until("three more ticks", Duration::from_secs(20), || {
        ticks(&p.log()) >= seen + 3
    });
    assert!(
        !p.log().contains("dispatching issue_id=2"),
        "no dispatch while budgets cannot be read"
    );
    assert_eq!(d.state()["counts"]["running"], 0);
    assert_eq!(p.issue_state("2"), "To Do");
    assert_eq!(d.get("/readyz").status, 503);
}
