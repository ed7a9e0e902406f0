//! The live session row in-process with a manual clock (issue 11): token figures reach it
//! batched (at most once per interval through the writer, not once per usage event), and a pid
//! an adapter reports that is not an agent this sortie started never names a process group to
//! stop after a crash. Published totals count the figures the row holds, never more.

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

    // The session's usage event has been handled in memory (its request is counted)...
    let deadline = Instant::now() + Duration::from_secs(20);
    let snap = loop {
        o.step(Duration::from_millis(20));
        let snap = o.snapshot_now();
        if snap
            .running
            .first()
            .is_some_and(|r| r.api_request_count == 1 && r.agent_pid == Some(me))
        {
            break snap;
        }
        assert!(Instant::now() < deadline, "no usage on the running session");
    };
    // ...but within the interval the row still holds the figures of the session's start...
    store.writer().flush().unwrap();
    let (tokens, pid, pgid) = live_row(dir).expect("the live row exists from dispatch");
    assert_eq!(tokens, 0, "a write per usage event");
    assert_eq!(pid, Some(me.to_string()));
    assert_eq!(pgid, None, "a foreign pid was recorded as a group to stop");
    // ...and what is served is what is stored: a daemon killed now restarts with these.
    assert_eq!(
        snap.running[0].tokens.input_tokens, 100,
        "the row's own figures are live"
    );
    assert_eq!(snap.totals.input_tokens, 0, "totals served before stored");

    // Once the interval has passed, the timer path writes them; once committed, they are served.
    clock.advance(Duration::from_millis(1_000));
    o.step(Duration::from_millis(1));
    store.writer().flush().unwrap();
    assert_eq!(live_row(dir).map(|r| r.0), Some(100));
    let snap = o.snapshot_now();
    assert_eq!(snap.totals.input_tokens, 100);
}
