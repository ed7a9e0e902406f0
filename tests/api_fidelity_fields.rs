//! Facts and fields of the API served by the real binary as the reference defines them: the
//! pass dispatch time of parked and budget rows and the spend a token ceiling read, a running
//! row's workspace and requests per model, a run's usage provenance, vendor amounts, spend per
//! model, unmeasured cause and workflow file name, and an event stream cursor above the newest
//! seq.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

/// The runs of one issue identifier, newest first.
fn runs_of(d: &Daemon, identifier: &str) -> Vec<Value> {
    let r = d.get(&format!("/api/v1/runs?issue={identifier}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["runs"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_park_serves_the_pass_dispatch_time_of_its_run_across_a_restart() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "P-1", "title": "Needs a person", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"write_file": {"path": ".sortie/status", "content": "blocked\nI need credentials.\n"}}),
            json!({"assistant": {"text": "stopping", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    let s = d.wait_state("the park", T, |s| s["counts"]["parked"] == 1);
    let runs = runs_of(&d, "P-1");
    let dispatched = runs[0]["dispatched_at"].clone();
    assert!(dispatched.is_string(), "run: {}", runs[0]);
    assert_eq!(s["parked"][0]["dispatched_at"], dispatched);
    let detail = d.get("/api/v1/P-1").json();
    assert_eq!(detail["parked"]["dispatched_at"], dispatched);
    assert_eq!(d.stop(), Some(0));

    // The park is restored with its dispatch time.
    let d = p.start();
    let s = d.wait_state("the restored park", T, |s| s["counts"]["parked"] == 1);
    assert_eq!(s["parked"][0]["dispatched_at"], dispatched);
}

/// A daemon whose one issue, H-1, is held at a session budget of 1 after its single-turn
/// session, with `extra_agent` added to the agent block; the set-up (kept alive with it), the
/// daemon and the state document showing the hold.
fn session_budget_hold(extra_agent: &str) -> (Setup, Daemon, Value) {
    let s = Setup::new(
        &mock_workflow(
            &format!("  max_turns: 1\n  max_sessions: 1\n{extra_agent}"),
            "  events_per_turn: 1\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "H-1", "To Do")]),
    );
    let d = s.start(&[]);
    let st = d.wait_state("the session budget hold", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "H-1"
    });
    (s, d, st)
}

#[test]
fn a_session_budget_hold_serves_its_pass_and_the_spend_the_token_ceiling_read() {
    let (_s, d, st) = session_budget_hold("  max_tokens: 1000000\n");
    let b = &st["budget_exhausted"][0];
    assert_eq!(b["reason"], "session_budget");
    let runs = runs_of(&d, "H-1");
    assert!(runs[0]["dispatched_at"].is_string(), "run: {}", runs[0]);
    assert_eq!(b["dispatched_at"], runs[0]["dispatched_at"]);
    assert_eq!(b["used_tokens"], 150);
    assert_eq!(b["budget_tokens"], 1_000_000);
    assert_eq!(b["unmeasured_sessions"], 0);
    assert_eq!(b["stopped_in_flight"], 0);
    let detail = d.get("/api/v1/H-1").json();
    assert_eq!(
        detail["budget_exhausted"]["dispatched_at"],
        b["dispatched_at"]
    );
    assert_eq!(detail["budget_exhausted"]["stopped_in_flight"], 0);
}

#[test]
fn without_a_token_ceiling_a_budget_hold_reads_no_spend() {
    let (_s, _d, st) = session_budget_hold("");
    let b = &st["budget_exhausted"][0];
    assert!(b["dispatched_at"].is_string(), "hold: {b}");
    for k in ["used_tokens", "unmeasured_sessions", "stopped_in_flight"] {
        assert_eq!(b[k], Value::Null, "{k}: {b}");
    }
}

#[test]
fn a_token_budget_hold_counts_the_session_it_stopped_in_flight() {
    // 150 tokens per turn against a ceiling of 100: the first session is stopped mid-turn.
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_tokens: 100\n",
            "  events_per_turn: 1\n  turn_delay_ms: 600000\n",
        ),
        &issues(&[("1", "B-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_until("the stopped run recorded", T, || {
        !runs_of(&d, "B-1").is_empty()
    });
    // The next poll finds the hold (the workflow polls once a minute).
    assert_eq!(d.post("/api/v1/refresh").status, 202);
    let st = d.wait_state("the token budget hold", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "B-1"
    });
    let b = &st["budget_exhausted"][0];
    assert_eq!(b["reason"], "token_budget");
    let runs = runs_of(&d, "B-1");
    assert_eq!(runs[0]["status"], "budget_stopped");
    assert_eq!(b["dispatched_at"], runs[0]["dispatched_at"]);
    assert_eq!(b["used_tokens"], 150);
    assert_eq!(b["stopped_in_flight"], 1);
    assert_eq!(b["unmeasured_sessions"], 0);
}

#[test]
fn a_running_row_serves_its_workspace_and_requests_per_model() {
    let (s, d) = running_mock_daemon("  max_turns: 1\n");
    let st = d.wait_state("the running row's workspace", T, |s| {
        s["running"][0]["workspace_path"].is_string()
    });
    let r = &st["running"][0];
    let path = r["workspace_path"].as_str().unwrap_or_default().to_string();
    assert!(path.starts_with('/'), "not absolute: {path}");
    assert!(path.ends_with("/ws/T-1"), "{path}");
    assert!(
        std::path::Path::new(&path).is_dir(),
        "no workspace at {path}"
    );
    assert_eq!(
        std::fs::canonicalize(&path).ok(),
        std::fs::canonicalize(s.path().join("ws/T-1")).ok()
    );
    assert_eq!(r["api_requests_measured"], true);
    assert_eq!(r["api_request_count"], 1);
    assert_eq!(r["requests_by_model"], json!({"mock-model": 1}));

    let detail = d.get("/api/v1/T-1").json();
    assert_eq!(detail["status"], "running");
    assert_eq!(detail["workspace"], json!({"path": path}));
    assert_eq!(detail["running"]["workspace_path"], path);
}

#[test]
fn a_measured_run_records_its_provenance_and_spend_per_model() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_sessions: 1\n",
            "  events_per_turn: 1\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "M-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("the run recorded", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "M-1"
    });
    let runs = runs_of(&d, "M-1");
    let run = &runs[0];
    assert_eq!(run["usage_completeness"], "complete");
    assert_eq!(
        run["usage_provenance"],
        json!([{"source": "protocol", "strategy": "live"}])
    );
    assert_eq!(run["vendor_amounts"], json!([]));
    assert_eq!(run["unmeasured_cause"], Value::Null);
    assert_eq!(
        run["model_usage"],
        json!([{
            "model": "mock-model",
            "tokens": {
                "input_tokens": 100,
                "output_tokens": 50,
                "total_tokens": 150,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0
            },
            "uncached_tokens": 150,
            "estimated_cost_usd": null,
            "cost_status": "unpriced",
            "unrated_classes": ["input", "output"],
            "price_source": null
        }])
    );
    // Issue groups and the issue's history serve the same run.
    let g = d.get("/api/v1/runs/issues").json();
    assert_eq!(g["groups"][0]["runs"][0]["model_usage"], run["model_usage"]);
    let detail = d.get("/api/v1/M-1").json();
    assert_eq!(
        detail["history"]["runs"][0]["usage_provenance"],
        run["usage_provenance"]
    );
}

#[test]
fn an_unmeasured_failed_run_records_its_cause_and_serves_the_workflow_file_name() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "U-1", "title": "Fails early", "state": "To Do", "priority": 1}
    ]));
    // No usage at all: the agent fails before any request.
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "error_during_execution", "text": "boom"}}),
            json!({"exit": 1}),
        ],
    );
    // No handoff state: the session budget holds the issue after its one session.
    p.fake_agent_workflow_full("", "  max_sessions: 1", "");
    let d = p.start();
    d.wait_state("the hold after the failed session", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "U-1"
    });
    let runs = runs_of(&d, "U-1");
    let run = &runs[0];
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["usage_completeness"], "unmeasured");
    assert_eq!(run["unmeasured_cause"], "ended_early");
    assert_eq!(run["usage_provenance"], json!([]));
    assert_eq!(run["vendor_amounts"], json!([]));
    assert_eq!(run["model_usage"], json!([]));
    assert_eq!(run["workflow_file"], "WORKFLOW.md");
    let g = d.get("/api/v1/runs/issues").json();
    let group = &g["groups"][0];
    assert_eq!(group["issue_id"], "1");
    assert_eq!(group["totals"]["unmeasured_runs"], 1);
    assert_eq!(group["totals"]["unmeasured_cause"], "ended_early");
    assert_eq!(group["runs"][0]["workflow_file"], "WORKFLOW.md");
}

