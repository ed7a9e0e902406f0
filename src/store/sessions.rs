//! Session metadata: the latest session of each issue, overwritten by the next one, so "what is
//! happening with this issue" survives a restart.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, InWorkflow, Scope};

/// The current session row of one issue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionMeta {
    pub issue_id: String,
    pub session_id: String,
    pub agent_pid: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub model_name: String,
    pub api_request_count: i64,
    /// Whether `api_request_count` is a measurement at all.
    pub api_requests_measured: bool,
    pub started_at_ms: Option<i64>,
    pub updated_at_ms: i64,
    /// Set by the exit write; `None` while running.
    pub exit_type: Option<String>,
    /// The dispatch whose session last wrote the row; cleared by the exit write.
    pub dispatch_id: Option<String>,
    /// The current agent process group (its leader's pid) and the leader's start time
    /// (`/proc/<pid>/stat` field 22); rewritten at each spawn (one process per turn), cleared
    /// by the exit write.
    pub agent_pgid: Option<i64>,
    pub agent_start_ticks: Option<i64>,
    /// What an interrupted session's run row needs (the row holds no other copy of them).
    pub identifier: String,
    /// Zero-based, like the orchestrator's attempt.
    pub attempt: i64,
    pub workspace: String,
    pub agent_kind: String,
    pub workflow_file: String,
    /// The sortie process that ran the session (`<pid>-<start ticks>`).
    pub sortie_instance: String,
    /// Set when a restart recorded the session as interrupted, until the warm start has
    /// stopped its processes.
    pub recovery_pending: bool,
}

pub(crate) fn upsert(conn: &Connection, wf: &str, s: &SessionMeta) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT INTO session_metadata (workflow, issue_id, session_id, agent_pid, input_tokens,
             output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, model_name,
             api_request_count, api_requests_measured, started_at_ms, updated_at_ms, exit_type,
             dispatch_id, agent_pgid, agent_start_ticks, identifier, attempt, workspace,
             agent_kind, workflow_file, sortie_instance, recovery_pending)
         VALUES (:workflow, :issue_id, :session_id, :agent_pid, :input_tokens, :output_tokens,
             :total_tokens, :cache_read_tokens, :cache_write_tokens, :model_name,
             :api_request_count, :api_requests_measured, :started_at_ms, :updated_at_ms,
             :exit_type, :dispatch_id, :agent_pgid, :agent_start_ticks, :identifier, :attempt,
             :workspace, :agent_kind, :workflow_file, :sortie_instance, :recovery_pending)
         ON CONFLICT(workflow, issue_id) DO UPDATE SET
             session_id = excluded.session_id, agent_pid = excluded.agent_pid,
             input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
             total_tokens = excluded.total_tokens,
             cache_read_tokens = excluded.cache_read_tokens,
             cache_write_tokens = excluded.cache_write_tokens,
             model_name = excluded.model_name, api_request_count = excluded.api_request_count,
             api_requests_measured = excluded.api_requests_measured,
             started_at_ms = excluded.started_at_ms, updated_at_ms = excluded.updated_at_ms,
             exit_type = excluded.exit_type, dispatch_id = excluded.dispatch_id,
             agent_pgid = excluded.agent_pgid, agent_start_ticks = excluded.agent_start_ticks,
             identifier = excluded.identifier, attempt = excluded.attempt,
             workspace = excluded.workspace, agent_kind = excluded.agent_kind,
             workflow_file = excluded.workflow_file,
             sortie_instance = excluded.sortie_instance,
             recovery_pending = excluded.recovery_pending",
        named_params! {
            ":workflow": wf, ":issue_id": s.issue_id, ":session_id": s.session_id,
            ":agent_pid": s.agent_pid,
            ":input_tokens": s.input_tokens, ":output_tokens": s.output_tokens,
            ":total_tokens": s.total_tokens, ":cache_read_tokens": s.cache_read_tokens,
            ":cache_write_tokens": s.cache_write_tokens, ":model_name": s.model_name,
            ":api_request_count": s.api_request_count,
            ":api_requests_measured": s.api_requests_measured,
            ":started_at_ms": s.started_at_ms, ":updated_at_ms": s.updated_at_ms,
            ":exit_type": s.exit_type, ":dispatch_id": s.dispatch_id,
            ":agent_pgid": s.agent_pgid, ":agent_start_ticks": s.agent_start_ticks,
            ":identifier": s.identifier, ":attempt": s.attempt, ":workspace": s.workspace,
            ":agent_kind": s.agent_kind, ":workflow_file": s.workflow_file,
            ":sortie_instance": s.sortie_instance, ":recovery_pending": s.recovery_pending,
        },
    )
    .ctx("save session metadata")?;
    Ok(())
}

