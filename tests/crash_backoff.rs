//! Failures that end a run without a completed turn never come back at poll rate: a missing
//! agent command is caught before any dispatch, a signal sortie did not send and a clean exit
//! without a result line are failed runs retried after the failure backoff, and waiting for a
//! slot does not count as an attempt.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{FAKE_AGENT, Project, holds_within};
use serde_json::json;

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "k", "identifier": "K-1", "title": "Crashes", "state": "To Do"}]));
}

/// Replaces the fake agent's path in the workflow with `command`.
fn set_agent_command(p: &Project, command: &str) {
    let wf = std::fs::read_to_string(p.workflow()).expect("read workflow");
    std::fs::write(p.workflow(), wf.replace(FAKE_AGENT, command)).expect("write workflow");
}

/// How many times the fake agent was started.
fn launches(p: &Project) -> usize {
    std::fs::read_to_string(p.path("argv.log"))
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

#[test]
fn a_missing_agent_command_fails_validate_readyz_and_dispatches_nothing() {
    let p = Project::new();
    one_issue(&p);
    p.fake_agent_workflow("", "");
    let missing = p.path("bin/no-such-agent");
    let missing_text = missing.display().to_string();
    set_agent_command(&p, &missing_text);

    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .arg("validate")
        .arg(p.workflow())
        .output()
        .expect("run sortie validate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("agent_command") && stderr.contains(&missing_text),
        "{stderr}"
    );

    // The same file, not executable: named as such.
    std::fs::create_dir_all(p.path("bin")).expect("bin dir");
    std::fs::write(&missing, "#!/bin/sh\n").expect("write agent");
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .args(["validate", "--format", "json"])
        .arg(p.workflow())
        .output()
        .expect("run sortie validate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("is not executable"), "{stdout}");
    std::fs::remove_file(&missing).expect("remove agent");

    // The daemon starts, says why it is not ready, and dispatches nothing.
    let d = p.start();
    d.wait_until("readyz 503", Duration::from_secs(30), || {
        d.try_get("/readyz").is_some_and(|r| r.status == 503)
    });
    let s = d.wait_state("a preflight attention item", Duration::from_secs(30), |s| {
        s["attention"].as_array().is_some_and(|items| {
            items.iter().any(|i| {
                i["kind"] == "preflight_failed"
                    && i["evidence"]["error"]
                        .as_str()
                        .is_some_and(|e| e.contains(&missing_text))
            })
        })
    });
    assert_eq!(s["counts"]["running"], 0, "{s}");
    // Several poll intervals (200 ms) later: still no session, no run.
    let dispatched = holds_within(Duration::from_millis(1500), || {
        d.try_state()
            .is_some_and(|s| s["counts"]["running"] != 0 || s["counts"]["retrying"] != 0)
    });
    assert!(!dispatched, "{}", d.state());
    assert_eq!(launches(&p), 0);
    assert_eq!(p.db_i64("SELECT COUNT(*) FROM run_history"), 0);
    assert!(
        p.log().contains(&missing_text),
        "startup log names the path"
    );
}

/// Runs `scenario` for one issue with a short poll interval and checks that the run is
/// recorded failed and retried after the failure backoff, not at the next tick.
fn failed_and_backed_off(scenario: &[serde_json::Value], error_part: &str) {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", scenario);
    p.fake_agent_workflow("", "");
    let d = p.start();

    let s = d.wait_state("a queued retry", Duration::from_secs(30), |s| {
        s["retrying"].as_array().is_some_and(|r| r.len() == 1)
    });
    let retry = &s["retrying"][0];
    assert_eq!(retry["attempt"], 1, "{s}");
    assert_eq!(retry["trigger"], "error", "{s}");
    assert!(
        retry["error"]
            .as_str()
            .is_some_and(|e| e.contains(error_part)),
        "{s}"
    );
    assert_eq!(p.run_statuses("k"), ["failed"]);
    assert!(
        p.log()
            .contains("issue_id=k issue_identifier=K-1 attempt=1 delay_ms=10000 trigger=error"),
        "first failure retry is 10 s away"
    );
    // Ten poll intervals: no second launch (the retry is due 10 s after the failure).
    let relaunched = holds_within(Duration::from_secs(2), || launches(&p) > 1);
    assert!(
        !relaunched,
        "re-dispatched at poll rate: {} launches",
        launches(&p)
    );
    assert_eq!(launches(&p), 1);
}

#[test]
fn an_agent_killed_by_a_foreign_signal_fails_and_waits_the_backoff() {
    failed_and_backed_off(
        &[json!({"init": {}}), json!({"kill_self": "KILL"})],
        "signal 9",
    );
}

#[test]
fn a_clean_exit_without_a_result_line_fails_and_waits_the_backoff() {
    failed_and_backed_off(
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "half way", "input_tokens": 10, "output_tokens": 5}}),
            json!({"exit": 0}),
        ],
        "without a result line",
    );
}

