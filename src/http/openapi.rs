//! The OpenAPI 3.1 document served at `GET /api/v1/openapi.json`, and a small validator for the
//! subset of JSON Schema it uses (`type`, `properties`, `required`, `items`, `enum`, `$ref`),
//! with which the tests keep the examples and live responses honest.

use serde_json::{Map, Value, json};

/// Every route the router serves: `(method, OpenAPI path)`.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/api/v1/state"),
    ("get", "/api/v1/runs"),
    ("get", "/api/v1/runs/issues"),
    ("get", "/api/v1/runs/{dispatch_id}/events"),
    ("get", "/api/v1/events"),
    ("get", "/api/v1/openapi.json"),
    ("get", "/api/v1/{identifier}"),
    ("post", "/api/v1/refresh"),
    ("post", "/api/v1/retries/{identifier}/run"),
    ("post", "/api/v1/reactions/{identifier}/{kind}/check"),
    ("post", "/api/v1/attention/{id}/acknowledge"),
];

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}

fn obj(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "required": required, "properties": props})
}

fn error_response(desc: &str, code: &str, message: &str) -> Value {
    json!({
        "description": desc,
        "content": {"application/json": {
            "schema": r("Error"),
            "example": {"error": {"code": code, "message": message}},
        }},
    })
}

fn json_response(desc: &str, schema: Value, example: Value) -> Value {
    json!({
        "description": desc,
        "content": {"application/json": {"schema": schema, "example": example}},
    })
}

fn path_param(name: &str, desc: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": desc, "schema": {"type": "string"}})
}

fn query_param(name: &str, desc: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": desc, "schema": {"type": "string"}})
}

fn method_not_allowed() -> Value {
    error_response(
        "Wrong method; the Allow header names the right one.",
        "method_not_allowed",
        "method DELETE is not allowed on this endpoint",
    )
}

fn cross_origin() -> Value {
    error_response(
        "A browser sent the request from a page on another origin; nothing changed.",
        "cross_origin_request_rejected",
        "a browser sent a state-changing request from another origin; nothing changed",
    )
}

