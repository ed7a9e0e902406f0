//! What the API serves about pull-request reactions through the real binary, on a daemon that
//! has none pending: the empty list and its count, a null `health.scm`, and the check-now
//! route's 404, 405, 403 and (while shutting down) 409 answers.

mod common;

use std::time::Duration;

use common::fake_github::{self, TOKEN};
use common::fake_server::Fault;
use common::{Resp, Setup, issues, mock_workflow, request, wait_for};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "body: {}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "body: {}", r.body);
    assert!(v["error"]["message"].is_string(), "body: {}", r.body);
}

#[test]
fn reactions_without_an_engine_read_empty_and_null() {
    let s = Setup::new(
        &mock_workflow("", ""),
        &issues(&[("r1", "R-1", "To Do"), ("r2", "R-2", "To Do")]),
    );
    let d = s.start(&[]);
    let state = d.wait_state("a completed poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert_eq!(state["pending_reactions"], json!([]));
    assert_eq!(state["counts"]["pending_reactions"], 0);
    assert_eq!(state["health"]["scm"], Value::Null);
    let active = state["active"].as_array().cloned().unwrap_or_default();
    assert!(
        active.iter().all(|e| e.get("reaction_kind").is_none()),
        "{active:?}"
    );
    // The per-issue response always carries the list.
    d.wait_until("the issue known", WAIT, || {
        d.try_get("/api/v1/R-1").is_some_and(|r| r.status == 200)
    });
    let detail = d.get("/api/v1/R-1").json();
    assert_eq!(detail["pending_reactions"], json!([]));
}

#[test]
fn check_now_answers_not_found_for_an_unknown_issue_or_kind() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let r = d.post("/api/v1/reactions/MT-653/ci/check");
    envelope(&r, 404, "reaction_not_found");
    assert_eq!(
        r.json()["error"]["message"],
        "no pending \"ci\" reaction for issue \"MT-653\""
    );
    // Not a reaction kind at all, and a config key (the route takes kinds).
    for kind in ["nope", "ci_failure", "CI"] {
        let r = d.post(&format!("/api/v1/reactions/MT-653/{kind}/check"));
        envelope(&r, 404, "reaction_not_found");
    }
    // Percent-encoded segments are matched decoded.
    let r = d.post("/api/v1/reactions/owner%2Frepo%239/bot-review/check");
    envelope(&r, 404, "reaction_not_found");
    assert_eq!(
        r.json()["error"]["message"],
        "no pending \"bot-review\" reaction for issue \"owner/repo#9\""
    );
    // The body and the query string are ignored.
    let r = request(
        d.port,
        "POST",
        "/api/v1/reactions/MT-653/review/check?now=1",
        &[("Content-Type", "application/json")],
    )
    .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 404, "reaction_not_found");
}

#[test]
fn check_now_takes_post_only_and_refuses_other_origins() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let path = "/api/v1/reactions/MT-653/ci/check";
    let r = d.get(path);
    envelope(&r, 405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"), "{:?}", r.headers);
    let r = request(d.port, "POST", path, &[("Sec-Fetch-Site", "cross-site")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    let r = request(d.port, "POST", path, &[("Origin", "http://evil.example")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    // A same-origin page reaches the route.
    let r = request(d.port, "POST", path, &[("Sec-Fetch-Site", "same-origin")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 404, "reaction_not_found");
}

fn sigterm(d: &common::Daemon) {
    if let Some(pid) = rustix::process::Pid::from_raw(d.child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

/// While shutting down, the route refuses with 409 and nothing queued, whatever the kind. A
/// dispatch comment the fake GitHub holds keeps the process answering after the drain began
/// (as for the other actions).
#[test]
fn check_now_while_shutting_down_answers_409_nothing_queued() {
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
    let d = s.start(&[("GITHUB_TOKEN", TOKEN)]);
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
    for kind in ["ci", "not-a-kind"] {
        let r = d.post(&format!("/api/v1/reactions/owner%2Frepo%231/{kind}/check"));
        assert_eq!(r.status, 409, "{}", r.body);
        let body = r.json();
        assert_eq!(body["queued"], false);
        assert!(body["requested_at"].is_string());
        assert_eq!(
            body["outcome_text"],
            "Nothing queued: Sortie is shutting down."
        );
        assert!(body.get("kind").is_none());
    }
    let mut d = d;
    let status = wait_for("the daemon's exit", WAIT, || {
        d.child.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(0));
}
