//! `GET /api/v1/state`: the document built from the published snapshot, plus one run-history
//! read per running issue for its completed-session figures.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::domain::PollOutcome;
use crate::orchestrator::snapshot::Snapshot;
use crate::orchestrator::state::CheckHealth;

use super::AppState;
use super::attention;
use super::rows::{self, IssueSpend, opt_ts, ts};
use super::wording;

/// Completed-session figures of every running issue (`None` per issue when unreadable).
pub fn running_spend(state: &AppState, snap: &Snapshot) -> BTreeMap<String, Option<IssueSpend>> {
    let mut out = BTreeMap::new();
    if snap.running.is_empty() {
        return out;
    }
    let ids: Vec<&str> = snap.running.iter().map(|r| r.issue.id.as_str()).collect();
    let all = state
        .store
        .read_conn()
        .ok()
        .and_then(|c| IssueSpend::read_many(&c, &ids));
    for id in ids {
        out.insert(
            id.to_string(),
            all.as_ref().and_then(|m| m.get(id).copied()),
        );
    }
    out
}

fn check<E>(c: &CheckHealth<E>) -> Map<String, Value> {
    let failing = c.failing_streak > 0;
    let mut m = Map::new();
    m.insert(
        "status".into(),
        if failing { "fail" } else { "pass" }.into(),
    );
    m.insert("checked_at".into(), opt_ts(c.checked_at_ms));
    m.insert("last_success_at".into(), opt_ts(c.last_success_ms));
    m.insert("consecutive_failures".into(), json!(c.failing_streak));
    m.insert(
        "failing_since".into(),
        if failing {
            opt_ts(c.since_ms)
        } else {
            Value::Null
        },
    );
    if failing && let Some(e) = &c.error {
        m.insert("error".into(), e.clone().into());
    }
    m
}

/// The `health` member.
pub fn health(snap: &Snapshot) -> Value {
    let h = &snap.health;
    let mut workflow = check(&h.workflow);
    workflow.insert("file".into(), snap.config.workflow_file.clone().into());
    let poll = &h.poll;
    let polled = poll.at_ms.is_some();
    let failing = polled && poll.outcome != Some(PollOutcome::Ok);
    let streak = if failing {
        poll.failing_streak.max(1)
    } else {
        0
    };
    let mut pm = Map::new();
    pm.insert(
        "status".into(),
        if failing { "fail" } else { "pass" }.into(),
    );
    pm.insert("checked_at".into(), opt_ts(poll.at_ms));
    pm.insert("last_success_at".into(), opt_ts(poll.last_success_ms));
    pm.insert("consecutive_failures".into(), json!(streak));
    pm.insert(
        "failing_since".into(),
        if failing {
            opt_ts(poll.failing_since_ms.or(poll.at_ms))
        } else {
            Value::Null
        },
    );
    if let Some(e) = poll.error.as_ref().filter(|_| failing) {
        pm.insert("error".into(), e.clone().into());
    }
    if polled {
        let outcome = match poll.outcome {
            Some(PollOutcome::Ok) => "succeeded",
            Some(o) => o.as_str(),
            None => "",
        };
        pm.insert("outcome".into(), outcome.into());
    }
    pm.insert(
        "next_poll_at".into(),
        match (snap.draining, poll.at_ms) {
            (true, _) => Value::Null,
            (false, Some(at)) => ts(at + snap.config.poll_interval_ms as i64),
            (false, None) => Value::Null,
        },
    );
    pm.insert(
        "summary_text".into(),
        wording::poll_summary(
            poll.outcome.map(PollOutcome::as_str),
            streak,
            poll.last_success_ms
                .map(|at| (snap.generated_at_ms - at).max(0)),
            true,
        )
        .into(),
    );
    json!({
        "database": Value::Object(check(&h.database)),
        "preflight": Value::Object(check(&h.preflight)),
        "workflow": Value::Object(workflow),
        "poll": Value::Object(pm),
        "scm": null,
    })
}

