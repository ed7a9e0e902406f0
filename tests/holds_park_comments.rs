//! The `park_comments_unread` hold through the real binary: an agent declares itself blocked
//! and its issue is parked with a label; a person comments and removes the label; the next run
//! must receive that comment, so the pass reads the comments first. While the read fails the
//! issue is held (`park_comments_unread`); the first poll whose read succeeds dispatches it,
//! and the run's prompt carries the comment.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, TOKEN};
use common::{FAKE_AGENT, Setup};
use serde_json::{Value, json};

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "needs-human"];
const WAIT: Duration = Duration::from_secs(30);
const COMMENTS: &str = "/repos/owner/repo/issues/1/comments";

/// The scripted agent (claude-code kind) over the fake GitHub; its prompt lists the issue's
/// comments.
fn workflow(fake: &FakeGithub) -> String {
    format!(
        r#"---
tracker:
  kind: github
  endpoint: {url}
  api_key: $GITHUB_TOKEN
  project: owner/repo
  active_states: [backlog, in-progress]
  terminal_states: [done]
  handoff_state: review
github:
  retry_base_ms: 10
  timeout_ms: 2000
polling:
  interval_ms: 200
workspace:
  root: ./ws
hooks:
  after_create: cp "$SORTIE_TEST_SCENARIO" .scenario
agent:
  kind: claude-code
  command: {agent}
  env: [FAKE_AGENT_*]
  max_turns: 3
---
Work on {{{{ .issue.identifier }}}}.{{{{ range .issue.comments }}}} Comment by {{{{ .author }}}}: {{{{ .body }}}}{{{{ end }}}}
"#,
        url = fake.url,
        agent = FAKE_AGENT,
    )
}

/// A run that declares itself blocked (the park protocol of `.sortie/status`).
fn blocked_scenario() -> String {
    let lines = [
        json!({"init": {}}),
        json!({"write_file": {"path": ".sortie/status", "content": "blocked\nNeeds a decision.\n"}}),
        json!({"assistant": {"text": "stopping", "input_tokens": 10, "output_tokens": 2}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ];
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

/// The prompts the scripted agent was started with, in order.
fn prompts(setup: &Setup) -> Vec<String> {
    std::fs::read_to_string(setup.path().join("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["prompt"].as_str().map(String::from))
        .collect()
}

fn held_row(s: &Value) -> Option<&Value> {
    s["held"]
        .as_array()?
        .iter()
        .find(|h| h["issue_identifier"] == "1")
}

#[test]
fn a_released_park_reads_the_comments_before_the_next_run() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| s.add_issue(1, "Needs a person", &["backlog"], false));
    let setup = Setup::new(&workflow(&fake), "[]");
    std::fs::write(setup.path().join("scenario.jsonl"), blocked_scenario())
        .unwrap_or_else(|e| panic!("scenario: {e}"));
    let scenario = setup.path().join("scenario.jsonl");
    let argv_log = setup.path().join("argv.log");
    let scenario = scenario.to_string_lossy();
    let argv_log = argv_log.to_string_lossy();
    let d = setup.start(&[
        ("GITHUB_TOKEN", TOKEN),
        ("SORTIE_TEST_SCENARIO", scenario.as_ref()),
        ("FAKE_AGENT_SCENARIO", ".scenario"),
        ("FAKE_AGENT_ARGV_LOG", argv_log.as_ref()),
    ]);
    d.wait_state("the park", WAIT, |s| s["counts"]["parked"] == 1);
    assert_eq!(fake.with_state(|s| s.labels(1)), ["backlog", "needs-human"]);
    assert_eq!(prompts(&setup).len(), 1);

    // A person answers and removes the label, while the comments endpoint fails.
    fake.with_state(|s| {
        s.comments.insert(
            1,
            vec![
                json!({"id": 77, "user": {"login": "alice"}, "body": "Use the blue one.",
                "created_at": "2026-01-03T00:00:00Z"}),
            ],
        );
        s.failing.insert(COMMENTS.to_string());
        s.set_labels(1, &["backlog"]);
    });
    let s = d.wait_state("the park_comments_unread hold", WAIT, |s| {
        held_row(s).is_some_and(|h| h["hold"]["reason"] == "park_comments_unread")
    });
    let row = held_row(&s).unwrap_or(&Value::Null);
    let hold = &row["hold"];
    assert_eq!(
        hold["reason_text"],
        "Comments of the released park could not be read"
    );
    assert_eq!(
        hold["release_text"],
        "Released when the next poll reads the issue's comments."
    );
    assert_eq!(hold["blockers"], Value::Null);
    assert_eq!(hold["slot"], Value::Null);
    assert!(
        hold["held_since"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(row["status_text"], hold["reason_text"]);
    assert_eq!(s["counts"]["parked"], 0, "the park itself is lifted");
    // A later poll still holds it: no run without the comments.
    let reads = fake.requests("GET", COMMENTS).len();
    d.wait_until("another failed read", WAIT, || {
        fake.requests("GET", COMMENTS).len() > reads
    });
    assert_eq!(prompts(&setup).len(), 1);

    // The endpoint recovers: the next poll reads the comment and dispatches with it.
    fake.with_state(|s| {
        s.failing.clear();
    });
    d.wait_until("the second run", WAIT, || prompts(&setup).len() >= 2);
    let second = &prompts(&setup)[1];
    assert!(
        second.contains("Comment by alice: Use the blue one."),
        "{second}"
    );
    assert!(
        !prompts(&setup)[0].contains("Comment by"),
        "the first run had no comments"
    );
    let s = d.wait_state("no hold left", WAIT, |s| held_row(s).is_none());
    assert_eq!(s["held"], json!([]));
}
