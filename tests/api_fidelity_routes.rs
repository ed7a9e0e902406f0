//! Status codes and routes as the API reference specifies them: the actions during shutdown,
//! a failed history read, HEAD and other methods on the event stream, unknown routes, request
//! size limits and hostile request lines, the `Sec-Fetch-Site` table, and the OpenAPI
//! document's own path.

mod common;

use std::time::Duration;

use common::fake_github::{self, TOKEN};
use common::fake_server::Fault;
use common::{Setup, wait_for};

const WAIT: Duration = Duration::from_secs(30);

fn sigterm(d: &common::Daemon) {
    if let Some(pid) = rustix::process::Pid::from_raw(d.child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

/// Once shutdown has begun, the orchestrator's loop ends as soon as nothing runs, while the
/// process still finishes its tracker writes and the HTTP server keeps answering. The actions
/// asked in that window are refused by the shutdown (409, nothing queued), not reported as
/// the orchestrator being unavailable (503). A dispatch comment the fake GitHub holds for a
/// few seconds keeps the window open.
#[test]
fn actions_during_shutdown_answer_409_nothing_queued() {
    let fake = fake_github::start(&["backlog", "in-progress", "review", "done"]);
    fake.with_state(|s| s.add_issue(1, "One", &["backlog"], false));
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/comments",
        Fault::Delay(Duration::from_secs(8)),
    );
    let workflow = format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true}}\ngithub:\n  timeout_ms: 20000\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n  model_name: mock-model\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    );
    let s = Setup::new(&workflow, "[]");
    let mut d = s.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("the dispatch comment held by the fake", WAIT, || {
        !fake
            .requests("POST", "/repos/owner/repo/issues/1/comments")
            .is_empty()
    });
    d.wait_until("the run handed off", WAIT, || {
        fake.with_state(|g| g.labels(1)) == ["review"]
            && d.try_state()
                .is_some_and(|s| s["running"].as_array().is_some_and(|r| r.is_empty()))
    });
    sigterm(&d);
    d.wait_until("draining", WAIT, || {
        d.try_get("/livez").is_some_and(|r| r.status == 503)
    });
    let r = d.post("/api/v1/refresh");
    assert_eq!(r.status, 409, "{}", r.body);
    let body = r.json();
    assert_eq!(body["queued"], false);
    assert_eq!(body["coalesced"], false);
    assert_eq!(body["operations"], serde_json::json!([]));
    assert_eq!(
        body["outcome_text"],
        "Nothing queued: Sortie is shutting down."
    );
    assert!(body["requested_at"].is_string());
    let r = d.post("/api/v1/retries/owner%2Frepo%231/run");
    assert_eq!(r.status, 409, "{}", r.body);
    let body = r.json();
    assert_eq!(body["queued"], false);
    assert_eq!(
        body["outcome_text"],
        "Nothing queued: Sortie is shutting down."
    );
    let r = d.post("/api/v1/attention/0123456789abcdef/acknowledge");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        r.json()["outcome_text"],
        "Nothing acknowledged: Sortie is shutting down."
    );
    let status = wait_for("the daemon's exit", WAIT, || {
        d.child.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(0));
}
