//! Run history routes: `GET /api/v1/runs`, `GET /api/v1/runs/issues` and
//! `GET /api/v1/runs/{dispatch_id}/events`, read through a read-only connection per request.

use std::collections::BTreeMap;

use rusqlite::OptionalExtension;
use serde_json::{Map, Value, json};

use crate::store::{ReadConn, RuleFilter, RunFilter, RunRecord};

use super::AppState;
use super::event_json;
use super::query;
use super::respond::{ApiError, JsonReply};
use super::rows::{self, ts};
use super::wording;

/// How the issue ended, as stored.
pub fn outcome_json(conn: &ReadConn, issue_id: &str) -> Result<Value, ApiError> {
    let row = conn
        .connection()
        .query_row(
            "SELECT kind, observed_at_ms, state, merge_path, pr_number, pr_repository
             FROM issue_outcomes WHERE issue_id = ?1",
            [issue_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, String>(5)?,
                ))
            },
        )
        .optional()
        .map_err(ApiError::history_unavailable)?;
    let Some((kind, at, state, merge_path, pr_number, pr_repo)) = row else {
        return Ok(Value::Null);
    };
    let mut m = Map::new();
    m.insert("kind".into(), kind.clone().into());
    m.insert("observed_at".into(), ts(at));
    if kind == "merged" {
        m.insert("merge_path".into(), merge_path.into());
        m.insert(
            "pull_request".into(),
            json!({"number": pr_number, "repository": pr_repo}),
        );
    } else {
        m.insert("state".into(), state.clone().into());
    }
    let pair = wording::history(Some(&kind), &state);
    m.insert("status_text".into(), pair.short.into());
    m.insert("status_text_full".into(), pair.full.into());
    Ok(Value::Object(m))
}

fn put_nonempty(m: &mut Map<String, Value>, k: &str, v: &str) {
    if !v.is_empty() {
        m.insert(k.into(), v.into());
    }
}

