//! Failure backoff driven in-process with a manual clock: retries are due at 10 s, 20 s,
//! 40 s … capped, measured from the stored `due_at` — no sleeping on the clock.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie::clock::{Clock, ManualClock};
use sortie::orchestrator::{Orchestrator, OrchestratorHandle};

type Setup = (Orchestrator, Arc<ManualClock>, OrchestratorHandle);

fn setup(dir: &std::path::Path) -> Setup {
    setup_with(
        dir,
        r#"[{"id": "1", "identifier": "F-1", "title": "Always fails", "state": "To Do"}]"#,
        // The failure breaker is off: the curve is followed past three failures.
        "  max_retry_backoff_ms: 45000\n  max_same_failures: 0\nmock:\n  turn_outcomes: [failed]\n",
    )
}

/// `agent_tail` is appended after `agent.max_turns` (more agent keys, then other sections).
fn setup_with(dir: &std::path::Path, issues: &str, agent_tail: &str) -> Setup {
    let p = common::in_process::mock_orchestrator(dir, issues, agent_tail);
    (p.orch, p.clock, p.handle)
}

/// Steps the orchestrator (real-time waits for worker messages only) until a retry of the
/// given attempt is queued; returns its due time.
fn wait_retry(o: &mut Orchestrator, attempt: u32) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        o.step(Duration::from_millis(20));
        let snap = o.snapshot_now();
        if let Some(r) = snap.retrying.iter().find(|r| r.attempt == attempt) {
            return r.due_at_ms;
        }
        assert!(Instant::now() < deadline, "no retry with attempt {attempt}");
    }
}

#[test]
fn failure_retries_double_from_ten_seconds_up_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, clock, _handle) = setup(dir.path());
    let mut delays = Vec::new();
    for attempt in 1..=5 {
        let due = wait_retry(&mut o, attempt);
        delays.push(due - clock.now_ms());
        // Jump to the due time: the retry fires, the session fails again.
        clock.advance(Duration::from_millis((due - clock.now_ms()) as u64));
    }
    assert_eq!(delays, vec![10_000, 20_000, 40_000, 45_000, 45_000]);

    // The stored row (written by the writer thread, FIFO) carries the same absolute due time.
    let due = wait_retry(&mut o, 6);
    let conn = rusqlite::Connection::open(dir.path().join("sortie.db")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row: Option<(i64, i64)> = conn
            .query_row(
                "SELECT attempt, due_at_ms FROM retry_entries WHERE issue_id = '1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok();
        if row == Some((6, due)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stored row {row:?}, want (6, {due})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_retry_does_not_fire_before_its_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, clock, _handle) = setup(dir.path());
    let due = wait_retry(&mut o, 1);
    clock.advance(Duration::from_millis((due - clock.now_ms() - 1) as u64));
    for _ in 0..10 {
        o.step(Duration::from_millis(10));
    }
    let snap = o.snapshot_now();
    assert_eq!(snap.running.len(), 0);
    assert_eq!(snap.retrying.len(), 1);
    assert_eq!(snap.retrying[0].attempt, 1);
}

#[test]
fn retry_now_with_every_slot_taken_leaves_the_retry_as_it_was() {
    use sortie::orchestrator::{OrchMsg, RetryNowOutcome};
    let dir = tempfile::tempdir().unwrap();
    let (mut o, clock, handle) = setup_with(
        dir.path(),
        r#"[{"id": "1", "identifier": "F-1", "title": "Fails", "state": "To Do", "priority": 1},
            {"id": "2", "identifier": "S-2", "title": "Slow", "state": "To Do", "priority": 2}]"#,
        "  max_concurrent_agents: 1\nmock:\n  issues:\n    F-1: {turn_outcomes: [failed]}\n    S-2: {turn_delay_ms: 3600000}\n",
    );
    let due = wait_retry(&mut o, 1);
    // The next tick dispatches the slow issue into the only slot.
    clock.advance(Duration::from_millis(1000));
    let deadline = Instant::now() + Duration::from_secs(20);
    while o.snapshot_now().running.is_empty() {
        o.step(Duration::from_millis(20));
        assert!(Instant::now() < deadline, "S-2 never started");
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    handle
        .tx
        .send(OrchMsg::RetryNow {
            identifier: "F-1".into(),
            reply: tx,
        })
        .unwrap();
    o.step(Duration::from_millis(200));
    let outcome = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        outcome,
        RetryNowOutcome::StillWaiting {
            reason: "no available orchestrator slots".into(),
            due_at_ms: due
        }
    );
    let snap = o.snapshot_now();
    assert_eq!(snap.retrying.len(), 1);
    assert_eq!(
        (snap.retrying[0].attempt, snap.retrying[0].due_at_ms),
        (1, due)
    );
}
