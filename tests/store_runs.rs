//! Run history: atomic run + events + aggregates, budgets across restarts, durability across
//! `kill -9`, listing filters and cursor paging.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::store::*;
use sortie::domain::{OutcomeKind, RunStatus};
use sortie::store::{IssueOutcome, RuleFilter, RunFilter, RunWrite, SessionMeta, Store};

#[test]
fn run_events_aggregates_and_session_commit_together() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let mut r = run("i1", "D1", T0);
    r.review_metadata = Some(serde_json::json!({"final_verdict": "pass", "total_iterations": 2}));
    r.model_usage = Some(serde_json::json!([{"model": "model-a"}]));
    r.estimated_cost_usd = Some(0.1923);
    r.declared_outcome = Some("blocked".into());
    r.agent_text = Some("Which one?".into());
    let out = store
        .writer()
        .record(RunWrite {
            run: r.clone(),
            events: events(3, T0, 20),
            session: Some(SessionMeta {
                issue_id: "i1".into(),
                session_id: "sess-D1".into(),
                exit_type: Some("succeeded".into()),
                updated_at_ms: T0,
                ..Default::default()
            }),
        })
        .unwrap();
    assert!(out.events_stored);
    let read = store.read_conn().unwrap();
    let stored = read.run(out.run_id).unwrap().unwrap();
    r.run_id = out.run_id;
    assert_eq!(stored, r, "every column round-trips");
    let ev = read.run_events("D1").unwrap().unwrap();
    assert_eq!((ev.first_seq, ev.events.len()), (1, 3));
    assert_eq!(ev.events[2], events(3, T0, 20)[2]);
    let t = read.aggregate_totals().unwrap();
    assert_eq!(
        (
            t.input_tokens,
            t.output_tokens,
            t.total_tokens,
            t.cache_read_tokens,
            t.cache_write_tokens
        ),
        (1000, 200, 1200, 500, 40)
    );
    assert_eq!(t.dispatches, 1);
    assert_eq!(t.seconds_running, 60.0);
    assert_eq!(t.exits.get("succeeded"), Some(&1));
    assert_eq!(
        read.session("i1").unwrap().unwrap().exit_type.as_deref(),
        Some("succeeded")
    );
}

#[test]
fn failure_mid_transaction_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path, clock()).unwrap();
    let raw = raw(&path);
    // The aggregate update is the last statement of the transaction: fail it.
    raw.execute_batch(
        "CREATE TRIGGER inject_fail BEFORE INSERT ON aggregate_metrics
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let err = store
        .writer()
        .record_run(run("i1", "D1", T0), events(5, T0, 10));
    assert!(err.is_err(), "the write must fail");
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM run_history"), 0);
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM agent_events"), 0);
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM agent_event_runs"), 0);
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM aggregate_metrics"), 0);
    assert!(store.writer().pending_event_writes().unwrap().is_empty());

    raw.execute_batch("DROP TRIGGER inject_fail").unwrap();
    store
        .writer()
        .record_run(run("i1", "D1", T0), events(5, T0, 10))
        .unwrap();
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM run_history"), 1);
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM agent_events"), 5);
    assert_eq!(count(&raw, "SELECT dispatches FROM aggregate_metrics"), 1);
}

#[test]
fn unmeasured_and_ci_rows_count_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    let mut unmeasured = run("i1", "D1", T0);
    unmeasured.tokens_measured = false;
    w.record_run(unmeasured, vec![]).unwrap();
    w.record_run(run("i1", "D2", T0 + 1), vec![]).unwrap();
    let mut ci = run("i1", "", T0 + 2);
    ci.status = RunStatus::CiFailed;
    ci.dispatch_id = Some(String::new());
    (ci.input_tokens, ci.output_tokens, ci.total_tokens) = (0, 0, 0);
    (ci.cache_read_tokens, ci.cache_write_tokens) = (0, 0);
    w.record_run(ci, vec![]).unwrap();
    let read = store.read_conn().unwrap();
    assert_eq!(
        read.count_runs_for_issue("i1").unwrap(),
        2,
        "CI results are not sessions"
    );
    assert_eq!(
        read.uncached_tokens_for_issue("i1").unwrap(),
        700,
        "unmeasured adds nothing"
    );
    assert_eq!(w.count_runs_for_issue("i1").unwrap(), 2);
    let t = read.aggregate_totals().unwrap();
    assert_eq!(
        (t.dispatches, t.unmeasured_sessions, t.total_tokens),
        (2, 1, 1200)
    );
}

/// An issue that used 2 of `max_sessions: 3` has exactly one session left after each restart,
/// and the aggregate counters continue rather than reset.
#[test]
fn budgets_and_counters_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let max_sessions = 3;
    {
        let store = Store::open(&path, clock()).unwrap();
        store
            .writer()
            .record_run(run("i1", "D1", T0), vec![])
            .unwrap();
        store
            .writer()
            .record_run(run("i1", "D2", T0 + 1), vec![])
            .unwrap();
    }
    let store = Store::open(&path, clock()).unwrap();
    let used = store
        .read_conn()
        .unwrap()
        .count_runs_for_issue("i1")
        .unwrap();
    assert_eq!(max_sessions - used, 1);
    store
        .writer()
        .record_run(run("i1", "D3", T0 + 2), vec![])
        .unwrap();
    store.close().unwrap();
    let store = Store::open(&path, clock()).unwrap();
    let read = store.read_conn().unwrap();
    assert_eq!(max_sessions - read.count_runs_for_issue("i1").unwrap(), 0);
    let t = read.warm_start_snapshot().unwrap().totals;
    assert_eq!((t.dispatches, t.total_tokens), (3, 3600));
}

