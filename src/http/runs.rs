//! Run history routes: `GET /api/v1/runs`, `GET /api/v1/runs/issues` and
//! `GET /api/v1/runs/{dispatch_id}/events`, read through a read-only connection per request.

use std::collections::BTreeMap;

use crate::store::{ReadConn, RuleFilter, RunFilter, RunRecord};

use super::AppState;
use super::event_json;
use super::live_rows::live_status;
use super::query;
use super::respond::{ApiError, JsonReply, echo};
use super::views::run::{
    IssueGroupView, IssueGroupsPage, IssueTotalsView, OutcomeView, RunEventsPage, RunView, RunsPage,
};
use super::views::{IssueStatus, nonempty, to_value};
use super::wording;

/// How the issue ended, as stored; `None` when it has not ended.
pub fn outcome(conn: &ReadConn, issue_id: &str) -> Result<Option<OutcomeView>, ApiError> {
    let row = conn
        .issue_outcome(issue_id)
        .map_err(ApiError::history_unavailable)?;
    Ok(row.as_ref().map(OutcomeView::build))
}

fn base_filter(q: &BTreeMap<String, String>) -> Result<RunFilter, ApiError> {
    Ok(RunFilter {
        issue_identifier: q.get("issue").cloned(),
        issue_id: q.get("issue_id").cloned(),
        rule: q.get("rule").map(|r| {
            if r == "<none>" {
                RuleFilter::Unnamed
            } else {
                RuleFilter::Named(r.clone())
            }
        }),
        status: query::status(q)?,
        stage: q.get("stage").cloned(),
        ..Default::default()
    })
}

/// The parameters `GET /api/v1/runs` accepts (the OpenAPI document lists the same).
pub const RUNS_PARAMS: &[&str] = &[
    "issue",
    "issue_id",
    "rule",
    "status",
    "stage",
    "since",
    "until",
    "ended_since",
    "ended_until",
    "cursor",
    "limit",
];

/// Parses the `GET /api/v1/runs` parameters: `(filter, cursor, limit)`.
pub fn parse_runs_query(url: &str) -> Result<(RunFilter, Option<i64>, usize), ApiError> {
    let q = query::strict(url, RUNS_PARAMS)?;
    let mut f = base_filter(&q)?;
    f.since_ms = query::timestamp(&q, "since")?;
    f.until_ms = query::timestamp(&q, "until")?;
    f.ended_since_ms = query::timestamp(&q, "ended_since")?;
    f.ended_until_ms = query::timestamp(&q, "ended_until")?;
    if let (Some(a), Some(b)) = (f.since_ms, f.until_ms)
        && a >= b
    {
        return Err(ApiError::invalid_parameter(
            "parameter \"since\" must be before \"until\"",
        ));
    }
    if let (Some(a), Some(b)) = (f.ended_since_ms, f.ended_until_ms)
        && a >= b
    {
        return Err(ApiError::invalid_parameter(
            "parameter \"ended_since\" must be before \"ended_until\"",
        ));
    }
    let cursor = query::cursor(&q)?;
    let limit = query::int_in(&q, "limit", 1, 200, 50)? as usize;
    Ok((f, cursor, limit))
}

type Outcomes = BTreeMap<String, Option<OutcomeView>>;

fn outcomes_for(conn: &ReadConn, runs: &[RunRecord]) -> Result<Outcomes, ApiError> {
    let mut out = BTreeMap::new();
    for r in runs {
        if !out.contains_key(&r.issue_id) {
            out.insert(r.issue_id.clone(), outcome(conn, &r.issue_id)?);
        }
    }
    Ok(out)
}

