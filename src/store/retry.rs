//! Queued retries. `due_at_ms` is absolute, so a restart resumes the exact backoff position:
//! overdue entries fire at once, future ones after the remaining time.

use rusqlite::types::{FromSql, ValueRef};
use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::json;
use super::scope::{self, InWorkflow, Scope};

use crate::domain::RetryTrigger;

/// One queued retry, with the routing frozen at the issue's first dispatch and the issue context
/// needed to explain it after a restart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RetryEntry {
    pub issue_id: String,
    pub identifier: String,
    pub display_identifier: String,
    /// One-based attempt the retry will dispatch.
    pub attempt: i64,
    /// Absolute epoch milliseconds when the retry fires.
    pub due_at_ms: i64,
    pub error: Option<String>,
    /// Agent session a continuation resumes.
    pub session_id: Option<String>,
    pub agent_kind: String,
    pub template: String,
    pub rule_name: String,
    pub chain_id: String,
    pub stage_previous: String,
    pub stage_previous_outcome: String,
    /// What scheduled it; `None` for an entry queued before this was stored, or one stored
    /// with no trigger (a reaction's continuation, which `reaction_kind` names instead).
    pub trigger: Option<RetryTrigger>,
    pub reaction_kind: String,
    pub reaction_config_key: String,
    pub issue_title: String,
    pub issue_url: String,
    pub issue_type: String,
    pub issue_labels: Vec<String>,
    pub issue_state: String,
    pub configured_model: String,
    /// When the pass was first picked up (epoch ms), if known.
    pub dispatched_at_ms: Option<i64>,
    /// A reaction retry's reaction and prompt context (JSON), so a restart keeps both.
    pub reaction_context: Option<String>,
}

impl RetryEntry {
    /// Time left until the entry fires; zero when overdue.
    pub fn remaining_ms(&self, now_ms: i64) -> i64 {
        (self.due_at_ms - now_ms).max(0)
    }
}

pub(crate) fn upsert(conn: &Connection, wf: &str, e: &RetryEntry) -> Result<(), StoreError> {
    let labels = json::encode("encode retry issue labels", &e.issue_labels)?;
    bind::execute(
        conn,
        "INSERT INTO retry_entries (workflow, issue_id, identifier, display_identifier, attempt, due_at_ms,
             error, session_id, agent_kind, template, rule_name, chain_id, stage_previous,
             stage_previous_outcome, retry_trigger, reaction_kind, reaction_config_key,
             issue_title, issue_url, issue_type, issue_labels, issue_state, configured_model,
             dispatched_at_ms, reaction_context)
         VALUES (:workflow, :issue_id, :identifier, :display_identifier, :attempt, :due_at_ms,
             :error, :session_id, :agent_kind, :template, :rule_name, :chain_id, :stage_previous,
             :stage_previous_outcome, :trigger, :reaction_kind, :reaction_config_key,
             :issue_title, :issue_url, :issue_type, :issue_labels, :issue_state, :configured_model,
             :dispatched_at_ms, :reaction_context)
         ON CONFLICT(workflow, issue_id) DO UPDATE SET
             identifier = excluded.identifier, display_identifier = excluded.display_identifier,
             attempt = excluded.attempt, due_at_ms = excluded.due_at_ms, error = excluded.error,
             session_id = excluded.session_id, agent_kind = excluded.agent_kind,
             template = excluded.template, rule_name = excluded.rule_name,
             chain_id = excluded.chain_id, stage_previous = excluded.stage_previous,
             stage_previous_outcome = excluded.stage_previous_outcome,
             retry_trigger = excluded.retry_trigger, reaction_kind = excluded.reaction_kind,
             reaction_config_key = excluded.reaction_config_key,
             issue_title = excluded.issue_title, issue_url = excluded.issue_url,
             issue_type = excluded.issue_type, issue_labels = excluded.issue_labels,
             issue_state = excluded.issue_state, configured_model = excluded.configured_model,
             dispatched_at_ms = excluded.dispatched_at_ms,
             reaction_context = excluded.reaction_context",
        named_params! {
            ":workflow": wf, ":issue_id": e.issue_id, ":identifier": e.identifier,
            ":display_identifier": e.display_identifier, ":attempt": e.attempt,
            ":due_at_ms": e.due_at_ms, ":error": e.error, ":session_id": e.session_id,
            ":agent_kind": e.agent_kind, ":template": e.template, ":rule_name": e.rule_name,
            ":chain_id": e.chain_id, ":stage_previous": e.stage_previous,
            ":stage_previous_outcome": e.stage_previous_outcome, ":trigger": e.trigger,
            ":reaction_kind": e.reaction_kind, ":reaction_config_key": e.reaction_config_key,
            ":issue_title": e.issue_title, ":issue_url": e.issue_url,
            ":issue_type": e.issue_type, ":issue_labels": labels,
            ":issue_state": e.issue_state, ":configured_model": e.configured_model,
            ":dispatched_at_ms": e.dispatched_at_ms, ":reaction_context": e.reaction_context,
        },
    )
    .ctx("save retry entry")?;
    Ok(())
}

