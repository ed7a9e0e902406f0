//! `GET /api/v1/{identifier}`: one issue's live detail (running, retrying, budget-held or
//! parked) with its run history, or its history alone. A renamed issue is found through the
//! issue id of the newest run recorded under the requested identifier.

use serde_json::{Map, Value, json};

use crate::orchestrator::snapshot::Snapshot;
use crate::store::{ReadConn, RunFilter};

use super::AppState;
use super::event_json;
use super::respond::{ApiError, JsonReply};
use super::rows::{self, IssueRows, IssueSpend};
use super::runs;
use super::wording::{self, Pair};

/// Events the detail serves.
const RECENT_EVENTS: usize = 50;
/// Runs the history member serves.
const HISTORY_RUNS: usize = 50;

fn pair_of(v: &Value) -> Pair {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or(wording::NOT_AVAILABLE)
            .to_string()
    };
    Pair {
        short: s("status_text"),
        full: s("status_text_full"),
    }
}

/// The live status and sentences of an issue, `None` when no live list holds it.
pub fn live_status(snap: &Snapshot, issue_id: &str) -> Option<(&'static str, Pair)> {
    let found = IssueRows::find(snap, issue_id);
    let status = found.status()?;
    let now = snap.generated_at_ms;
    let row = match status {
        "running" => found
            .running
            .map(|r| rows::running_row(r, &snap.config, None, now)),
        "retrying" => found.retry.map(|r| rows::retry_row(r, &snap.config, now)),
        "budget_exhausted" => found.budget.map(|b| rows::budget_row(b, &snap.config)),
        _ => found.parked.map(|p| rows::parked_row(p, &snap.config)),
    }?;
    Some((status, pair_of(&row)))
}

fn live_issue_id(snap: &Snapshot, identifier: &str) -> Option<String> {
    snap.running
        .iter()
        .map(|r| &r.issue)
        .chain(snap.retrying.iter().map(|r| &r.issue))
        .chain(snap.budget_exhausted.iter().map(|r| &r.issue))
        .chain(snap.parked.iter().map(|r| &r.issue))
        .find(|i| i.identifier == identifier)
        .map(|i| i.id.clone())
}

fn history(conn: &ReadConn, issue_id: &str) -> Result<(Value, Value), ApiError> {
    let page = conn
        .list_runs(
            &RunFilter {
                issue_id: Some(issue_id.to_string()),
                ..Default::default()
            },
            None,
            HISTORY_RUNS,
        )
        .map_err(ApiError::history_unavailable)?;
    let outcome = runs::outcome_json(conn, issue_id)?;
    if page.runs.is_empty() {
        return Ok((Value::Null, outcome));
    }
    let hops: Vec<Value> = page
        .runs
        .iter()
        .filter(|r| !r.stage_target.is_empty())
        .map(|r| {
            let mut m = Map::new();
            m.insert("run_id".into(), r.run_id.into());
            if !r.chain_id.is_empty() {
                m.insert("chain_id".into(), r.chain_id.clone().into());
            }
            m.insert("source_rule".into(), r.rule_name.clone().into());
            m.insert("target_rule".into(), r.stage_target.clone().into());
            m.insert("result".into(), r.stage_result.clone().into());
            m.insert("completed_at".into(), rows::ts(r.completed_at_ms));
            Value::Object(m)
        })
        .collect();
    let h = json!({
        "runs": page.runs.iter().map(|r| runs::run_json(r, &outcome, true)).collect::<Vec<_>>(),
        "next_cursor": page.next_cursor.map(|c| c.to_string()),
        "totals": runs::issue_totals(conn, issue_id)?,
        "hops": hops,
        "last_stage": null,
        "issue_outcome": outcome.clone(),
    });
    Ok((h, outcome))
}

/// The newest recorded events of the issue's newest run that has a dispatch id.
fn recorded_events(conn: &ReadConn, issue_id: &str) -> Result<Vec<Value>, ApiError> {
    let dispatch: Option<String> = conn
        .connection()
        .query_row(
            "SELECT dispatch_id FROM run_history
             WHERE issue_id = ?1 AND dispatch_id IS NOT NULL AND dispatch_id <> ''
             ORDER BY id DESC LIMIT 1",
            [issue_id],
            |r| r.get(0),
        )
        .ok();
    let Some(d) = dispatch else {
        return Ok(Vec::new());
    };
    let stored = conn.run_events(&d).map_err(ApiError::history_unavailable)?;
    Ok(stored
        .map(|s| {
            let skip = s.events.len().saturating_sub(RECENT_EVENTS);
            s.events[skip..]
                .iter()
                .map(|e| event_json::served(e.seq, &e.payload))
                .collect()
        })
        .unwrap_or_default())
}

fn issue_member(row: &Value) -> Value {
    let mut m = Map::new();
    for (from, to) in [
        ("issue_title", "title"),
        ("issue_url", "url"),
        ("issue_type", "issue_type"),
        ("issue_labels", "labels"),
        ("state", "state"),
    ] {
        if let Some(v) = row.get(from) {
            m.insert(to.into(), v.clone());
        }
    }
    Value::Object(m)
}

