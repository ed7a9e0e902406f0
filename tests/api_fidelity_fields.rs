//! Facts and fields of the API served by the real binary as the reference defines them: an
//! event stream cursor above the newest seq.

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
