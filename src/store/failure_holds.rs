//! Issues held by the failure breaker (`failure_holds`): one row per issue, so a restart keeps
//! holding an issue whose failure will not heal until a person releases it.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, InWorkflow, Scope};

/// One stored hold; `message` is already masked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FailureHoldRow {
    pub issue_id: String,
    pub identifier: String,
    pub issue_title: String,
    pub issue_url: String,
    pub issue_state: String,
    pub agent_kind: String,
    pub cause: String,
    pub classified: bool,
    pub runs: u32,
    pub message: String,
    pub since_ms: i64,
}

pub(crate) fn upsert(conn: &Connection, wf: &str, h: &FailureHoldRow) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO failure_holds (workflow, issue_id, identifier, issue_title,
             issue_url, issue_state, agent_kind, cause, classified, runs, message, since_ms)
         VALUES (:workflow, :issue_id, :identifier, :issue_title, :issue_url, :issue_state, :agent_kind,
             :cause, :classified, :runs, :message, :since_ms)",
        named_params! {
            ":workflow": wf, ":issue_id": h.issue_id, ":identifier": h.identifier,
            ":issue_title": h.issue_title,
            ":issue_url": h.issue_url, ":issue_state": h.issue_state,
            ":agent_kind": h.agent_kind, ":cause": h.cause, ":classified": h.classified,
            ":runs": h.runs, ":message": h.message, ":since_ms": h.since_ms,
        },
    )
    .ctx("save failure hold")?;
    Ok(())
}

pub(crate) fn delete(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM failure_holds WHERE workflow = ?1 AND issue_id = ?2",
        rusqlite::params![wf, issue_id],
    )
    .ctx("delete failure hold")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<FailureHoldRow>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// The scope's failure holds, each with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<FailureHoldRow>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM failure_holds WHERE {} ORDER BY since_ms, workflow, issue_id",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load failure holds")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(InWorkflow {
                workflow: r.get("workflow")?,
                row: from_row(r)?,
            })
        })
        .ctx("load failure holds")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read failure hold")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<FailureHoldRow> {
    Ok(FailureHoldRow {
        issue_id: r.get("issue_id")?,
        identifier: r.get("identifier")?,
        issue_title: r.get("issue_title")?,
        issue_url: r.get("issue_url")?,
        issue_state: r.get("issue_state")?,
        agent_kind: r.get("agent_kind")?,
        cause: r.get("cause")?,
        classified: r.get("classified")?,
        runs: r.get("runs")?,
        message: r.get("message")?,
        since_ms: r.get("since_ms")?,
    })
}