/// One run in the seed's shape. `pr_loop` is `{}` on the runs route (no reactions configured
/// in this build) and `null` inside groups and issue history.
pub fn run_json(r: &RunRecord, outcome: &Value, in_group: bool) -> Value {
    let mut m = Map::new();
    let measured = r.usage_completeness != "unmeasured" && r.tokens_measured;
    m.insert("run_id".into(), r.run_id.into());
    m.insert("issue_id".into(), r.issue_id.clone().into());
    m.insert("issue_identifier".into(), r.identifier.clone().into());
    put_nonempty(&mut m, "display_identifier", &r.display_identifier);
    put_nonempty(&mut m, "issue_title", &r.issue_title);
    put_nonempty(&mut m, "issue_url", &r.issue_url);
    m.insert("attempt".into(), r.attempt.into());
    m.insert("status".into(), r.status.clone().into());
    m.insert("error".into(), json!(r.error));
    m.insert(
        "declared_outcome".into(),
        json!(r.declared_outcome.as_deref().filter(|s| !s.is_empty())),
    );
    m.insert(
        "agent_text".into(),
        json!(
            r.agent_text
                .as_deref()
                .filter(|s| !s.is_empty() && r.declared_outcome.is_some())
        ),
    );
    put_nonempty(&mut m, "rule_name", &r.rule_name);
    put_nonempty(&mut m, "agent_kind", &r.agent_kind);
    put_nonempty(&mut m, "configured_model", &r.configured_model);
    put_nonempty(&mut m, "configured_effort", &r.configured_effort);
    put_nonempty(&mut m, "model_name", &r.reported_model);
    put_nonempty(&mut m, "workflow_file", &r.workflow_file);
    m.insert("started_at".into(), ts(r.started_at_ms));
    m.insert("completed_at".into(), ts(r.completed_at_ms));
    m.insert("dispatched_at".into(), rows::opt_ts(r.dispatched_at_ms));
    m.insert("turns_completed".into(), r.turns_completed.into());
    let n = |v: i64| if measured { json!(v) } else { Value::Null };
    m.insert(
        "tokens".into(),
        json!({
            "input_tokens": n(r.input_tokens),
            "output_tokens": n(r.output_tokens),
            "total_tokens": n(r.total_tokens),
            "cache_read_tokens": n(r.cache_read_tokens),
            "cache_write_tokens": n(r.cache_write_tokens),
        }),
    );
    m.insert("uncached_tokens".into(), n(r.uncached_tokens()));
    let completeness = match r.usage_completeness.as_str() {
        "complete" | "lower_bound" | "unmeasured" => r.usage_completeness.clone(),
        "partial" => "lower_bound".into(),
        _ if !r.tokens_measured => "unmeasured".into(),
        _ if r.unaccounted_turns > 0 => "lower_bound".into(),
        _ => "complete".into(),
    };
    m.insert("usage_completeness".into(), completeness.clone().into());
    m.insert(
        "usage_provenance".into(),
        r.usage_provenance.clone().unwrap_or(Value::Null),
    );
    m.insert(
        "vendor_amounts".into(),
        r.vendor_amounts.clone().unwrap_or(Value::Null),
    );
    let unmeasured = completeness == "unmeasured";
    m.insert(
        "unmeasured_cause".into(),
        if unmeasured {
            json!(r.unmeasured_cause.clone().unwrap_or_else(|| {
                if r.status == "succeeded" {
                    "no_usage".into()
                } else {
                    "ended_early".into()
                }
            }))
        } else {
            Value::Null
        },
    );
    m.insert("unmeasured_units".into(), json!([]));
    m.insert("estimated_cost_usd".into(), json!(r.estimated_cost_usd));
    m.insert(
        "cost_status".into(),
        if unmeasured {
            "unmeasured".to_string()
        } else if r.cost_status.is_empty() {
            "unpriced".to_string()
        } else {
            r.cost_status.clone()
        }
        .into(),
    );
    m.insert(
        "model_usage".into(),
        r.model_usage.clone().unwrap_or_else(|| json!([])),
    );
    put_nonempty(&mut m, "chain_id", &r.chain_id);
    put_nonempty(&mut m, "stage_previous", &r.stage_previous);
    put_nonempty(&mut m, "stage_previous_outcome", &r.stage_previous_outcome);
    put_nonempty(&mut m, "stage_target", &r.stage_target);
    put_nonempty(&mut m, "stage_result", &r.stage_result);
    m.insert("stage_chain".into(), Value::Null);
    m.insert(
        "self_review".into(),
        match &r.review_metadata {
            Some(v) if v.is_object() => json!({
                "final_verdict": v.get("final_verdict").cloned().unwrap_or_else(|| "none".into()),
                "total_iterations": v.get("total_iterations").cloned().unwrap_or(Value::Null),
                "cap_reached": v.get("cap_reached").cloned().unwrap_or(Value::Null),
            }),
            _ => Value::Null,
        },
    );
    let origin = r.trigger.is_some() || r.dispatch_id.is_some();
    m.insert("origin_recorded".into(), origin.into());
    let origin_member = |v: &Option<String>| -> Value {
        if origin {
            json!(v.clone().unwrap_or_default())
        } else {
            Value::Null
        }
    };
    m.insert("trigger".into(), origin_member(&r.trigger));
    m.insert("reaction_kind".into(), origin_member(&r.reaction_kind));
    m.insert(
        "reaction_config_key".into(),
        origin_member(&r.reaction_config_key),
    );
    m.insert("session_id".into(), origin_member(&r.session_id));
    m.insert("ssh_host".into(), origin_member(&r.ssh_host));
    m.insert("dispatch_id".into(), json!(r.dispatch_id));
    m.insert(
        "pr_loop".into(),
        if in_group { Value::Null } else { json!({}) },
    );
    if let Some(Value::Array(skills)) = &r.skills
        && !skills.is_empty()
    {
        m.insert("skills".into(), Value::Array(skills.clone()));
    }
    m.insert("issue_outcome".into(), outcome.clone());
    Value::Object(m)
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

/// Parses the `GET /api/v1/runs` parameters: `(filter, cursor, limit)`.
pub fn parse_runs_query(url: &str) -> Result<(RunFilter, Option<i64>, usize), ApiError> {
    let q = query::strict(
        url,
        &[
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
        ],
    )?;
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

fn outcomes_for(conn: &ReadConn, runs: &[RunRecord]) -> Result<BTreeMap<String, Value>, ApiError> {
    let mut out = BTreeMap::new();
    for r in runs {
        if !out.contains_key(&r.issue_id) {
            out.insert(r.issue_id.clone(), outcome_json(conn, &r.issue_id)?);
        }
    }
    Ok(out)
}

pub fn list_runs(state: &AppState, url: &str) -> Result<JsonReply, ApiError> {
    let (filter, cursor, limit) = parse_runs_query(url)?;
    let conn = state
        .store
        .read_conn()
        .map_err(ApiError::history_unavailable)?;
    let page = conn
        .list_runs(&filter, cursor, limit)
        .map_err(ApiError::history_unavailable)?;
    let outcomes = outcomes_for(&conn, &page.runs)?;
    let runs: Vec<Value> = page
        .runs
        .iter()
        .map(|r| run_json(r, outcomes.get(&r.issue_id).unwrap_or(&Value::Null), false))
        .collect();
    Ok(JsonReply::ok(json!({
        "runs": runs,
        "next_cursor": page.next_cursor.map(|c| c.to_string()),
    })))
}

/// The issue's spend over all of its runs (the `totals` of a group and of issue history).
pub fn issue_totals(conn: &ReadConn, issue_id: &str) -> Result<Value, ApiError> {
    let row = conn
        .connection()
        .query_row(
            "SELECT COUNT(*),
                    COALESCE(SUM(tokens_measured = 0 AND status <> 'ci_failed'), 0),
                    COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                    COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
                    COALESCE(SUM(cache_write_tokens), 0),
                    COALESCE(SUM(MAX(total_tokens - cache_read_tokens, 0)), 0),
                    COALESCE(SUM(usage_completeness <> 'complete' AND status <> 'ci_failed'), 0),
                    SUM(estimated_cost_usd)
             FROM run_history WHERE issue_id = ?1",
            [issue_id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    [
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, i64>(6)?,
                    ],
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                    r.get::<_, Option<f64>>(9)?,
                ))
            },
        )
        .map_err(ApiError::history_unavailable)?;
    let (count, unmeasured, sums, uncached, incomplete, cost) = row;
    let complete = incomplete == 0 && unmeasured == 0;
    let fig = |v: i64| {
        if v == 0 && !complete {
            Value::Null
        } else {
            json!(v)
        }
    };
    let causes: Vec<String> = {
        let mut stmt = conn
            .connection()
            .prepare(
                "SELECT DISTINCT COALESCE(unmeasured_cause, '') FROM run_history
                 WHERE issue_id = ?1 AND tokens_measured = 0 AND status <> 'ci_failed'",
            )
            .map_err(ApiError::history_unavailable)?;
        let rows = stmt
            .query_map([issue_id], |r| r.get::<_, String>(0))
            .map_err(ApiError::history_unavailable)?;
        rows.filter_map(Result::ok).collect()
    };
    let cause = match causes.as_slice() {
        [] => Value::Null,
        [one] if one.is_empty() => "unknown".into(),
        [one] => one.clone().into(),
        _ => "mixed".into(),
    };
    let cost_status = if cost.is_some() {
        if complete { "estimated" } else { "partial" }
    } else if uncached == 0 && !complete {
        "unmeasured"
    } else {
        "unpriced"
    };
    Ok(json!({
        "run_count": count,
        "unmeasured_runs": unmeasured,
        "tokens": {
            "input_tokens": fig(sums[0]),
            "output_tokens": fig(sums[1]),
            "total_tokens": fig(sums[2]),
            "cache_read_tokens": fig(sums[3]),
            "cache_write_tokens": fig(sums[4]),
        },
        "uncached_tokens": fig(uncached),
        "tokens_complete": complete,
        "estimated_cost_usd": cost,
        "cost_status": cost_status,
        "unmeasured_cause": cause,
        "unmeasured_units": [],
        "vendor_amounts": [],
        "agent_priced_usd": null,
        "agent_priced_models": [],
    }))
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
        .read_conn()
        .map_err(ApiError::history_unavailable)?;
    let page = conn
        .list_issue_groups(&filter, cursor, limit)
        .map_err(ApiError::history_unavailable)?;
    let mut groups = Vec::new();
    for (issue_id, newest) in &page.groups {
        let run_filter = RunFilter {
            issue_id: Some(issue_id.clone()),
            issue_identifier: None,
            ..filter.clone()
        };
        let runs = conn
            .list_runs(&run_filter, Some(newest + 1), 5)
            .map_err(ApiError::history_unavailable)?;
        let outcome = outcome_json(&conn, issue_id)?;
        let newest_run = conn
            .list_runs(
                &RunFilter {
                    issue_id: Some(issue_id.clone()),
                    ..Default::default()
                },
                None,
                1,
            )
            .map_err(ApiError::history_unavailable)?;
        let head = newest_run.runs.first().or(runs.runs.first());
        let mut m = Map::new();
        m.insert("issue_id".into(), issue_id.clone().into());
        if let Some(h) = head {
            m.insert("issue_identifier".into(), h.identifier.clone().into());
            put_nonempty(&mut m, "display_identifier", &h.display_identifier);
            put_nonempty(&mut m, "issue_title", &h.issue_title);
            put_nonempty(&mut m, "issue_url", &h.issue_url);
        }
        let (status, pair) =
            super::issue_detail::live_status(&snap, issue_id).unwrap_or_else(|| {
                let kind = outcome.get("kind").and_then(Value::as_str);
                let st = outcome.get("state").and_then(Value::as_str).unwrap_or("");
                ("history", wording::history(kind, st))
            });
        m.insert("status".into(), status.into());
        m.insert("status_text".into(), pair.short.into());
        m.insert("status_text_full".into(), pair.full.into());
        m.insert("issue_outcome".into(), outcome.clone());
        m.insert(
            "runs".into(),
            Value::Array(
                runs.runs
                    .iter()
                    .map(|r| run_json(r, &outcome, true))
                    .collect(),
            ),
        );
        m.insert(
            "next_cursor".into(),
            json!(runs.next_cursor.map(|c| c.to_string())),
        );
        m.insert("totals".into(), issue_totals(&conn, issue_id)?);
        groups.push(Value::Object(m));
    }
    Ok(JsonReply::ok(json!({
        "groups": groups,
        "next_cursor": page.next_cursor.map(|c| c.to_string()),
    })))
}

