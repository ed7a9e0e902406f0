//! The real binary against the fake Gitea API: the example workflow validates and runs; a
//! candidate is dispatched, moved to in-progress and handed off by label; a terminal state
//! stops a running agent and cleans its workspace; a dependency holds an issue until it is
//! terminal; lifecycle comments are posted once; faults surface in the poll health and
//! recover.

mod common;

use std::time::Duration;

use common::fake_gitea::{self, FakeGitea, TOKEN};
use common::fake_server::{Fault, Reply};
use common::poll_health;
use common::{FAKE_AGENT, Setup};

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "wontfix", "bug"];
const WAIT: Duration = Duration::from_secs(30);
const ISSUES: &str = "/api/v1/repos/owner/repo/issues";

/// The example workflow with only its endpoint and agent command replaced.
fn example_for(fake: &FakeGitea) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gitea/WORKFLOW.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        text.contains("endpoint: https://gitea.example.com\n")
            && text.contains("command: claude\n")
    );
    text.replace(
        "endpoint: https://gitea.example.com\n",
        &format!("endpoint: {}\n", fake.url),
    )
    .replace("command: claude\n", &format!("command: {FAKE_AGENT}\n"))
}

/// A mock-agent workflow over the fake, polling every 200 ms, retried reads backing off 10 ms.
fn mock_workflow(fake: &FakeGitea, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: gitea\n  endpoint: {url}\n  api_key: $GITEA_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done, wontfix]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true, on_completion: true}}\ngitea:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

fn posts(fake: &FakeGitea, n: u64, what: &str) -> Vec<serde_json::Value> {
    fake.requests("POST", &format!("{ISSUES}/{n}/{what}"))
        .iter()
        .map(|r| r.json())
        .collect()
}

fn label_id(fake: &FakeGitea, name: &str) -> serde_json::Value {
    fake.with_state(|s| s.label(name).map(|l| l["id"].clone()))
        .unwrap_or_else(|| panic!("no label {name}"))
}

#[test]
fn the_example_validates_and_hands_an_issue_off_by_label() {
    let fake = fake_gitea::start_repo("your-org/your-repo", LABELS);
    fake.with_state(|s| s.add_issue(1, "Add dark mode", &["backlog"], false));
    let setup = Setup::new(&example_for(&fake), "[]");
    let validate = |token: Option<&str>| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(setup.path())
            .args(["validate", "WORKFLOW.md"])
            .env_remove("GITEA_TOKEN");
        if let Some(t) = token {
            cmd.env("GITEA_TOKEN", t);
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
    assert!(line.contains("$GITEA_TOKEN"), "{out}");

    let d = setup.start(&[("GITEA_TOKEN", TOKEN)]);
    d.wait_until("issue 1 handed off to review", WAIT, || {
        fake.with_state(|s| s.labels(1)) == ["review"]
    });
    let base = "/api/v1/repos/your-org/your-repo/issues/1";
    let added: Vec<_> = fake
        .requests("POST", &format!("{base}/labels"))
        .iter()
        .map(|r| r.json()["labels"][0].clone())
        .collect();
    assert_eq!(
        added,
        [label_id(&fake, "in-progress"), label_id(&fake, "review")]
    );
    d.wait_until("both lifecycle comments", WAIT, || {
        fake.requests("POST", &format!("{base}/comments")).len() >= 2
    });
    assert_eq!(fake.requests("POST", &format!("{base}/comments")).len(), 2);
    for label in ["backlog", "in-progress"] {
        let path = format!("{base}/labels/{}", label_id(&fake, label));
        assert_eq!(fake.requests("DELETE", &path).len(), 1, "{label}");
    }
    for r in fake.journal() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("token {TOKEN}").as_str())
        );
    }
    assert!(!d.log_text().contains(TOKEN));
}

