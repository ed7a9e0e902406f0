//! The words the API serves, through the real binary: a run's and a retry's error as the plain
//! sentence of its kind (the database keeps the stored text), reschedule reasons as written, a
//! retry-now put-back, the poll summary's closing clause, tool results without a duration, and
//! the 999-character cut of event messages.

mod common;

use std::time::Duration;

use common::{Daemon, Project, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

fn issue(id: &str, identifier: &str, priority: u32) -> Value {
    json!({"id": id, "identifier": identifier, "title": format!("Work on {identifier}"),
           "state": "To Do", "priority": priority})
}

/// A run of an issue with `status` as `GET /api/v1/runs?issue=` serves it, once recorded.
fn served_run(d: &Daemon, identifier: &str, status: &str) -> Value {
    wait_for(&format!("a {status} run of {identifier}"), T, || {
        let v: Value =
            serde_json::from_str(&d.get_ok(&format!("/api/v1/runs?issue={identifier}"))?).ok()?;
        v["runs"]
            .as_array()?
            .iter()
            .find(|r| r["status"] == status)
            .cloned()
    })
}

/// The events of an issue's finished run.
fn run_events(d: &Daemon, identifier: &str) -> Vec<Value> {
    let run = served_run(d, identifier, "succeeded");
    let dispatch = run["dispatch_id"].as_str().unwrap_or_default().to_string();
    let v = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    v["events"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_tool_result_without_a_duration_omits_it() {
    let p = Project::new();
    p.issues(json!([issue("1", "T-1", 1), issue("2", "T-2", 2)]));
    let bash = |id: &str| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "echo hi"}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "hi", "is_error": false});
    let assistant = |content: Value| {
        json!({"emit": {"type": "assistant", "message": {"id": "m1", "type": "message", "role": "assistant",
            "model": "fake-model-1", "content": content, "usage": {"input_tokens": 10, "output_tokens": 2}}}})
    };
    // The call and its result in one message: nothing timed the call.
    p.scenario(
        "T-1",
        &[
            json!({"init": {}}),
            assistant(json!([bash("toolu_1"), result("toolu_1")])),
            json!({"result": {"text": "done"}}),
        ],
    );
    // The result a while after the call: a measured duration.
    p.scenario(
        "T-2",
        &[
            json!({"init": {}}),
            assistant(json!([bash("toolu_2")])),
            json!({"sleep_ms": 300}),
            json!({"emit": {"type": "user", "message": {"role": "user", "content": [result("toolu_2")]}}}),
            json!({"result": {"text": "done"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();

    let tool = |identifier: &str| {
        run_events(&d, identifier)
            .into_iter()
            .find(|e| e["event"] == "tool_result")
            .unwrap_or_else(|| panic!("no tool_result event for {identifier}"))
    };
    let untimed = tool("T-1");
    assert_eq!(untimed["tool_line"], "echo hi", "{untimed}");
    assert_eq!(untimed["text"], "Ran echo hi.", "{untimed}");
    assert!(untimed.get("duration_ms").is_none(), "{untimed}");

    let timed = tool("T-2");
    assert!(
        timed["duration_ms"].as_u64().is_some_and(|ms| ms >= 300),
        "{timed}"
    );
    assert!(
        timed["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Ran echo hi in ") && t.ends_with("s.")),
        "{timed}"
    );
}

#[test]
fn event_messages_are_cut_after_999_characters() {
    let p = Project::new();
    p.issues(json!([issue("1", "L-1", 1)]));
    let long = "x".repeat(1500);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": long, "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"text": long}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    let events = run_events(&d, "L-1");
    let cut = format!("{}…", "x".repeat(999));
    let completed = events
        .iter()
        .find(|e| e["event"] == "turn_completed")
        .unwrap_or(&Value::Null);
    assert_eq!(completed["message"], cut.as_str(), "{completed}");
    assert_eq!(
        completed["text"],
        format!("Turn completed: {cut}."),
        "{completed}"
    );
    let said = events
        .iter()
        .find(|e| e["event"] == "notification")
        .unwrap_or_else(|| panic!("no notification: {events:?}"));
    assert_eq!(said["message"], cut.as_str(), "{said}");
}
