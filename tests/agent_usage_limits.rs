//! Provider usage limits: a refused session makes a `usage_limited` run, a `usage_limit` retry
//! due at the reset, and a `usage_limit` hold that stops every other session of the agent kind
//! until then (a poll tick one interval longer). In-process with a manual clock for the exact
//! times; through the real binary with the fake Claude Code reporting a rejected limit.

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use sortie::clock::Clock;
use sortie::domain::RetryTrigger;
use sortie::orchestrator::dispatch_pass::HoldReason;
use sortie::orchestrator::snapshot::Snapshot;

use common::Project;
use common::in_process::{START_MS, mock_orchestrator, step_until};

const T: Duration = Duration::from_secs(30);

const RESET_MS: i64 = START_MS + 60_000;

fn issue(id: &str, identifier: &str) -> String {
    format!(r#"{{"id": "{id}", "identifier": "{identifier}", "title": "t", "state": "To Do"}}"#)
}

fn issues(list: &[(&str, &str)]) -> String {
    let rows: Vec<String> = list.iter().map(|(i, k)| issue(i, k)).collect();
    format!("[{}]", rows.join(","))
}

/// The mock refuses U-1's first session for a usage limit that resets at [`RESET_MS`].
fn mock_tail(model_line: &str, limit_model: &str) -> String {
    format!(
        "mock:\n{model_line}  issues:\n    U-1:\n      failing_sessions: 1\n      failing_outcome: usage_limited\n      usage_limit_resets_at_ms: {RESET_MS}\n{limit_model}"
    )
}

fn runs_of(dir: &std::path::Path, issue_id: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(dir.join("sortie.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT status FROM run_history WHERE issue_id = ?1 ORDER BY id")
        .unwrap();
    stmt.query_map([issue_id], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn held_reason<'a>(snap: &'a Snapshot, identifier: &str) -> Option<&'a HoldReason> {
    snap.held
        .iter()
        .find(|h| h.issue.identifier == identifier)
        .map(|h| &h.reason)
}

/// Steps until the writer has committed `n` runs of `issue_id`.
fn wait_runs(
    o: &mut sortie::orchestrator::Orchestrator,
    dir: &std::path::Path,
    id: &str,
    n: usize,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while runs_of(dir, id).len() < n {
        o.step(Duration::from_millis(20));
        assert!(
            std::time::Instant::now() < deadline,
            "no run {n} of issue {id}"
        );
    }
}

#[test]
fn a_refused_session_retries_at_the_reset_and_holds_the_kind_one_poll_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = mock_orchestrator(dir.path(), &issues(&[("1", "U-1")]), &mock_tail("", ""));
    let o = &mut p.orch;
    step_until(o, "the usage_limit retry", |s| {
        s.retrying
            .iter()
            .any(|r| r.issue.identifier == "U-1" && r.trigger == RetryTrigger::UsageLimit)
    });
    let snap = o.snapshot_now();
    let retry = snap.retrying.iter().find(|r| r.issue.id == "1").unwrap();
    // The reset is a minute away, later than the 10 s failure backoff.
    assert_eq!(retry.due_at_ms, RESET_MS);
    assert_eq!(retry.attempt, 1);
    wait_runs(o, dir.path(), "1", 1);
    assert_eq!(runs_of(dir.path(), "1"), vec!["usage_limited"]);

    // A second issue of the kind appears: the next tick holds it for the limit.
    std::fs::write(
        dir.path().join("issues.json"),
        issues(&[("1", "U-1"), ("2", "U-2")]),
    )
    .unwrap();
    p.clock.advance(Duration::from_millis(1_000));
    step_until(o, "U-2 held for the usage limit", |s| {
        matches!(held_reason(s, "U-2"), Some(HoldReason::UsageLimit { .. }))
    });
    let snap = o.snapshot_now();
    assert_eq!(
        held_reason(&snap, "U-2"),
        Some(&HoldReason::UsageLimit {
            agent_kind: "mock".into(),
            resets_at_ms: RESET_MS,
            model_only: false,
            model: None,
        })
    );
    assert!(
        held_reason(&snap, "U-1").is_none(),
        "U-1 is listed as retrying"
    );
    assert!(runs_of(dir.path(), "2").is_empty());

    // At the reset the refused issue's own retry fires; a poll tick still holds U-2.
    p.clock
        .advance(Duration::from_millis((RESET_MS - p.clock.now_ms()) as u64));
    wait_runs(o, dir.path(), "1", 2);
    assert_eq!(runs_of(dir.path(), "1"), vec!["usage_limited", "succeeded"]);
    o.step(Duration::from_millis(20));
    let snap = o.snapshot_now();
    assert!(
        matches!(
            held_reason(&snap, "U-2"),
            Some(HoldReason::UsageLimit { .. })
        ),
        "a poll tick within one interval of the reset still holds: {:?}",
        held_reason(&snap, "U-2")
    );
    assert!(runs_of(dir.path(), "2").is_empty());

    // One poll interval (1 s) past the reset the hold ends and U-2 is dispatched.
    p.clock.advance(Duration::from_millis(1_000));
    wait_runs(o, dir.path(), "2", 1);
    assert_eq!(runs_of(dir.path(), "2"), vec!["succeeded"]);
    assert!(held_reason(&o.snapshot_now(), "U-2").is_none());
}

#[test]
fn a_limit_that_names_a_model_holds_the_configured_model_alone() {
    let dir = tempfile::tempdir().unwrap();
    let tail = mock_tail("  model: big\n", "      usage_limit_model: big-2026\n");
    let mut p = mock_orchestrator(dir.path(), &issues(&[("1", "U-1")]), &tail);
    let o = &mut p.orch;
    step_until(o, "the usage_limit retry", |s| {
        s.retrying
            .iter()
            .any(|r| r.trigger == RetryTrigger::UsageLimit)
    });
    std::fs::write(
        dir.path().join("issues.json"),
        issues(&[("1", "U-1"), ("2", "U-2")]),
    )
    .unwrap();
    p.clock.advance(Duration::from_millis(1_000));
    step_until(o, "U-2 held on the model", |s| {
        held_reason(s, "U-2").is_some()
    });
    assert_eq!(
        held_reason(&o.snapshot_now(), "U-2"),
        Some(&HoldReason::UsageLimit {
            agent_kind: "mock".into(),
            resets_at_ms: RESET_MS,
            model_only: true,
            model: Some("big".into()),
        })
    );

    // Another configured model is not held: U-2 dispatches before the reset.
    let wf = std::fs::read_to_string(dir.path().join("WORKFLOW.md")).unwrap();
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        wf.replace("  model: big\n", "  model: small\n"),
    )
    .unwrap();
    p.clock.advance(Duration::from_millis(1_000));
    wait_runs(o, dir.path(), "2", 1);
    assert!(p.clock.now_ms() < RESET_MS);
    assert_eq!(runs_of(dir.path(), "2"), vec!["succeeded"]);
}

