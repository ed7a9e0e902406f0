//! Agent events of finished runs: written once with the run's history row, served by dispatch
//! id, pruned at write time (365 days, then 2 GiB across all runs, oldest runs first).

use rusqlite::{Connection, OptionalExtension, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::json;

/// One kept agent event. `payload` holds the type-specific members (message, session_id,
/// tool_name, tool_kind, tool_argument, duration_ms, tool_error, usage…) as a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Number within the run, from 1; dropping old events never renumbers the rest.
    pub seq: i64,
    pub at_ms: i64,
    pub event_type: String,
    pub payload: serde_json::Value,
}

impl StoredEvent {
    /// Bytes the event counts against the retention caps: its type, its JSON payload and 16
    /// bytes for seq and time. Indexes and SQLite row overhead are not counted, so
    /// the cap is a property of the events, not of the database's page layout.
    pub fn size_bytes(&self) -> usize {
        let payload = serde_json::to_string(&self.payload)
            .map(|s| s.len())
            .unwrap_or(0);
        self.event_type.len() + payload + 16
    }
}

/// The events stored for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvents {
    pub dispatch_id: String,
    pub first_seq: i64,
    pub events: Vec<StoredEvent>,
}

/// Retention limits. The defaults are Sortie's documented ones; tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Events of runs completed longer ago than this (before the run being written) are pruned.
    pub max_age_ms: i64,
    /// At most this many aged runs are removed per write.
    pub max_aged_runs_per_write: i64,
    /// All stored events together stay within this many bytes.
    pub max_total_bytes: i64,
}

impl Default for EventLimits {
    fn default() -> Self {
        EventLimits {
            max_age_ms: 365 * 24 * 60 * 60 * 1000,
            max_aged_runs_per_write: 4,
            max_total_bytes: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// What one write pruned (logged, and checked by tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub aged_runs: usize,
    pub size_runs: usize,
}

/// Stores a run's events and prunes older runs, inside the caller's transaction. A run with no
/// events stores nothing (the API then answers "not retained").
pub(crate) fn write_run_events(
    conn: &Connection,
    dispatch_id: &str,
    run_id: Option<i64>,
    completed_at_ms: i64,
    events: &[StoredEvent],
    limits: &EventLimits,
) -> Result<PruneReport, StoreError> {
    if events.is_empty() || dispatch_id.is_empty() {
        return Ok(PruneReport::default());
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO agent_events (dispatch_id, seq, at_ms, event_type, payload)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .ctx("prepare insert agent event")?;
    let mut bytes: i64 = 0;
    for e in events {
        let payload = json::encode("encode agent event payload", &e.payload)?;
        bytes += e.size_bytes() as i64;
        bind::execute_stmt(
            &mut stmt,
            params![dispatch_id, e.seq, e.at_ms, e.event_type, payload],
        )
        .ctx("insert agent event")?;
    }
    let first = events.iter().map(|e| e.seq).min().unwrap_or(0);
    let last = events.iter().map(|e| e.seq).max().unwrap_or(0);
    bind::execute(
        conn,
        "INSERT INTO agent_event_runs (dispatch_id, run_id, completed_at_ms, first_seq, last_seq,
             event_count, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            dispatch_id,
            run_id,
            completed_at_ms,
            first,
            last,
            events.len() as i64,
            bytes
        ],
    )
    .ctx("insert agent event run")?;
    prune(conn, dispatch_id, completed_at_ms, limits)
}

/// Removes up to `max_aged_runs_per_write` runs completed more than `max_age_ms` before
/// `completed_at_ms`, then whole runs oldest first until the total fits; never `keep`.
pub(crate) fn prune(
    conn: &Connection,
    keep: &str,
    completed_at_ms: i64,
    limits: &EventLimits,
) -> Result<PruneReport, StoreError> {
    let mut report = PruneReport::default();
    let aged = select_ids(
        conn,
        "SELECT dispatch_id FROM agent_event_runs
         WHERE completed_at_ms < ?1 AND dispatch_id <> ?2
         ORDER BY completed_at_ms, dispatch_id LIMIT ?3",
        params![
            completed_at_ms.saturating_sub(limits.max_age_ms),
            keep,
            limits.max_aged_runs_per_write
        ],
    )?;
    for id in &aged {
        delete_run(conn, id)?;
    }
    report.aged_runs = aged.len();

    let mut total: i64 = conn
        .query_row(
            "SELECT COALESCE(SUM(bytes), 0) FROM agent_event_runs",
            [],
            |r| r.get(0),
        )
        .ctx("sum stored event bytes")?;
    if total <= limits.max_total_bytes {
        return Ok(report);
    }
    let mut stmt = conn
        .prepare(
            "SELECT dispatch_id, bytes FROM agent_event_runs WHERE dispatch_id <> ?1
             ORDER BY completed_at_ms, dispatch_id",
        )
        .ctx("prepare oldest event runs")?;
    let mut victims = Vec::new();
    let mut rows = stmt.query([keep]).ctx("list oldest event runs")?;
    while total > limits.max_total_bytes {
        let Some(row) = rows.next().ctx("read oldest event run")? else {
            break;
        };
        let id: String = row.get(0).ctx("read event run id")?;
        let bytes: i64 = row.get(1).ctx("read event run bytes")?;
        total -= bytes;
        victims.push(id);
    }
    drop(rows);
    for id in &victims {
        delete_run(conn, id)?;
    }
    report.size_runs = victims.len();
    Ok(report)
}

fn select_ids(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(sql).ctx("prepare select event runs")?;
    let rows = stmt
        .query_map(args, |r| r.get::<_, String>(0))
        .ctx("select event runs")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read event run id")?);
    }
    Ok(out)
}

fn delete_run(conn: &Connection, dispatch_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM agent_events WHERE dispatch_id = ?1",
        rusqlite::params![dispatch_id],
    )
    .ctx("prune agent events")?;
    bind::execute(
        conn,
        "DELETE FROM agent_event_runs WHERE dispatch_id = ?1",
        rusqlite::params![dispatch_id],
    )
    .ctx("prune agent event run")?;
    Ok(())
}

