//! The real binary against the fake GitLab API: the example workflow validates and runs; a
//! candidate is dispatched, moved to in-progress and handed off by label; a terminal state
//! stops a running agent and cleans its workspace; blockers hold an issue until terminal;
//! lifecycle notes are posted once; faults surface in the poll health and recover.

mod common;

use std::time::Duration;

use common::fake_gitlab::{self, FakeGitlab, TOKEN, issue_path, project_path};
use common::fake_server::{Fault, Reply};
use common::poll_health;
use common::{FAKE_AGENT, Setup};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The example workflow with only its endpoint, project and agent command replaced.
fn example_for(fake: &FakeGitlab) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gitlab/WORKFLOW.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        text.contains("endpoint: https://gitlab.com\n")
            && text.contains("project: your-group/your-project\n")
            && text.contains("command: claude\n")
    );
    text.replace(
        "endpoint: https://gitlab.com\n",
        &format!("endpoint: {}\n", fake.url),
    )
    .replace(
        "project: your-group/your-project\n",
        &format!("project: {}\n", fake_gitlab::PROJECT),
    )
    .replace("command: claude\n", &format!("command: {FAKE_AGENT}\n"))
}

/// A mock-agent workflow over the fake, polling every 200 ms, retried reads backing off 10 ms.
fn mock_workflow(fake: &FakeGitlab, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: gitlab\n  endpoint: {url}\n  api_key: $GITLAB_TOKEN\n  project: {project}\n  active_states: [backlog, in-progress]\n  terminal_states: [done, wontfix]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true, on_completion: true}}\ngitlab:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url,
        project = fake_gitlab::PROJECT
    )
}

fn notes_posted(fake: &FakeGitlab, iid: u64) -> usize {
    fake.requests("POST", &format!("{}/notes", issue_path(iid)))
        .len()
}

fn edits(fake: &FakeGitlab, iid: u64) -> Vec<serde_json::Value> {
    fake.requests("PUT", &issue_path(iid))
        .iter()
        .map(|r| r.json())
        .collect()
}

#[test]
fn the_example_validates_and_hands_an_issue_off_by_label() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| s.add_issue(1, "Add dark mode", &["backlog"], false));
    let setup = Setup::new(&example_for(&fake), "[]");
    let validate = |token: Option<&str>| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(setup.path())
            .args(["validate", "WORKFLOW.md"])
            .env_remove("GITLAB_TOKEN");
        if let Some(t) = token {
            cmd.env("GITLAB_TOKEN", t);
        }
        cmd.output().unwrap_or_else(|e| panic!("{e}"))
    };
    let ok = validate(Some(TOKEN));
    assert!(
        ok.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    let missing = validate(None);
    assert_eq!(missing.status.code(), Some(1));
    let out = String::from_utf8_lossy(&missing.stdout).to_string()
        + &String::from_utf8_lossy(&missing.stderr);
    let line = out
        .lines()
        .find(|l| l.contains("tracker.api_key"))
        .unwrap_or_default();
    assert!(line.contains("$GITLAB_TOKEN"), "{out}");

    let d = setup.start(&[("GITLAB_TOKEN", TOKEN)]);
    d.wait_until("issue 1 handed off to review", WAIT, || {
        fake.with_state(|s| s.labels(1)) == ["review"]
    });
    assert_eq!(
        edits(&fake, 1),
        [
            json!({"add_labels": "in-progress", "remove_labels": "backlog"}),
            json!({"add_labels": "review", "remove_labels": "in-progress"}),
        ]
    );
    d.wait_until("both lifecycle notes", WAIT, || notes_posted(&fake, 1) >= 2);
    assert_eq!(notes_posted(&fake, 1), 2);
    for r in fake.journal() {
        assert_eq!(r.header("private-token"), Some(TOKEN));
        assert!(r.path.starts_with(&project_path()), "{}", r.path);
    }
    assert!(!d.log_text().contains(TOKEN));
}

#[test]
fn a_terminal_state_stops_the_running_agent_and_cleans_its_workspace() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| s.add_issue(7, "Long job", &["backlog"], false));
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 600000\n"), "[]");
    let d = setup.start(&[("GITLAB_TOKEN", TOKEN)]);
    d.wait_state("a running session", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "7"
    });
    d.wait_until("issue 7 labelled in-progress", WAIT, || {
        fake.with_state(|s| s.labels(7)) == ["in-progress"]
    });
    let ws = setup.path().join("ws/7");
    d.wait_until("the workspace made", WAIT, || ws.is_dir());
    fake.with_state(|s| {
        s.set_labels(7, &["done"]);
        s.set_open(7, false);
    });
    d.wait_state("the run stopped", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.is_empty())
    });
    d.wait_until("the workspace removed", WAIT, || !ws.exists());
    d.wait_until("the dispatch note", WAIT, || notes_posted(&fake, 7) >= 1);
    assert_eq!(notes_posted(&fake, 7), 1, "only the dispatch note");
}

