//! The real binary against the fake GitHub API: the example workflow validates and runs; a
//! candidate is dispatched, moved to in-progress and handed off by label; a terminal state
//! stops a running agent and cleans its workspace; blockers hold an issue until terminal;
//! lifecycle comments are posted once; faults surface in the poll health and recover; a poll
//! past its byte caps (`tracker.max_poll_bytes`) fails naming the cap.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, TOKEN};
use common::fake_server::{Fault, Reply};
use common::poll_health;
use common::{FAKE_AGENT, Setup};

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "wontfix", "bug"];
const WAIT: Duration = Duration::from_secs(30);

/// The example workflow with only its endpoint and agent command replaced.
fn example_for(fake: &FakeGithub) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/github/WORKFLOW.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        text.contains("endpoint: https://api.github.com\n") && text.contains("command: claude\n")
    );
    text.replace(
        "endpoint: https://api.github.com\n",
        &format!("endpoint: {}\n", fake.url),
    )
    .replace("command: claude\n", &format!("command: {FAKE_AGENT}\n"))
}

/// A mock-agent workflow over the fake, polling every 200 ms, retried reads backing off 10 ms.
fn mock_workflow(fake: &FakeGithub, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done, wontfix]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true, on_completion: true}}\ngithub:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

fn posts(fake: &FakeGithub, n: u64, what: &str) -> Vec<serde_json::Value> {
    fake.requests("POST", &format!("/repos/owner/repo/issues/{n}/{what}"))
        .iter()
        .map(|r| r.json())
        .collect()
}

#[test]
fn the_example_validates_and_hands_an_issue_off_by_label() {
    let fake = fake_github::start_repo("your-org/your-repo", LABELS);
    fake.with_state(|s| s.add_issue(1, "Add dark mode", &["backlog"], false));
    let setup = Setup::new(&example_for(&fake), "[]");
    let validate = |token: Option<&str>| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(setup.path())
            .args(["validate", "WORKFLOW.md"])
            .env_remove("GITHUB_TOKEN");
        if let Some(t) = token {
            cmd.env("GITHUB_TOKEN", t);
        }
        cmd.output().unwrap_or_else(|e| panic!("{e}"))
    };
    let ok = validate(Some(TOKEN));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let missing = validate(None);
    assert_eq!(missing.status.code(), Some(1));
    let out = String::from_utf8_lossy(&missing.stdout).to_string()
        + &String::from_utf8_lossy(&missing.stderr);
    let line = out
        .lines()
        .find(|l| l.contains("tracker.api_key"))
        .unwrap_or_default();
    assert!(line.contains("$GITHUB_TOKEN"), "{out}");

    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("issue 1 handed off to review", WAIT, || {
        fake.with_state(|s| s.labels(1)) == ["review"]
    });
    let labels = fake.requests("POST", "/repos/your-org/your-repo/issues/1/labels");
    let added: Vec<_> = labels
        .iter()
        .map(|r| r.json()["labels"][0].clone())
        .collect();
    assert_eq!(
        added,
        [
            serde_json::json!("in-progress"),
            serde_json::json!("review")
        ]
    );
    d.wait_until("both lifecycle comments", WAIT, || {
        fake.requests("POST", "/repos/your-org/your-repo/issues/1/comments")
            .len()
            >= 2
    });
    let base = "/repos/your-org/your-repo/issues/1";
    assert_eq!(fake.requests("POST", &format!("{base}/comments")).len(), 2);
    assert_eq!(
        fake.requests("DELETE", &format!("{base}/labels/backlog"))
            .len(),
        1
    );
    assert_eq!(
        fake.requests("DELETE", &format!("{base}/labels/in-progress"))
            .len(),
        1
    );
    for r in fake.journal() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
        assert_eq!(r.header("x-github-api-version"), Some("2022-11-28"));
    }
    assert!(!d.log_text().contains(TOKEN));
}

#[test]
fn a_terminal_state_stops_the_running_agent_and_cleans_its_workspace() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| s.add_issue(7, "Long job", &["backlog"], false));
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 600000\n"), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_state("a running session", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "7"
    });
    // The worker relabels the issue and makes its workspace after the session is listed.
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
    assert_eq!(
        posts(&fake, 7, "comments").len(),
        1,
        "only the dispatch comment"
    );
}

#[test]
fn a_blocker_holds_an_issue_until_it_is_terminal() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(2, "Blocked", &["backlog"], false);
        s.add_issue(3, "Blocker under review", &["review"], false);
        s.blocked_by.insert(2, vec![3]);
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("a few blocker reads", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/issues/2/dependencies/blocked_by")
            .len()
            >= 3
    });
    assert_eq!(fake.with_state(|s| s.labels(2)), ["backlog"]);
    assert!(posts(&fake, 2, "labels").is_empty());
    fake.with_state(|s| {
        s.set_labels(3, &["done"]);
        s.set_open(3, false);
    });
    d.wait_until("issue 2 handed off", WAIT, || {
        fake.with_state(|s| s.labels(2)) == ["review"]
    });
    d.wait_until("both lifecycle comments", WAIT, || {
        posts(&fake, 2, "comments").len() >= 2
    });
    // The issue is no longer active: nothing more is written.
    let before = fake.journal().iter().filter(|r| r.method != "GET").count();
    d.wait_until("two more polls", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/issues").len() >= 10
    });
    assert_eq!(
        fake.journal().iter().filter(|r| r.method != "GET").count(),
        before
    );
    assert_eq!(posts(&fake, 2, "comments").len(), 2);
}