#[test]
fn a_retry_of_another_issue_waits_for_the_reset() {
    let dir = tempfile::tempdir().unwrap();
    // U-2 fails its first session (retry in 10 s); U-1 is refused for a limit a minute away.
    let tail = format!("{}    U-2:\n      failing_sessions: 1\n", mock_tail("", ""));
    let mut p = mock_orchestrator(dir.path(), &issues(&[("1", "U-1"), ("2", "U-2")]), &tail);
    let o = &mut p.orch;
    step_until(o, "both retries", |s| s.retrying.len() == 2);
    let snap = o.snapshot_now();
    let u2 = snap.retrying.iter().find(|r| r.issue.id == "2").unwrap();
    assert_eq!(u2.trigger, RetryTrigger::Error);
    p.clock.advance(Duration::from_millis(
        (u2.due_at_ms - p.clock.now_ms()) as u64,
    ));
    step_until(o, "U-2's retry put back until the reset", |s| {
        s.retrying
            .iter()
            .any(|r| r.issue.id == "2" && r.trigger == RetryTrigger::Timer)
    });
    let snap = o.snapshot_now();
    let u2 = snap.retrying.iter().find(|r| r.issue.id == "2").unwrap();
    assert_eq!(u2.due_at_ms, RESET_MS);
    assert_eq!(u2.attempt, 1, "waiting for a reset is not a session");
    assert_eq!(runs_of(dir.path(), "2").len(), 1);
}

