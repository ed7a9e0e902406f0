//! The real binary against the fake Linear API: the example workflow validates and runs; a
//! candidate is dispatched, moved to In Progress and handed off by state id, each written
//! once; a terminal state stops a running agent and cleans its workspace; blockers hold an
//! issue until terminal; lifecycle comments are posted once; faults surface in the poll health
//! and recover; an answer of a shape the adapter cannot read puts a due retry back instead of
//! dropping it.

mod common;

use std::time::Duration;

use common::fake_linear::{self, FakeLinear, calls, issue_id};
use common::fake_server::Fault;
use common::poll_health;
use common::{FAKE_AGENT, Setup};

const WAIT: Duration = Duration::from_secs(30);

/// The example workflow with only its endpoint and agent command replaced.
fn example_for(fake: &FakeLinear) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/linear/WORKFLOW.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let endpoint = "endpoint: https://api.linear.app\n";
    assert!(text.contains(endpoint) && text.contains("command: claude\n"));
    text.replace(endpoint, &format!("endpoint: {}\n", fake.url))
        .replace("command: claude\n", &format!("command: {FAKE_AGENT}\n"))
}

/// A mock-agent workflow over the fake, polling every 200 ms, retried reads backing off 10 ms.
fn mock_workflow(fake: &FakeLinear, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: linear\n  endpoint: {url}\n  api_key: $LINEAR_API_KEY\n  project: ENG\n  active_states: [Todo, In Progress]\n  terminal_states: [Done, Canceled]\n  in_progress_state: In Progress\n  handoff_state: In Review\n  comments: {{on_dispatch: true, on_completion: true}}\nlinear:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

fn state_writes(fake: &FakeLinear, n: u64) -> Vec<String> {
    calls(fake, "SortieIssueUpdate")
        .iter()
        .filter(|v| v["id"] == issue_id(n).as_str())
        .map(|v| v["stateId"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn comment_writes(fake: &FakeLinear, n: u64) -> Vec<String> {
    calls(fake, "SortieCommentCreate")
        .iter()
        .filter(|v| v["issueId"] == issue_id(n).as_str())
        .map(|v| v["body"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn env() -> [(&'static str, &'static str); 1] {
    [("LINEAR_API_KEY", fake_linear::TOKEN)]
}

#[test]
fn the_example_validates_and_hands_an_issue_off_by_state_id() {
    let fake = fake_linear::start();
    fake.with_state(|s| {
        s.add_issue(1, "Add dark mode", "Todo");
    });
    let setup = Setup::new(&example_for(&fake), "[]");
    let validate = |token: Option<&str>| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(setup.path())
            .args(["validate", "WORKFLOW.md"])
            .env_remove("LINEAR_API_KEY");
        if let Some(t) = token {
            cmd.env("LINEAR_API_KEY", t);
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = validate(Some(fake_linear::TOKEN));
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = validate(None);
    assert_eq!(code, Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("tracker.api_key"))
        .unwrap_or_default();
    assert!(line.contains("$LINEAR_API_KEY"), "{text}");

    let d = setup.start(&env());
    d.wait_until("ENG-1 handed off to In Review", WAIT, || {
        fake.with_state(|s| s.state(1)) == "In Review"
    });
    assert_eq!(state_writes(&fake, 1), ["st-progress", "st-review"]);
    d.wait_until("both lifecycle comments", WAIT, || {
        comment_writes(&fake, 1).len() >= 2
    });
    assert_eq!(comment_writes(&fake, 1).len(), 2);
    for r in fake.journal() {
        assert_eq!(r.header("authorization"), Some(fake_linear::TOKEN));
    }
    assert!(!d.log_text().contains(fake_linear::TOKEN));
}

#[test]
fn a_terminal_state_stops_the_running_agent_and_cleans_its_workspace() {
    let fake = fake_linear::start();
    fake.with_state(|s| {
        s.add_issue(7, "Long job", "Todo");
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 600000\n"), "[]");
    let d = setup.start(&env());
    d.wait_state("a running session", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "ENG-7"
    });
    d.wait_until("ENG-7 moved to In Progress", WAIT, || {
        fake.with_state(|s| s.state(7)) == "In Progress"
    });
    let ws = setup.path().join("ws/ENG-7");
    d.wait_until("the workspace made", WAIT, || ws.is_dir());
    fake.with_state(|s| s.set_state(7, "Canceled"));
    d.wait_state("the run stopped", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.is_empty())
    });
    d.wait_until("the workspace removed", WAIT, || !ws.exists());
    assert_eq!(state_writes(&fake, 7), ["st-progress"]);
    assert_eq!(
        comment_writes(&fake, 7).len(),
        1,
        "only the dispatch comment"
    );
}

#[test]
fn a_blocker_holds_an_issue_until_it_is_terminal() {
    let fake = fake_linear::start();
    fake.with_state(|s| {
        s.add_issue(2, "Blocked", "Todo");
        s.add_issue(3, "Blocker under review", "In Review");
        if let Some(i) = s.issue_mut(2) {
            i.blocked_by = vec![3];
        }
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&env());
    d.wait_until("a few polls", WAIT, || {
        calls(&fake, "SortieIssues").len() >= 3
    });
    assert_eq!(fake.with_state(|s| s.state(2)), "Todo");
    assert!(state_writes(&fake, 2).is_empty());
    fake.with_state(|s| s.set_state(3, "Done"));
    d.wait_until("ENG-2 handed off", WAIT, || {
        fake.with_state(|s| s.state(2)) == "In Review"
    });
    d.wait_until("both lifecycle comments", WAIT, || {
        comment_writes(&fake, 2).len() >= 2
    });
    let polls = calls(&fake, "SortieIssues").len();
    d.wait_until("more polls", WAIT, || {
        calls(&fake, "SortieIssues").len() >= polls + 4
    });
    assert_eq!(comment_writes(&fake, 2).len(), 2);
    assert_eq!(state_writes(&fake, 2), ["st-progress", "st-review"]);
}

#[test]
fn faults_show_in_the_poll_health_and_the_next_poll_recovers() {
    let fake = fake_linear::start();
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&env());
    d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let faults: Vec<(Vec<Fault>, &str)> = vec![
        (vec![fake_linear::unauthenticated()], "tracker_auth_error"),
        (vec![fake_linear::ratelimited(120_000)], "RATELIMITED"),
        (vec![Fault::server_error(502); 3], "tracker_transport_error"),
        (vec![Fault::BadJson], "tracker_payload_error"),
        (vec![Fault::Dropped; 3], "tracker_transport_error"),
        (
            vec![Fault::Delay(Duration::from_millis(2500)); 3],
            "timed out",
        ),
    ];
    for (group, wanted) in faults {
        let label = format!("{:?}", group[0]);
        poll_health::fails_then_recovers(
            &d,
            &fake,
            ("POST", fake_linear::PATH),
            &group,
            &label,
            WAIT,
            |error| {
                assert!(error.contains("tracker: linear:"), "{label}: {error}");
                assert!(error.contains(wanted), "{label}: {error}");
                assert!(!error.contains(fake_linear::TOKEN));
            },
        );
        assert_eq!(fake.pending_faults("POST", fake_linear::PATH), 0, "{label}");
    }
    fake.with_state(|s| {
        s.add_issue(4, "After the storm", "Todo");
    });
    d.wait_until("ENG-4 handed off", WAIT, || {
        fake.with_state(|s| s.state(4)) == "In Review"
    });
    assert_eq!(state_writes(&fake, 4), ["st-progress", "st-review"]);
}

/// A retry that fires while Linear answers the issue read with a shape the adapter cannot read
/// is put back with its backoff (the attempt kept, the failure logged with the answer's first
/// bytes), and runs once the answers are readable again: the answer was never "not found".
#[test]
fn an_unreadable_issue_answer_puts_the_due_retry_back() {
    let fake = fake_linear::start();
    fake.with_state(|s| {
        s.add_issue(1, "Flaky at first", "Todo");
    });
    let wf = mock_workflow(&fake, "  issues:\n    ENG-1: {failing_sessions: 1}\n").replace(
        "  max_turns: 1\nmock:",
        "  max_turns: 1\n  max_retry_backoff_ms: 3000\nmock:",
    );
    let setup = Setup::new(&wf, "[]");
    let d = setup.start(&env());
    d.wait_state("the first attempt failed and waits to retry", WAIT, |s| {
        s["retrying"]
            .as_array()
            .is_some_and(|r| r.iter().any(|e| e["issue_identifier"] == "ENG-1"))
    });
    fake.with_state(|s| s.unreadable_ops.push("SortieIssue".into()));
    let before = calls(&fake, "SortieIssue").len();
    d.wait_until(
        "the retry's issue read met the unreadable answer",
        WAIT,
        || {
            calls(&fake, "SortieIssue").len() > before
                && d.log_text().contains("retry issue fetch failed")
        },
    );
    let log = d.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("retry issue fetch failed"))
        .unwrap_or_default();
    assert!(
        line.contains("tracker_payload_error") && line.contains("SortieIssue"),
        "{line}"
    );
    assert!(line.contains("data"), "the answer's first bytes: {line}");
    assert!(!line.contains("tracker_not_found"), "{line}");
    let s = d.wait_state("the retry still queued", WAIT, |_| true);
    let entry = s["retrying"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["issue_identifier"] == "ENG-1").cloned())
        .unwrap_or_else(|| panic!("the retry was dropped: {}", s["retrying"]));
    assert!(entry["attempt"].as_u64() >= Some(1), "{entry}");
    fake.with_state(|s| s.unreadable_ops.clear());
    d.wait_until("ENG-1 handed off on its retry", WAIT, || {
        fake.with_state(|s| s.state(1)) == "In Review"
    });
    // The unreadable answers break Linear's schema on purpose; nothing else may.
    for v in fake.vendor_violations() {
        assert!(
            v.contains("SortieIssue") && v.contains("Cannot return null"),
            "{v}"
        );
    }
}
