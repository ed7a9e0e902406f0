//! Routing and the handlers of this build's routes.

use std::time::Duration;

use serde_json::{Value, json};
use tiny_http::{Header, Method, Request, Response};

use crate::clock::rfc3339_ms;
use crate::orchestrator::RefreshOutcome;
use crate::orchestrator::dispatch_pass::{HoldReason, SlotScope};
use crate::orchestrator::snapshot::Snapshot;

use super::AppState;

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn send_json(req: Request, status: u16, body: &Value, extra: &[(&str, &str)]) {
    let text = crate::mask::mask(&body.to_string());
    let mut resp = Response::from_string(text).with_status_code(status);
    for h in [
        header("Content-Type", "application/json; charset=utf-8"),
        header("Cache-Control", "no-store"),
        header("X-Content-Type-Options", "nosniff"),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    for (k, v) in extra {
        if let Some(h) = header(k, v) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}

/// The error envelope: `{"error": {"code": …, "message": …}}`.
fn send_error(req: Request, status: u16, code: &str, message: &str, extra: &[(&str, &str)]) {
    send_json(
        req,
        status,
        &json!({"error": {"code": code, "message": message}}),
        extra,
    );
}

/// Handles one request.
pub fn handle(state: &AppState, req: Request) {
    let path = req.url().split('?').next().unwrap_or("/").to_string();
    let method = req.method().clone();
    let allow = |req: Request, allowed: &str| {
        send_error(
            req,
            405,
            "method_not_allowed",
            &format!("method not allowed; allowed: {allowed}"),
            &[("Allow", allowed)],
        )
    };
    match path.as_str() {
        "/" => match method {
            Method::Get | Method::Head => {
                let mut resp = Response::empty(302);
                if let Some(h) = header("Location", "/ui/") {
                    resp.add_header(h);
                }
                let _ = req.respond(resp);
            }
            _ => allow(req, "GET, HEAD"),
        },
        "/livez" => match method {
            Method::Get | Method::Head => {
                let snap = state.orch.snapshot();
                if snap.draining {
                    send_json(req, 503, &json!({"status": "draining"}), &[]);
                } else {
                    send_json(req, 200, &json!({"status": "ok"}), &[]);
                }
            }
            _ => allow(req, "GET, HEAD"),
        },
        "/readyz" => match method {
            Method::Get | Method::Head => readyz(state, req),
            _ => allow(req, "GET, HEAD"),
        },
        "/api/v1/state" => match method {
            Method::Get | Method::Head => {
                let snap = state.orch.snapshot();
                send_json(req, 200, &state_json(&snap, state), &[]);
            }
            _ => allow(req, "GET, HEAD"),
        },
        "/api/v1/refresh" => match method {
            Method::Post => refresh(state, req),
            _ => allow(req, "POST"),
        },
        _ => send_error(req, 404, "not_found", &format!("no route for {path}"), &[]),
    }
}

fn readyz(state: &AppState, req: Request) {
    let snap = state.orch.snapshot();
    let h = &snap.health;
    let checks = json!({
        "database": h.database.ok || h.database.checked_at_ms.is_none(),
        "preflight": h.preflight.ok || h.preflight.checked_at_ms.is_none(),
        "workflow": h.workflow.ok || h.workflow.checked_at_ms.is_none(),
    });
    let ready = !snap.draining
        && checks
            .as_object()
            .map(|m| m.values().all(|v| v.as_bool() == Some(true)))
            .unwrap_or(false);
    let body = json!({
        "status": if ready { "ok" } else { "unavailable" },
        "checks": checks,
        "version": state.version,
        "uptime_seconds": ((state.clock.now_ms() - snap.started_at_ms).max(0) / 1000),
    });
    send_json(req, if ready { 200 } else { 503 }, &body, &[]);
}

fn refresh(state: &AppState, req: Request) {
    match state.orch.refresh(Duration::from_secs(5)) {
        Some(RefreshOutcome::Queued) => send_json(
            req,
            202,
            &json!({"queued": true, "coalesced": false, "requested_at": rfc3339_ms(state.clock.now_ms())}),
            &[],
        ),
        Some(RefreshOutcome::Coalesced) => send_json(
            req,
            202,
            &json!({"queued": true, "coalesced": true, "requested_at": rfc3339_ms(state.clock.now_ms())}),
            &[],
        ),
        Some(RefreshOutcome::Draining) => send_error(
            req,
            409,
            "draining",
            "sortie is shutting down and accepts no refresh",
            &[],
        ),
        None => send_error(
            req,
            503,
            "orchestrator_unavailable",
            "the orchestrator did not answer in time",
            &[],
        ),
    }
}

fn opt_ms(ms: Option<i64>) -> Value {
    ms.map(|m| Value::String(rfc3339_ms(m)))
        .unwrap_or(Value::Null)
}

fn issue_fields(issue: &crate::domain::Issue) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("issue_id".into(), issue.id.clone().into());
    m.insert("issue_identifier".into(), issue.identifier.clone().into());
    if !issue.title.is_empty() {
        m.insert("issue_title".into(), issue.title.clone().into());
    }
    if !issue.url.is_empty() {
        m.insert("issue_url".into(), issue.url.clone().into());
    }
    if !issue.state.is_empty() {
        m.insert("state".into(), issue.state.clone().into());
    }
    m.insert("issue_labels".into(), json!(issue.labels));
    m
}

fn hold_json(reason: &HoldReason, since_ms: i64) -> Value {
    let (blockers, slot) = match reason {
        HoldReason::BlockedBy(b) => (
            json!(
                b.iter()
                    .map(|r| {
                        let mut m = serde_json::Map::new();
                        m.insert("issue_id".into(), r.id.clone().into());
                        m.insert("issue_identifier".into(), r.identifier.clone().into());
                        if !r.state.is_empty() {
                            m.insert("state".into(), r.state.clone().into());
                        }
                        Value::Object(m)
                    })
                    .collect::<Vec<_>>()
            ),
            Value::Null,
        ),
        HoldReason::AgentSlotsFull { scope, used, limit } => {
            let mut m = serde_json::Map::new();
            match scope {
                SlotScope::Global => {
                    m.insert("scope".into(), "global".into());
                }
                SlotScope::State(s) => {
                    m.insert("scope".into(), "state".into());
                    m.insert("state".into(), s.clone().into());
                }
            }
            m.insert("used".into(), json!(used));
            m.insert("limit".into(), json!(limit));
            (Value::Null, Value::Object(m))
        }
    };
    json!({
        "reason": reason.code(),
        "held_since": rfc3339_ms(since_ms),
        "blockers": blockers,
        "slot": slot,
        "resets_at": null,
    })
}

/// The state document (the subset of the seed's `GET /api/v1/state` this build fills).
pub fn state_json(snap: &Snapshot, state: &AppState) -> Value {
    let running: Vec<Value> = snap
        .running
        .iter()
        .map(|r| {
            let mut m = issue_fields(&r.issue);
            m.insert("dispatch_id".into(), r.dispatch_id.clone().into());
            m.insert("attempt".into(), json!(r.attempt + 1));
            m.insert("turn_count".into(), json!(r.turn));
            m.insert("max_turns".into(), json!(r.max_turns));
            m.insert("started_at".into(), rfc3339_ms(r.started_at_ms).into());
            m.insert(
                "dispatched_at".into(),
                rfc3339_ms(r.dispatched_at_ms).into(),
            );
            m.insert("last_event_at".into(), opt_ms(r.last_event_at_ms));
            m.insert("last_event".into(), json!(r.last_event_type));
            m.insert("last_message".into(), json!(r.last_message));
            m.insert("session_id".into(), json!(r.session_id));
            m.insert("stall_at".into(), opt_ms(r.stall_at_ms));
            let tokens = match &r.tokens {
                Some(t) => json!({
                    "input_tokens": t.input_tokens,
                    "output_tokens": t.output_tokens,
                    "total_tokens": t.total_tokens,
                    "cache_read_tokens": t.cache_read_tokens,
                    "cache_write_tokens": t.cache_write_tokens,
                }),
                None => json!({
                    "input_tokens": null, "output_tokens": null, "total_tokens": null,
                    "cache_read_tokens": null, "cache_write_tokens": null,
                }),
            };
            m.insert("tokens".into(), tokens);
            m.insert("tokens_measured".into(), json!(r.tokens.is_some()));
            m.insert("api_request_count".into(), json!(r.api_request_count));
            m.insert("model".into(), json!(r.model));
            Value::Object(m)
        })
        .collect();
    let retrying: Vec<Value> = snap
        .retrying
        .iter()
        .map(|r| {
            let mut m = issue_fields(&r.issue);
            m.insert("attempt".into(), json!(r.attempt));
            m.insert("due_at".into(), rfc3339_ms(r.due_at_ms).into());
            m.insert("error".into(), json!(r.error));
            m.insert("trigger".into(), json!(r.trigger));
            Value::Object(m)
        })
        .collect();
    let held: Vec<Value> = snap
        .held
        .iter()
        .map(|h| {
            let mut m = issue_fields(&h.issue);
            m.insert("hold".into(), hold_json(&h.reason, h.since_ms));
            Value::Object(m)
        })
        .collect();
    let budget: Vec<Value> = snap
        .budget_exhausted
        .iter()
        .map(|b| {
            let mut m = issue_fields(&b.issue);
            m.insert("reason".into(), b.reason.into());
            m.insert("used".into(), json!(b.used));
            m.insert("limit".into(), json!(b.limit));
            m.insert("exhausted_at".into(), rfc3339_ms(b.since_ms).into());
            Value::Object(m)
        })
        .collect();
    let parked: Vec<Value> = snap
        .parked
        .iter()
        .map(|p| {
            let mut m = issue_fields(&p.issue);
            m.insert("reason".into(), p.reason.clone().into());
            m.insert("parked_at".into(), rfc3339_ms(p.parked_at_ms).into());
            m.insert("label".into(), p.label.clone().into());
            m.insert("label_applied".into(), json!(p.label_applied));
            Value::Object(m)
        })
        .collect();
    let t = &snap.totals;
    let check = |c: &crate::orchestrator::state::CheckHealth| {
        json!({
            "ok": c.ok,
            "checked_at": opt_ms(c.checked_at_ms),
            "error": c.error,
            "failing_streak": c.failing_streak,
        })
    };
    let h = &snap.health;
    json!({
        "counts": {
            "running": running.len(),
            "retrying": retrying.len(),
            "held": held.len(),
            "budget_exhausted": budget.len(),
            "parked": parked.len(),
        },
        "running": running,
        "retrying": retrying,
        "budget_exhausted": budget,
        "parked": parked,
        "held": held,
        "pending_reactions": [],
        "between_stages": [],
        "agent_totals": {
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "total_tokens": t.total_tokens,
            "cache_read_tokens": t.cache_read_tokens,
            "cache_write_tokens": t.cache_write_tokens,
            "seconds_running": t.seconds_running,
            "unmeasured_sessions": t.unmeasured_sessions,
            "dispatches": t.dispatches,
        },
        "health": {
            "database": check(&h.database),
            "preflight": check(&h.preflight),
            "workflow": check(&h.workflow),
            "poll": {
                "at": opt_ms(h.poll.at_ms),
                "outcome": h.poll.outcome,
                "error": h.poll.error,
                "candidates": h.poll.candidates,
                "dispatched": h.poll.dispatched,
            },
        },
        "config": {
            "workflow_path": snap.workflow_path,
            "tracker_kind": snap.tracker_kind,
            "agent_kind": snap.agent_kind,
            "poll_interval_ms": snap.poll_interval_ms,
            "max_concurrent_agents": snap.max_concurrent_agents,
        },
        "version": state.version,
        "started_at": rfc3339_ms(snap.started_at_ms),
        "generated_at": rfc3339_ms(snap.generated_at_ms),
    })
}