#[test]
fn list_runs_filters_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    for i in 0..7 {
        let issue = if i % 2 == 0 { "a" } else { "b" };
        let mut r = run(issue, &format!("D{i}"), T0 + i * DAY_MS);
        if i == 3 {
            r.rule_name = String::new();
            r.status = RunStatus::Failed;
            r.stage_target = "review".into();
        }
        w.record_run(r, vec![]).unwrap();
    }
    w.set_outcome_wait(IssueOutcome {
        observed_at_ms: T0 + 10 * DAY_MS,
        ..IssueOutcome::new("b", OutcomeKind::Merged)
    })
    .unwrap();
    let read = store.read_conn().unwrap();
    let ids = |f: &RunFilter, cursor, limit| -> (Vec<i64>, Option<i64>) {
        let p = read.list_runs(f, cursor, limit).unwrap();
        (p.runs.iter().map(|r| r.run_id).collect(), p.next_cursor)
    };
    let all = RunFilter::default();
    assert_eq!(ids(&all, None, 3), (vec![7, 6, 5], Some(5)));
    assert_eq!(ids(&all, Some(5), 3), (vec![4, 3, 2], Some(2)));
    assert_eq!(ids(&all, Some(2), 3), (vec![1], None));
    assert_eq!(ids(&all, None, 7), (vec![7, 6, 5, 4, 3, 2, 1], None));
    // A run recorded between pages does not move served runs.
    w.record_run(run("a", "D-late", T0 + 20 * DAY_MS), vec![])
        .unwrap();
    assert_eq!(ids(&all, Some(5), 3), (vec![4, 3, 2], Some(2)));

    let f = RunFilter {
        issue_identifier: Some("MT-b".into()),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![6, 4, 2]);
    let f = RunFilter {
        issue_id: Some("a".into()),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![8, 7, 5, 3, 1]);
    let f = RunFilter {
        rule: Some(RuleFilter::Unnamed),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![4]);
    let f = RunFilter {
        rule: Some(RuleFilter::Named("implement".into())),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0.len(), 7);
    let f = RunFilter {
        status: Some(RunStatus::Failed),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![4]);
    let f = RunFilter {
        stage: Some("review".into()),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![4]);
    let f = RunFilter {
        since_ms: Some(T0 + 2 * DAY_MS),
        until_ms: Some(T0 + 5 * DAY_MS),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![5, 4, 3]);
    let f = RunFilter {
        ended_since_ms: Some(T0 + 10 * DAY_MS),
        ..Default::default()
    };
    assert_eq!(ids(&f, None, 10).0, vec![6, 4, 2]);
    let f = RunFilter {
        ended_until_ms: Some(T0 + 10 * DAY_MS),
        ..Default::default()
    };
    assert!(ids(&f, None, 10).0.is_empty());
    let f = RunFilter {
        status: Some(RunStatus::Failed),
        issue_id: Some("a".into()),
        ..Default::default()
    };
    assert!(ids(&f, None, 10).0.is_empty(), "filters combine with AND");

    let groups = read.list_issue_groups(&all, None, 1).unwrap();
    assert_eq!(groups.groups, vec![("a".to_string(), 8)]);
    assert_eq!(groups.next_cursor, Some(8));
    let groups = read.list_issue_groups(&all, Some(8), 1).unwrap();
    assert_eq!(groups.groups, vec![("b".to_string(), 6)]);
    assert_eq!(groups.next_cursor, None);
}

const CHILD_ENV: &str = "SORTIE_STORE_KILL_CHILD_DB";

/// The child half of `committed_run_survives_kill_9`, run only as its subprocess: records a
/// run, reports, then blocks until killed.
#[test]
#[ignore = "subprocess of committed_run_survives_kill_9"]
fn kill_child_records_then_waits() {
    let path = std::env::var(CHILD_ENV).expect("run by committed_run_survives_kill_9");
    let store = Store::open(std::path::Path::new(&path), clock()).unwrap();
    let id = store
        .writer()
        .record_run(run("i1", "D-kill", T0), events(4, T0, 30))
        .unwrap();
    // Straight to the pipe: the test harness captures `println!`.
    let mut out = std::io::stdout();
    writeln!(out, "COMMITTED {id}").unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line); // blocks until the parent kills us
    std::process::abort();
}

#[test]
fn committed_run_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "kill_child_records_then_waits",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut committed = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        // The harness prefixes the line with the test name.
        if let Some((_, id)) = line.split_once("COMMITTED ") {
            committed = Some(id.trim().parse::<i64>().unwrap());
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run_id = committed.expect("child reported the commit");

    let store = Store::open(&path, clock()).unwrap();
    let read = store.read_conn().unwrap();
    assert_eq!(read.integrity_check().unwrap(), "ok");
    let r = read.run(run_id).unwrap().expect("run row survived");
    assert_eq!(r.dispatch_id.as_deref(), Some("D-kill"));
    assert_eq!(read.run_events("D-kill").unwrap().unwrap().events.len(), 4);
    let t = read.aggregate_totals().unwrap();
    assert_eq!((t.dispatches, t.total_tokens), (1, 1200));
}