fn schemas() -> Value {
    let tokens = obj(
        &[
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        ],
        json!({
            "input_tokens": nullable("integer"),
            "output_tokens": nullable("integer"),
            "total_tokens": nullable("integer"),
            "cache_read_tokens": nullable("integer"),
            "cache_write_tokens": nullable("integer"),
        }),
    );
    let sentences =
        json!({"status_text": {"type": "string"}, "status_text_full": {"type": "string"}});
    let mut running_props = json!({
        "issue_id": {"type": "string"}, "issue_identifier": {"type": "string"},
        "issue_labels": {"type": "array", "items": {"type": "string"}},
        "dispatch_id": {"type": "string"}, "turn_count": {"type": "integer"},
        "last_message": {"type": "string"}, "started_at": {"type": "string"},
        "dispatched_at": {"type": "string"}, "last_event_at": nullable("string"),
        "tokens": r("Tokens"), "uncached_tokens": nullable("integer"),
        "tokens_measured": {"type": "boolean"},
        "usage_arrival": {"enum": ["incremental", "turn_end", "none", ""]},
        "usage_attribution": {"enum": ["per_model", "session_total", "none", ""]},
        "tokens_awaited": {"type": "boolean"}, "tokens_pending": {"type": "boolean"},
        "api_request_count": nullable("integer"), "api_requests_measured": {"type": "boolean"},
        "used_sessions": nullable("integer"), "budget_sessions": nullable("integer"),
        "unmeasured_sessions": nullable("integer"), "issue_tokens_completed": nullable("integer"),
        "used_tokens": nullable("integer"), "used_tokens_complete": {"type": "boolean"},
        "budget_tokens": nullable("integer"), "budget_usd": nullable("number"),
        "estimated_cost_usd": nullable("number"),
        "cost_status": {"enum": ["estimated", "partial", "unpriced", "unmeasured"]},
        "issue_estimated_cost_usd": nullable("number"),
        "issue_cost_status": {"enum": ["estimated", "partial", "unpriced", "unmeasured"]},
        "stage_lineage": {"type": ["object", "null"]}, "stage_position": {"type": ["object", "null"]},
        "quiet_at": nullable("string"), "stall_at": nullable("string"),
        "stall_text": nullable("string"), "stall_text_full": nullable("string"),
        "stall_off_text": nullable("string"),
    });
    merge(&mut running_props, &sentences);
    let running = obj(
        &[
            "issue_id",
            "issue_identifier",
            "issue_labels",
            "status_text",
            "status_text_full",
            "dispatch_id",
            "turn_count",
            "dispatched_at",
            "tokens",
            "uncached_tokens",
            "tokens_measured",
            "usage_arrival",
            "usage_attribution",
            "tokens_awaited",
            "tokens_pending",
            "api_request_count",
            "api_requests_measured",
            "used_sessions",
            "budget_sessions",
            "unmeasured_sessions",
            "issue_tokens_completed",
            "used_tokens",
            "used_tokens_complete",
            "budget_tokens",
            "budget_usd",
            "estimated_cost_usd",
            "cost_status",
            "issue_estimated_cost_usd",
            "issue_cost_status",
            "stage_lineage",
            "stage_position",
            "quiet_at",
            "stall_at",
            "stall_text",
            "stall_text_full",
            "stall_off_text",
        ],
        running_props,
    );
    let mut retry_props = json!({
        "issue_id": {"type": "string"}, "issue_identifier": {"type": "string"},
        "attempt": {"type": "integer"}, "due_at": {"type": "string"},
        "dispatched_at": nullable("string"), "error": nullable("string"),
        "stage_lineage": {"type": ["object", "null"]}, "stage_position": {"type": ["object", "null"]},
        "paused": {"type": "boolean"},
    });
    merge(&mut retry_props, &sentences);
    let retry = obj(
        &[
            "issue_id",
            "issue_identifier",
            "attempt",
            "due_at",
            "dispatched_at",
            "stage_lineage",
            "stage_position",
            "paused",
            "status_text",
            "status_text_full",
        ],
        retry_props,
    );
    let hold = obj(
        &[
            "reason",
            "held_since",
            "blockers",
            "slot",
            "resets_at",
            "reason_text",
            "release_text",
        ],
        json!({
            "reason": {"type": "string"}, "held_since": {"type": "string"},
            "blockers": {"type": ["array", "null"]}, "slot": {"type": ["object", "null"]},
            "resets_at": nullable("string"), "reason_text": {"type": "string"},
            "release_text": {"type": "string"},
        }),
    );
    let attention = obj(
        &[
            "id",
            "kind",
            "severity",
            "since",
            "acknowledged_at",
            "reason_text",
            "why_text",
            "clears_text",
            "action",
            "evidence",
        ],
        json!({
            "id": {"type": "string"}, "kind": {"type": "string"},
            "severity": {"enum": ["critical", "warning"]}, "since": nullable("string"),
            "acknowledged_at": nullable("string"), "reason_text": {"type": "string"},
            "why_text": {"type": "string"}, "clears_text": {"type": "string"},
            "action": obj(&["kind"], json!({"kind": {"enum": ["open_issue", "open_pull_request", "acknowledge"]}})),
            "evidence": {"type": "object"},
        }),
    );
    let check = obj(
        &[
            "status",
            "checked_at",
            "last_success_at",
            "consecutive_failures",
            "failing_since",
        ],
        json!({
            "status": {"enum": ["pass", "fail"]}, "checked_at": nullable("string"),
            "last_success_at": nullable("string"), "consecutive_failures": {"type": "integer"},
            "failing_since": nullable("string"),
        }),
    );
    let state = obj(
        &[
            "generated_at",
            "version",
            "started_at",
            "counts",
            "running",
            "retrying",
            "budget_exhausted",
            "parked",
            "pending_reactions",
            "between_stages",
            "active",
            "held",
            "attention",
            "agent_totals",
            "rate_limits",
            "config",
            "health",
        ],
        json!({
            "generated_at": {"type": "string"}, "version": {"type": "string"},
            "started_at": {"type": "string"},
            "counts": obj(&["running", "retrying", "budget_exhausted", "parked", "pending_reactions", "between_stages", "held", "attention"], json!({})),
            "running": {"type": "array", "items": r("RunningRow")},
            "retrying": {"type": "array", "items": r("RetryRow")},
            "budget_exhausted": {"type": "array"}, "parked": {"type": "array"},
            "pending_reactions": {"type": "array"}, "between_stages": {"type": "array"},
            "active": {"type": "array", "items": obj(&["issue_id", "issue_identifier", "status", "stage_position", "dispatched_at", "status_text", "status_text_full", "pr_loop"], json!({}))},
            "held": {"type": "array", "items": obj(&["issue_id", "issue_identifier", "issue_labels", "hold", "status_text", "status_text_full"], json!({"hold": r("Hold")}))},
            "attention": {"type": "array", "items": r("AttentionItem")},
            "agent_totals": obj(&["input_tokens", "output_tokens", "total_tokens", "cache_read_tokens", "cache_write_tokens", "seconds_running", "unmeasured_sessions", "running_unreported", "running_non_reporting"], json!({})),
            "rate_limits": {"type": "object"},
            "config": obj(&["tracker", "polling", "agent", "worker", "dispatch", "reactions", "token_rates"], json!({})),
            "health": obj(&["database", "preflight", "workflow", "poll", "scm"], json!({
                "database": r("Check"), "preflight": r("Check"), "workflow": r("Check"),
                "poll": obj(&["status", "summary_text", "next_poll_at"], json!({"summary_text": {"type": "string"}})),
            })),
        }),
    );
    let run = obj(
        &[
            "run_id",
            "issue_id",
            "issue_identifier",
            "attempt",
            "status",
            "error",
            "declared_outcome",
            "agent_text",
            "started_at",
            "completed_at",
            "dispatched_at",
            "turns_completed",
            "tokens",
            "uncached_tokens",
            "usage_completeness",
            "unmeasured_cause",
            "unmeasured_units",
            "estimated_cost_usd",
            "cost_status",
            "model_usage",
            "stage_chain",
            "self_review",
            "origin_recorded",
            "dispatch_id",
            "pr_loop",
            "issue_outcome",
        ],
        json!({
            "run_id": {"type": "integer"}, "status": {"type": "string"},
            "error": nullable("string"), "tokens": r("Tokens"),
            "uncached_tokens": nullable("integer"),
            "usage_completeness": {"enum": ["complete", "lower_bound", "unmeasured"]},
            "model_usage": {"type": "array"}, "issue_outcome": {"type": ["object", "null"]},
            "dispatch_id": nullable("string"),
        }),
    );
    let event = obj(
        &["seq", "at", "event", "message", "text"],
        json!({
            "seq": {"type": "integer"}, "at": {"type": "string"}, "event": {"type": "string"},
            "message": {"type": "string"}, "text": {"type": "string"},
        }),
    );
    json!({
        "Error": obj(&["error"], json!({"error": obj(&["code", "message"], json!({"code": {"type": "string"}, "message": {"type": "string"}}))})),
        "Tokens": tokens,
        "RunningRow": running,
        "RetryRow": retry,
        "Hold": hold,
        "AttentionItem": attention,
        "Check": check,
        "State": state,
        "Run": run,
        "RunEvent": event,
        "Probe": obj(&["status"], json!({"status": {"enum": ["pass", "fail"]}})),
        "Readiness": obj(&["status", "version", "uptime_seconds", "checks"], json!({
            "status": {"enum": ["pass", "fail"]}, "version": {"type": "string"},
            "uptime_seconds": {"type": "number"},
            "checks": obj(&["database", "preflight", "workflow"], json!({})),
        })),
        "IssueDetail": obj(&["issue_identifier", "issue_id", "status", "status_text", "status_text_full", "next_outcomes", "issue", "workspace", "attempts", "running", "retry", "budget_exhausted", "parked", "pending_reactions", "between_stages", "recent_events", "last_error", "pr_loop", "tracked", "history"], json!({
            "status": {"enum": ["running", "retrying", "budget_exhausted", "parked", "pending_reactions", "between_stages", "history"]},
            "recent_events": {"type": "array", "items": r("RunEvent")},
            "history": {"type": ["object", "null"]},
        })),
    })
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
}

