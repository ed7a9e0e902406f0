//! What pull-request reactions keep across a restart: standing escalations, the fingerprint of
//! what a kind last dispatched (so the same failure or comment set is never dispatched twice),
//! and the review comments a run was given. Everything else about a pending reaction lives in
//! memory and is rebuilt from run history (`run_history.pr_record`) at startup.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};
use crate::domain::{EscalationTrigger, ReactionKind};

/// A standing escalation, with what a rebuilt row serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEscalation {
    pub issue_id: String,
    pub kind: ReactionKind,
    pub escalated_at_ms: i64,
    pub trigger: EscalationTrigger,
    pub used_attempts: Option<i64>,
    pub identifier: String,
    pub display_identifier: String,
    pub issue_title: String,
    pub issue_url: String,
    pub pr_owner: String,
    pub pr_repo: String,
    pub pr_number: i64,
    pub pr_branch: String,
    pub pr_head_sha: String,
}

/// A kind's dispatch fingerprint for one issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub issue_id: String,
    pub kind: ReactionKind,
    pub fingerprint: String,
    pub dispatched: bool,
}

/// Review comments given to a run, per issue and pull request (`owner/repo#number`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenComments {
    pub issue_id: String,
    pub pr_key: String,
    pub comment_ids: Vec<String>,
}

/// The newest triage verdict of a kind for one issue, and the subject it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriageAnswer {
    pub issue_id: String,
    pub kind: ReactionKind,
    pub fingerprint: String,
    /// `act`, `ignore` or `escalate`.
    pub answer: String,
    pub answered_at_ms: i64,
}

/// The newest run of an issue that left a pull-request record, for rebuilding its reactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrRun {
    pub issue_id: String,
    pub identifier: String,
    pub display_identifier: String,
    pub issue_title: String,
    pub issue_url: String,
    pub attempt: i64,
    pub session_id: Option<String>,
    pub rule_name: String,
    pub agent_adapter: String,
    pub configured_model: String,
    pub dispatched_at_ms: Option<i64>,
    pub chain_id: String,
    /// The record's JSON.
    pub pr_record: String,
}

/// One reaction write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactionWrite {
    SaveEscalation(StoredEscalation),
    DeleteEscalation(String, ReactionKind),
    SaveFingerprint(Fingerprint, i64),
    DeleteFingerprint(String, ReactionKind),
    GiveComments(GivenComments),
    SaveTriageAnswer(TriageAnswer),
    DeleteTriageAnswer(String, ReactionKind),
    /// Forget everything stored for an issue's reactions (its `pr_loop` activity is history
    /// and stays).
    ClearIssue(String),
    /// One mark of a reaction's activity in a pass.
    PrLoop(super::PrLoopWrite),
}

impl ReactionWrite {
    pub fn issue_id(&self) -> &str {
        match self {
            ReactionWrite::SaveEscalation(e) => &e.issue_id,
            ReactionWrite::DeleteEscalation(id, _)
            | ReactionWrite::DeleteFingerprint(id, _)
            | ReactionWrite::DeleteTriageAnswer(id, _) => id,
            ReactionWrite::SaveTriageAnswer(a) => &a.issue_id,
            ReactionWrite::SaveFingerprint(f, _) => &f.issue_id,
            ReactionWrite::GiveComments(g) => &g.issue_id,
            ReactionWrite::ClearIssue(id) => id,
            ReactionWrite::PrLoop(w) => &w.issue_id,
        }
    }
}

