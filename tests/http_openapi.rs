//! The OpenAPI document against what sortie serves: a strict validator (every object closed,
//! every required member present, no empty schema), the document's own examples, and live
//! responses of the real binary checked against the documented schema of their route and
//! status.

mod common;

use std::time::Duration;

use common::schema_check::validate;
use common::*;
use serde_json::{Value, json};
use sortie::http::openapi;

const T: Duration = Duration::from_secs(30);

fn openapi_doc(d: &Daemon) -> Value {
    let r = d.get("/openapi.json");
    assert_eq!(r.status, 200);
    r.json()
}

/// The documented schema of a response; a missing one fails the test (never validates
/// against nothing).
fn schema_of(doc: &Value, path: &str, method: &str, status: u16) -> Value {
    openapi::response_schema(doc, path, method, &status.to_string())
        .cloned()
        .unwrap_or_else(|| panic!("{method} {path} {status} has no documented JSON schema"))
}

/// Fetches `url`, expects `status`, and validates the body against the documented schema of
/// `template` (the OpenAPI path).
fn check_live(
    d: &Daemon,
    doc: &Value,
    method: &str,
    url: &str,
    template: &str,
    status: u16,
) -> Value {
    let r = if method == "post" {
        d.post(url)
    } else {
        d.get(url)
    };
    assert_eq!(r.status, status, "{method} {url}: {}", r.body);
    let body = r.json();
    let schema = schema_of(doc, template, method, status);
    validate(&schema, &body, doc)
        .unwrap_or_else(|e| panic!("{method} {url} {status} breaks its schema: {e}\n{body}"));
    body
}

#[test]
fn every_example_validates() {
    let doc = openapi::document();
    let all = openapi::examples(&doc);
    assert!(all.len() > 20);
    for (p, m, status, schema, example) in all {
        if let Err(e) = validate(&schema, &example, &doc) {
            panic!("{m} {p} {status}: {e}");
        }
    }
}

#[test]
fn every_reference_resolves() {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    out.push(r.to_string());
                }
                m.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let doc = openapi::document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        assert!(r.starts_with("#/components/schemas/"), "{r}");
        assert!(doc.pointer(&r[1..]).is_some(), "{r} does not resolve");
    }
}

#[test]
fn validator_rejects_wrong_shapes() {
    let doc = openapi::document();
    let s = json!({"$ref": "#/components/schemas/Tokens"});
    let nulls = json!({"input_tokens": null, "output_tokens": null, "total_tokens": null, "cache_read_tokens": null, "cache_write_tokens": null});
    assert!(validate(&s, &nulls, &doc).is_ok());
    // A missing required member.
    assert!(validate(&s, &json!({"input_tokens": 1}), &doc).is_err());
    // A wrong type.
    let mut wrong = nulls.clone();
    wrong["input_tokens"] = json!("1");
    assert!(validate(&s, &wrong, &doc).is_err());
}

#[test]
fn validator_rejects_an_undocumented_member() {
    let doc = openapi::document();
    let s = json!({"$ref": "#/components/schemas/Tokens"});
    let mut extra = json!({"input_tokens": null, "output_tokens": null, "total_tokens": null, "cache_read_tokens": null, "cache_write_tokens": null});
    extra["stall_at_ms"] = json!(1);
    let e = validate(&s, &extra, &doc).err().unwrap_or_default();
    assert!(e.contains("stall_at_ms: undocumented member"), "{e}");
    // Nested too: an extra member inside a documented member of the state document.
    let mut state = openapi::examples(&doc)
        .into_iter()
        .find(|(p, _, status, _, _)| p == "/api/v1/state" && status == "200")
        .map(|(_, _, _, _, example)| example)
        .unwrap_or(Value::Null);
    state["health"]["poll"]["surprise"] = json!(true);
    let schema = schema_of(&doc, "/api/v1/state", "get", 200);
    let e = validate(&schema, &state, &doc).err().unwrap_or_default();
    assert!(
        e.contains("$.health.poll.surprise: undocumented member"),
        "{e}"
    );
}

#[test]
fn validator_rejects_empty_schemas_and_undocumented_items() {
    let doc = json!({});
    assert!(validate(&json!({}), &json!(1), &doc).is_err());
    assert!(validate(&json!(true), &json!(1), &doc).is_err());
    assert!(validate(&json!({"type": "array"}), &json!([1]), &doc).is_err());
    assert!(validate(&json!({"type": "object"}), &json!({"a": 1}), &doc).is_err());
    assert!(validate(&json!({"type": "object"}), &json!({}), &doc).is_ok());
}

