//! Usage-limit holds on a whole agent kind (`agent_usage_holds`): one row per kind and model
//! scope, so a restart before the reset starts no session the provider would refuse.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, InWorkflow, Scope};

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
pub(crate) fn upsert(conn: &Connection, wf: &str, h: &UsageHoldRow) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT INTO agent_usage_holds (workflow, agent_kind, model_only, model, resets_at_ms,
             since_ms)
         VALUES (:workflow, :agent_kind, :model_only, :model, :resets_at_ms, :since_ms)
         ON CONFLICT (workflow, agent_kind, model_only, model) DO UPDATE SET
             resets_at_ms = MAX(resets_at_ms, excluded.resets_at_ms)",
        named_params! {
            ":workflow": wf, ":agent_kind": h.agent_kind, ":model_only": h.model_only,
            ":model": h.model,
            ":resets_at_ms": h.resets_at_ms, ":since_ms": h.since_ms,
        },
    )
    .ctx("save usage hold")?;
    Ok(())
}

/// Deletes the hold of one scope.
pub(crate) fn delete(conn: &Connection, wf: &str, h: &UsageHoldRow) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM agent_usage_holds
         WHERE workflow = ?1 AND agent_kind = ?2 AND model_only = ?3 AND model = ?4",
        rusqlite::params![wf, h.agent_kind, h.model_only, h.model],
    )
    .ctx("delete usage hold")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<UsageHoldRow>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// The scope's usage holds, each with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<UsageHoldRow>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM agent_usage_holds WHERE {}
             ORDER BY agent_kind, model_only, model, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load usage holds")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(InWorkflow {
                workflow: r.get("workflow")?,
                row: from_row(r)?,
            })
        })
        .ctx("load usage holds")?;
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
