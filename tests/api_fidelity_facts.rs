//! Facts the API serves through the real binary: the retry trigger a run was dispatched by,
//! run totals on turn-ending events, poll health across ticks and refreshes, the startup
//! failure event, and the agents' rate limits.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn issue(p: &Project, id: &str, identifier: &str) {
    p.issues(json!([{"id": id, "identifier": identifier, "title": "One", "state": "To Do"}]));
}

/// The runs of an issue in `/api/v1/runs`, oldest first.
fn runs_of(d: &Daemon, identifier: &str) -> Vec<Value> {
    let v = d.get(&format!("/api/v1/runs?issue={identifier}")).json();
    let mut runs = v["runs"].as_array().cloned().unwrap_or_default();
    runs.reverse();
    runs
}

#[test]
fn a_run_names_the_retry_trigger_that_dispatched_it() {
    // Continuation: no handoff state, so a successful run is continued.
    let p = Project::new();
    issue(&p, "1", "T-1");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "m1", "text": "done", "input_tokens": 3, "output_tokens": 1}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow_full("", "", "");
    let d = p.start();
    d.wait_until("two runs", WAIT, || p.run_statuses("1").len() >= 2);
    let runs = runs_of(&d, "T-1");
    assert_eq!(runs[0]["trigger"], "", "{runs:?}");
    assert_eq!(runs[1]["trigger"], "continuation", "{runs:?}");
    let detail = d.get("/api/v1/T-1").json();
    let history = detail["history"]["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let triggers: Vec<&Value> = history.iter().map(|r| &r["trigger"]).collect();
    assert!(
        triggers.contains(&&json!("continuation")) && triggers.contains(&&json!("")),
        "{triggers:?}"
    );
}

#[test]
fn a_failed_run_retried_now_keeps_the_error_trigger() {
    let p = Project::new();
    issue(&p, "2", "T-2");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "error_during_execution", "is_error": true, "text": "boom"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("the error retry", WAIT, |s| {
        s["retrying"][0]["trigger"] == "error"
    });
    assert_eq!(d.post("/api/v1/retries/T-2/run").status, 202);
    d.wait_until("the retried run", WAIT, || p.run_statuses("2").len() >= 2);
    let runs = runs_of(&d, "T-2");
    assert_eq!(runs[0]["trigger"], "", "{runs:?}");
    assert_eq!(runs[1]["trigger"], "error", "{runs:?}");
}

#[test]
fn a_refresh_polls_without_moving_the_poll_timer() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let first = d.wait_state("the first poll", WAIT, |s| {
        s["health"]["poll"]["checked_at"].is_string()
    });
    let next = first["health"]["poll"]["next_poll_at"].clone();
    assert!(next.is_string(), "{}", first["health"]["poll"]);
    let checked = first["health"]["poll"]["checked_at"].clone();
    assert_eq!(d.post("/api/v1/refresh").status, 202);
    let after = d.wait_state("the refresh's poll", WAIT, |s| {
        s["health"]["poll"]["checked_at"] != checked
    });
    assert_eq!(
        after["health"]["poll"]["next_poll_at"], next,
        "{}",
        after["health"]["poll"]
    );
}