fn state_example() -> Value {
    json!({
        "generated_at": "2026-03-26T14:30:00.000Z", "version": "0.1.0",
        "started_at": "2026-03-26T13:28:10.000Z",
        "counts": {"running": 0, "retrying": 1, "budget_exhausted": 0, "parked": 0,
                   "pending_reactions": 0, "between_stages": 0, "held": 0, "attention": 0},
        "running": [],
        "retrying": [{
            "issue_id": "def456", "issue_identifier": "MT-650", "issue_labels": ["export"],
            "status_text": "Retry 3 in 5m: no agent slot was free",
            "status_text_full": "The retry came due and was not dispatched: no agent slot was free. Retry 3 in 5m.",
            "dispatched_at": "2026-03-26T14:02:41.000Z", "attempt": 3,
            "due_at": "2026-03-26T14:35:00.000Z", "error": "no available orchestrator slots",
            "trigger": "timer", "agent_kind": "mock", "stage_lineage": null,
            "stage_position": null, "paused": false,
        }],
        "budget_exhausted": [], "parked": [], "pending_reactions": [], "between_stages": [],
        "active": [{
            "issue_id": "def456", "issue_identifier": "MT-650", "status": "retrying",
            "stage_position": null, "agent_kind": "mock",
            "dispatched_at": "2026-03-26T14:02:41.000Z",
            "status_text": "Retry 3 in 5m: no agent slot was free",
            "status_text_full": "The retry came due and was not dispatched: no agent slot was free. Retry 3 in 5m.",
            "pr_loop": {},
        }],
        "held": [], "attention": [],
        "agent_totals": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                         "cache_read_tokens": 0, "cache_write_tokens": 0, "seconds_running": 0.0,
                         "unmeasured_sessions": 0, "running_unreported": 0, "running_non_reporting": 0},
        "rate_limits": {},
        "config": {"tracker": {"kind": "file", "active_states": ["To Do"], "terminal_states": ["Done"]},
                   "polling": {"interval_ms": 30000},
                   "agent": {"kind": "mock"}, "worker": {"ssh_hosts": [], "max_concurrent_agents_per_host": null},
                   "dispatch": {"rules": [], "default": null, "chains": [], "max_consecutive_hops": null, "hop_ceiling": 10},
                   "reactions": {}, "token_rates": null},
        "health": {
            "database": {"status": "pass", "checked_at": null, "last_success_at": null, "consecutive_failures": 0, "failing_since": null},
            "preflight": {"status": "pass", "checked_at": null, "last_success_at": null, "consecutive_failures": 0, "failing_since": null},
            "workflow": {"status": "pass", "checked_at": null, "last_success_at": null, "consecutive_failures": 0, "failing_since": null, "file": "WORKFLOW.md"},
            "poll": {"status": "pass", "checked_at": null, "last_success_at": null, "consecutive_failures": 0, "failing_since": null, "next_poll_at": null, "summary_text": "Sortie has not polled the tracker yet."},
            "scm": null,
        },
    })
}

