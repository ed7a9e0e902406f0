//! Parked issues: issues Sortie stopped dispatching until a person acts (the agent reported
//! itself blocked, or handoffs kept going missing). Restored at startup.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::json;
use super::scope::{self, InWorkflow, Scope};

use crate::domain::ParkReason;

/// One parked issue. There is no `Default`: a park always has a reason, so
/// [`ParkedIssue::new`] takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedIssue {
    pub issue_id: String,
    pub identifier: String,
    pub reason: ParkReason,
    pub label: String,
    pub label_applied: bool,
    pub parked_state: String,
    /// Cut to whole seconds when stored.
    pub parked_at_ms: i64,
    pub issue_title: String,
    pub issue_url: String,
    pub issue_type: String,
    pub issue_labels: Vec<String>,
    pub run_id: Option<i64>,
    pub rule_name: String,
    pub agent_kind: String,
    pub configured_model: String,
    pub dispatched_at_ms: Option<i64>,
}

impl ParkedIssue {
    /// A park of `issue_id` for `reason`, every other field unset.
    pub fn new(issue_id: impl Into<String>, reason: ParkReason) -> ParkedIssue {
        ParkedIssue {
            issue_id: issue_id.into(),
            identifier: String::new(),
            reason,
            label: String::new(),
            label_applied: false,
            parked_state: String::new(),
            parked_at_ms: 0,
            issue_title: String::new(),
            issue_url: String::new(),
            issue_type: String::new(),
            issue_labels: Vec::new(),
            run_id: None,
            rule_name: String::new(),
            agent_kind: String::new(),
            configured_model: String::new(),
            dispatched_at_ms: None,
        }
    }
}

pub(crate) fn park(conn: &Connection, wf: &str, p: &ParkedIssue) -> Result<(), StoreError> {
    let labels = json::encode("encode parked issue labels", &p.issue_labels)?;
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO parked_issues (workflow, issue_id, identifier, reason, label,
             label_applied, parked_state, parked_at_ms, issue_title, issue_url, issue_type,
             issue_labels, run_id, rule_name, agent_kind, configured_model, dispatched_at_ms)
         VALUES (:workflow, :issue_id, :identifier, :reason, :label, :label_applied, :parked_state,
             :parked_at_ms, :issue_title, :issue_url, :issue_type, :issue_labels, :run_id,
             :rule_name, :agent_kind, :configured_model, :dispatched_at_ms)",
        named_params! {
            ":workflow": wf, ":issue_id": p.issue_id, ":identifier": p.identifier,
            ":reason": p.reason,
            ":label": p.label, ":label_applied": p.label_applied,
            ":parked_state": p.parked_state,
            ":parked_at_ms": p.parked_at_ms - p.parked_at_ms.rem_euclid(1000),
            ":issue_title": p.issue_title, ":issue_url": p.issue_url,
            ":issue_type": p.issue_type, ":issue_labels": labels, ":run_id": p.run_id,
            ":rule_name": p.rule_name, ":agent_kind": p.agent_kind,
            ":configured_model": p.configured_model, ":dispatched_at_ms": p.dispatched_at_ms,
        },
    )
    .ctx("save parked issue")?;
    Ok(())
}

pub(crate) fn unpark(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM parked_issues WHERE workflow = ?1 AND issue_id = ?2",
        rusqlite::params![wf, issue_id],
    )
    .ctx("delete parked issue")?;
    Ok(())
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<ParkedIssue>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// The scope's parked issues, each with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<ParkedIssue>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM parked_issues WHERE {} ORDER BY parked_at_ms, workflow, issue_id",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load parked issues")?;
    let mut rows = stmt.query([sc.bound()]).ctx("load parked issues")?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().ctx("read parked issue")? {
        out.push(InWorkflow {
            workflow: r.get("workflow").ctx("read parked issue workflow")?,
            row: from_row(r)?,
        });
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> Result<ParkedIssue, StoreError> {
    let labels: String = r.get("issue_labels").ctx("read parked issue labels")?;
    let get = |r: &Row<'_>| -> rusqlite::Result<ParkedIssue> {
        Ok(ParkedIssue {
            issue_id: r.get("issue_id")?,
            identifier: r.get("identifier")?,
            reason: r.get("reason")?,
            label: r.get("label")?,
            label_applied: r.get("label_applied")?,
            parked_state: r.get("parked_state")?,
            parked_at_ms: r.get("parked_at_ms")?,
            issue_title: r.get("issue_title")?,
            issue_url: r.get("issue_url")?,
            issue_type: r.get("issue_type")?,
            issue_labels: Vec::new(),
            run_id: r.get("run_id")?,
            rule_name: r.get("rule_name")?,
            agent_kind: r.get("agent_kind")?,
            configured_model: r.get("configured_model")?,
            dispatched_at_ms: r.get("dispatched_at_ms")?,
        })
    };
    let mut p = get(r).ctx("read parked issue")?;
    p.issue_labels = json::decode("decode parked issue labels", &labels)?;
    Ok(p)
}
