//! The words the API serves, through the real binary: a run's and a retry's error as the plain
//! sentence of its kind (the database keeps the stored text), reschedule reasons as written, a
//! retry-now put-back, the poll summary's closing clause, tool results without a duration, and
//! the 999-character cut of event messages.

mod common;

use std::time::Duration;

use common::{Daemon, Project, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

const STALL: &str = "The agent sent no event within the stall timeout, so Sortie stopped the run.";

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

/// Waits until `sql` reads `want` (the writer thread commits after the API shows a change).
fn stored(p: &Project, sql: &str, want: &str) {
    let read = || {
        p.db_conn()
            .query_row(sql, [], |r| r.get::<_, String>(0))
            .ok()
    };
    let found = common::poll(T, common::POLL, || read().filter(|v| v == want));
    assert_eq!(found.as_deref(), Some(want), "{sql}: {:?}", read());
}

fn retry_of<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["retrying"]
        .as_array()?
        .iter()
        .find(|r| r["issue_identifier"] == identifier)
}

#[test]
fn run_and_retry_errors_read_as_the_plain_sentence_of_their_kind() {
    let p = Project::new();
    p.issues(json!([
        issue("f", "F-1", 1),
        issue("b", "B-1", 2),
        issue("r", "R-1", 3),
        issue("h", "H-1", 4),
    ]));
    p.scenario(
        "F-1",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "error_during_execution", "text": "it broke"}}),
            json!({"exit": 1}),
        ],
    );
    p.scenario(
        "B-1",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "spending", "input_tokens": 150, "output_tokens": 5}}),
            json!({"hang": true}),
        ],
    );
    let working = [
        json!({"init": {}}),
        json!({"assistant": {"text": "working", "input_tokens": 10, "output_tokens": 2}}),
        json!({"hang": true}),
    ];
    p.scenario("R-1", &working);
    p.scenario("H-1", &working);
    p.fake_agent_workflow("  max_tokens: 100\n  max_concurrent_agents: 4", "");
    let mut d = p.start();

    // An agent error: the run, its retry, the issue's last error and the retry's sentences.
    let failed = "The agent's turn failed: error_during_execution: it broke.";
    let s = d.wait_state("the failed run's retry", T, |s| {
        retry_of(s, "F-1").is_some_and(|r| r["trigger"] == "error")
    });
    let retry = retry_of(&s, "F-1").unwrap_or(&Value::Null);
    assert_eq!(retry["error"], failed, "{retry}");
    assert!(
        retry["status_text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Retry 1 in ") && t.ends_with(" after an error")),
        "{retry}"
    );
    assert!(
        retry["status_text_full"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("{failed} Retry 1 in "))),
        "{retry}"
    );
    let detail = d.get("/api/v1/F-1").json();
    assert_eq!(detail["last_error"], failed, "{detail}");
    assert_eq!(detail["retry"]["error"], failed, "{detail}");
    assert_eq!(served_run(&d, "F-1", "failed")["error"], failed);
    // The database keeps the stored text.
    stored(
        &p,
        "SELECT error FROM run_history WHERE issue_id = 'f'",
        "turn_failed: error_during_execution: it broke",
    );
    stored(
        &p,
        "SELECT error FROM retry_entries WHERE issue_id = 'f'",
        "worker exited: turn_failed: error_during_execution: it broke",
    );

    // A budget stop carries the figures behind it.
    assert_eq!(
        served_run(&d, "B-1", "budget_stopped")["error"],
        "Sortie stopped the run because the issue used 155 tokens, reaching its limit of 100."
    );
    stored(
        &p,
        "SELECT error FROM run_history WHERE issue_id = 'b'",
        "cancelled: budget: used_tokens=155 max_tokens=100",
    );

    // The issue reaching a final state while its agent works.
    d.wait_state("R-1 and H-1 running", T, |s| {
        s["running"].as_array().is_some_and(|r| {
            ["R-1", "H-1"].iter().all(|i| {
                r.iter()
                    .any(|e| e["issue_identifier"] == *i && e["last_event_at"].is_string())
            })
        })
    });
    p.set_issue_state("r", "Done");
    assert_eq!(
        served_run(&d, "R-1", "cancelled")["error"],
        "The issue reached a terminal or inactive state, so Sortie stopped the run."
    );
    stored(
        &p,
        "SELECT error FROM run_history WHERE issue_id = 'r'",
        "cancelled: reconcile",
    );

    // Shutdown stops the session in its first turn; the next start serves the run.
    assert_eq!(d.terminate(), Some(0));
    let d = p.start();
    assert_eq!(
        served_run(&d, "H-1", "cancelled")["error"],
        "Sortie stopped the session before the agent finished turn 1."
    );
    stored(
        &p,
        "SELECT error FROM run_history WHERE issue_id = 'h' ORDER BY id LIMIT 1",
        "cancelled: shutdown",
    );
}

#[test]
fn a_stall_reads_as_its_sentence_on_the_run_and_on_the_retry() {
    let p = Project::new();
    p.issues(json!([issue("s", "S-1", 1)]));
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("  stall_timeout_ms: 700", "");
    let d = p.start();
    let s = d.wait_state("the stall retry", T, |s| {
        retry_of(s, "S-1").is_some_and(|r| r["trigger"] == "stall")
    });
    let retry = retry_of(&s, "S-1").unwrap_or(&Value::Null);
    assert_eq!(retry["error"], STALL, "{retry}");
    assert!(
        retry["status_text_full"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("{STALL} Retry 1 in "))),
        "{retry}"
    );
    assert_eq!(d.get("/api/v1/S-1").json()["last_error"], STALL);
    assert_eq!(served_run(&d, "S-1", "cancelled")["error"], STALL);
    stored(
        &p,
        "SELECT error FROM run_history WHERE issue_id = 's'",
        "cancelled: stall",
    );
    stored(
        &p,
        "SELECT error FROM retry_entries WHERE issue_id = 's'",
        "stall timeout exceeded",
    );
}

