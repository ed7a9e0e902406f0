//! The live session row in-process with a manual clock (issue 11): token figures reach it
//! batched (at most once per interval through the writer, not once per usage event), and a pid
//! an adapter reports that is not an agent this sortie started never names a process group to
//! stop after a crash.

mod common;

use std::time::{Duration, Instant};

use common::in_process::{InProcess, mock_orchestrator};

fn live_row(dir: &std::path::Path) -> Option<(i64, Option<String>, Option<i64>)> {
    rusqlite::Connection::open(dir.join("sortie.db"))
        .ok()?
        .query_row(
            "SELECT input_tokens, agent_pid, agent_pgid FROM session_metadata
             WHERE dispatch_id IS NOT NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .ok()
}

#[test]
fn figures_reach_the_live_row_batched_and_a_foreign_pid_is_never_recorded_as_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // The mock reports this test's own pid: a real process, but not an agent sortie started.
    let me = std::process::id();
    let InProcess {
        orch: mut o,
        clock,
        store,
        ..
    } = mock_orchestrator(
        dir,
        r#"[{"id": "1", "identifier": "L-1", "title": "Live", "state": "To Do"}]"#,
        &format!("mock:\n  agent_pid: {me}\n  turn_delay_ms: 600000\n"),
    );

    // The session's usage event has been handled in memory...
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        o.step(Duration::from_millis(20));
        let snap = o.snapshot_now();
        if snap
            .running
            .first()
            .is_some_and(|r| r.tokens.input_tokens == 100 && r.agent_pid == Some(me))
        {
            break;
        }
        assert!(Instant::now() < deadline, "no usage on the running session");
    }
    // ...but within the interval the row still holds the figures of the session's start.
    store.writer().flush().unwrap();
    let (tokens, pid, pgid) = live_row(dir).expect("the live row exists from dispatch");
    assert_eq!(tokens, 0, "a write per usage event");
    assert_eq!(pid, Some(me.to_string()));
    assert_eq!(pgid, None, "a foreign pid was recorded as a group to stop");

    // Once the interval has passed, the timer path writes them.
    clock.advance(Duration::from_millis(1_000));
    o.step(Duration::from_millis(1));
    store.writer().flush().unwrap();
    assert_eq!(live_row(dir).map(|r| r.0), Some(100));
}