/// The `config` member: the workflow in force, without credentials.
pub fn config(snap: &Snapshot) -> Value {
    let c = &snap.config;
    let mut tracker = Map::new();
    tracker.insert("kind".into(), c.tracker_kind.clone().into());
    if let Some(p) = &c.tracker_project {
        tracker.insert("project".into(), p.clone().into());
    }
    tracker.insert("active_states".into(), json!(c.active_states));
    for (k, v) in [
        ("in_progress_state", &c.in_progress_state),
        ("handoff_state", &c.handoff_state),
        ("no_change_state", &c.no_change_state),
    ] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            tracker.insert(k.into(), v.clone().into());
        }
    }
    tracker.insert("terminal_states".into(), json!(c.terminal_states));
    json!({
        "tracker": Value::Object(tracker),
        "polling": {"interval_ms": c.poll_interval_ms},
        "agent": {
            "kind": c.agent_kind,
            "usage_arrival": match rows::usage_arrival_of(&c.agent_kind) {
                "" => "none",
                a => a,
            },
            "max_turns": c.max_turns,
            "stall_timeout_ms": c.stall_timeout_ms,
            "max_retry_backoff_ms": c.max_retry_backoff_ms,
            "max_sessions": c.max_sessions,
            "max_tokens": c.max_tokens,
            "max_cost_usd": c.max_cost_usd,
            "max_concurrent_agents": c.max_concurrent_agents,
            "max_concurrent_agents_by_state": c.max_concurrent_agents_by_state,
        },
        "worker": {"ssh_hosts": [], "max_concurrent_agents_per_host": null},
        "dispatch": {
            "rules": [],
            "default": null,
            "chains": [],
            "max_consecutive_hops": null,
            "hop_ceiling": 10,
        },
        "reactions": {},
        "token_rates": null,
    })
}

fn active_entry(row: &Value, status: &str) -> (Option<String>, String, String, Value) {
    let mut m = Map::new();
    for k in [
        "issue_id",
        "issue_identifier",
        "display_identifier",
        "issue_title",
        "issue_url",
    ] {
        if let Some(v) = row.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert("status".into(), status.into());
    for k in ["rule_name"] {
        if let Some(v) = row.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    m.insert(
        "stage_position".into(),
        row.get("stage_position").cloned().unwrap_or(Value::Null),
    );
    for k in ["agent_kind", "configured_model"] {
        if let Some(v) = row.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    let dispatched = row.get("dispatched_at").cloned().unwrap_or(Value::Null);
    m.insert("dispatched_at".into(), dispatched.clone());
    for k in ["status_text", "status_text_full"] {
        m.insert(
            k.into(),
            row.get(k)
                .cloned()
                .unwrap_or_else(|| wording::NOT_AVAILABLE.into()),
        );
    }
    m.insert("pr_loop".into(), json!({}));
    let s = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    (
        dispatched.as_str().map(str::to_string),
        s("issue_identifier"),
        s("issue_id"),
        Value::Object(m),
    )
}

/// The `active` list: one entry per issue, by status precedence, ordered by place (earliest
/// `dispatched_at`, undated first), then identifier, then id.
pub fn active(lists: &[(&str, &[Value])]) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut firsts: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (_, rows) in lists {
        for r in rows.iter() {
            let id = r.get("issue_id").and_then(Value::as_str).unwrap_or("");
            let d = r
                .get("dispatched_at")
                .and_then(Value::as_str)
                .map(str::to_string);
            let e = firsts.entry(id.to_string()).or_insert(None);
            if let Some(d) = d
                && e.as_ref().is_none_or(|cur| d < *cur)
            {
                *e = Some(d);
            }
        }
    }
    let mut entries = Vec::new();
    for (status, rows) in lists {
        for r in rows.iter() {
            let id = r
                .get("issue_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !seen.insert(id.clone()) {
                continue;
            }
            let (_, ident, iid, v) = active_entry(r, status);
            let place = firsts.get(&id).cloned().flatten();
            entries.push((place, ident, iid, v));
        }
    }
    entries.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
            .then_with(|| a.2.as_bytes().cmp(b.2.as_bytes()))
    });
    entries.into_iter().map(|e| e.3).collect()
}