pub fn list_runs(state: &AppState, url: &str) -> Result<JsonReply, ApiError> {
    let (filter, cursor, limit) = parse_runs_query(url)?;
    let snap = state.orch.snapshot();
    let conn = state
        .store
        .read_pool()
        .get()
        .map_err(ApiError::history_unavailable)?;
    let page = conn
        .list_runs(&filter, cursor, limit)
        .map_err(ApiError::history_unavailable)?;
    let outcomes = outcomes_for(&conn, &page.runs)?;
    let passes: Vec<_> = page.runs.iter().map(super::pr_loop::run_pass).collect();
    let activity = super::pr_loop::read(&conn, &passes).map_err(ApiError::history_unavailable)?;
    let runs = page
        .runs
        .iter()
        .zip(&passes)
        .map(|(r, pass)| {
            let o = outcomes.get(&r.issue_id).and_then(Option::as_ref);
            let mut v = RunView::build(r, o, false, &snap.config.dispatch);
            v.pr_loop = Some(super::pr_loop::view(&snap, pass.as_ref(), &activity));
            v
        })
        .collect();
    Ok(JsonReply::ok(to_value(&RunsPage {
        runs,
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    })))
}

/// The issue's spend over all of its runs (the `totals` of a group and of issue history).
pub fn issue_totals(conn: &ReadConn, issue_id: &str) -> Result<IssueTotalsView, ApiError> {
    let row = conn
        .issue_totals(issue_id)
        .map_err(ApiError::history_unavailable)?;
    Ok(IssueTotalsView::build(&row))
}

/// One issue's group: its newest runs matching `filter`, its status and totals.
fn issue_group(
    conn: &ReadConn,
    snap: &crate::orchestrator::snapshot::Snapshot,
    filter: &RunFilter,
    issue_id: &str,
    newest: i64,
) -> Result<IssueGroupView, ApiError> {
    let run_filter = RunFilter {
        issue_id: Some(issue_id.to_string()),
        issue_identifier: None,
        ..filter.clone()
    };
    let runs = conn
        .list_runs(&run_filter, Some(newest + 1), 5)
        .map_err(ApiError::history_unavailable)?;
    let outcome = outcome(conn, issue_id)?;
    let newest_run = conn
        .list_runs(
            &RunFilter {
                issue_id: Some(issue_id.to_string()),
                ..Default::default()
            },
            None,
            1,
        )
        .map_err(ApiError::history_unavailable)?;
    let head = newest_run.runs.first().or(runs.runs.first());
    let (status, sentences) = match live_status(snap, issue_id) {
        Some((s, words)) => (s, words),
        None => {
            let kind = outcome.as_ref().map(|o| o.kind.as_str());
            let st = outcome
                .as_ref()
                .and_then(|o| o.state.as_deref())
                .unwrap_or("");
            (IssueStatus::History, wording::history(kind, st).into())
        }
    };
    Ok(IssueGroupView {
        issue_id: issue_id.to_string(),
        issue_identifier: head.map(|h| h.identifier.clone()),
        display_identifier: head.and_then(|h| nonempty(&h.display_identifier)),
        issue_title: head.and_then(|h| nonempty(&h.issue_title)),
        issue_url: head.and_then(|h| nonempty(&h.issue_url)),
        status,
        sentences,
        runs: runs
            .runs
            .iter()
            .map(|r| RunView::build(r, outcome.as_ref(), true, &snap.config.dispatch))
            .collect(),
        next_cursor: runs.next_cursor.map(|c| c.to_string()),
        totals: issue_totals(conn, issue_id)?,
        issue_outcome: outcome,
    })
}

pub fn list_issue_groups(state: &AppState, url: &str) -> Result<JsonReply, ApiError> {
    let q = query::strict(
        url,
        &["issue", "rule", "status", "stage", "cursor", "limit"],
    )?;
    let filter = base_filter(&q)?;
    let cursor = query::cursor(&q)?;
    let limit = query::int_in(&q, "limit", 1, 50, 20)? as usize;
    let snap = state.orch.snapshot();
    let conn = state
        .store
        .read_pool()
        .get()
        .map_err(ApiError::history_unavailable)?;
    let page = conn
        .list_issue_groups(&filter, cursor, limit)
        .map_err(ApiError::history_unavailable)?;
    let groups = page
        .groups
        .iter()
        .map(|(issue_id, newest)| issue_group(&conn, &snap, &filter, issue_id, *newest))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(JsonReply::ok(to_value(&IssueGroupsPage {
        groups,
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    })))
}