pub(crate) fn apply(conn: &Connection, wf: &str, w: &ReactionWrite) -> Result<(), StoreError> {
    match w {
        ReactionWrite::SaveEscalation(e) => save_escalation(conn, wf, e),
        ReactionWrite::DeleteEscalation(id, kind) => bind::execute(
            conn,
            "DELETE FROM reaction_escalations WHERE workflow = ?1 AND issue_id = ?2 AND kind = ?3",
            rusqlite::params![wf, id, kind],
        )
        .map(|_| ())
        .ctx("delete reaction escalation"),
        ReactionWrite::SaveFingerprint(f, at) => save_fingerprint(conn, wf, f, *at),
        ReactionWrite::DeleteFingerprint(id, kind) => bind::execute(
            conn,
            "DELETE FROM reaction_fingerprints WHERE workflow = ?1 AND issue_id = ?2 AND kind = ?3",
            rusqlite::params![wf, id, kind],
        )
        .map(|_| ())
        .ctx("delete reaction fingerprint"),
        ReactionWrite::GiveComments(g) => give_comments(conn, wf, g),
        ReactionWrite::SaveTriageAnswer(a) => save_triage_answer(conn, wf, a),
        ReactionWrite::DeleteTriageAnswer(id, kind) => bind::execute(
            conn,
            "DELETE FROM triage_answers WHERE workflow = ?1 AND issue_id = ?2 AND kind = ?3",
            rusqlite::params![wf, id, kind],
        )
        .map(|_| ())
        .ctx("delete triage answer"),
        ReactionWrite::ClearIssue(id) => clear_issue(conn, wf, id),
        ReactionWrite::PrLoop(w) => super::pr_loop::apply(conn, wf, w),
    }
}

fn save_escalation(conn: &Connection, wf: &str, e: &StoredEscalation) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO reaction_escalations (workflow, issue_id, kind, escalated_at_ms,
             escalation_trigger, used_attempts, identifier, display_identifier, issue_title,
             issue_url, pr_owner, pr_repo, pr_number, pr_branch, pr_head_sha)
         VALUES (:workflow, :issue_id, :kind, :at, :trigger, :used, :identifier, :display, :title, :url,
             :owner, :repo, :number, :branch, :sha)",
        named_params! {
            ":workflow": wf, ":issue_id": e.issue_id, ":kind": e.kind,
            ":at": e.escalated_at_ms,
            ":trigger": e.trigger, ":used": e.used_attempts, ":identifier": e.identifier,
            ":display": e.display_identifier, ":title": e.issue_title, ":url": e.issue_url,
            ":owner": e.pr_owner, ":repo": e.pr_repo, ":number": e.pr_number,
            ":branch": e.pr_branch, ":sha": e.pr_head_sha,
        },
    )
    .ctx("save reaction escalation")?;
    Ok(())
}

fn save_fingerprint(
    conn: &Connection,
    wf: &str,
    f: &Fingerprint,
    at_ms: i64,
) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO reaction_fingerprints (workflow, issue_id, kind, fingerprint,
             dispatched, updated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        rusqlite::params![wf, f.issue_id, f.kind, f.fingerprint, f.dispatched, at_ms],
    )
    .ctx("save reaction fingerprint")?;
    Ok(())
}

fn save_triage_answer(conn: &Connection, wf: &str, a: &TriageAnswer) -> Result<(), StoreError> {
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO triage_answers (workflow, issue_id, kind, fingerprint, answer,
             answered_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        rusqlite::params![
            wf,
            a.issue_id,
            a.kind,
            a.fingerprint,
            a.answer,
            a.answered_at_ms
        ],
    )
    .ctx("save triage answer")?;
    Ok(())
}

fn give_comments(conn: &Connection, wf: &str, g: &GivenComments) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO reaction_given_comments (workflow, issue_id, pr_key, comment_id)
             VALUES (?1, ?2, ?3, ?4)",
        )
        .ctx("prepare save given comments")?;
    for id in &g.comment_ids {
        bind::execute_stmt(&mut stmt, rusqlite::params![wf, g.issue_id, g.pr_key, id])
            .ctx("save given comment")?;
    }
    Ok(())
}

fn clear_issue(conn: &Connection, wf: &str, issue_id: &str) -> Result<(), StoreError> {
    for table in [
        "reaction_escalations",
        "reaction_fingerprints",
        "reaction_given_comments",
        "triage_answers",
    ] {
        bind::execute(
            conn,
            &format!("DELETE FROM {table} WHERE workflow = ?1 AND issue_id = ?2"),
            rusqlite::params![wf, issue_id],
        )
        .ctx("clear issue reactions")?;
    }
    Ok(())
}

pub(crate) fn load_escalations(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<StoredEscalation>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM reaction_escalations WHERE {} ORDER BY issue_id, kind, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load reaction escalations")?;
    let rows = stmt
        .query_map([sc.bound()], escalation_row)
        .ctx("load reaction escalations")?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read reaction escalation")
}