#[test]
fn a_claude_code_run_names_the_runtime_output_as_its_usage_source() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "C-1", "title": "Measured", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "msg_a", "text": "a", "input_tokens": 30, "output_tokens": 5, "model": "model-b"}}),
            json!({"assistant": {"id": "msg_b", "text": "b", "input_tokens": 20, "output_tokens": 5, "model": "model-a"}}),
            json!({"assistant": {"id": "msg_c", "text": "c", "input_tokens": 10, "output_tokens": 5, "model": "model-b"}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    // No handoff state: the session budget holds the issue after its one session.
    p.fake_agent_workflow_full("", "  max_sessions: 1", "");
    let d = p.start();
    d.wait_state("the hold after the session", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "C-1"
    });
    let runs = runs_of(&d, "C-1");
    let run = &runs[0];
    assert_eq!(
        run["usage_provenance"],
        json!([{"source": "output", "strategy": "live"}])
    );
    let models: Vec<(Value, Value)> = run["model_usage"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| (m["model"].clone(), m["tokens"]["input_tokens"].clone()))
        .collect();
    assert_eq!(
        models,
        vec![(json!("model-a"), json!(20)), (json!("model-b"), json!(40))],
        "{run}"
    );
}

/// The cursor of `dispatch` in a frame id `rev;D:seq;…`.
fn cursor_in(id: &str, dispatch: &str) -> Option<i64> {
    id.split(';')
        .skip(1)
        .find_map(|p| p.strip_prefix(&format!("{dispatch}:")))
        .and_then(|s| s.parse().ok())
}

