//! Crash safety of tracker text: an identifier with a NUL byte (valid JSON) must not panic a
//! thread (Rust refuses thread names with NUL) nor stop other issues from running.

mod common;

use std::time::Duration;

use common::Project;
use serde_json::json;

#[test]
fn an_identifier_with_nul_neither_kills_the_daemon_nor_blocks_other_issues() {
    let p = Project::new();
    p.issues(json!([
        {"id": "n1", "identifier": "N\u{0}-1\u{7}", "title": "Nul", "state": "To Do", "priority": 1},
        {"id": "ok", "identifier": "OK-1", "title": "Fine", "state": "To Do", "priority": 2},
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
            json!({"result": {"subtype": "success", "text": "ok", "input_tokens": 10, "output_tokens": 5}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();

    // The NUL issue was dispatched (its supervisor thread started) and the other one ran to
    // its handoff.
    d.wait_until("OK-1 handed off", Duration::from_secs(30), || {
        p.issue_state("ok") == "Review"
    });
    d.wait_until("the NUL issue handed off", Duration::from_secs(30), || {
        p.issue_state("n1") == "Review"
    });
    // The daemon is alive and still serves the state; the NUL issue's run is on record.
    let s = d.state();
    assert!(s["counts"].is_object(), "{s}");
    assert_eq!(p.run_statuses("n1"), ["succeeded"]);
    let detail = d.get("/api/v1/N%00-1%07");
    assert_eq!(
        detail.status, 200,
        "issue detail of the NUL identifier: {}",
        detail.body
    );
    let log = p.log();
    assert!(!log.contains("panicked"), "a thread panicked:\n{log}");
    assert_eq!(d.terminate(), Some(0), "clean shutdown after the NUL issue");
}