/// Events of one run: live from the snapshot while it runs, else from the database.
pub fn run_events(state: &AppState, dispatch_id: &str) -> Result<JsonReply, ApiError> {
    let snap = state.orch.snapshot();
    if let Some(r) = snap.running.iter().find(|r| r.dispatch_id == dispatch_id) {
        return Ok(JsonReply::ok(to_value(&RunEventsPage {
            dispatch_id: dispatch_id.to_string(),
            first_seq: r.recent_events().next().map(|(s, _)| s as i64),
            events: r
                .recent_events()
                .map(|(seq, ev)| event_json::view_live(seq, ev))
                .collect(),
        })));
    }
    let not_retained = || {
        ApiError::new(
            404,
            "run_events_not_retained",
            format!(
                "no events are retained for dispatch ID \"{}\"",
                echo(dispatch_id)
            ),
        )
    };
    let conn = state
        .store
        .read_pool()
        .get()
        .map_err(ApiError::history_unavailable)?;
    let stored = conn
        .run_events(dispatch_id)
        .map_err(ApiError::history_unavailable)?
        .filter(|e| !e.events.is_empty())
        .ok_or_else(not_retained)?;
    Ok(JsonReply::ok(to_value(&RunEventsPage {
        dispatch_id: dispatch_id.to_string(),
        first_seq: stored.events.first().map(|e| e.seq),
        events: stored
            .events
            .iter()
            .map(|e| event_json::view(e.seq, &e.payload))
            .collect(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RunStatus;
    use serde_json::{Value, json};

    #[test]
    fn runs_query_rules() {
        assert!(parse_runs_query("/api/v1/runs").is_ok());
        let e = parse_runs_query("/api/v1/runs?limit=201").err();
        assert_eq!(
            e.map(|e| e.message),
            Some("parameter \"limit\" must be an integer from 1 to 200".into())
        );
        let e =
            parse_runs_query("/api/v1/runs?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z")
                .err();
        assert_eq!(
            e.map(|e| e.message),
            Some("parameter \"since\" must be before \"until\"".into())
        );
        assert!(parse_runs_query("/api/v1/runs?status=done").is_err());
        assert!(parse_runs_query("/api/v1/runs?cursor=0").is_err());
        let (f, c, l) =
            parse_runs_query("/api/v1/runs?rule=%3Cnone%3E&cursor=7&limit=3").unwrap_or_default();
        assert_eq!(f.rule, Some(RuleFilter::Unnamed));
        assert_eq!((c, l), (Some(7), 3));
    }

    #[test]
    fn unmeasured_run_serves_null_tokens() {
        let r = RunRecord {
            run_id: 3,
            tokens_measured: false,
            usage_completeness: "unmeasured".into(),
            unmeasured_cause: Some("ended_early".into()),
            ..RunRecord::new(RunStatus::Failed)
        };
        let d = Default::default();
        let v = to_value(&RunView::build(&r, None, false, &d));
        assert_eq!(v["tokens"]["total_tokens"], Value::Null);
        assert_eq!(v["uncached_tokens"], Value::Null);
        assert_eq!(v["unmeasured_cause"], "ended_early");
        assert_eq!(v["cost_status"], "unmeasured");
        assert_eq!(v["model_usage"], json!([]));
        assert_eq!(v["pr_loop"], json!({}));
        // A run recorded before its cause was kept.
        let legacy = RunRecord {
            unmeasured_cause: None,
            ..r
        };
        let v = to_value(&RunView::build(&legacy, None, false, &d));
        assert_eq!(v["unmeasured_cause"], "unknown");
    }
}
