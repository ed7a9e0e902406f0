//! Live stage passes (`live_stage_passes`): the running stage sessions and budget holds the
//! daemon keeps in the database for `sortie stats`, emptied at startup and never restored;
//! and the stage events a hop decision adds to the run that reached it.

use rusqlite::{Connection, OptionalExtension, named_params, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::events::StoredEvent;
use super::json;
use super::scope::{self, Scope};

use crate::domain::stage::{LivePass, LivePassKind};

/// Saves (replaces) the issue's live pass.
pub(crate) fn save(conn: &Connection, wf: &str, p: &LivePass) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO live_stage_passes (workflow, issue_id, identifier, kind,
             chain_id, rule_name, via_rule, since_ms)
         VALUES (:workflow, :issue_id, :identifier, :kind, :chain_id, :rule_name, :via_rule,
             :since_ms)",
        named_params! {
            ":workflow": wf, ":issue_id": p.issue_id, ":identifier": p.identifier, ":kind": p.kind.as_str(),
            ":chain_id": p.chain_id, ":rule_name": p.rule_name, ":via_rule": p.via_rule,
            ":since_ms": p.since_ms,
        },
    )
    .ctx("save live stage pass")?;
    Ok(())
}

/// Drops the issue's live pass.
pub(crate) fn end(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM live_stage_passes WHERE workflow = ?1 AND issue_id = ?2",
        params![wf, issue_id],
    )
    .ctx("end live stage pass")?;
    Ok(())
}

/// Empties the workflow's passes (its start: nothing is restored from them).
pub(crate) fn clear(conn: &Connection, wf: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM live_stage_passes WHERE workflow = ?1",
        params![wf],
    )
    .ctx("empty live stage passes")?;
    Ok(())
}

/// Every live pass of the scope; `[]` on a database that predates the table.
pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<LivePass>, StoreError> {
    let present: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'live_stage_passes'",
            [],
            |r| r.get(0),
        )
        .optional()
        .ctx("look for live stage passes")?;
    if present.is_none() {
        return Ok(Vec::new());
    }
    let col = scope::column(conn, "live_stage_passes")?;
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, identifier, kind, chain_id, rule_name, via_rule, since_ms
             FROM live_stage_passes WHERE {} ORDER BY issue_id, {col}",
            scope::filter(col, 1)
        ))
        .ctx("prepare live stage passes")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .ctx("read live stage passes")?;
    let mut out = Vec::new();
    for row in rows {
        let (issue_id, identifier, kind, chain_id, rule_name, via_rule, since_ms) =
            row.ctx("read live stage pass")?;
        // A kind this build does not know is left out rather than guessed.
        let Some(kind) = LivePassKind::parse(&kind) else {
            continue;
        };
        out.push(LivePass {
            issue_id,
            identifier,
            kind,
            chain_id,
            rule_name,
            via_rule,
            since_ms,
        });
    }
    Ok(out)
}

/// Adds `event` after the newest stored event of the run `dispatch_id` (its seq is assigned
/// here). A run whose events are not stored (none kept, or their write is still being
/// retried) gets none: numbering it from 1 could collide with the events still to come.
/// Returns whether the event was stored.
pub(crate) fn append_run_event(
    conn: &Connection,
    dispatch_id: &str,
    at_ms: i64,
    event_type: &str,
    payload: &serde_json::Value,
) -> Result<bool, StoreError> {
    let last: Option<i64> = conn
        .query_row(
            "SELECT last_seq FROM agent_event_runs WHERE dispatch_id = ?1",
            params![dispatch_id],
            |r| r.get(0),
        )
        .optional()
        .ctx("read the run's last event")?;
    let Some(last) = last else {
        return Ok(false);
    };
    let mut payload = payload.clone();
    if let Some(m) = payload.as_object_mut() {
        m.insert("event".into(), event_type.into());
        m.insert("at".into(), crate::clock::rfc3339_ms(at_ms).into());
    }
    let ev = StoredEvent {
        seq: last + 1,
        at_ms,
        event_type: event_type.to_string(),
        payload,
    };
    let text = json::encode("encode stage event payload", &ev.payload)?;
    bind::execute(
        conn,
        "INSERT INTO agent_events (dispatch_id, seq, at_ms, event_type, payload)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![dispatch_id, ev.seq, ev.at_ms, ev.event_type, text],
    )
    .ctx("insert stage event")?;
    bind::execute(
        conn,
        "UPDATE agent_event_runs SET last_seq = ?2, event_count = event_count + 1,
             bytes = bytes + ?3 WHERE dispatch_id = ?1",
        params![dispatch_id, ev.seq, ev.size_bytes() as i64],
    )
    .ctx("count stage event")?;
    Ok(true)
}