/// The stored events of a run, oldest first; `None` when none are retained.
pub(crate) fn run_events(
    conn: &Connection,
    dispatch_id: &str,
) -> Result<Option<RunEvents>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT seq, at_ms, event_type, payload FROM agent_events
             WHERE dispatch_id = ?1 ORDER BY seq",
        )
        .ctx("prepare run events")?;
    let rows = stmt
        .query_map([dispatch_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .ctx("read run events")?;
    let mut events = Vec::new();
    for row in rows {
        let (seq, at_ms, event_type, payload) = row.ctx("read run event")?;
        events.push(StoredEvent {
            seq,
            at_ms,
            event_type,
            payload: json::decode("decode agent event payload", &payload)?,
        });
    }
    let Some(first_seq) = events.first().map(|e| e.seq) else {
        return Ok(None);
    };
    Ok(Some(RunEvents {
        dispatch_id: dispatch_id.to_string(),
        first_seq,
        events,
    }))
}

/// Total bytes of stored events (health, tests).
pub(crate) fn stored_bytes(conn: &Connection) -> Result<i64, StoreError> {
    conn.query_row(
        "SELECT COALESCE(SUM(bytes), 0) FROM agent_event_runs",
        [],
        |r| r.get(0),
    )
    .ctx("sum stored event bytes")
}

/// Whether any events are stored for the dispatch id.
pub(crate) fn has_events(conn: &Connection, dispatch_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM agent_event_runs WHERE dispatch_id = ?1",
            rusqlite::params![dispatch_id],
            |_| Ok(()),
        )
        .optional()
        .ctx("check stored events")?
        .is_some())
}