#[test]
fn a_stream_cursor_above_the_newest_seq_reads_as_the_newest_from_the_first_frame() {
    let (_s, d) = running_mock_daemon("  max_turns: 1\n");
    let st = d.state();
    let dispatch = st["running"][0]["dispatch_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let events = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    let newest = events["events"]
        .as_array()
        .and_then(|e| e.last())
        .and_then(|e| e["seq"].as_i64())
        .unwrap_or(0);
    assert!(newest > 0, "{events}");
    let mut stream = open_stream(
        d.port,
        &format!("/api/v1/events?run={dispatch}:999999"),
        &[],
    );
    assert_eq!(stream.status, 200);
    let first = stream.next_frame(T).unwrap_or_else(|| panic!("no frame"));
    assert_eq!(first.event, "change");
    assert_eq!(
        cursor_in(&first.id, &dispatch),
        Some(newest),
        "{}",
        first.id
    );
}

#[test]
fn an_ended_run_cursor_above_its_last_seq_reads_as_the_last_from_the_first_frame() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_sessions: 1\n",
            "  events_per_turn: 2\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "E-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("the run recorded", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "E-1"
    });
    let runs = runs_of(&d, "E-1");
    let dispatch = runs[0]["dispatch_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let events = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    let last = events["events"]
        .as_array()
        .and_then(|e| e.last())
        .and_then(|e| e["seq"].as_i64())
        .unwrap_or(0);
    assert!(last > 0, "{events}");
    let mut stream = open_stream(
        d.port,
        &format!("/api/v1/events?run={dispatch}:999999"),
        &[],
    );
    let frames = stream.until(T, |f| f.event == "run_ended");
    assert_eq!(frames.first().map(|f| f.event.as_str()), Some("change"));
    for f in &frames {
        assert_eq!(
            cursor_in(&f.id, &dispatch),
            Some(last),
            "{}: {}",
            f.event,
            f.id
        );
    }
    assert_eq!(
        frames.last().map(|f| f.data["last_seq"].clone()),
        Some(json!(last))
    );
    assert!(frames.iter().all(|f| f.event != "agent_event"));
}