/// Events of one run: live from the snapshot while it runs, else from the database.
pub fn run_events(state: &AppState, dispatch_id: &str) -> Result<JsonReply, ApiError> {
    let snap = state.orch.snapshot();
    if let Some(r) = snap.running.iter().find(|r| r.dispatch_id == dispatch_id) {
        let events: Vec<Value> = r
            .recent_events
            .iter()
            .map(|(seq, ev)| event_json::served_live(*seq, ev))
            .collect();
        return Ok(JsonReply::ok(json!({
            "dispatch_id": dispatch_id,
            "first_seq": r.recent_events.first().map(|(s, _)| *s),
            "events": events,
        })));
    }
    let not_retained = || {
        ApiError::new(
            404,
            "run_events_not_retained",
            format!("no events are retained for dispatch ID \"{dispatch_id}\""),
        )
    };
    let conn = state
        .store
        .read_conn()
        .map_err(ApiError::history_unavailable)?;
    let stored = conn
        .run_events(dispatch_id)
        .map_err(ApiError::history_unavailable)?
        .filter(|e| !e.events.is_empty())
        .ok_or_else(not_retained)?;
    let events: Vec<Value> = stored
        .events
        .iter()
        .map(|e| event_json::served(e.seq, &e.payload))
        .collect();
    Ok(JsonReply::ok(json!({
        "dispatch_id": dispatch_id,
        "first_seq": stored.events.first().map(|e| e.seq),
        "events": events,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            status: "failed".into(),
            tokens_measured: false,
            usage_completeness: "unmeasured".into(),
            ..Default::default()
        };
        let v = run_json(&r, &Value::Null, false);
        assert_eq!(v["tokens"]["total_tokens"], Value::Null);
        assert_eq!(v["uncached_tokens"], Value::Null);
        assert_eq!(v["unmeasured_cause"], "ended_early");
        assert_eq!(v["cost_status"], "unmeasured");
        assert_eq!(v["model_usage"], json!([]));
        assert_eq!(v["pr_loop"], json!({}));
    }
}