// ---- in process, with a manual clock ------------------------------------------------------

mod in_process {
    use super::*;
    use common::in_process::{mock_orchestrator, step_until};
    use sortie::clock::{Clock, ManualClock};
    use sortie::orchestrator::Orchestrator;

    fn setup(
        dir: &std::path::Path,
        issues: &str,
        agent_tail: &str,
    ) -> (Orchestrator, Arc<ManualClock>) {
        let p = mock_orchestrator(dir, issues, agent_tail);
        (p.orch, p.clock)
    }

    /// The reference's reschedule table: a retry that finds no free slot is put back at the
    /// next attempt and waits that attempt's backoff, so a taken slot never makes it return
    /// at poll rate. Waiting starts no session, so the session budget is not spent.
    #[test]
    fn waiting_for_a_slot_advances_the_attempt_and_its_backoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut o, clock) = setup(
            dir.path(),
            r#"[{"id": "1", "identifier": "F-1", "title": "Fails", "state": "To Do", "priority": 1},
                {"id": "2", "identifier": "S-2", "title": "Slow", "state": "To Do", "priority": 2}]"#,
            "  max_concurrent_agents: 1\nmock:\n  issues:\n    F-1: {turn_outcomes: [failed]}\n    S-2: {turn_delay_ms: 3600000}\n",
        );
        step_until(&mut o, "F-1's first retry", |s| {
            s.retrying.iter().any(|r| r.attempt == 1)
        });
        // The next tick gives the only slot to the slow issue.
        clock.advance(Duration::from_millis(1000));
        step_until(&mut o, "S-2 running", |s| !s.running.is_empty());
        // F-1's retry comes due again and again while the slot is taken.
        let mut waits = Vec::new();
        for _ in 0..4 {
            let due = o.snapshot_now().retrying.first().map(|r| r.due_at_ms);
            let Some(due) = due else {
                panic!("the retry vanished")
            };
            clock.advance(Duration::from_millis(
                (due - clock.now_ms()).max(0) as u64 + 1,
            ));
            o.step(Duration::from_millis(10));
            let snap = o.snapshot_now();
            let r = snap.retrying.first().expect("put back");
            assert_eq!(r.error.as_deref(), Some("no available orchestrator slots"));
            waits.push((r.attempt, r.due_at_ms - clock.now_ms()));
        }
        assert_eq!(o.snapshot_now().running.len(), 1);
        let attempts: Vec<u32> = waits.iter().map(|w| w.0).collect();
        assert_eq!(
            attempts[0] + 3,
            attempts[3],
            "each reschedule advances: {waits:?}"
        );
        assert!(
            waits.windows(2).all(|w| w[1].1 >= w[0].1),
            "the backoff grows with the attempt: {waits:?}"
        );
    }

    #[test]
    fn a_failure_no_retry_can_fix_still_waits_the_backoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut o, clock) = setup(
            dir.path(),
            r#"[{"id": "1", "identifier": "I-1", "title": "Asks", "state": "To Do"}]"#,
            "mock:\n  turn_outcomes: [input_required]\n",
        );
        step_until(&mut o, "a retry after input_required", |s| {
            s.retrying.iter().any(|r| r.attempt == 1)
        });
        let snap = o.snapshot_now();
        assert_eq!(snap.retrying[0].due_at_ms - clock.now_ms(), 10_000);
        // Ticks before the due time dispatch nothing.
        for _ in 0..5 {
            clock.advance(Duration::from_millis(1000));
            o.step(Duration::from_millis(10));
        }
        let snap = o.snapshot_now();
        assert!(snap.running.is_empty());
        assert_eq!(snap.retrying.len(), 1);
    }
}