/// The whole document.
pub fn document() -> Value {
    let get_state = json!({
        "summary": "System state",
        "responses": {
            "200": json_response("Snapshot returned.", r("State"), state_example()),
            "405": method_not_allowed(),
            "503": error_response("The snapshot could not be produced.", "snapshot_unavailable", "the orchestrator state snapshot could not be produced"),
        },
    });
    let runs_params: Vec<Value> = [
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
    ]
    .iter()
    .map(|p| {
        query_param(
            p,
            "See the HTTP API reference; an empty value is the same as an absent one.",
        )
    })
    .collect();
    let invalid = error_response(
        "Unknown or repeated parameter, or a malformed or out-of-range value.",
        "invalid_parameter",
        "parameter \"limit\" must be an integer from 1 to 200",
    );
    let history_unavailable = error_response(
        "Run history could not be read.",
        "history_unavailable",
        "run history could not be read: database is locked",
    );
    let group_params: Vec<Value> = ["issue", "rule", "status", "stage", "cursor", "limit"]
        .iter()
        .map(|p| query_param(p, "See the HTTP API reference."))
        .collect();
    let paths = json!({
        "/": {"get": {"summary": "Redirect to the dashboard", "responses": {"302": {"description": "Location: /ui/"}, "405": method_not_allowed()}}},
        "/livez": {"get": {"summary": "Liveness probe", "responses": {
            "200": json_response("Alive.", r("Probe"), json!({"status": "pass"})),
            "503": json_response("Draining.", r("Probe"), json!({"status": "fail"})),
            "405": method_not_allowed(),
        }}},
        "/readyz": {"get": {"summary": "Readiness probe", "responses": {
            "200": json_response("All checks pass.", r("Readiness"), json!({"status": "pass", "version": "0.1.0", "uptime_seconds": 3742.8, "checks": {"database": "pass", "preflight": "pass", "workflow": "pass"}})),
            "503": json_response("A check failed, or draining.", r("Readiness"), json!({"status": "fail", "version": "0.1.0", "uptime_seconds": 3742.8, "checks": {"database": "pass", "preflight": "fail", "workflow": "pass"}})),
            "405": method_not_allowed(),
        }}},
        "/api/v1/state": {"get": get_state},
        "/api/v1/runs": {"get": {"summary": "Run history, newest first", "parameters": runs_params, "responses": {
            "200": json_response("Page returned.", obj(&["runs", "next_cursor"], json!({"runs": {"type": "array", "items": r("Run")}, "next_cursor": nullable("string")})), json!({"runs": [], "next_cursor": null})),
            "400": invalid.clone(), "405": method_not_allowed(), "503": history_unavailable.clone(),
        }}},
        "/api/v1/runs/issues": {"get": {"summary": "Run history by issue", "parameters": group_params, "responses": {
            "200": json_response("Page returned.", obj(&["groups", "next_cursor"], json!({"groups": {"type": "array"}, "next_cursor": nullable("string")})), json!({"groups": [], "next_cursor": null})),
            "400": invalid.clone(), "405": method_not_allowed(), "503": history_unavailable.clone(),
        }}},
        "/api/v1/runs/{dispatch_id}/events": {"get": {"summary": "The agent events kept for one run", "parameters": [path_param("dispatch_id", "A dispatch ID.")], "responses": {
            "200": json_response("Events returned.", obj(&["dispatch_id", "first_seq", "events"], json!({"dispatch_id": {"type": "string"}, "first_seq": nullable("integer"), "events": {"type": "array", "items": r("RunEvent")}})),
                json!({"dispatch_id": "RLQFSIOFERWGDW2HZY45W55VXK", "first_seq": 1, "events": [{"seq": 1, "at": "2026-03-26T14:10:14.000Z", "event": "session_started", "message": "", "session_id": "s-1", "text": "Session started."}]})),
            "404": error_response("No events for the dispatch ID.", "run_events_not_retained", "no events are retained for dispatch ID \"X\""),
            "405": method_not_allowed(), "503": history_unavailable.clone(),
        }}},
        "/api/v1/events": {"get": {"summary": "Server-sent change signals, heartbeats and agent events", "parameters": [query_param("run", "<dispatch_id> or <dispatch_id>:<seq>, up to 16 times.")], "responses": {
            "200": {"description": "The stream: frames `change`, `heartbeat`, `agent_event`, `run_ended`, `reset`, each with an id `revision;<dispatch_id>:<seq>…`.", "content": {"text/event-stream": {"schema": {"type": "string"}, "example": "id: 1792000000000000000\nevent: change\ndata: {}\n\n"}}},
            "400": error_response("A run parameter broke its rules.", "invalid_parameter", "parameter \"run\" must not be empty"),
            "405": method_not_allowed(),
        }}},
        "/api/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "The OpenAPI document.", "content": {"application/json": {"schema": {"type": "object"}}}}, "405": method_not_allowed()}}},
        "/api/v1/{identifier}": {"get": {"summary": "Issue detail and run history", "parameters": [path_param("identifier", "The issue identifier, e.g. MT-649.")], "responses": {
            "200": json_response("Issue found.", r("IssueDetail"), json!({
                "issue_identifier": "MT-649", "issue_id": "abc123", "status": "history",
                "status_text": "Handed off to Human Review", "status_text_full": "Handed off: Sortie moved the issue to Human Review.",
                "next_outcomes": [], "issue": {"title": "Fix the flaky login test"}, "workspace": null,
                "attempts": {"restart_count": 0, "current_retry_attempt": 0}, "running": null, "retry": null,
                "budget_exhausted": null, "parked": null, "pending_reactions": [], "between_stages": null,
                "recent_events": [], "last_error": null, "pr_loop": {}, "tracked": {}, "history": null,
            })),
            "404": error_response("Neither the state nor run history holds the identifier.", "issue_not_found", "issue identifier \"XYZ-999\" not found in current state or run history"),
            "405": method_not_allowed(), "503": history_unavailable.clone(),
        }}},
        "/api/v1/refresh": {"post": {"summary": "Trigger a poll cycle", "responses": {
            "202": json_response("Queued, or joined a queued refresh.", obj(&["queued", "coalesced", "requested_at", "operations", "outcome_text"], json!({"queued": {"type": "boolean"}, "coalesced": {"type": "boolean"}, "operations": {"type": "array"}, "outcome_text": {"type": "string"}})),
                json!({"queued": true, "coalesced": false, "requested_at": "2026-03-26T14:30:05.000Z", "operations": ["poll", "reconcile"], "outcome_text": "Tracker poll and reconciliation queued."})),
            "403": cross_origin(), "405": method_not_allowed(),
            "409": json_response("Draining.", obj(&["queued", "coalesced", "requested_at", "operations", "outcome_text"], json!({})),
                json!({"queued": false, "coalesced": false, "requested_at": "2026-03-26T14:30:05.000Z", "operations": [], "outcome_text": "Nothing queued: Sortie is shutting down."})),
        }}},
        "/api/v1/retries/{identifier}/run": {"post": {"summary": "Make a scheduled retry due now", "parameters": [path_param("identifier", "The retry's issue identifier.")], "responses": {
            "202": json_response("The retry is due now.", obj(&["queued", "requested_at", "issue_id", "issue_identifier", "attempt", "outcome_text"], json!({})),
                json!({"queued": true, "requested_at": "2026-03-26T14:31:10.000Z", "issue_id": "def456", "issue_identifier": "MT-650", "attempt": 3, "outcome_text": "Retry 3 of MT-650 is due now."})),
            "403": cross_origin(),
            "404": error_response("No retry scheduled.", "retry_not_found", "no retry is scheduled for issue \"MT-999\""),
            "405": method_not_allowed(),
            "409": json_response("Draining.", obj(&["queued", "requested_at", "outcome_text"], json!({})), json!({"queued": false, "requested_at": "2026-03-26T14:31:10.000Z", "outcome_text": "Nothing queued: Sortie is shutting down."})),
            "503": error_response("Not taken.", "retry_now_unavailable", "the retry request was not taken; nothing changed"),
        }}},
        "/api/v1/reactions/{identifier}/{kind}/check": {"post": {"summary": "Make a pending reaction's check due now (no reactions exist in this build)", "parameters": [path_param("identifier", "Issue identifier."), path_param("kind", "Reaction kind.")], "responses": {
            "403": cross_origin(),
            "404": error_response("No pending reaction of that kind.", "reaction_not_found", "no pending \"ci\" reaction for issue \"MT-653\""),
            "405": method_not_allowed(),
            "409": json_response("Draining.", obj(&["queued", "requested_at", "outcome_text"], json!({})), json!({"queued": false, "requested_at": "2026-03-26T14:31:10.000Z", "outcome_text": "Nothing queued: Sortie is shutting down."})),
        }}},
        "/api/v1/attention/{id}/acknowledge": {"post": {"summary": "Acknowledge an attention item", "parameters": [path_param("id", "The item id.")], "responses": {
            "200": json_response("Acknowledged, now or before.", obj(&["acknowledged", "already_acknowledged", "requested_at", "id", "kind", "acknowledged_at", "outcome_text"], json!({"acknowledged": {"type": "boolean"}, "already_acknowledged": {"type": "boolean"}})),
                json!({"acknowledged": true, "already_acknowledged": false, "requested_at": "2026-03-26T14:31:10.000Z", "id": "9ee206201099385b431c9bb01911553f", "kind": "parked", "issue_id": "jkl012", "issue_identifier": "MT-652", "acknowledged_at": "2026-03-26T14:31:10.000Z", "outcome_text": "Acknowledged MT-652 (Parked: the agent needs a person). It comes back only if a new cause appears."})),
            "403": cross_origin(),
            "404": error_response("No current item has the id.", "attention_item_not_found", "no current attention item has ID \"9ee206201099385b431c9bb01911553f\""),
            "405": method_not_allowed(),
            "409": json_response("Draining.", obj(&["acknowledged", "already_acknowledged", "requested_at", "outcome_text"], json!({})), json!({"acknowledged": false, "already_acknowledged": false, "requested_at": "2026-03-26T14:31:10.000Z", "outcome_text": "Nothing acknowledged: Sortie is shutting down."})),
            "500": error_response("Not saved.", "acknowledgement_not_saved", "the acknowledgement could not be saved: disk full"),
            "503": error_response("Not taken.", "acknowledge_unavailable", "the acknowledgement was not taken; nothing changed"),
        }}},
    });
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Sortie HTTP API",
            "version": crate::build_info::VERSION,
            "description": "JSON API, event stream and probes on sortie's one port. Every error uses the envelope {\"error\": {\"code\", \"message\"}}; a refused cross-origin state-changing request answers 403 cross_origin_request_rejected on every path.",
        },
        "paths": paths,
        "components": {"schemas": schemas()},
    })
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// Validates `v` against `schema` (resolving `$ref` in `doc`); the error names the path.
pub fn validate(schema: &Value, v: &Value, doc: &Value) -> Result<(), String> {
    validate_at(schema, v, doc, "$")
}

