//! Issue outcomes: how an issue's latest work ended. One per issue; a new observation replaces
//! the stored one only as the API defines (handed_off ← any; terminal ← handed_off or merged;
//! merged ← handed_off), and a new dispatch clears it.

use rusqlite::{Connection, OptionalExtension, Row, named_params};

use super::error::{SqlContext, StoreError};

use crate::domain::OutcomeKind;

pub const OUTCOME_HANDED_OFF: &str = OutcomeKind::HandedOff.as_str();
pub const OUTCOME_MERGED: &str = OutcomeKind::Merged.as_str();
pub const OUTCOME_TERMINAL: &str = OutcomeKind::Terminal.as_str();

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IssueOutcome {
    pub issue_id: String,
    /// `handed_off` | `merged` | `terminal`
    pub kind: String,
    pub observed_at_ms: i64,
    pub state: String,
    /// `auto_merge` | `merge_completion` (merged only)
    pub merge_path: String,
    pub pr_number: Option<i64>,
    pub pr_repository: String,
}

/// Whether an observation of kind `new` replaces a stored outcome of kind `stored`. A stored
/// word outside the vocabulary is always replaced; an unknown new word replaces only a
/// handed-off outcome.
pub fn replaces(stored: &str, new: &str) -> bool {
    let Ok(stored) = stored.parse::<OutcomeKind>() else {
        return true;
    };
    let new = new.parse::<OutcomeKind>().ok();
    match stored {
        OutcomeKind::HandedOff => true,
        OutcomeKind::Terminal => {
            matches!(new, Some(OutcomeKind::HandedOff | OutcomeKind::Merged))
        }
        OutcomeKind::Merged => new == Some(OutcomeKind::HandedOff),
    }
}

/// Records an observation; returns whether it was stored (false when the stored one stays).
pub(crate) fn set(conn: &Connection, o: &IssueOutcome) -> Result<bool, StoreError> {
    let stored: Option<String> = conn
        .query_row(
            "SELECT kind FROM issue_outcomes WHERE issue_id = ?1",
            [&o.issue_id],
            |r| r.get(0),
        )
        .optional()
        .ctx("read stored issue outcome")?;
    if let Some(stored) = stored
        && !replaces(&stored, &o.kind)
    {
        return Ok(false);
    }
    conn.execute(
        "INSERT OR REPLACE INTO issue_outcomes (issue_id, kind, observed_at_ms, state,
             merge_path, pr_number, pr_repository)
         VALUES (:issue_id, :kind, :observed_at_ms, :state, :merge_path, :pr_number,
             :pr_repository)",
        named_params! {
            ":issue_id": o.issue_id, ":kind": o.kind, ":observed_at_ms": o.observed_at_ms,
            ":state": o.state, ":merge_path": o.merge_path, ":pr_number": o.pr_number,
            ":pr_repository": o.pr_repository,
        },
    )
    .ctx("save issue outcome")?;
    Ok(true)
}

pub(crate) fn clear(conn: &Connection, issue_id: &str) -> Result<(), StoreError> {
    conn.execute("DELETE FROM issue_outcomes WHERE issue_id = ?1", [issue_id])
        .ctx("clear issue outcome")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection) -> Result<Vec<IssueOutcome>, StoreError> {
    let mut stmt = conn
        .prepare("SELECT * FROM issue_outcomes ORDER BY issue_id")
        .ctx("prepare load issue outcomes")?;
    let rows = stmt.query_map([], from_row).ctx("load issue outcomes")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read issue outcome")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<IssueOutcome> {
    Ok(IssueOutcome {
        issue_id: r.get("issue_id")?,
        kind: r.get("kind")?,
        observed_at_ms: r.get("observed_at_ms")?,
        state: r.get("state")?,
        merge_path: r.get("merge_path")?,
        pr_number: r.get("pr_number")?,
        pr_repository: r.get("pr_repository")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacement_rules() {
        for new in [OUTCOME_HANDED_OFF, OUTCOME_MERGED, OUTCOME_TERMINAL] {
            assert!(replaces(OUTCOME_HANDED_OFF, new));
        }
        assert!(replaces(OUTCOME_TERMINAL, OUTCOME_HANDED_OFF));
        assert!(replaces(OUTCOME_TERMINAL, OUTCOME_MERGED));
        assert!(!replaces(OUTCOME_TERMINAL, OUTCOME_TERMINAL));
        assert!(replaces(OUTCOME_MERGED, OUTCOME_HANDED_OFF));
        assert!(!replaces(OUTCOME_MERGED, OUTCOME_TERMINAL));
        assert!(!replaces(OUTCOME_MERGED, OUTCOME_MERGED));
    }
}