#[test]
fn live_responses_of_a_running_session_match_the_document() {
    let (_s, d) = running_mock_daemon("  max_turns: 1\n  stall_timeout_ms: 600000\n");
    let doc = openapi_doc(&d);
    assert_eq!(doc["openapi"], "3.1.0");
    let state = check_live(&d, &doc, "get", "/api/v1/state", "/api/v1/state", 200);
    assert_eq!(state["running"].as_array().map(Vec::len), Some(1));
    let dispatch = state["running"][0]["dispatch_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    check_live(&d, &doc, "get", "/api/v1/T-1", "/api/v1/{identifier}", 200);
    check_live(
        &d,
        &doc,
        "get",
        &format!("/api/v1/runs/{dispatch}/events"),
        "/api/v1/runs/{dispatch_id}/events",
        200,
    );
    check_live(&d, &doc, "get", "/livez", "/livez", 200);
    check_live(&d, &doc, "get", "/readyz", "/readyz", 200);
    check_live(&d, &doc, "get", "/api/v1/runs", "/api/v1/runs", 200);
    check_live(
        &d,
        &doc,
        "get",
        "/api/v1/runs/issues",
        "/api/v1/runs/issues",
        200,
    );
    check_live(&d, &doc, "post", "/api/v1/refresh", "/api/v1/refresh", 202);
    check_live(
        &d,
        &doc,
        "get",
        "/api/v1/NOPE-1",
        "/api/v1/{identifier}",
        404,
    );
    check_live(&d, &doc, "get", "/api/v1/runs?limit=0", "/api/v1/runs", 400);
}

#[test]
fn live_responses_of_run_history_match_the_document() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_sessions: 1\n",
            "  events_per_turn: 2\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "H-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("the budget hold after one session", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "H-1"
    });
    let doc = openapi_doc(&d);
    let state = check_live(&d, &doc, "get", "/api/v1/state", "/api/v1/state", 200);
    assert_eq!(state["attention"].as_array().map(Vec::len), Some(1));
    let runs = check_live(&d, &doc, "get", "/api/v1/runs", "/api/v1/runs", 200);
    let dispatch = runs["runs"][0]["dispatch_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    check_live(
        &d,
        &doc,
        "get",
        "/api/v1/runs/issues",
        "/api/v1/runs/issues",
        200,
    );
    check_live(
        &d,
        &doc,
        "get",
        &format!("/api/v1/runs/{dispatch}/events"),
        "/api/v1/runs/{dispatch_id}/events",
        200,
    );
    check_live(&d, &doc, "get", "/api/v1/prices", "/api/v1/prices", 200);
    let detail = check_live(&d, &doc, "get", "/api/v1/H-1", "/api/v1/{identifier}", 200);
    assert!(detail["history"].is_object());
    let stats = check_live(&d, &doc, "get", "/api/v1/stats", "/api/v1/stats", 200);
    assert_eq!(stats["summary"]["runs"], 1);
    check_live(
        &d,
        &doc,
        "get",
        "/api/v1/stats?since=7d",
        "/api/v1/stats",
        400,
    );
    let id = state["attention"][0]["id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    check_live(
        &d,
        &doc,
        "post",
        &format!("/api/v1/attention/{id}/acknowledge"),
        "/api/v1/attention/{id}/acknowledge",
        200,
    );
    check_live(&d, &doc, "get", "/api/v1/state", "/api/v1/state", 200);
    check_live(
        &d,
        &doc,
        "post",
        "/api/v1/retries/H-1/run",
        "/api/v1/retries/{identifier}/run",
        404,
    );
}

#[test]
fn live_responses_of_a_hold_match_the_document() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_concurrent_agents_by_state: {\"to do\": 1}\n",
            "  turn_delay_ms: 600000\n",
        ),
        &issues(&[("1", "S-1", "To Do"), ("2", "S-2", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("one running, one held", T, |s| {
        s["counts"]["running"] == 1 && s["counts"]["held"] == 1
    });
    let doc = openapi_doc(&d);
    let state = check_live(&d, &doc, "get", "/api/v1/state", "/api/v1/state", 200);
    assert_eq!(state["held"][0]["hold"]["reason"], "agent_slots_full");
    let held = state["held"][0]["issue_identifier"]
        .as_str()
        .unwrap_or("")
        .to_string();
    // A held issue has no live row and no history yet.
    check_live(
        &d,
        &doc,
        "get",
        &format!("/api/v1/{held}"),
        "/api/v1/{identifier}",
        404,
    );
}

#[test]
fn live_responses_of_a_queued_retry_match_the_document() {
    let s = Setup::new(
        &mock_workflow("  max_turns: 1\n", "  turn_outcomes: [failed]\n"),
        &issues(&[("1", "R-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("a queued retry", T, |s| {
        s["retrying"][0]["issue_identifier"] == "R-1"
    });
    let doc = openapi_doc(&d);
    let state = check_live(&d, &doc, "get", "/api/v1/state", "/api/v1/state", 200);
    assert_eq!(state["active"][0]["status"], "retrying");
    let detail = check_live(&d, &doc, "get", "/api/v1/R-1", "/api/v1/{identifier}", 200);
    assert!(detail["retry"].is_object());
    check_live(
        &d,
        &doc,
        "get",
        "/api/v1/runs/issues",
        "/api/v1/runs/issues",
        200,
    );
    check_live(
        &d,
        &doc,
        "post",
        "/api/v1/retries/R-1/run",
        "/api/v1/retries/{identifier}/run",
        202,
    );
}
