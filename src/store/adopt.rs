//! A database one workflow used alone keeps its rows under the unnamed workflow (`''`). When
//! a daemon of several workflows opens it, the workflow that ran alone adopts those rows
//! (`cli::run_many` decides which), so its retries, holds, history and budgets carry on.

use rusqlite::Connection;

use super::error::{SqlContext, StoreError};

/// What the unnamed workflow left in the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnnamedRows {
    /// Rows under `''`, every table together.
    pub rows: i64,
    /// The workflow file name its newest run recorded (`run_history.workflow_file`).
    pub workflow_file: Option<String>,
}

/// The tables keyed by workflow.
fn keyed_tables(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut st = conn
        .prepare(
            "SELECT m.name FROM sqlite_master m
             WHERE m.type = 'table'
               AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'workflow')
             ORDER BY m.name",
        )
        .ctx("list keyed tables")?;
    let names = st
        .query_map([], |r| r.get::<_, String>(0))
        .ctx("list keyed tables")?
        .collect::<Result<Vec<_>, _>>()
        .ctx("read keyed tables")?;
    Ok(names)
}

fn rows_of(conn: &Connection, tables: &[String], workflow: &str) -> Result<i64, StoreError> {
    let mut total = 0;
    for t in tables {
        let n: i64 = conn
            .query_row(
                &format!("SELECT COUNT(*) FROM \"{t}\" WHERE workflow = ?1"),
                [workflow],
                |r| r.get(0),
            )
            .ctx("count a workflow's rows")?;
        total += n;
    }
    Ok(total)
}

pub(crate) fn unnamed_rows(conn: &Connection) -> Result<UnnamedRows, StoreError> {
    let tables = keyed_tables(conn)?;
    let rows = rows_of(conn, &tables, "")?;
    let workflow_file = if rows > 0 {
        conn.query_row(
            "SELECT workflow_file FROM run_history WHERE workflow = '' AND workflow_file != ''
             ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get::<_, String>(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .ctx("read the unnamed workflow's file")?
    } else {
        None
    };
    Ok(UnnamedRows {
        rows,
        workflow_file,
    })
}

/// Moves every `''` row to `name`, in one transaction; `Ok(None)` (nothing moved) when `name`
/// already has rows of its own, which the two histories would collide with.
pub(crate) fn adopt_unnamed(conn: &Connection, name: &str) -> Result<Option<i64>, StoreError> {
    let tables = keyed_tables(conn)?;
    if rows_of(conn, &tables, name)? > 0 {
        return Ok(None);
    }
    let tx = conn
        .unchecked_transaction()
        .ctx("begin adopting the unnamed workflow")?;
    let mut moved = 0;
    for t in &tables {
        moved += super::bind::execute(
            &tx,
            &format!("UPDATE \"{t}\" SET workflow = ?1 WHERE workflow = ''"),
            &[&name as &dyn rusqlite::ToSql][..],
        )
        .ctx("adopt the unnamed workflow's rows")? as i64;
    }
    tx.commit().ctx("commit adopting the unnamed workflow")?;
    Ok(Some(moved))
}