/// The events of the issue's first recorded run, once it is recorded.
fn first_run_events(d: &Daemon, p_runs: impl Fn() -> usize, identifier: &str) -> (u16, Value) {
    d.wait_until("a recorded run", WAIT, || p_runs() >= 1);
    let runs = runs_of(d, identifier);
    let dispatch = runs[0]["dispatch_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let r = d.get(&format!("/api/v1/runs/{dispatch}/events"));
    let status = r.status;
    (status, if status == 200 { r.json() } else { Value::Null })
}

#[test]
fn a_session_that_fails_to_start_gets_a_startup_failed_event() {
    let s = Setup::new(
        &mock_workflow("", "  start_error: true\n"),
        &issues(&[("1", "T-1", "To Do")]),
    );
    let d = s.start(&[]);
    let count = || {
        d.try_get("/api/v1/runs")
            .filter(|r| r.status == 200)
            .and_then(|r| r.json()["runs"].as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let (status, v) = first_run_events(&d, count, "T-1");
    assert_eq!(status, 200, "{v}");
    let events = v["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(events.len(), 1, "{v}");
    assert_eq!(events[0]["event"], "startup_failed", "{v}");
    assert_eq!(events[0]["message"], "mock start_error", "{v}");
    assert_eq!(
        events[0]["text"], "The session failed to start: mock start_error.",
        "{v}"
    );
}

#[test]
fn an_agent_that_cannot_be_run_fails_to_start_with_an_event() {
    let p = Project::new();
    issue(&p, "3", "T-3");
    p.scenario("default", &[json!({"exit": 127})]);
    p.fake_agent_workflow("", "");
    let d = p.start();
    let (status, v) = first_run_events(&d, || p.run_statuses("3").len(), "T-3");
    assert_eq!(status, 200, "{v}");
    let events = v["events"].as_array().cloned().unwrap_or_default();
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "startup_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0]["message"], "agent binary not found", "{v}");
}

fn rate_limit_line(kind: &str, status: &str, resets_at_s: i64, utilization: Option<f64>) -> Value {
    let mut info = json!({"status": status, "resetsAt": resets_at_s, "rateLimitType": kind});
    if let Some(u) = utilization {
        info["utilization"] = json!(u);
    }
    json!({"emit": {"type": "rate_limit_event", "rate_limit_info": info, "session_id": "${SESSION_ID}"}})
}

#[test]
fn rate_limits_the_agent_reports_are_served_by_kind() {
    let p = Project::new();
    issue(&p, "4", "T-4");
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            rate_limit_line("seven_day", "allowed_warning", now_s + 86_400, Some(0.82)),
            rate_limit_line("five_hour", "allowed", now_s + 3_600, None),
            // Already reset: held, but not served among the windows.
            rate_limit_line("seven_day_opus", "allowed", now_s - 60, Some(0.1)),
            json!({"assistant": {"id": "m1", "text": "done", "input_tokens": 3, "output_tokens": 1}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    let s = d.wait_state("reported rate limits", WAIT, |s| {
        s["rate_limits"]["claude-code"]["windows"]
            .as_array()
            .is_some_and(|w| w.len() == 2)
    });
    let kind = &s["rate_limits"]["claude-code"];
    let windows = kind["windows"].as_array().cloned().unwrap_or_default();
    assert_eq!(windows[0]["label"], "5-hour limit", "{kind}");
    assert_eq!(windows[0]["status"], "allowed", "{kind}");
    assert_eq!(windows[0]["used_percent"], Value::Null, "{kind}");
    assert!(windows[0]["resets_at"].is_string(), "{kind}");
    assert_eq!(windows[0]["amount"], Value::Null, "{kind}");
    assert_eq!(windows[1]["label"], "Weekly limit", "{kind}");
    assert_eq!(windows[1]["status"], "warning", "{kind}");
    assert_eq!(windows[1]["used_percent"], 82.0, "{kind}");
    assert!(kind["reported_at"].is_string(), "{kind}");
    let newest = windows
        .iter()
        .filter_map(|w| w["reported_at"].as_str())
        .max()
        .unwrap_or_default()
        .to_string();
    assert!(
        kind["reported_at"].as_str().unwrap_or_default() >= newest.as_str(),
        "{kind}"
    );
}

/// The `usage` of the first event of type `kind` in `events`.
fn usage_of(events: &[Value], kind: &str) -> Value {
    events
        .iter()
        .find(|e| e["event"] == kind)
        .map(|e| e["usage"].clone())
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

/// The run's events once every kind in `kinds` is among them: the events reach the store through
/// the writer thread, which may lag the state the test waited for.
fn run_events_with(d: &Daemon, dispatch: &str, kinds: &[&str]) -> Vec<Value> {
    let path = format!("/api/v1/runs/{dispatch}/events");
    let mut events = Vec::new();
    d.wait_until("the run's events", WAIT, || {
        events = d.get(&path).json()["events"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        kinds
            .iter()
            .all(|k| events.iter().any(|e| e["event"] == *k))
    });
    events
}

fn sse_events(d: &Daemon, dispatch: &str, until: &str) -> Vec<Value> {
    let mut st = open_stream(d.port, &format!("/api/v1/events?run={dispatch}"), &[]);
    st.until(WAIT, |f| {
        f.event == "agent_event" && f.data["event"] == until
    })
    .into_iter()
    .filter(|f| f.event == "agent_event")
    .map(|f| f.data)
    .collect()
}

#[test]
fn turn_ending_events_carry_the_run_totals_everywhere() {
    let p = Project::new();
    issue(&p, "5", "T-5");
    let gate = p.path("markers/go");
    p.scenario(
        "default",
        &[
            json!({"turn": 1, "init": {}}),
            json!({"turn": 1, "assistant": {"id": "m1", "text": "one", "input_tokens": 30, "output_tokens": 4}}),
            json!({"turn": 1, "result": {"subtype": "success", "text": "ok"}}),
            // The second turn reports no usage of its own: its end still carries the run's.
            json!({"turn": 2, "init": {}}),
            json!({"turn": 2, "wait_file": gate.display().to_string()}),
            json!({"turn": 2, "result": {"subtype": "error_during_execution", "is_error": true, "text": "boom"}}),
        ],
    );
    p.fake_agent_workflow("  max_turns: 2\n", "");
    let d = p.start();
    let totals = json!({"input_tokens": 30, "output_tokens": 4, "total_tokens": 34,
                        "cache_read_tokens": 0, "cache_write_tokens": 0});
    let s = d.wait_state("the second turn", WAIT, |s| {
        s["running"][0]["turn_count"] == 2
    });
    let dispatch = s["running"][0]["dispatch_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // While the run runs: the events route, the issue's recent events and the stream.
    let live = run_events_with(&d, &dispatch, &["turn_completed"]);
    assert_eq!(usage_of(&live, "turn_completed"), totals);
    let detail = d.get("/api/v1/T-5").json();
    let recent = detail["recent_events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(usage_of(&recent, "turn_completed"), totals);
    assert_eq!(
        usage_of(
            &sse_events(&d, &dispatch, "turn_completed"),
            "turn_completed"
        ),
        totals
    );
    std::fs::write(&gate, "").unwrap_or_else(|e| panic!("{e}"));
    d.wait_until("the run recorded", WAIT, || p.run_statuses("5").len() == 1);
    // Once recorded: the stored events and their replay on the stream.
    let stored = run_events_with(&d, &dispatch, &["turn_completed", "turn_failed"]);
    assert_eq!(usage_of(&stored, "turn_completed"), totals);
    assert_eq!(usage_of(&stored, "turn_failed"), totals);
    let replay = sse_events(&d, &dispatch, "turn_failed");
    assert_eq!(usage_of(&replay, "turn_failed"), totals);
}

#[test]
fn poll_health_keeps_its_streak_across_failing_ticks() {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow("", "");
    let d = p.start();
    let ok = d.wait_state("a successful poll", WAIT, |s| {
        s["health"]["poll"]["last_success_at"].is_string()
    });
    p.write("issues.json", "not json");
    let first = d.wait_state("the first failed poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "tracker_failed"
    });
    let since = first["health"]["poll"]["failing_since"].clone();
    assert!(since.is_string(), "{}", first["health"]["poll"]);
    let later = d.wait_state("three failed polls", WAIT, |s| {
        s["health"]["poll"]["consecutive_failures"].as_u64() >= Some(3)
    });
    let poll = &later["health"]["poll"];
    assert_eq!(poll["outcome"], "tracker_failed", "{poll}");
    assert_eq!(poll["status"], "fail", "{poll}");
    assert_eq!(poll["failing_since"], since, "{poll}");
    // The last success stays the one before the streak (or a later one, never none).
    let last_ok = poll["last_success_at"].as_str().unwrap_or_default();
    let before = ok["health"]["poll"]["last_success_at"]
        .as_str()
        .unwrap_or_default();
    assert!(!last_ok.is_empty() && last_ok >= before, "{poll}");
    assert!(last_ok < since.as_str().unwrap_or_default(), "{poll}");
    p.issues(json!([]));
    let back = d.wait_state("a passing poll", WAIT, |s| {
        s["health"]["poll"]["status"] == "pass"
    });
    let poll = &back["health"]["poll"];
    assert_eq!(poll["consecutive_failures"], 0, "{poll}");
    assert_eq!(poll["failing_since"], Value::Null, "{poll}");
    assert!(poll["last_success_at"].as_str() > since.as_str(), "{poll}");
}
