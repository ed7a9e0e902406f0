//! Usage-limit holds on a whole agent kind (`agent_usage_holds`): one row per kind and model
//! scope, so a restart before the reset starts no session the provider would refuse.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};

/// One stored hold. `model` is `""` for a hold on every model and for the runtime's default
/// model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageHoldRow {
    pub agent_kind: String,
    pub model_only: bool,
    pub model: String,
    pub resets_at_ms: i64,
    pub since_ms: i64,
}

/// Saves a hold; one already stored for the scope keeps the later reset and its start.
pub(crate) fn upsert(conn: &Connection, h: &UsageHoldRow) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT INTO agent_usage_holds (agent_kind, model_only, model, resets_at_ms, since_ms)
         VALUES (:agent_kind, :model_only, :model, :resets_at_ms, :since_ms)
         ON CONFLICT (agent_kind, model_only, model) DO UPDATE SET
             resets_at_ms = MAX(resets_at_ms, excluded.resets_at_ms)",
        named_params! {
            ":agent_kind": h.agent_kind, ":model_only": h.model_only, ":model": h.model,
            ":resets_at_ms": h.resets_at_ms, ":since_ms": h.since_ms,
        },
    )
    .ctx("save usage hold")?;
    Ok(())
}

/// Deletes the hold of one scope.
pub(crate) fn delete(conn: &Connection, h: &UsageHoldRow) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM agent_usage_holds
         WHERE agent_kind = ?1 AND model_only = ?2 AND model = ?3",
        rusqlite::params![h.agent_kind, h.model_only, h.model],
    )
    .ctx("delete usage hold")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection) -> Result<Vec<UsageHoldRow>, StoreError> {
    let mut stmt = conn
        .prepare("SELECT * FROM agent_usage_holds ORDER BY agent_kind, model_only, model")
        .ctx("prepare load usage holds")?;
    let rows = stmt.query_map([], from_row).ctx("load usage holds")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read usage hold")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<UsageHoldRow> {
    Ok(UsageHoldRow {
        agent_kind: r.get("agent_kind")?,
        model_only: r.get("model_only")?,
        model: r.get("model")?,
        resets_at_ms: r.get("resets_at_ms")?,
        since_ms: r.get("since_ms")?,
    })
}