/// The whole document.
pub fn document(state: &AppState, snap: &Snapshot) -> Value {
    let now = snap.generated_at_ms;
    let cfg = &snap.config;
    let spend = running_spend(state, snap);
    let running: Vec<Value> = snap
        .running
        .iter()
        .map(|r| rows::running_row(r, cfg, spend.get(&r.issue.id).copied().flatten(), now))
        .collect();
    let retrying: Vec<Value> = snap
        .retrying
        .iter()
        .map(|r| rows::retry_row(r, cfg, now))
        .collect();
    let mut budget: Vec<Value> = snap
        .budget_exhausted
        .iter()
        .map(|b| rows::budget_row(b, cfg))
        .collect();
    rows::sort_by_issue(&mut budget);
    let mut parked: Vec<Value> = snap
        .parked
        .iter()
        .map(|p| rows::parked_row(p, cfg))
        .collect();
    rows::sort_by_issue(&mut parked);
    let mut held: Vec<Value> = snap.held.iter().map(rows::held_row).collect();
    rows::sort_by_issue(&mut held);
    let active = active(&[
        ("running", &running),
        ("retrying", &retrying),
        ("budget_exhausted", &budget),
        ("parked", &parked),
    ]);
    let items = attention::items(snap);
    let unacked = items
        .iter()
        .filter(|i| i.json.get("acknowledged_at") == Some(&Value::Null))
        .count();
    let (mut unreported, mut non_reporting) = (0u64, 0u64);
    for r in &snap.running {
        let u = rows::row_usage(r, &cfg.agent_kind);
        if !u.measured {
            if u.awaited {
                unreported += 1;
            } else {
                non_reporting += 1;
            }
        }
    }
    let t = &snap.totals;
    // Elapsed time of the sessions running now counts too.
    let live_seconds: f64 = snap
        .running
        .iter()
        .map(|r| ((now - r.started_at_ms).max(0) as f64) / 1000.0)
        .sum();
    let mut doc = Map::new();
    doc.insert("generated_at".into(), ts(now));
    doc.insert("version".into(), state.version.into());
    doc.insert("started_at".into(), ts(snap.started_at_ms));
    doc.insert(
        "counts".into(),
        json!({
            "running": running.len(),
            "retrying": retrying.len(),
            "budget_exhausted": budget.len(),
            "parked": parked.len(),
            "pending_reactions": 0,
            "between_stages": 0,
            "held": held.len(),
            "attention": unacked,
        }),
    );
    doc.insert("running".into(), Value::Array(running));
    doc.insert("retrying".into(), Value::Array(retrying));
    doc.insert("budget_exhausted".into(), Value::Array(budget));
    doc.insert("parked".into(), Value::Array(parked));
    doc.insert("pending_reactions".into(), json!([]));
    doc.insert("between_stages".into(), json!([]));
    doc.insert("active".into(), Value::Array(active));
    doc.insert("held".into(), Value::Array(held));
    doc.insert(
        "attention".into(),
        Value::Array(items.into_iter().map(|i| i.json).collect()),
    );
    doc.insert(
        "agent_totals".into(),
        json!({
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "total_tokens": t.total_tokens,
            "cache_read_tokens": t.cache_read_tokens,
            "cache_write_tokens": t.cache_write_tokens,
            "seconds_running": t.seconds_running + live_seconds,
            "unmeasured_sessions": t.unmeasured_sessions,
            "running_unreported": unreported,
            "running_non_reporting": non_reporting,
        }),
    );
    doc.insert("rate_limits".into(), json!({}));
    doc.insert("config".into(), config(snap));
    doc.insert("health".into(), health(snap));
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_orders_by_place_then_identifier() {
        let running = vec![
            json!({"issue_id": "2", "issue_identifier": "B", "dispatched_at": "2026-01-01T00:00:02.000Z", "status_text": "Turn 1", "status_text_full": "Running, turn 1."}),
        ];
        let retrying = vec![
            json!({"issue_id": "1", "issue_identifier": "A", "dispatched_at": "2026-01-01T00:00:03.000Z", "status_text": "x", "status_text_full": "x."}),
            json!({"issue_id": "2", "issue_identifier": "B", "dispatched_at": "2026-01-01T00:00:01.000Z", "status_text": "y", "status_text_full": "y."}),
        ];
        let parked = vec![
            json!({"issue_id": "3", "issue_identifier": "C", "dispatched_at": null, "status_text": "p", "status_text_full": "p."}),
        ];
        let a = active(&[
            ("running", &running),
            ("retrying", &retrying),
            ("parked", &parked),
        ]);
        let ids: Vec<&str> = a
            .iter()
            .map(|v| v["issue_id"].as_str().unwrap_or(""))
            .collect();
        // Undated first; issue 2 is placed by its earliest row (its retry row) but its status
        // is running by precedence.
        assert_eq!(ids, vec!["3", "2", "1"]);
        assert_eq!(a[1]["status"], "running");
        assert_eq!(a[1]["status_text"], "Turn 1");
    }

    #[test]
    fn health_before_the_first_poll() {
        let snap = Snapshot::default();
        let h = health(&snap);
        assert_eq!(h["poll"]["status"], "pass");
        assert_eq!(
            h["poll"]["summary_text"],
            "Sortie has not polled the tracker yet."
        );
        assert!(h["poll"].get("outcome").is_none());
        assert_eq!(h["database"]["checked_at"], Value::Null);
        assert!(h["database"].get("error").is_none());
    }
}