/// The issue's session row (across workflows: the first workflow's by name that has one).
pub(crate) fn get(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<Option<SessionMeta>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM session_metadata WHERE {} AND issue_id = ?2 ORDER BY workflow LIMIT 1",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare get session metadata")?;
    let mut rows = stmt
        .query(rusqlite::params![sc.bound(), issue_id])
        .ctx("get session metadata")?;
    match rows.next().ctx("read session metadata")? {
        Some(r) => Ok(Some(from_row(r).ctx("read session metadata")?)),
        None => Ok(None),
    }
}

pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<SessionMeta>, StoreError> {
    load_in(conn, sc).map(scope::rows)
}

/// The scope's session rows, each with its workflow.
pub(crate) fn load_in(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<SessionMeta>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM session_metadata WHERE {} ORDER BY issue_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load session metadata")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(InWorkflow {
                workflow: r.get("workflow")?,
                row: from_row(r)?,
            })
        })
        .ctx("load session metadata")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read session metadata")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<SessionMeta> {
    Ok(SessionMeta {
        issue_id: r.get("issue_id")?,
        session_id: r.get("session_id")?,
        agent_pid: r.get("agent_pid")?,
        input_tokens: r.get("input_tokens")?,
        output_tokens: r.get("output_tokens")?,
        total_tokens: r.get("total_tokens")?,
        cache_read_tokens: r.get("cache_read_tokens")?,
        cache_write_tokens: r.get("cache_write_tokens")?,
        model_name: r.get("model_name")?,
        api_request_count: r.get("api_request_count")?,
        api_requests_measured: r.get("api_requests_measured")?,
        started_at_ms: r.get("started_at_ms")?,
        updated_at_ms: r.get("updated_at_ms")?,
        exit_type: r.get("exit_type")?,
        dispatch_id: r.get("dispatch_id")?,
        agent_pgid: r.get("agent_pgid")?,
        agent_start_ticks: r.get("agent_start_ticks")?,
        identifier: r.get("identifier")?,
        attempt: r.get("attempt")?,
        workspace: r.get("workspace")?,
        agent_kind: r.get("agent_kind")?,
        workflow_file: r.get("workflow_file")?,
        sortie_instance: r.get("sortie_instance")?,
        recovery_pending: r.get("recovery_pending")?,
    })
}

/// Sessions a restart recorded as interrupted whose processes the warm start has not yet
/// stopped.
pub(crate) fn recovery_pending(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<SessionMeta>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM session_metadata WHERE recovery_pending = 1 AND {}
             ORDER BY issue_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load interrupted sessions")?;
    let rows = stmt
        .query_map([sc.bound()], from_row)
        .ctx("load interrupted sessions")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read interrupted session")?);
    }
    Ok(out)
}

/// Marks an interrupted session as handled: its processes are stopped.
pub(crate) fn recovered(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "UPDATE session_metadata SET recovery_pending = 0, agent_pgid = NULL,
             agent_start_ticks = NULL
         WHERE workflow = ?1 AND issue_id = ?2 AND recovery_pending = 1",
        rusqlite::params![wf, issue_id],
    )
    .ctx("mark interrupted session recovered")?;
    Ok(())
}