fn escalation_row(r: &Row<'_>) -> rusqlite::Result<StoredEscalation> {
    Ok(StoredEscalation {
        issue_id: r.get("issue_id")?,
        kind: r.get("kind")?,
        escalated_at_ms: r.get("escalated_at_ms")?,
        trigger: r.get("escalation_trigger")?,
        used_attempts: r.get("used_attempts")?,
        identifier: r.get("identifier")?,
        display_identifier: r.get("display_identifier")?,
        issue_title: r.get("issue_title")?,
        issue_url: r.get("issue_url")?,
        pr_owner: r.get("pr_owner")?,
        pr_repo: r.get("pr_repo")?,
        pr_number: r.get("pr_number")?,
        pr_branch: r.get("pr_branch")?,
        pr_head_sha: r.get("pr_head_sha")?,
    })
}

pub(crate) fn load_fingerprints(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<Fingerprint>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, kind, fingerprint, dispatched FROM reaction_fingerprints
             WHERE {}",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load reaction fingerprints")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(Fingerprint {
                issue_id: r.get(0)?,
                kind: r.get(1)?,
                fingerprint: r.get(2)?,
                dispatched: r.get(3)?,
            })
        })
        .ctx("load reaction fingerprints")?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read reaction fingerprint")
}

pub(crate) fn load_triage_answers(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<TriageAnswer>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, kind, fingerprint, answer, answered_at_ms FROM triage_answers
             WHERE {} ORDER BY issue_id, kind, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load triage answers")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok(TriageAnswer {
                issue_id: r.get(0)?,
                kind: r.get(1)?,
                fingerprint: r.get(2)?,
                answer: r.get(3)?,
                answered_at_ms: r.get(4)?,
            })
        })
        .ctx("load triage answers")?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read triage answer")
}

pub(crate) fn load_given(conn: &Connection, sc: &Scope) -> Result<Vec<GivenComments>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT issue_id, pr_key, comment_id FROM reaction_given_comments
             WHERE {} ORDER BY issue_id, pr_key, workflow, comment_id",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load given comments")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .ctx("load given comments")?;
    let mut out: Vec<GivenComments> = Vec::new();
    for row in rows {
        let (issue_id, pr_key, id) = row.ctx("read given comment")?;
        match out.last_mut() {
            Some(g) if g.issue_id == issue_id && g.pr_key == pr_key => g.comment_ids.push(id),
            _ => out.push(GivenComments {
                issue_id,
                pr_key,
                comment_ids: vec![id],
            }),
        }
    }
    Ok(out)
}

/// Per issue, its newest run, when that run left a pull-request record and succeeded. A
/// recorded CI result and a triage run (a reaction's row without a dispatch id) are not runs
/// of the issue's work and are passed over.
pub(crate) fn latest_pr_runs(conn: &Connection, sc: &Scope) -> Result<Vec<PrRun>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT h.issue_id, h.identifier, h.display_identifier, h.issue_title, h.issue_url,
                    h.attempt, h.session_id, h.rule_name, h.agent_adapter, h.configured_model,
                    h.dispatched_at, h.pr_record, COALESCE(h.chain_id, '')
             FROM run_history h
             JOIN (SELECT workflow, issue_id, MAX(id) AS id FROM run_history
                   WHERE status != 'ci_failed' AND {}
                     AND NOT (dispatch_id IS NULL AND COALESCE(reaction_kind, '') != '')
                   GROUP BY workflow, issue_id) latest ON latest.id = h.id
             WHERE h.pr_record IS NOT NULL AND h.status = 'succeeded'
             ORDER BY h.identifier, h.issue_id, h.workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load pull-request runs")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            let dispatched: Option<String> = r.get(10)?;
            Ok(PrRun {
                issue_id: r.get(0)?,
                identifier: r.get(1)?,
                display_identifier: r.get(2)?,
                issue_title: r.get(3)?,
                issue_url: r.get(4)?,
                attempt: r.get(5)?,
                session_id: r.get(6)?,
                rule_name: r.get(7)?,
                agent_adapter: r.get(8)?,
                configured_model: r.get(9)?,
                dispatched_at_ms: dispatched
                    .and_then(|d| super::time::from_text("dispatched_at", &d).ok()),
                pr_record: r.get(11)?,
                chain_id: r.get(12)?,
            })
        })
        .ctx("load pull-request runs")?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read pull-request run")
}