fn stored_holds(dir: &std::path::Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(dir.join("sortie.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT agent_kind, resets_at_ms FROM agent_usage_holds")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_usage_hold_survives_a_restart_until_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = mock_orchestrator(dir.path(), &issues(&[("1", "U-1")]), &mock_tail("", ""));
    step_until(&mut p.orch, "the usage_limit retry", |s| {
        s.retrying
            .iter()
            .any(|r| r.trigger == RetryTrigger::UsageLimit)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stored_holds(dir.path()).is_empty() {
        p.orch.step(Duration::from_millis(20));
        assert!(
            std::time::Instant::now() < deadline,
            "the hold was not stored"
        );
    }
    assert_eq!(
        stored_holds(dir.path()),
        vec![("mock".to_string(), RESET_MS)]
    );
    drop(p);

    // Restarted (the clock back at the start, before the reset), with a second issue.
    let mut p = mock_orchestrator(
        dir.path(),
        &issues(&[("1", "U-1"), ("2", "U-2")]),
        "mock:\n",
    );
    let o = &mut p.orch;
    step_until(o, "U-2 held by the restored hold", |s| {
        held_reason(s, "U-2").is_some()
    });
    assert_eq!(
        held_reason(&o.snapshot_now(), "U-2"),
        Some(&HoldReason::UsageLimit {
            agent_kind: "mock".into(),
            resets_at_ms: RESET_MS,
            model_only: false,
            model: None,
        })
    );
    let snap = o.snapshot_now();
    let retry = snap.retrying.iter().find(|r| r.issue.id == "1").unwrap();
    assert_eq!(
        (retry.trigger, retry.due_at_ms),
        (RetryTrigger::UsageLimit, RESET_MS)
    );
    assert!(runs_of(dir.path(), "2").is_empty());

    // One poll interval past the reset the hold ends, and its row with it.
    p.clock.advance(Duration::from_millis(
        (RESET_MS + 1_000 - p.clock.now_ms()) as u64,
    ));
    wait_runs(o, dir.path(), "2", 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !stored_holds(dir.path()).is_empty() {
        o.step(Duration::from_millis(20));
        assert!(
            std::time::Instant::now() < deadline,
            "the hold row was not deleted"
        );
    }
}

/// The metrics count the retry under its trigger and the run under its status.
#[test]
fn metrics_count_usage_limit_retries() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = mock_orchestrator(dir.path(), &issues(&[("1", "U-1")]), &mock_tail("", ""));
    step_until(&mut p.orch, "the usage_limit retry", |s| {
        s.retrying
            .iter()
            .any(|r| r.trigger == RetryTrigger::UsageLimit)
    });
    let text = p
        .handle
        .metrics
        .render(&p.orch.snapshot_now().gauge_values(START_MS));
    assert!(
        text.lines()
            .any(|l| l.starts_with("sortie_retries_total{trigger=\"usage_limit\"} 1")),
        "{text}"
    );
}

// ---- through the real binary, with the fake Claude Code ----

fn rate_limit_event(status: &str, kind: &str, resets_at_s: i64, utilization: f64) -> Value {
    json!({"emit": {"type": "rate_limit_event", "rate_limit_info": {
        "status": status, "resetsAt": resets_at_s, "rateLimitType": kind,
        "utilization": utilization}}, "turn": 1})
}

fn rfc3339(ms: i64) -> String {
    sortie::clock::rfc3339_ms(ms)
}

/// Sessions the fake agent started in `identifier`'s workspace.
fn spawns_in(p: &Project, identifier: &str) -> usize {
    let text = std::fs::read_to_string(p.path("argv.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["cwd"]
                .as_str()
                .is_some_and(|c| c.ends_with(&format!("/{identifier}")))
        })
        .count()
}

#[test]
fn the_daemon_holds_claude_code_for_a_rejected_usage_limit_and_resumes_after_the_reset() {
    let p = Project::new();
    // The issue becomes active once the scenario is written, after the daemon has started.
    p.issues(json!([{"id": "1", "identifier": "U-1", "title": "Refused", "state": "Backlog"}]));
    p.scenario("U-1", &[]);
    p.fake_agent_workflow("  max_retry_backoff_ms: 1000", "");
    let d = p.start();
    // A reset a few whole seconds ahead; the ordinary backoff (1 s here) ends earlier.
    let reset_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 5;
    let reset_ms = reset_s * 1000;
    let week_s = reset_s + 7 * 24 * 3600;
    // The first turn is refused; the retry resumes the session (turn 2: the default script).
    p.scenario(
        "U-1",
        &[
            json!({"init": {}, "turn": 1}),
            rate_limit_event("allowed", "seven_day", week_s, 0.4),
            rate_limit_event("rejected", "five_hour", reset_s, 1.0),
            json!({"result": {"subtype": "success", "is_error": true,
                "text": "Claude AI usage limit reached"}, "turn": 1}),
            json!({"exit": 1, "turn": 1}),
        ],
    );
    p.scenario(
        "U-2",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.set_issue_state("1", "To Do");
    let s = d.wait_state("the usage_limit retry", T, |s| {
        s["retrying"][0]["trigger"] == "usage_limit"
    });
    let retry = &s["retrying"][0];
    assert_eq!(retry["issue_identifier"], "U-1");
    assert_eq!(retry["due_at"], rfc3339(reset_ms));
    assert_eq!(p.run_statuses("1"), vec!["usage_limited"]);
    let runs = d.get("/api/v1/runs?status=usage_limited").json();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs["runs"][0]["status"], "usage_limited");

    // Windows of every limit the agent reported, shortest first.
    let limits = &s["rate_limits"]["claude-code"];
    let labels: Vec<&str> = limits["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, vec!["5-hour limit", "Weekly limit"], "{limits}");
    assert_eq!(limits["windows"][0]["status"], "exhausted");
    assert_eq!(limits["windows"][0]["resets_at"], rfc3339(reset_ms));
    assert_eq!(limits["windows"][1]["status"], "allowed");
    assert_eq!(limits["windows"][1]["used_percent"], 40.0);

    // Another issue of the kind is held until the reset.
    p.issues(json!([
        {"id": "1", "identifier": "U-1", "title": "Refused", "state": "To Do"},
        {"id": "2", "identifier": "U-2", "title": "Waits", "state": "To Do"}
    ]));
    let s = d.wait_state("U-2 held for the usage limit", T, |s| {
        s["held"][0]["issue_identifier"] == "U-2"
    });
    let hold = &s["held"][0]["hold"];
    assert_eq!(hold["reason"], "usage_limit");
    assert_eq!(hold["agent_kind"], "claude-code");
    assert_eq!(hold["resets_at"], rfc3339(reset_ms));
    assert!(hold.get("model_only").is_none(), "{hold}");
    assert_eq!(spawns_in(&p, "U-2"), 0);

    // After the reset both run.
    d.wait_until("U-1 retried and U-2 dispatched", T, || {
        p.run_statuses("1").len() == 2 && p.run_statuses("2").len() == 1
    });
    assert_eq!(p.run_statuses("1"), vec!["usage_limited", "succeeded"]);
    assert_eq!(p.run_statuses("2"), vec!["succeeded"]);
    let started: Vec<String> = {
        let conn = p.db_conn();
        let mut st = conn
            .prepare(
                "SELECT started_at FROM run_history
                 WHERE issue_id = '2' OR (issue_id = '1' AND status = 'succeeded')",
            )
            .unwrap();
        st.query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    for at in started {
        let at: jiff::Timestamp = at.parse().unwrap();
        assert!(
            at.as_millisecond() >= reset_ms,
            "a session started at {at}, before the reset"
        );
    }
    let metrics = d.get("/metrics").body;
    assert!(
        metrics.contains("sortie_retries_total{trigger=\"usage_limit\"} 1"),
        "{metrics}"
    );
    // The reset window has passed: only the weekly one is left.
    let s = d.state();
    let windows = s["rate_limits"]["claude-code"]["windows"]
        .as_array()
        .unwrap();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0]["label"], "Weekly limit");
}