#[test]
fn a_blocker_holds_an_issue_until_it_is_terminal() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(2, "Blocked", &["backlog"], false);
        s.add_issue(3, "Blocker under review", &["review"], false);
        s.block(2, 3);
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITLAB_TOKEN", TOKEN)]);
    let links = format!("{}/links", issue_path(2));
    d.wait_until("a few blocker reads", WAIT, || {
        fake.requests("GET", &links).len() >= 3
    });
    assert_eq!(fake.with_state(|s| s.labels(2)), ["backlog"]);
    assert!(edits(&fake, 2).is_empty());
    fake.with_state(|s| {
        s.set_labels(3, &["done"]);
        s.set_open(3, false);
    });
    d.wait_until("issue 2 handed off", WAIT, || {
        fake.with_state(|s| s.labels(2)) == ["review"]
    });
    d.wait_until("both lifecycle notes", WAIT, || notes_posted(&fake, 2) >= 2);
    // The issue is no longer active: nothing more is written.
    let before = fake.journal().iter().filter(|r| r.method != "GET").count();
    let list = format!("{}/issues", project_path());
    let polls = fake.requests("GET", &list).len();
    d.wait_until("two more polls", WAIT, || {
        fake.requests("GET", &list).len() >= polls + 2
    });
    assert_eq!(
        fake.journal().iter().filter(|r| r.method != "GET").count(),
        before
    );
    assert_eq!(notes_posted(&fake, 2), 2);
}

#[test]
fn faults_show_in_the_poll_health_and_the_next_poll_recovers() {
    let fake = fake_gitlab::start();
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITLAB_TOKEN", TOKEN)]);
    let s = d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let tracker = &s["health"]["tracker"];
    assert_eq!(tracker["kind"], "gitlab", "{tracker}");
    assert_eq!(tracker["rate_limit"]["limit"], 2000, "{tracker}");
    assert_eq!(tracker["rate_limit"]["remaining"], 1999, "{tracker}");
    assert_eq!(
        tracker["rate_limit"]["reset_at"], "2100-01-01T00:00:00.000Z",
        "{tracker}"
    );
    let path = format!("{}/issues", project_path());
    let spent = Fault::Status(
        Reply::json(429, &json!({"message": "Retry later"}))
            .header("Retry-After", "120")
            .header("RateLimit-Remaining", "0")
            .header("RateLimit-Reset", "4102444800"),
    );
    let faults: Vec<Vec<Fault>> = vec![
        vec![Fault::unauthorized()],
        vec![spent],
        vec![Fault::server_error(502); 3],
        vec![Fault::BadJson],
        vec![Fault::Truncated; 3],
        vec![Fault::Dropped; 3],
        vec![Fault::Delay(Duration::from_millis(2500)); 3],
    ];
    for group in faults {
        let label = format!("{:?}", group[0]);
        poll_health::fails_then_recovers(
            &d,
            &fake,
            ("GET", &path),
            &group,
            &label,
            WAIT,
            |error| {
                assert!(error.contains("tracker: gitlab:"), "{label}: {error}");
                assert!(!error.contains(TOKEN));
            },
        );
        assert_eq!(fake.pending_faults("GET", &path), 0, "{label}");
    }
    let s = d.wait_state("the latest state", WAIT, |_| true);
    let limited = &s["health"]["tracker"]["rate_limit"];
    assert_eq!(limited["last_limited_status"], 429, "{limited}");
    assert!(limited["last_limited_at"].is_string(), "{limited}");
    // Recovery dispatches as usual, and every write was sent once.
    fake.with_state(|s| s.add_issue(4, "After the storm", &["backlog"], false));
    d.wait_until("issue 4 handed off", WAIT, || {
        fake.with_state(|s| s.labels(4)) == ["review"]
    });
    // The completion note is written by the tracker-ops thread after the handoff.
    d.wait_until("both lifecycle notes of issue 4", WAIT, || {
        notes_posted(&fake, 4) >= 2
    });
    assert_eq!(edits(&fake, 4).len(), 2);
    assert_eq!(notes_posted(&fake, 4), 2);
}

#[test]
fn a_workflow_without_states_gets_the_kinds_default_labels() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(5, "Reviewed", &["review"], false);
        s.add_issue(6, "Done", &["done"], true);
    });
    let wf = format!(
        "---\ntracker:\n  kind: gitlab\n  endpoint: {}\n  api_key: $GITLAB_TOKEN\n  project: {}\nagent:\n  kind: mock\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        fake.url,
        fake_gitlab::PROJECT
    );
    let setup = Setup::new(&wf, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .env("GITLAB_TOKEN", TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("dispatch 5 \"Reviewed\" (state \"review\""),
        "{text}"
    );
    assert!(!text.contains("dispatch 6"), "{text}");
}

#[test]
fn a_429_read_is_not_retried_before_its_retry_after() {
    let fake = fake_gitlab::start();
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITLAB_TOKEN", TOKEN)]);
    let issues = format!("{}/issues", project_path());
    poll_health::a_429_waits_for_its_retry_after(&d, &fake, &issues, WAIT);
}