fn validate_at(schema: &Value, v: &Value, doc: &Value, at: &str) -> Result<(), String> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.trim_start_matches("#/components/schemas/");
        let target = doc
            .pointer(&format!("/components/schemas/{name}"))
            .ok_or_else(|| format!("{at}: unresolved {reference}"))?;
        return validate_at(target, v, doc, at);
    }
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(s) => type_matches(s, v),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|s| type_matches(s, v)),
            _ => true,
        };
        if !ok {
            return Err(format!("{at}: expected type {t}, got {v}"));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {allowed:?}"));
    }
    if let Some(obj) = v.as_object() {
        if let Some(Value::Array(req)) = schema.get("required") {
            for k in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(k) {
                    return Err(format!("{at}: missing required member {k}"));
                }
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (k, s) in props {
                if let Some(child) = obj.get(k) {
                    validate_at(s, child, doc, &format!("{at}.{k}"))?;
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, child) in arr.iter().enumerate() {
            validate_at(items, child, doc, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// The schema of a response in the document, for tests: `(path, method, status)`.
pub fn response_schema<'a>(
    doc: &'a Value,
    path: &str,
    method: &str,
    status: &str,
) -> Option<&'a Value> {
    doc.get("paths")?
        .get(path)?
        .get(method)?
        .get("responses")?
        .get(status)?
        .pointer("/content/application~1json/schema")
}

/// Every `(path, method, status, schema, example)` with a JSON example.
pub fn examples(doc: &Value) -> Vec<(String, String, String, Value, Value)> {
    let mut out = Vec::new();
    let empty = Map::new();
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (p, methods) in paths {
        for (m, op) in methods.as_object().unwrap_or(&empty) {
            let responses = op
                .get("responses")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            for (status, resp) in responses {
                if let (Some(s), Some(e)) = (
                    resp.pointer("/content/application~1json/schema"),
                    resp.pointer("/content/application~1json/example"),
                ) {
                    out.push((p.clone(), m.clone(), status.clone(), s.clone(), e.clone()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_route_is_described() {
        let doc = document();
        for (method, path) in ROUTES {
            assert!(
                doc.pointer(&format!("/paths/{}/{method}", path.replace('/', "~1")))
                    .is_some(),
                "{method} {path} is not in the OpenAPI document"
            );
        }
        let described = doc["paths"].as_object().map(|m| m.len()).unwrap_or(0);
        assert_eq!(
            described,
            ROUTES.len(),
            "the document describes a route the router lacks"
        );
    }

    #[test]
    fn every_example_validates() {
        let doc = document();
        let all = examples(&doc);
        assert!(all.len() > 20);
        for (p, m, status, schema, example) in all {
            if let Err(e) = validate(&schema, &example, &doc) {
                panic!("{m} {p} {status}: {e}");
            }
        }
    }

    #[test]
    fn validator_rejects_wrong_shapes() {
        let doc = document();
        let s = json!({"$ref": "#/components/schemas/Tokens"});
        assert!(validate(&s, &json!({"input_tokens": 1}), &doc).is_err());
        assert!(validate(&s, &json!({"input_tokens": "1", "output_tokens": null, "total_tokens": null, "cache_read_tokens": null, "cache_write_tokens": null}), &doc).is_err());
    }

    #[test]
    fn every_router_route_has_a_documented_template() {
        use super::super::router::{Route, route};
        let samples = [
            "/",
            "/livez",
            "/readyz",
            "/api/v1/state",
            "/api/v1/runs",
            "/api/v1/runs/issues",
            "/api/v1/runs/ABC/events",
            "/api/v1/events",
            "/api/v1/refresh",
            "/api/v1/retries/X-1/run",
            "/api/v1/reactions/X-1/ci/check",
            "/api/v1/attention/00ff/acknowledge",
            "/api/v1/openapi.json",
            "/api/v1/X-1",
        ];
        for p in samples {
            let r = route(p);
            assert_ne!(r, Route::NotFound, "{p}");
            let t = r
                .template()
                .unwrap_or_else(|| panic!("{p} has no template"));
            assert!(ROUTES.contains(&t), "{t:?} is served but not documented");
        }
        assert_eq!(samples.len(), ROUTES.len());
    }

    #[test]
    fn the_router_maps_each_documented_path() {
        for (_, path) in ROUTES {
            let concrete = path
                .replace("{dispatch_id}", "ABC")
                .replace("{identifier}", "MT-1")
                .replace("{kind}", "ci")
                .replace("{id}", "00ff");
            assert_ne!(
                super::super::router::route(&concrete),
                super::super::router::Route::NotFound,
                "{path}"
            );
        }
    }
}