pub fn detail(state: &AppState, identifier: &str) -> Result<JsonReply, ApiError> {
    let snap = state.orch.snapshot();
    let conn = state
        .store
        .read_conn()
        .map_err(ApiError::history_unavailable)?;
    let mut issue_id = live_issue_id(&snap, identifier);
    if issue_id.is_none() {
        issue_id = conn
            .connection()
            .query_row(
                "SELECT issue_id FROM run_history WHERE identifier = ?1 ORDER BY id DESC LIMIT 1",
                [identifier],
                |r| r.get::<_, String>(0),
            )
            .ok();
    }
    let not_found = || {
        ApiError::new(
            404,
            "issue_not_found",
            format!("issue identifier \"{identifier}\" not found in current state or run history"),
        )
    };
    let issue_id = issue_id.ok_or_else(not_found)?;
    let (history, outcome) = history(&conn, &issue_id)?;
    let found = IssueRows::find(&snap, &issue_id);
    let now = snap.generated_at_ms;
    let cfg = &snap.config;
    let running = found
        .running
        .map(|r| rows::running_row(r, cfg, IssueSpend::read(&conn, &issue_id), now));
    let retry = found.retry.map(|r| rows::retry_row(r, cfg, now));
    let budget = found.budget.map(|b| rows::budget_row(b, cfg));
    let parked = found.parked.map(|p| rows::parked_row(p, cfg));
    let Some(status) = found.status() else {
        if history.is_null() {
            return Err(not_found());
        }
        let head = history
            .get("runs")
            .and_then(|r| r.get(0))
            .cloned()
            .unwrap_or(Value::Null);
        let kind = outcome.get("kind").and_then(Value::as_str);
        let st = outcome.get("state").and_then(Value::as_str).unwrap_or("");
        let pair = wording::history(kind, st);
        let mut issue = Map::new();
        for (from, to) in [("issue_title", "title"), ("issue_url", "url")] {
            if let Some(v) = head.get(from) {
                issue.insert(to.into(), v.clone());
            }
        }
        return Ok(JsonReply::ok(json!({
            "issue_identifier": head.get("issue_identifier").cloned().unwrap_or_else(|| identifier.into()),
            "issue_id": issue_id,
            "status": "history",
            "status_text": pair.short,
            "status_text_full": pair.full,
            "next_outcomes": [],
            "issue": Value::Object(issue),
            "workspace": null,
            "attempts": {"restart_count": 0, "current_retry_attempt": 0},
            "running": null,
            "retry": null,
            "budget_exhausted": null,
            "parked": null,
            "pending_reactions": [],
            "between_stages": null,
            "recent_events": recorded_events(&conn, &issue_id)?,
            "last_error": null,
            "pr_loop": {},
            "tracked": {},
            "history": history,
        })));
    };
    let deciding = match status {
        "running" => running.clone(),
        "retrying" => retry.clone(),
        "budget_exhausted" => budget.clone(),
        _ => parked.clone(),
    }
    .unwrap_or(Value::Null);
    let pair = pair_of(&deciding);
    let current_identifier = deciding
        .get("issue_identifier")
        .cloned()
        .unwrap_or_else(|| identifier.into());
    let recent_events = match found.running {
        Some(r) => {
            let skip = r.recent_events.len().saturating_sub(RECENT_EVENTS);
            r.recent_events[skip..]
                .iter()
                .map(|(seq, ev)| event_json::served_live(*seq, ev))
                .collect()
        }
        None => recorded_events(&conn, &issue_id)?,
    };
    let attempt = found
        .running
        .map(|r| r.attempt + 1)
        .or(found.retry.map(|r| r.attempt))
        .unwrap_or(0);
    let mut next = Vec::new();
    if let Some(r) = found.retry {
        let when = r.due_at_ms - now;
        next.push(json!({
            "condition": "When the retry comes due",
            "text": if when <= 0 {
                format!("Sortie dispatches attempt {} on the next check of the retry queue.", r.attempt)
            } else {
                format!("Sortie dispatches attempt {} in {}, if an agent slot is free.", r.attempt, wording::duration(when))
            },
        }));
    } else if found.running.is_some() {
        if let Some(h) = &cfg.handoff_state {
            next.push(json!({
                "condition": "If the run succeeds",
                "text": format!("Sortie moves the issue to {h}."),
            }));
        }
        next.push(json!({
            "condition": "If the run fails",
            "text": "Sortie retries with exponential backoff.",
        }));
        if let Some(t) = cfg.max_tokens {
            next.push(json!({
                "condition": format!("If tokens reach {}", wording::tokens(t)),
                "text": "Sortie stops the session and holds the issue at its token budget.",
            }));
        }
    }
    Ok(JsonReply::ok(json!({
        "issue_identifier": current_identifier,
        "issue_id": issue_id,
        "status": status,
        "status_text": pair.short,
        "status_text_full": pair.full,
        "next_outcomes": next,
        "issue": issue_member(&deciding),
        "workspace": found.running.and_then(|r| r.workspace_path.clone()).map(|p| json!({"path": p})),
        "attempts": {
            "restart_count": attempt.saturating_sub(1),
            "current_retry_attempt": found.retry.map(|r| r.attempt).unwrap_or(0),
        },
        "running": running,
        "retry": retry,
        "budget_exhausted": budget,
        "parked": parked,
        "pending_reactions": [],
        "between_stages": null,
        "recent_events": recent_events,
        "last_error": found.retry.and_then(|r| r.error.as_deref()).filter(|e| !e.trim().is_empty()),
        "pr_loop": {},
        "tracked": {},
        "history": history,
    })))
}
