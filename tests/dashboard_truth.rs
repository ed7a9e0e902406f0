//! What the dashboard's pages show, checked on the API they read, through the real binary with
//! the file tracker and the scripted fake agent: a running row serves the state sortie moved
//! the issue to; a slot hold is counted and worded against the running rows of the same
//! document, between polls too; the stats route's hour buckets carry the tokens, outcomes and
//! cost the Overview's charts draw. The pages themselves are checked in headless Chromium by
//! `tests/browser_issue_pages.rs`.

mod common;

use std::time::Duration;

use common::Project;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn issue(id: &str, ident: &str, pri: i64) -> Value {
    json!({"id": id, "identifier": ident, "title": format!("Issue {ident}"), "state": "To Do",
           "priority": pri})
}

fn hang() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "working", "input_tokens": 100, "output_tokens": 20}}),
        json!({"hang": true}),
    ]
}

fn success_after(ms: u64) -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"sleep_ms": ms}),
        json!({"assistant": {"text": "done", "input_tokens": 1000, "output_tokens": 200, "model": "fake-model-1"}}),
        json!({"result": {"subtype": "success", "text": "ok", "input_tokens": 10, "output_tokens": 5}}),
    ]
}

const TRACKER: &str = "  in_progress_state: In Progress\n  handoff_state: Review";

/// Polls far apart, so a test sees the document between two passes.
fn slow_polls(p: &Project) {
    let wf = std::fs::read_to_string(p.workflow()).unwrap_or_default();
    p.write(
        "WORKFLOW.md",
        &wf.replace("interval_ms: 200", "interval_ms: 600000"),
    );
}

fn rows<'a>(s: &'a Value, list: &str) -> Vec<&'a Value> {
    s[list]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// The row serves the transition's state before any later poll reads the issue again.
#[test]
fn a_running_row_serves_the_state_sortie_moved_the_issue_to() {
    let p = Project::new();
    p.issues(json!([issue("1", "R-1", 1)]));
    p.scenario("default", &hang());
    p.fake_agent_workflow_full(TRACKER, "", "");
    // No poll tick after the dispatch re-reads the state: only the transition's fact can.
    slow_polls(&p);
    let mut d = p.start();
    d.graceful_drop = true;
    d.wait_until("the tracker to say In Progress", WAIT, || {
        p.issue_state("1") == "In Progress"
    });
    let s = d.wait_state("the running row", WAIT, |s| {
        rows(s, "running")
            .first()
            .is_some_and(|r| r["state"] == "In Progress")
    });
    let row = &s["running"][0];
    assert_eq!(row["issue_identifier"], "R-1");
    let detail = d.get("/api/v1/R-1").json();
    assert_eq!(detail["issue"]["state"], "In Progress", "{detail}");
    assert_eq!(detail["running"]["state"], "In Progress");
}

/// With one slot, the pass holds S-2 while S-1 runs. Once S-1 ends, the document between two
/// polls shows no running session, so the hold says the slot was taken at the last poll and is
/// free now, and its `used` is the document's own count.
#[test]
fn a_slot_hold_agrees_with_the_running_rows_of_its_document() {
    let p = Project::new();
    p.issues(json!([issue("1", "S-1", 1), issue("2", "S-2", 2)]));
    p.scenario("S-1", &success_after(800));
    p.scenario("S-2", &hang());
    p.fake_agent_workflow_full(TRACKER, "  max_concurrent_agents: 1", "");
    slow_polls(&p);
    let mut d = p.start();
    d.graceful_drop = true;
    let held = |s: &Value| {
        rows(s, "held")
            .into_iter()
            .find(|h| h["issue_identifier"] == "S-2")
            .cloned()
    };
    let s = d.wait_state("S-1 running, S-2 held", WAIT, |s| {
        rows(s, "running").len() == 1 && held(s).is_some()
    });
    let h = held(&s).unwrap_or_default();
    assert_eq!(h["hold"]["slot"]["used"], 1, "{h}");
    assert_eq!(h["status_text"], "All 1 agent slots are in use");

    let s = d.wait_state("S-1 ended, the next poll not yet run", WAIT, |s| {
        rows(s, "running").is_empty() && held(s).is_some()
    });
    let h = held(&s).unwrap_or_default();
    assert_eq!(s["counts"]["running"], 0);
    assert_eq!(h["hold"]["reason"], "agent_slots_full");
    assert_eq!(
        (&h["hold"]["slot"]["used"], &h["hold"]["slot"]["limit"]),
        (&json!(0), &json!(1)),
        "{h}"
    );
    assert_eq!(
        h["hold"]["reason_text"],
        "All 1 agent slots were in use at the last poll"
    );
    assert_eq!(
        h["hold"]["release_text"],
        "Released at the next poll: a slot is free now."
    );
    assert_eq!(h["status_text"], h["hold"]["reason_text"]);

    // The next poll dispatches it.
    assert_eq!(d.post("/api/v1/refresh").status, 202);
    d.wait_state("S-2 running", WAIT, |s| {
        rows(s, "running")
            .iter()
            .any(|r| r["issue_identifier"] == "S-2")
    });
}

#[test]
fn the_stats_route_serves_hour_buckets_with_tokens_outcomes_and_cost() {
    let p = Project::new();
    p.issues(json!([issue("1", "H-1", 1), issue("2", "H-2", 2)]));
    p.scenario("default", &success_after(10));
    p.fake_agent_workflow_full(
        TRACKER,
        "",
        "token_rates:\n  claude-code: {input_per_mtok: 3, output_per_mtok: 15}\n",
    );
    let d = p.start();
    d.wait_until("two recorded runs", WAIT, || {
        p.run_statuses("1").len() + p.run_statuses("2").len() == 2
    });
    let r = d.get("/api/v1/stats?since=2h&period=hour");
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = r.json();
    let spend = &doc["spend"];
    assert_eq!(spend["period"], "hour");
    let buckets = spend["buckets"].as_array().cloned().unwrap_or_default();
    let runs: u64 = buckets.iter().filter_map(|b| b["runs"].as_u64()).sum();
    let succeeded: u64 = buckets.iter().filter_map(|b| b["succeeded"].as_u64()).sum();
    let tokens: i64 = buckets
        .iter()
        .filter_map(|b| b["tokens"]["total"].as_i64())
        .sum();
    let cost: f64 = buckets.iter().filter_map(|b| b["cost_usd"].as_f64()).sum();
    assert_eq!((runs, succeeded), (2, 2), "{spend}");
    assert_eq!(
        tokens,
        doc["summary"]["tokens"]["total"].as_i64().unwrap_or(-1)
    );
    assert!(cost > 0.0, "{spend}");
    assert!(
        buckets
            .iter()
            .all(|b| b["start"].as_str().is_some_and(|t| t.ends_with(":00:00Z"))),
        "{spend}"
    );
    // Hours need a bounded range; an unknown period is refused before anything is read.
    for bad in ["/api/v1/stats?period=hour", "/api/v1/stats?period=week"] {
        let r = d.get(bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], "invalid_parameter");
    }
    // Without a period the report keeps its day buckets, now with the same new members.
    let day = d.get("/api/v1/stats").json();
    assert_eq!(day["spend"]["period"], "day");
    assert_eq!(day["spend"]["buckets"][0]["succeeded"], 2);
}