#[test]
fn a_missing_endpoint_fails_validation_in_one_line() {
    let fake = fake_gitea::start(LABELS);
    let text = example_for(&fake).replace(&format!("  endpoint: {}\n", fake.url), "");
    let setup = Setup::new(&text, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "WORKFLOW.md"])
        .env("GITEA_TOKEN", TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .find(|l| l.contains("tracker.endpoint"))
        .unwrap_or_default();
    assert!(
        line.contains("required for tracker kind \"gitea\""),
        "{text}"
    );
    assert!(fake.journal().is_empty());
}

#[test]
fn a_terminal_state_stops_the_running_agent_and_cleans_its_workspace() {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| s.add_issue(7, "Long job", &["backlog"], false));
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 600000\n"), "[]");
    let d = setup.start(&[("GITEA_TOKEN", TOKEN)]);
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
    assert_eq!(
        posts(&fake, 7, "comments").len(),
        1,
        "only the dispatch comment"
    );
}

#[test]
fn a_dependency_holds_an_issue_until_it_is_terminal() {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(2, "Blocked", &["backlog"], false);
        s.add_issue(3, "Blocker under review", &["review"], false);
        s.depends_on.insert(2, vec![3]);
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITEA_TOKEN", TOKEN)]);
    d.wait_until("a few dependency reads", WAIT, || {
        fake.requests("GET", &format!("{ISSUES}/2/dependencies"))
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
    let polls = fake.requests("GET", ISSUES).len();
    d.wait_until("two more polls", WAIT, || {
        fake.requests("GET", ISSUES).len() >= polls + 2
    });
    assert_eq!(
        fake.journal().iter().filter(|r| r.method != "GET").count(),
        before
    );
    assert_eq!(posts(&fake, 2, "comments").len(), 2);
}

#[test]
fn faults_show_in_the_poll_health_and_the_next_poll_recovers() {
    let fake = fake_gitea::start(LABELS);
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITEA_TOKEN", TOKEN)]);
    let s = d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert_eq!(s["health"]["tracker"]["kind"], "gitea", "{}", s["health"]);
    let forbidden = Fault::Status(Reply::json(
        403,
        &serde_json::json!({"message": "token does not have at least one of required scope(s): [read:issue]"}),
    ));
    let faults: Vec<Vec<Fault>> = vec![
        vec![Fault::unauthorized()],
        vec![forbidden],
        vec![Fault::too_many_requests(1); 3],
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
            ("GET", ISSUES),
            &group,
            &label,
            WAIT,
            |error| {
                assert!(error.contains("tracker: gitea:"), "{label}: {error}");
                assert!(!error.contains(TOKEN));
            },
        );
        assert_eq!(fake.pending_faults("GET", ISSUES), 0, "{label}");
    }
    // The 429s are remembered in the tracker's health.
    let s = d.wait_state("the latest state", WAIT, |_| true);
    let limited = &s["health"]["tracker"]["rate_limit"];
    assert_eq!(limited["last_limited_status"], 429, "{limited}");
    // Recovery dispatches as usual, and every write was sent once.
    fake.with_state(|s| s.add_issue(4, "After the storm", &["backlog"], false));
    d.wait_until("issue 4 handed off", WAIT, || {
        fake.with_state(|s| s.labels(4)) == ["review"]
    });
    assert_eq!(posts(&fake, 4, "labels").len(), 2);
}

#[test]
fn a_workflow_without_states_gets_the_kinds_default_labels() {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(5, "Reviewed", &["review"], false);
        s.add_issue(6, "Done", &["done"], true);
    });
    let wf = format!(
        "---\ntracker:\n  kind: gitea\n  endpoint: {}\n  api_key: $GITEA_TOKEN\n  project: owner/repo\nagent:\n  kind: mock\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        fake.url
    );
    let setup = Setup::new(&wf, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .env("GITEA_TOKEN", TOKEN)
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
    let fake = fake_gitea::start(LABELS);
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("GITEA_TOKEN", TOKEN)]);
    poll_health::a_429_waits_for_its_retry_after(&d, &fake, ISSUES, WAIT);
}
