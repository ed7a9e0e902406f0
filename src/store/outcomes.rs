//! Issue outcomes: how an issue's latest work ended. One per issue; a new observation replaces
//! the stored one only as the API defines (handed_off ← any; terminal ← handed_off or merged;
//! merged ← handed_off), and a new dispatch clears it.

use rusqlite::{Connection, OptionalExtension, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};
use super::vocabulary::unknown_word;

use crate::domain::OutcomeKind;

/// How an issue's latest work ended. There is no `Default`: an outcome always has a kind, so
/// [`IssueOutcome::new`] takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueOutcome {
    pub issue_id: String,
    pub kind: OutcomeKind,
    pub observed_at_ms: i64,
    pub state: String,
    /// `auto_merge` | `merge_completion` (merged only)
    pub merge_path: String,
    pub pr_number: Option<i64>,
    pub pr_repository: String,
}

impl IssueOutcome {
    /// An outcome of `kind` for `issue_id`, every other field unset.
    pub fn new(issue_id: impl Into<String>, kind: OutcomeKind) -> IssueOutcome {
        IssueOutcome {
            issue_id: issue_id.into(),
            kind,
            observed_at_ms: 0,
            state: String::new(),
            merge_path: String::new(),
            pr_number: None,
            pr_repository: String::new(),
        }
    }
}

/// Whether an observation of kind `new` replaces a stored outcome of kind `stored`.
pub fn replaces(stored: OutcomeKind, new: OutcomeKind) -> bool {
    match stored {
        OutcomeKind::HandedOff => true,
        OutcomeKind::Terminal => match new {
            OutcomeKind::HandedOff | OutcomeKind::Merged => true,
            OutcomeKind::Terminal => false,
        },
        OutcomeKind::Merged => match new {
            OutcomeKind::HandedOff => true,
            OutcomeKind::Terminal | OutcomeKind::Merged => false,
        },
    }
}

/// Records an observation; returns whether it was stored (false when the stored one stays).
pub(crate) fn set(conn: &Connection, wf: &str, o: &IssueOutcome) -> Result<bool, StoreError> {
    let stored = conn
        .query_row(
            "SELECT kind FROM issue_outcomes WHERE workflow = ?1 AND issue_id = ?2",
            [wf, &o.issue_id],
            |r| r.get::<_, OutcomeKind>(0),
        )
        .optional();
    let replace = match stored {
        Ok(None) => true,
        Ok(Some(stored)) => replaces(stored, o.kind),
        // A word this build does not know cannot be ranked against the new observation, which
        // this build does understand, so the new one is kept.
        Err(e) if unknown_word(&e).is_some() => true,
        Err(e) => return Err(e).ctx("read stored issue outcome"),
    };
    if !replace {
        return Ok(false);
    }
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO issue_outcomes (workflow, issue_id, kind, observed_at_ms, state,
             merge_path, pr_number, pr_repository)
         VALUES (:workflow, :issue_id, :kind, :observed_at_ms, :state, :merge_path, :pr_number,
             :pr_repository)",
        named_params! {
            ":workflow": wf, ":issue_id": o.issue_id, ":kind": o.kind, ":observed_at_ms": o.observed_at_ms,
            ":state": o.state, ":merge_path": o.merge_path, ":pr_number": o.pr_number,
            ":pr_repository": o.pr_repository,
        },
    )
    .ctx("save issue outcome")?;
    Ok(true)
}

pub(crate) fn clear(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM issue_outcomes WHERE workflow = ?1 AND issue_id = ?2",
        rusqlite::params![wf, issue_id],
    )
    .ctx("clear issue outcome")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<IssueOutcome>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM issue_outcomes WHERE {} ORDER BY issue_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load issue outcomes")?;
    let rows = stmt
        .query_map([sc.bound()], from_row)
        .ctx("load issue outcomes")?;
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
        use OutcomeKind::{HandedOff, Merged, Terminal};
        for new in OutcomeKind::ALL {
            assert!(replaces(HandedOff, *new));
        }
        assert!(replaces(Terminal, HandedOff));
        assert!(replaces(Terminal, Merged));
        assert!(!replaces(Terminal, Terminal));
        assert!(replaces(Merged, HandedOff));
        assert!(!replaces(Merged, Terminal));
        assert!(!replaces(Merged, Merged));
    }
}
