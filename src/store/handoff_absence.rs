//! Each issue's count of withheld handoffs in a row (`handoff_absence`), so the ceiling that
//! parks an issue counts across a restart.

use rusqlite::{Connection, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};

/// The count of `issue_id` as of `at_ms`; `0` removes the row (the sequence ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffAbsenceWrite {
    pub issue_id: String,
    pub withheld_in_a_row: u32,
    pub at_ms: i64,
}

pub(crate) fn apply(
    conn: &Connection,
    wf: &str,
    w: &HandoffAbsenceWrite,
) -> Result<(), StoreError> {
    if w.withheld_in_a_row == 0 {
        bind::execute(
            conn,
            "DELETE FROM handoff_absence WHERE workflow = ?1 AND issue_id = ?2",
            params![wf, w.issue_id],
        )
        .ctx("delete handoff absence count")?;
        return Ok(());
    }
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO handoff_absence (workflow, issue_id, withheld_in_a_row,
             updated_at_ms)
         VALUES (?1, ?2, ?3, ?4)",
        params![wf, w.issue_id, w.withheld_in_a_row, w.at_ms],
    )
    .ctx("save handoff absence count")?;
    Ok(())
}

/// Every stored count: issue id and withheld handoffs in a row.
pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<(String, u32)>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, withheld_in_a_row FROM handoff_absence WHERE {}
             ORDER BY issue_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load handoff absence counts")?;
    let rows = stmt
        .query_map([sc.bound()], |r| Ok((r.get(0)?, r.get(1)?)))
        .ctx("load handoff absence counts")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read handoff absence count")?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_saved_replaced_and_removed_at_zero() {
        let conn = crate::store::migrate::test_db();
        let w = |n| HandoffAbsenceWrite {
            issue_id: "1".into(),
            withheld_in_a_row: n,
            at_ms: 5,
        };
        apply(&conn, "", &w(1)).unwrap_or_else(|e| panic!("{e}"));
        apply(&conn, "", &w(2)).unwrap_or_else(|e| panic!("{e}"));
        apply(&conn, "b", &w(3)).unwrap_or_else(|e| panic!("{e}"));
        let single = Scope::single();
        assert_eq!(
            load_all(&conn, &single).ok(),
            Some(vec![("1".to_string(), 2)])
        );
        assert_eq!(
            load_all(&conn, &Scope::one("b")).ok(),
            Some(vec![("1".to_string(), 3)])
        );
        apply(&conn, "", &w(0)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(load_all(&conn, &single).ok(), Some(vec![]));
        assert_eq!(load_all(&conn, &Scope::All).ok().map(|v| v.len()), Some(1));
    }
}
