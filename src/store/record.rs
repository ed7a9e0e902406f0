//! Recording a finished run: its history row, its events (with retention pruning), the
//! aggregate increments and optionally its session row, all in ONE transaction, so a crash
//! either keeps all of it or none of it and counters never drift from history.

use rusqlite::Connection;

use super::aggregates;
use super::error::{SqlContext, StoreError};
use super::events::{self, EventLimits, PruneReport, StoredEvent};
use super::runs::{self, RunRecord};
use super::sessions::{self, SessionMeta};

/// Everything written when a run finishes.
#[derive(Debug, Clone, PartialEq)]
pub struct RunWrite {
    pub run: RunRecord,
    /// The run's kept events, oldest first (stored under `run.dispatch_id`).
    pub events: Vec<StoredEvent>,
    /// The session row to store with the exit (exit type set, dispatch id cleared).
    pub session: Option<SessionMeta>,
}

/// What `record_run` committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordOutcome {
    /// The new row's id (API `run_id`).
    pub run_id: i64,
    /// False when the events could not be written with the row and wait for a retry.
    pub events_stored: bool,
    pub pruned: PruneReport,
}

/// One transaction: run row (+ events and pruning when `with_events`) + aggregates + session.
pub(crate) fn record(
    conn: &mut Connection,
    wf: &str,
    w: &RunWrite,
    with_events: bool,
    limits: &EventLimits,
    now_ms: i64,
) -> Result<(i64, PruneReport), StoreError> {
    let tx = conn.transaction().ctx("begin run transaction")?;
    let run_id = runs::insert(&tx, wf, &w.run)?;
    let mut pruned = PruneReport::default();
    if with_events && let Some(dispatch_id) = w.run.dispatch_id.as_deref() {
        pruned = events::write_run_events(
            &tx,
            dispatch_id,
            Some(run_id),
            w.run.completed_at_ms,
            &w.events,
            limits,
        )?;
    }
    aggregates::add_run(&tx, wf, &w.run, now_ms)?;
    if let Some(s) = &w.session {
        sessions::upsert(&tx, wf, s)?;
    }
    tx.commit().ctx("commit run transaction")?;
    Ok((run_id, pruned))
}

/// Writes events whose first write failed (their run row already exists).
pub(crate) fn write_events_only(
    conn: &mut Connection,
    dispatch_id: &str,
    run_id: Option<i64>,
    completed_at_ms: i64,
    events: &[StoredEvent],
    limits: &EventLimits,
) -> Result<PruneReport, StoreError> {
    let tx = conn.transaction().ctx("begin event retry transaction")?;
    let pruned =
        events::write_run_events(&tx, dispatch_id, run_id, completed_at_ms, events, limits)?;
    tx.commit().ctx("commit event retry transaction")?;
    Ok(pruned)
}