pub(crate) fn delete(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "DELETE FROM retry_entries WHERE workflow = ?1 AND issue_id = ?2",
        rusqlite::params![wf, issue_id],
    )
    .ctx("delete retry entry")?;
    Ok(())
}

/// Every queued retry of the scope, soonest first.
pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<RetryEntry>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// [`load_all`], each entry with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<RetryEntry>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM retry_entries WHERE {} ORDER BY due_at_ms, workflow, issue_id",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load retry entries")?;
    let mut rows = stmt.query([sc.bound()]).ctx("load retry entries")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().ctx("read retry entry")? {
        out.push(InWorkflow {
            workflow: row.get("workflow").ctx("read retry entry workflow")?,
            row: from_row(row)?,
        });
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> Result<RetryEntry, StoreError> {
    let labels: String = r.get("issue_labels").ctx("read retry issue_labels")?;
    let get = |r: &Row<'_>| -> rusqlite::Result<RetryEntry> {
        Ok(RetryEntry {
            issue_id: r.get("issue_id")?,
            identifier: r.get("identifier")?,
            display_identifier: r.get("display_identifier")?,
            attempt: r.get("attempt")?,
            due_at_ms: r.get("due_at_ms")?,
            error: r.get("error")?,
            session_id: r.get("session_id")?,
            agent_kind: r.get("agent_kind")?,
            template: r.get("template")?,
            rule_name: r.get("rule_name")?,
            chain_id: r.get("chain_id")?,
            stage_previous: r.get("stage_previous")?,
            stage_previous_outcome: r.get("stage_previous_outcome")?,
            trigger: optional_word(r, "retry_trigger")?,
            reaction_kind: r.get("reaction_kind")?,
            reaction_config_key: r.get("reaction_config_key")?,
            issue_title: r.get("issue_title")?,
            issue_url: r.get("issue_url")?,
            issue_type: r.get("issue_type")?,
            issue_labels: Vec::new(),
            issue_state: r.get("issue_state")?,
            configured_model: r.get("configured_model")?,
            dispatched_at_ms: r.get("dispatched_at_ms")?,
            reaction_context: r.get("reaction_context")?,
        })
    };
    let mut e = get(r).ctx("read retry entry")?;
    e.issue_labels = json::decode("decode retry issue labels", &labels)?;
    Ok(e)
}

/// A nullable vocabulary column where an empty text, like NULL, means "none recorded".
fn optional_word<T: FromSql>(r: &Row<'_>, column: &str) -> rusqlite::Result<Option<T>> {
    match r.get_ref(column)? {
        ValueRef::Null | ValueRef::Text(b"") => Ok(None),
        _ => r.get(column).map(Some),
    }
}
