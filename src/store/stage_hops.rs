//! Stage hops: each issue's latest hop (`domain::stage::StageHop`), restored at startup so
//! the hop count and `between_stages[]` survive a restart.

use rusqlite::{Connection, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::json;
use super::scope::{self, Scope};
use super::stage_passes;

use crate::domain::stage::{StageHop, StageOutcome};

/// A write to the `stage_hops` table.
#[derive(Debug, Clone, PartialEq)]
pub enum StageHopWrite {
    /// Saves the hop, replacing the issue's earlier one.
    Save(Box<StageHop>),
    /// Drops the issue's hop (its count reset).
    Delete(String),
    /// The run a hop's next stage dispatched is recorded: the run row's hop result.
    RunStage {
        dispatch_id: String,
        target: String,
        result: String,
    },
    /// Saves the issue's live stage pass (a running stage session or a budget hold).
    LivePass(Box<crate::domain::stage::LivePass>),
    /// Drops the issue's live stage pass.
    EndLivePass(String),
    /// Empties the live stage passes (daemon start).
    ClearLivePasses,
    /// Adds a stage event (`stage.advanced`, `stage.not_advanced`) to the run that reached
    /// the hop decision.
    RunEvent {
        dispatch_id: String,
        at_ms: i64,
        event_type: String,
        payload: serde_json::Value,
    },
}

impl StageHopWrite {
    pub(crate) fn key(&self) -> &str {
        match self {
            StageHopWrite::Save(h) => &h.issue_id,
            StageHopWrite::Delete(id) => id,
            StageHopWrite::RunStage { dispatch_id, .. } => dispatch_id,
            StageHopWrite::LivePass(p) => &p.issue_id,
            StageHopWrite::EndLivePass(id) => id,
            StageHopWrite::ClearLivePasses => "",
            StageHopWrite::RunEvent { dispatch_id, .. } => dispatch_id,
        }
    }
}

pub(crate) fn apply(conn: &Connection, wf: &str, w: &StageHopWrite) -> Result<(), StoreError> {
    match w {
        StageHopWrite::Save(h) => save(conn, wf, h),
        StageHopWrite::Delete(id) => {
            bind::execute(
                conn,
                "DELETE FROM stage_hops WHERE workflow = ?1 AND issue_id = ?2",
                rusqlite::params![wf, id],
            )
            .ctx("delete stage hop")?;
            Ok(())
        }
        StageHopWrite::RunStage {
            dispatch_id,
            target,
            result,
        } => {
            bind::execute(
                conn,
                "UPDATE run_history SET stage_target = ?2, stage_result = ?3
                 WHERE dispatch_id = ?1 AND workflow = ?4",
                rusqlite::params![dispatch_id, target, result, wf],
            )
            .ctx("record the run's stage hop")?;
            Ok(())
        }
        StageHopWrite::LivePass(p) => stage_passes::save(conn, wf, p),
        StageHopWrite::EndLivePass(id) => stage_passes::end(conn, wf, id),
        StageHopWrite::ClearLivePasses => stage_passes::clear(conn, wf),
        StageHopWrite::RunEvent {
            dispatch_id,
            at_ms,
            event_type,
            payload,
        } => {
            if !stage_passes::append_run_event(conn, dispatch_id, *at_ms, event_type, payload)? {
                log::info!(
                    dispatch_id:% = dispatch_id,
                    event:% = event_type;
                    "stage event not added: the run has no stored events"
                );
            }
            Ok(())
        }
    }
}

fn save(conn: &Connection, wf: &str, h: &StageHop) -> Result<(), StoreError> {
    let labels = match &h.issue_labels {
        Some(l) => Some(json::encode("encode stage hop labels", l)?),
        None => None,
    };
    bind::execute(
        conn,
        "INSERT OR REPLACE INTO stage_hops (workflow, issue_id, identifier, display_identifier,
             hop_count,
             source_rule, target_rule, target_label, previous_outcome, source_dispatch_id,
             chain_id, dispatched_at_ms, hopped_at_ms, target_observed, picked_up, issue_title,
             issue_url, issue_type, state, issue_labels)
         VALUES (:workflow, :issue_id, :identifier, :display_identifier, :hop_count,
             :source_rule,
             :target_rule, :target_label, :previous_outcome, :source_dispatch_id, :chain_id,
             :dispatched_at_ms, :hopped_at_ms, :target_observed, :picked_up, :issue_title,
             :issue_url, :issue_type, :state, :issue_labels)",
        named_params! {
            ":workflow": wf, ":issue_id": h.issue_id, ":identifier": h.identifier,
            ":display_identifier": h.display_identifier, ":hop_count": h.hop_count,
            ":source_rule": h.source_rule, ":target_rule": h.target_rule,
            ":target_label": h.target_label,
            ":previous_outcome": h.previous_outcome.map(|o| o.as_str()).unwrap_or(""),
            ":source_dispatch_id": h.source_dispatch_id, ":chain_id": h.chain_id,
            ":dispatched_at_ms": h.dispatched_at_ms, ":hopped_at_ms": h.hopped_at_ms,
            ":target_observed": h.target_observed, ":picked_up": h.picked_up,
            ":issue_title": h.issue_title, ":issue_url": h.issue_url,
            ":issue_type": h.issue_type, ":state": h.state, ":issue_labels": labels,
        },
    )
    .ctx("save stage hop")?;
    Ok(())
}

/// Every stored hop of the scope, by issue id.
pub(crate) fn load_all(conn: &Connection, sc: &Scope) -> Result<Vec<StageHop>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM stage_hops WHERE {} ORDER BY issue_id, workflow",
            scope::filter("workflow", 1)
        ))
        .ctx("read stage hops")?;
    let rows = stmt
        .query_map([sc.bound()], from_row)
        .ctx("read stage hops")?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.ctx("read stage hop")?);
    }
    Ok(out)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<StageHop> {
    let labels: Option<String> = r.get("issue_labels")?;
    let outcome: String = r.get("previous_outcome")?;
    Ok(StageHop {
        issue_id: r.get("issue_id")?,
        identifier: r.get("identifier")?,
        display_identifier: r.get("display_identifier")?,
        hop_count: r.get("hop_count")?,
        source_rule: r.get("source_rule")?,
        target_rule: r.get("target_rule")?,
        target_label: r.get("target_label")?,
        previous_outcome: StageOutcome::parse(&outcome),
        source_dispatch_id: r.get("source_dispatch_id")?,
        chain_id: r.get("chain_id")?,
        dispatched_at_ms: r.get("dispatched_at_ms")?,
        hopped_at_ms: r.get("hopped_at_ms")?,
        target_observed: r.get("target_observed")?,
        picked_up: r.get("picked_up")?,
        issue_title: r.get("issue_title")?,
        issue_url: r.get("issue_url")?,
        issue_type: r.get("issue_type")?,
        state: r.get("state")?,
        // A list that does not decode reads as unread rather than failing the restore.
        issue_labels: labels.and_then(|l| serde_json::from_str(&l).ok()),
    })
}
