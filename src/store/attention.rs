//! Attention acknowledgements: a person saw an item. Kept under the item id so they survive a
//! restart; the first acknowledgement time wins.

use rusqlite::{Connection, Row, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, InWorkflow, Scope};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttentionAck {
    /// 32 lowercase hex characters.
    pub item_id: String,
    pub kind: String,
    pub acknowledged_at_ms: i64,
}

/// Stores the acknowledgement unless one exists; returns the stored row (the first one).
pub(crate) fn acknowledge(
    conn: &Connection,
    wf: &str,
    a: &AttentionAck,
) -> Result<AttentionAck, StoreError> {
    bind::execute(
        conn,
        "INSERT OR IGNORE INTO attention_acks (workflow, item_id, kind, acknowledged_at_ms)
         VALUES (?1, ?2, ?3, ?4)",
        params![wf, a.item_id, a.kind, a.acknowledged_at_ms],
    )
    .ctx("save acknowledgement")?;
    conn.query_row(
        "SELECT * FROM attention_acks WHERE workflow = ?1 AND item_id = ?2",
        [wf, &a.item_id],
        from_row,
    )
    .ctx("read acknowledgement")
}

pub(crate) fn delete(
    conn: &Connection,
    wf: &str,
    item_ids: &[String],
) -> Result<usize, StoreError> {
    let mut n = 0;
    for id in item_ids {
        n += bind::execute(
            conn,
            "DELETE FROM attention_acks WHERE workflow = ?1 AND item_id = ?2",
            params![wf, id],
        )
        .ctx("delete acknowledgement")?;
    }
    Ok(n)
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<AttentionAck>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// The scope's acknowledgements, each with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<AttentionAck>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM attention_acks WHERE {} ORDER BY item_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load acknowledgements")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(InWorkflow {
                workflow: r.get("workflow")?,
                row: from_row(r)?,
            })
        })
        .ctx("load acknowledgements")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read acknowledgement")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<AttentionAck> {
    Ok(AttentionAck {
        item_id: r.get("item_id")?,
        kind: r.get("kind")?,
        acknowledged_at_ms: r.get("acknowledged_at_ms")?,
    })
}
