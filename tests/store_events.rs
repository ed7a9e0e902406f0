//! Event retention (age, size) and the retry schedule for failed event writes.

mod common;

use std::time::Duration;

use common::store::*;
use sortie::store::{EventLimits, Store, StoreOptions};

fn open_with_limits(
    path: &std::path::Path,
    limits: EventLimits,
    c: std::sync::Arc<sortie::clock::ManualClock>,
) -> Store {
    Store::open_with(
        path,
        c,
        StoreOptions {
            event_limits: limits,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn aged_runs_pruned_at_most_four_per_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_with_limits(&path, EventLimits::default(), clock());
    let w = store.writer();
    for i in 0..6 {
        w.record_run(run("old", &format!("OLD{i}"), T0 + i), events(2, T0, 10))
            .unwrap();
    }
    // 365 days after the old runs: not yet older than the limit.
    let out = w
        .record(sortie::store::RunWrite {
            run: run("new", "NEW0", T0 + 365 * DAY_MS),
            events: events(2, T0, 10),
            session: None,
        })
        .unwrap();
    assert_eq!(out.pruned.aged_runs, 0);
    let out = w
        .record(sortie::store::RunWrite {
            run: run("new", "NEW1", T0 + 366 * DAY_MS),
            events: events(2, T0, 10),
            session: None,
        })
        .unwrap();
    assert_eq!(out.pruned.aged_runs, 4, "at most four aged runs per write");
    let read = store.read_conn().unwrap();
    for i in 0..4 {
        assert!(
            read.run_events(&format!("OLD{i}")).unwrap().is_none(),
            "oldest first"
        );
    }
    assert!(read.has_events("OLD4").unwrap() && read.has_events("OLD5").unwrap());
    w.record_run(run("new", "NEW2", T0 + 367 * DAY_MS), events(1, T0, 10))
        .unwrap();
    assert!(!read.has_events("OLD4").unwrap() && !read.has_events("OLD5").unwrap());
    assert!(read.has_events("NEW0").unwrap() && read.has_events("NEW1").unwrap());
    // The run rows themselves are never pruned.
    assert_eq!(read.count_runs_for_issue("old").unwrap(), 6);
}

#[test]
fn size_cap_prunes_whole_runs_oldest_first_never_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let per_run: i64 = events(4, T0, 100)
        .iter()
        .map(|e| e.size_bytes() as i64)
        .sum();
    let limits = EventLimits {
        max_total_bytes: per_run * 3,
        ..Default::default()
    };
    let store = open_with_limits(&path, limits, clock());
    let w = store.writer();
    let read = store.read_conn().unwrap();
    for i in 0..5 {
        w.record_run(
            run("a", &format!("D{i}"), T0 + i * 1000),
            events(4, T0, 100),
        )
        .unwrap();
        assert!(read.stored_event_bytes().unwrap() <= per_run * 3);
    }
    let kept: Vec<bool> = (0..5)
        .map(|i| read.has_events(&format!("D{i}")).unwrap())
        .collect();
    assert_eq!(kept, vec![false, false, true, true, true]);
    // A run bigger than the whole cap is kept; everything else goes.
    w.record_run(run("a", "BIG", T0 + 10_000), events(20, T0, 100))
        .unwrap();
    assert!(read.has_events("BIG").unwrap());
    assert!((0..5).all(|i| !read.has_events(&format!("D{i}")).unwrap()));
}

#[test]
fn failed_event_write_keeps_run_and_retries_on_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    let store = open_with_limits(&path, EventLimits::default(), c.clone());
    let raw = raw(&path);
    raw.execute_batch(
        "CREATE TRIGGER inject_event_fail BEFORE INSERT ON agent_events
         BEGIN SELECT RAISE(ABORT, 'injected'); END;",
    )
    .unwrap();
    let w = store.writer();
    let out = w
        .record(sortie::store::RunWrite {
            run: run("i1", "D1", T0),
            events: events(3, T0, 10),
            session: None,
        })
        .unwrap();
    assert!(!out.events_stored);
    let read = store.read_conn().unwrap();
    assert!(
        read.run(out.run_id).unwrap().is_some(),
        "run stored without its events"
    );
    assert_eq!(
        read.aggregate_totals().unwrap().dispatches,
        1,
        "counted once"
    );
    assert!(read.run_events("D1").unwrap().is_none());

    let pending = w.pending_event_writes().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].retries, pending[0].due_at_ms), (0, T0 + 4_000));

    c.advance(Duration::from_millis(3_999));
    w.ping().unwrap();
    assert_eq!(
        w.pending_event_writes().unwrap()[0].retries,
        0,
        "not due yet"
    );
    c.advance(Duration::from_millis(1));
    w.ping().unwrap(); // first retry runs and fails
    let p = &w.pending_event_writes().unwrap()[0];
    assert_eq!((p.retries, p.due_at_ms), (1, T0 + 4_000 + 8_000));

    raw.execute_batch("DROP TRIGGER inject_event_fail").unwrap();
    c.advance(Duration::from_millis(8_000));
    w.ping().unwrap();
    assert!(w.pending_event_writes().unwrap().is_empty());
    let ev = read.run_events("D1").unwrap().unwrap();
    assert_eq!(ev.events.len(), 3);
    assert_eq!(
        read.aggregate_totals().unwrap().dispatches,
        1,
        "retry adds no second count"
    );
}

#[test]
fn failed_event_write_dropped_after_fifth_retry() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    let store = open_with_limits(&path, EventLimits::default(), c.clone());
    raw(&path)
        .execute_batch(
            "CREATE TRIGGER inject_event_fail BEFORE INSERT ON agent_events
             BEGIN SELECT RAISE(ABORT, 'injected'); END;",
        )
        .unwrap();
    let w = store.writer();
    w.record_run(run("i1", "D1", T0), events(2, T0, 10))
        .unwrap();
    let mut waits = Vec::new();
    let mut now = T0;
    while let Some(p) = w.pending_event_writes().unwrap().first().cloned() {
        waits.push(p.due_at_ms - now);
        c.advance(Duration::from_millis((p.due_at_ms - now) as u64));
        now = p.due_at_ms;
        w.ping().unwrap();
        assert!(waits.len() <= 5, "gives up after five retries");
    }
    assert_eq!(waits, vec![4_000, 8_000, 16_000, 32_000, 64_000]);
    assert!(
        store
            .read_conn()
            .unwrap()
            .run_events("D1")
            .unwrap()
            .is_none()
    );
}
