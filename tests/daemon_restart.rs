//! Warm start through the real binary: retries keep their absolute due time across SIGKILL,
//! session budgets come from run history, aggregate counters do not reset, the database stays
//! consistent; a database from a newer sortie is refused.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "K-1", "title": "Keep going", "state": "To Do", "priority": 1}]));
}

fn failing() -> Vec<serde_json::Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "trying", "input_tokens": 40, "output_tokens": 7}}),
        json!({"result": {"subtype": "error_during_execution", "is_error": true, "text": "boom"}}),
    ]
}

fn succeeding() -> Vec<serde_json::Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 100, "output_tokens": 20}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn retry_row(p: &Project) -> Option<(i64, i64, String)> {
    if !p.db().exists() {
        return None;
    }
    p.db_conn()
        .query_row(
            "SELECT attempt, due_at_ms, COALESCE(error, '') FROM retry_entries WHERE issue_id = '1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .ok()
}

fn integrity_ok(p: &Project) {
    let ok: String = p
        .db_conn()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_retry_in_backoff_keeps_its_due_time_across_sigkill() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &failing());
    p.fake_agent_workflow("", "");
    let mut d = p.start();

    let (attempt, due, error) = wait_for("a persisted retry", Duration::from_secs(30), || {
        retry_row(&p)
    });
    let completed: i64 = p.db_i64(
        "SELECT CAST(ROUND((julianday(completed_at) - 2440587.5) * 86400000) AS INTEGER) FROM run_history WHERE issue_id = '1'",
    );
    assert_eq!(attempt, 1);
    // First failure retry: 10 s after the failed run ended, give or take the time the exit
    // took to reach the scheduler on a loaded machine (a second failure would wait 20 s).
    let delay = due - completed;
    assert!((9_000..=12_000).contains(&delay), "delay {delay} ms");
    assert!(
        error.contains("boom") || error.contains("turn_failed"),
        "{error}"
    );

    d.kill9();
    let mut d = p.start();
    // After the first tick of the new process the retry is still queued, unchanged.
    d.wait_state("a completed poll", Duration::from_secs(20), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let s = d.try_state().unwrap();
    assert_eq!(s["counts"]["retrying"], 1, "{s}");
    assert_eq!(retry_row(&p).map(|r| r.1), Some(due), "due_at changed");
    assert_eq!(p.run_statuses("1"), vec!["failed"], "the retry fired early");
    assert_eq!(d.terminate(), Some(0));
    integrity_ok(&p);
}

#[test]
fn session_budget_holds_across_restarts_and_counters_do_not_reset() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &succeeding());
    // No handoff: every successful session is followed by a continuation retry after 1 s.
    p.fake_agent_workflow_full("", "  max_sessions: 3", "");
    let mut d = p.start();
    wait_for("two sessions recorded", Duration::from_secs(30), || {
        (p.run_statuses("1").len() >= 2).then_some(())
    });
    d.kill9();
    let runs_before = p.run_statuses("1").len();
    assert_eq!(runs_before, 2, "kill came too late");
    let tokens_before = p.db_i64("SELECT input_tokens FROM aggregate_metrics");
    assert!(tokens_before > 0);

    for _restart in 0..2 {
        let mut d = p.start();
        let s = d.wait_state("the session budget hold", Duration::from_secs(30), |s| {
            s["budget_exhausted"]
                .as_array()
                .is_some_and(|b| b.iter().any(|e| e["reason"] == "session_budget"))
        });
        assert_eq!(s["counts"]["running"], 0);
        assert_eq!(
            s["counts"]["retrying"], 0,
            "no retry queued beside the hold"
        );
        assert_eq!(p.run_statuses("1").len(), 3, "exactly one more session");
        assert!(s["agent_totals"]["input_tokens"].as_u64().unwrap() as i64 >= tokens_before);
        d.kill9();
    }
    assert!(p.db_i64("SELECT input_tokens FROM aggregate_metrics") >= tokens_before);
    integrity_ok(&p);
}

#[test]
fn a_database_from_a_newer_sortie_is_refused() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &succeeding());
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    d.wait_state("a completed poll", Duration::from_secs(20), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert_eq!(d.terminate(), Some(0));
    {
        let conn = rusqlite::Connection::open(p.db()).unwrap();
        conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (999, '2030-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    }
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .arg(p.workflow())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("newer than this sortie supports"),
        "{stderr}"
    );
}

fn metric(d: &common::Daemon, name_and_labels: &str) -> f64 {
    let body = d.get_ok("/metrics").expect("metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(name_and_labels).map(str::trim))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn counters_survive_sigkill_with_a_session_running() {
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "m1", "text": "working", "input_tokens": 500, "output_tokens": 40}}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    wait_for("the live session row", Duration::from_secs(30), || {
        (p.db_i64("SELECT input_tokens FROM session_metadata WHERE dispatch_id IS NOT NULL") == 500)
            .then_some(())
    });
    let tokens_before = metric(&d, "sortie_tokens_total{type=\"input\"}");
    let dispatches_before = metric(&d, "sortie_dispatches_total{outcome=\"success\"}");
    assert_eq!((tokens_before, dispatches_before), (500.0, 1.0));
    d.kill9();

    // Nothing runs after the restart: the counters show only what was recovered.
    p.set_issue_state("1", "Backlog");
    let d = p.start();
    d.wait_state("a completed poll", Duration::from_secs(20), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert!(metric(&d, "sortie_tokens_total{type=\"input\"}") >= tokens_before);
    assert!(metric(&d, "sortie_dispatches_total{outcome=\"success\"}") >= dispatches_before);
    assert!(
        p.log()
            .contains("sessions lost with the previous process recorded in the totals")
    );
    assert_eq!(
        p.db_i64("SELECT COUNT(*) FROM session_metadata WHERE dispatch_id IS NOT NULL"),
        0
    );
}