#[test]
fn a_retry_now_put_back_serves_its_reschedule_reason_as_written() {
    let p = Project::new();
    p.issues(json!([issue("f", "F-1", 1), issue("h", "H-1", 2)]));
    p.scenario(
        "F-1",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "error_during_execution", "text": "it broke"}}),
            json!({"exit": 1}),
        ],
    );
    p.scenario("H-1", &[json!({"init": {}}), json!({"hang": true})]);
    // One slot for the state both issues are in: F-1 fails in it first, then H-1 holds it.
    p.fake_agent_workflow(
        "  max_concurrent_agents: 4\n  max_concurrent_agents_by_state:\n    To Do: 1",
        "",
    );
    let d = p.start();
    let s = d.wait_state("H-1 running and F-1's retry queued", T, |s| {
        s["running"][0]["issue_identifier"] == "H-1"
            && retry_of(s, "F-1").is_some_and(|r| r["trigger"] == "error")
    });
    let before = retry_of(&s, "F-1").cloned().unwrap_or(Value::Null);
    let due_before = wait_for("the stored retry", T, || {
        Some(p.db_i64("SELECT due_at_ms FROM retry_entries WHERE issue_id = 'f'"))
            .filter(|d| *d > 0)
    });

    let r = d.post("/api/v1/retries/F-1/run");
    assert_eq!(r.status, 202, "{}", r.body);
    let s = d.wait_state("the put-back", T, |s| {
        retry_of(s, "F-1").is_some_and(|r| r["trigger"] == "timer")
    });
    let after = retry_of(&s, "F-1").unwrap_or(&Value::Null);
    // Served as written, at the attempt and due time it had; the sentences reword it.
    assert_eq!(after["error"], "no available orchestrator slots", "{after}");
    assert_eq!(after["attempt"], before["attempt"], "{after}");
    assert_eq!(after["due_at"], before["due_at"], "{after}");
    assert!(
        after["status_text"].as_str().is_some_and(
            |t| t.starts_with("Retry 1 in ") && t.ends_with(": no agent slot was free")
        ),
        "{after}"
    );
    assert!(
        after["status_text_full"]
            .as_str()
            .is_some_and(|t| t.starts_with(
                "The retry came due and was not dispatched: no agent slot was free. Retry 1 in "
            )),
        "{after}"
    );
    let detail = d.get("/api/v1/F-1").json();
    assert_eq!(
        detail["last_error"], "no available orchestrator slots",
        "{detail}"
    );
    stored(
        &p,
        "SELECT error FROM retry_entries WHERE issue_id = 'f'",
        "no available orchestrator slots",
    );
    assert_eq!(
        p.db_i64("SELECT due_at_ms FROM retry_entries WHERE issue_id = 'f'"),
        due_before
    );
    // The log says what happened to the row: no new backoff.
    let log = p.log();
    assert!(
        log.contains(&format!(
            "msg=\"retry put back after a request to run it now\" issue_id=f issue_identifier=F-1 attempt=1 due_at_ms={due_before} reason=\"no available orchestrator slots\""
        )),
        "{log}"
    );
    assert!(
        !log.contains("msg=\"retry rescheduled\" issue_id=f"),
        "{log}"
    );
}

#[test]
fn a_failing_poll_summary_ends_with_when_the_last_successful_poll_was() {
    let p = Project::new();
    p.write("issues.json", "not json");
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("", "");
    let d = p.start();
    let s = d.wait_state("a failing first poll", T, |s| {
        s["health"]["poll"]["status"] == "fail"
    });
    assert!(
        s["health"]["poll"]["summary_text"]
            .as_str()
            .is_some_and(
                |t| t.starts_with("The latest poll could not read the tracker")
                    && t.ends_with("; no poll has succeeded since Sortie started.")
            ),
        "{}",
        s["health"]["poll"]
    );
    p.issues(json!([]));
    d.wait_state("a passing poll", T, |s| {
        s["health"]["poll"]["status"] == "pass"
    });
    p.write("issues.json", "not json");
    let s = d.wait_state("a failing poll after a success", T, |s| {
        s["health"]["poll"]["status"] == "fail"
    });
    let text = s["health"]["poll"]["summary_text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("The latest poll could not read the tracker")
            && text.contains("; the last successful poll was ")
            && text.ends_with(" ago."),
        "{text}"
    );
}

/// The events of an issue's finished run.
fn run_events(d: &Daemon, identifier: &str) -> Vec<Value> {
    let run = served_run(d, identifier, "succeeded");
    let dispatch = run["dispatch_id"].as_str().unwrap_or_default().to_string();
    // The run's events are stored by their own write after the run row commits: wait for the
    // turn's end to be among them.
    wait_for("the run's stored events", Duration::from_secs(10), || {
        let v = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
        let events = v["events"].as_array().cloned().unwrap_or_default();
        events
            .iter()
            .any(|e| e["event"] == "turn_completed")
            .then_some(events)
    })
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
        timed["duration_ms"].as_u64().is_some_and(|ms| ms >= 200),
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