#[test]
fn faults_show_in_the_poll_health_and_the_next_poll_recovers() {
    let fake = fake_github::start(LABELS);
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    let s = d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let tracker = &s["health"]["tracker"];
    assert_eq!(tracker["kind"], "github", "{tracker}");
    assert_eq!(tracker["rate_limit"]["limit"], 5000, "{tracker}");
    assert_eq!(tracker["rate_limit"]["remaining"], 4999, "{tracker}");
    assert_eq!(
        tracker["rate_limit"]["reset_at"], "2100-01-01T00:00:00.000Z",
        "{tracker}"
    );
    let path = "/repos/owner/repo/issues";
    let faults: Vec<Vec<Fault>> = vec![
        vec![Fault::unauthorized()],
        vec![Fault::rate_limited()],
        vec![Fault::secondary_rate_limited(120)],
        vec![Fault::server_error(502); 3],
        vec![Fault::BadJson],
        vec![Fault::Truncated; 3],
        vec![Fault::Dropped; 3],
        vec![Fault::Delay(Duration::from_millis(2500)); 3],
    ];
    for group in faults {
        let label = format!("{:?}", group[0]);
        poll_health::fails_then_recovers(&d, &fake, ("GET", path), &group, &label, WAIT, |error| {
            assert!(error.contains("tracker: github:"), "{label}: {error}");
            assert!(!error.contains(TOKEN));
        });
        assert_eq!(fake.pending_faults("GET", path), 0, "{label}");
    }
    // The rate-limited answers are remembered in the tracker's health.
    let s = d.wait_state("the latest state", WAIT, |_| true);
    let limited = &s["health"]["tracker"]["rate_limit"];
    assert_eq!(limited["last_limited_status"], 403, "{limited}");
    assert!(limited["last_limited_at"].is_string(), "{limited}");
    // Recovery dispatches as usual, and every write was sent once.
    fake.with_state(|s| s.add_issue(4, "After the storm", &["backlog"], false));
    d.wait_until("issue 4 handed off", WAIT, || {
        fake.with_state(|s| s.labels(4)) == ["review"]
    });
    assert_eq!(posts(&fake, 4, "labels").len(), 2);
}

#[test]
fn a_429_read_is_not_retried_before_its_retry_after() {
    let fake = fake_github::start(LABELS);
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    poll_health::a_429_waits_for_its_retry_after(&d, &fake, "/repos/owner/repo/issues", WAIT);
}

#[test]
fn a_workflow_without_states_gets_the_kinds_default_labels() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(5, "Reviewed", &["review"], false);
        s.add_issue(6, "Done", &["done"], true);
    });
    let wf = format!(
        "---\ntracker:\n  kind: github\n  endpoint: {}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\nagent:\n  kind: mock\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        fake.url
    );
    let setup = Setup::new(&wf, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .env("GITHUB_TOKEN", TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    // `review` is active by default; the closed `done` issue is terminal.
    assert!(
        text.contains("dispatch 5 \"Reviewed\" (state \"review\""),
        "{text}"
    );
    assert!(!text.contains("dispatch 6"), "{text}");
}

/// With `tracker.max_poll_bytes: 1048576`, one answer may take 128 KiB and a poll's pages
/// 1 MiB together: an answer over the first and a list over the second each fail the poll
/// with an error naming the setting, and the poll passes again once the tracker shrinks.
#[test]
fn a_poll_past_its_byte_caps_fails_naming_the_cap() {
    let fake = fake_github::start(LABELS);
    let wf = mock_workflow(&fake, "  turn_delay_ms: 10\n")
        .replace("  comments:", "  max_poll_bytes: 1048576\n  comments:");
    let setup = Setup::new(&wf, "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let path = "/repos/owner/repo/issues";
    let big = fake_github::issue_json(1, &"x".repeat(200 * 1024), &["backlog"], false);
    let oversized = [Fault::Status(Reply::json(200, &serde_json::json!([big])))];
    poll_health::fails_then_recovers(
        &d,
        &fake,
        ("GET", path),
        &oversized,
        "an answer over its cap",
        WAIT,
        |error| {
            assert!(
            error.contains("is over the 128 KiB one answer may take (an eighth of tracker.max_poll_bytes, 1 MiB)"),
            "{error}"
        );
        },
    );
    // Pages of about 100 KiB each, 1.2 MiB together, of issues that are never candidates.
    let title = "t".repeat(1500);
    fake.with_state(|s| {
        for n in 100..700 {
            s.add_issue(n, &title, &["done"], false);
        }
    });
    let s = d.wait_state("the poll failing on its total", WAIT, |s| {
        s["health"]["poll"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("would pass their cap of 1 MiB (tracker.max_poll_bytes)"))
    });
    assert_eq!(
        s["health"]["poll"]["status"], "fail",
        "{}",
        s["health"]["poll"]
    );
    fake.with_state(|s| {
        for n in 100..700 {
            s.issues.remove(&n);
        }
    });
    d.wait_state("the poll passing again", WAIT, |s| {
        s["health"]["poll"]["status"] == "pass"
    });
}
