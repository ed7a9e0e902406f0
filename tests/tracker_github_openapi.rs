//! Every request sortie's GitHub adapter sends is checked against GitHub's own OpenAPI
//! description by Prism (`tests/common/prism.rs`): a dry run reads through Prism's mock, and a
//! daemon run dispatches, comments and swaps labels on the hand-written fake while Prism
//! validates a copy of each request, and every adapter operation (including close and reopen,
//! which the daemon never does: it moves no issue to a terminal state) runs the same way. Prism's answers are synthetic, so the tests
//! assert only that the requests reached Prism and that it logged no violation.

mod common;

use std::time::Duration;

use common::Setup;
use common::fake_github::{self, TOKEN};
use common::prism::{self, Answer, Report, Session};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerSettings};

const WAIT: Duration = Duration::from_secs(60);
const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "wontfix", "bug"];

/// A `kind: github` workflow on `endpoint` with a mock agent; `extra` adds tracker keys.
fn workflow(endpoint: &str, extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {endpoint}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done, wontfix]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true, on_completion: true}}\n{extra}github:\n  retry_base_ms: 10\n  timeout_ms: 5000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\n---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

/// The check itself: requests outside the description are reported, so a clean report means
/// something (and a change in Prism's log format cannot pass silently).
#[test]
fn violations_are_reported() {
    let Some(session) = prism::session_or_skip(Answer::Prism) else {
        return;
    };
    let headers = [("Accept", "application/vnd.github+json")];
    for path in [
        "/repos/owner/repo/issues?state=bogus",
        "/repos/owner/repo/no-such-route",
    ] {
        let answered = common::request(session.port(), "GET", path, &headers);
        assert!(answered.is_some(), "no answer through the relay for {path}");
    }
    let report = session.report();
    let all = report.violations.join("\n");
    assert!(
        all.contains("state must be equal to one of the allowed values"),
        "{all}\n---\n{}",
        report.log
    );
    assert!(
        all.contains("NO_PATH_MATCHED"),
        "{all}\n---\n{}",
        report.log
    );
}

/// Fails with Prism's words when it logged any violation.
fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "requests violate GitHub's OpenAPI description:\n{}\n--- Prism log of this test:\n{}",
        report.violations.join("\n"),
        report.log
    );
}

fn assert_requested(report: &Report, want: &str) {
    assert!(
        report.requests.iter().any(|r| r == want),
        "Prism never received {want:?}; it received {:?}",
        report.requests
    );
}

fn dry_run(session: &Session, extra: &str) -> String {
    let setup = Setup::new(&workflow(&session.url, extra), "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .env("GITHUB_TOKEN", TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("run sortie --dry-run: {e}"));
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn dry_runs_read_through_prism_without_violations() {
    let Some(session) = prism::session_or_skip(Answer::Prism) else {
        return;
    };
    let listed = dry_run(&session, "");
    let searched = dry_run(&session, "  query_filter: \"label:bug\"\n");
    let report = session.report();
    assert_clean(&report);
    assert_requested(&report, "get /repos/owner/repo/issues");
    assert_requested(&report, "get /search/issues");
    eprintln!(
        "dry run over Prism:\n{listed}\n{searched}\nrequests: {:?}",
        report.requests
    );
}

#[test]
fn a_daemon_run_sends_only_described_requests() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add dark mode", &["backlog"], false);
        s.add_issue(2, "Fix the build", &["backlog"], false);
    });
    let Some(session) = prism::session_or_skip(Answer::Fake(fake.url.clone())) else {
        return;
    };
    let setup = Setup::new(&workflow(&session.url, ""), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("issues 1 and 2 handed off", WAIT, || {
        fake.with_state(|s| s.labels(1) == ["review"] && s.labels(2) == ["review"])
    });
    d.wait_until("both lifecycle comments on issue 1", WAIT, || {
        fake.requests("POST", "/repos/owner/repo/issues/1/comments")
            .len()
            >= 2
    });
    drop(d);
    let report = session.report();
    assert_clean(&report);
    for want in [
        "get /repos/owner/repo/issues",
        "get /repos/owner/repo/issues/1",
        "post /repos/owner/repo/issues/1/labels",
        "delete /repos/owner/repo/issues/1/labels/backlog",
        "post /repos/owner/repo/issues/1/comments",
    ] {
        assert_requested(&report, want);
    }
    eprintln!("daemon run requests: {:?}", report.requests);
}

/// The adapter over the relay, as the registry builds it for a workflow.
fn adapter(endpoint: &str) -> std::sync::Arc<dyn TrackerAdapter> {
    let settings = TrackerSettings {
        kind: "github".into(),
        endpoint: Some(endpoint.into()),
        api_key: Some(TOKEN.into()),
        project: Some("owner/repo".into()),
        active_states: vec!["backlog".into(), "in-progress".into()],
        terminal_states: vec!["done".into(), "wontfix".into()],
        handoff_state: Some("review".into()),
        block: json!({"retry_base_ms": 10, "timeout_ms": 5000})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        ..TrackerSettings::default()
    };
    registry::build_tracker(&settings, std::sync::Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_adapter_operation_sends_only_described_requests() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add dark mode", &["backlog"], false);
        s.add_issue(2, "Old work", &["done"], true);
    });
    let Some(session) = prism::session_or_skip(Answer::Fake(fake.url.clone())) else {
        return;
    };
    let t = adapter(&session.url);
    let ok = |what: &str, r: Result<(), sortie::tracker::TrackerError>| {
        r.unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    ok("candidates", t.fetch_candidate_issues().map(drop));
    ok("by id", t.fetch_issue_by_id("1").map(drop));
    ok(
        "by states",
        t.fetch_issues_by_states(&["done".into()]).map(drop),
    );
    ok(
        "states by ids",
        t.fetch_issue_states_by_ids(&["1".into(), "2".into()])
            .map(drop),
    );
    ok("comments", t.fetch_issue_comments("1").map(drop));
    ok("blockers", t.fetch_blockers("1").map(drop));
    ok("comment", t.comment_issue("1", "sortie: working on it"));
    ok("add label", t.add_label("1", "bug"));
    ok("remove label", t.remove_label("1", "bug"));
    ok("to in-progress", t.transition_issue("1", "in-progress"));
    ok("close", t.transition_issue("1", "done"));
    ok("reopen", t.transition_issue("1", "backlog"));
    assert!(fake.with_state(|s| s.is_open(1)));
    let report = session.report();
    assert_clean(&report);
    for want in [
        "get /repos/owner/repo/issues",
        "get /search/issues",
        "get /repos/owner/repo/issues/1/comments",
        "get /repos/owner/repo/issues/1/dependencies/blocked_by",
        "post /repos/owner/repo/issues/1/comments",
        "post /repos/owner/repo/issues/1/labels",
        "delete /repos/owner/repo/issues/1/labels/bug",
        "patch /repos/owner/repo/issues/1",
    ] {
        assert_requested(&report, want);
    }
    eprintln!("adapter requests: {:?}", report.requests);
}
