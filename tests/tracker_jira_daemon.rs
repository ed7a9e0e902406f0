//! The real binary against the fake Jira API: the example workflow validates and runs; a
//! candidate is dispatched, moved to In Progress and handed off by the right transition,
//! posted once; a terminal status stops a running agent and cleans its workspace; blockers
//! hold an issue until terminal; lifecycle comments are posted once as ADF; faults surface in
//! the poll health and recover.

mod common;

use std::time::Duration;

use common::fake_jira::{self, FakeJira};
use common::fake_server::{Fault, Reply};
use common::poll_health;
use common::{FAKE_AGENT, Setup};

const WAIT: Duration = Duration::from_secs(30);
const SEARCH: &str = "/rest/api/3/search/jql";

/// The example workflow with only its endpoint and agent command replaced.
fn example_for(fake: &FakeJira) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/jira/WORKFLOW.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let endpoint = "endpoint: https://your-site.atlassian.net\n";
    assert!(text.contains(endpoint) && text.contains("command: claude\n"));
    text.replace(endpoint, &format!("endpoint: {}\n", fake.url))
        .replace("command: claude\n", &format!("command: {FAKE_AGENT}\n"))
}

/// A mock-agent workflow over the fake, polling every 200 ms, retried reads backing off 10 ms.
fn mock_workflow(fake: &FakeJira, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: jira\n  endpoint: {url}\n  api_key: $JIRA_API_TOKEN\n  project: PROJ\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Human Review\n  comments: {{on_dispatch: true, on_completion: true}}\njira:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

fn transition_posts(fake: &FakeJira, id: u64) -> Vec<serde_json::Value> {
    fake.requests("POST", &format!("/rest/api/3/issue/{id}/transitions"))
        .iter()
        .map(|r| r.json()["transition"]["id"].clone())
        .collect()
}

fn comment_posts(fake: &FakeJira, id: u64) -> Vec<serde_json::Value> {
    fake.requests("POST", &format!("/rest/api/3/issue/{id}/comment"))
        .iter()
        .map(|r| r.json()["body"].clone())
        .collect()
}

fn key() -> String {
    fake_jira::api_key()
}

#[test]
fn the_example_validates_and_hands_an_issue_off_by_transition() {
    let fake = fake_jira::start();
    let id = fake.with_state(|s| s.add_issue(1, "Add dark mode", "To Do"));
    let setup = Setup::new(&example_for(&fake), "[]");
    let validate = |token: Option<&str>| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(setup.path())
            .args(["validate", "WORKFLOW.md"])
            .env_remove("JIRA_API_TOKEN");
        if let Some(t) = token {
            cmd.env("JIRA_API_TOKEN", t);
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = validate(Some(&key()));
    assert_eq!(code, Some(0), "{text}");
    for (token, wanted) in [(None, "$JIRA_API_TOKEN"), (Some("only-a-token"), "email")] {
        let (code, text) = validate(token);
        assert_eq!(code, Some(1), "{text}");
        let line = text
            .lines()
            .find(|l| l.contains("tracker.api_key"))
            .unwrap_or_default();
        assert!(line.contains(wanted), "{text}");
    }

    let d = setup.start(&[("JIRA_API_TOKEN", &key())]);
    d.wait_until("PROJ-1 handed off to Human Review", WAIT, || {
        fake.with_state(|s| s.status(id)) == "Human Review"
    });
    assert_eq!(
        transition_posts(&fake, id),
        [serde_json::json!("21"), serde_json::json!("31")]
    );
    d.wait_until("both lifecycle comments", WAIT, || {
        comment_posts(&fake, id).len() >= 2
    });
    let comments = comment_posts(&fake, id);
    assert_eq!(comments.len(), 2);
    assert!(comments.iter().all(fake_jira::is_adf), "{comments:?}");
    let basic = data_encoding::BASE64.encode(key().as_bytes());
    for r in fake.journal() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
    }
    assert!(!d.log_text().contains(fake_jira::TOKEN));
}

#[test]
fn a_terminal_status_stops_the_running_agent_and_cleans_its_workspace() {
    let fake = fake_jira::start();
    let id = fake.with_state(|s| s.add_issue(7, "Long job", "To Do"));
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 600000\n"), "[]");
    let d = setup.start(&[("JIRA_API_TOKEN", &key())]);
    d.wait_state("a running session", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "PROJ-7"
    });
    // The worker moves the issue after the session is listed as running.
    d.wait_until("PROJ-7 moved to In Progress", WAIT, || {
        fake.with_state(|s| s.status(id)) == "In Progress"
    });
    let ws = setup.path().join("ws/PROJ-7");
    d.wait_until("the workspace made", WAIT, || ws.is_dir());
    fake.with_state(|s| s.set_status(id, "Done"));
    d.wait_state("the run stopped", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.is_empty())
    });
    d.wait_until("the workspace removed", WAIT, || !ws.exists());
    assert_eq!(transition_posts(&fake, id), [serde_json::json!("21")]);
    assert_eq!(
        comment_posts(&fake, id).len(),
        1,
        "only the dispatch comment"
    );
}

#[test]
fn a_blocker_holds_an_issue_until_it_is_terminal() {
    let fake = fake_jira::start();
    let (blocked, blocker) = fake.with_state(|s| {
        let blocked = s.add_issue(2, "Blocked", "To Do");
        let blocker = s.add_issue(3, "Blocker under review", "Human Review");
        if let Some(i) = s.issues.get_mut(&blocked) {
            i.blocked_by = vec![blocker];
        }
        (blocked, blocker)
    });
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("JIRA_API_TOKEN", &key())]);
    d.wait_until("a few polls", WAIT, || {
        fake.requests("GET", SEARCH).len() >= 3
    });
    assert_eq!(fake.with_state(|s| s.status(blocked)), "To Do");
    assert!(transition_posts(&fake, blocked).is_empty());
    fake.with_state(|s| s.set_status(blocker, "Done"));
    d.wait_until("PROJ-2 handed off", WAIT, || {
        fake.with_state(|s| s.status(blocked)) == "Human Review"
    });
    d.wait_until("both lifecycle comments", WAIT, || {
        comment_posts(&fake, blocked).len() >= 2
    });
    // The issue is no longer active: nothing more is written.
    let before = fake.journal().iter().filter(|r| r.method != "GET").count();
    let polls = fake.requests("GET", SEARCH).len();
    d.wait_until("more polls", WAIT, || {
        fake.requests("GET", SEARCH).len() >= polls + 4
    });
    assert_eq!(
        fake.journal().iter().filter(|r| r.method != "GET").count(),
        before
    );
    assert_eq!(comment_posts(&fake, blocked).len(), 2);
    assert_eq!(transition_posts(&fake, blocked).len(), 2);
}

#[test]
fn faults_show_in_the_poll_health_and_the_next_poll_recovers() {
    let fake = fake_jira::start();
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("JIRA_API_TOKEN", &key())]);
    d.wait_state("a first good poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let captcha = Fault::Status(
        Reply::json(401, &serde_json::json!({"errorMessages": ["denied"]}))
            .header("X-Seraph-LoginReason", "AUTHENTICATION_DENIED"),
    );
    let faults: Vec<(Vec<Fault>, &str)> = vec![
        (vec![Fault::unauthorized()], "tracker_auth_error"),
        (vec![captcha], "CAPTCHA"),
        (vec![Fault::too_many_requests(120)], "tracker_api_error"),
        (vec![Fault::server_error(502); 3], "tracker_transport_error"),
        (vec![Fault::BadJson], "tracker_payload_error"),
        (vec![Fault::Truncated; 3], "tracker_transport_error"),
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
            ("GET", SEARCH),
            &group,
            &label,
            WAIT,
            |error| {
                assert!(error.contains("tracker: jira:"), "{label}: {error}");
                assert!(error.contains(wanted), "{label}: {error}");
                assert!(!error.contains(fake_jira::TOKEN));
            },
        );
        assert_eq!(fake.pending_faults("GET", SEARCH), 0, "{label}");
    }
    // Recovery dispatches as usual, and every write was sent once.
    let id = fake.with_state(|s| s.add_issue(4, "After the storm", "To Do"));
    d.wait_until("PROJ-4 handed off", WAIT, || {
        fake.with_state(|s| s.status(id)) == "Human Review"
    });
    assert_eq!(
        transition_posts(&fake, id),
        [serde_json::json!("21"), serde_json::json!("31")]
    );
}

#[test]
fn a_429_read_is_not_retried_before_its_retry_after() {
    let fake = fake_jira::start();
    let setup = Setup::new(&mock_workflow(&fake, "  turn_delay_ms: 10\n"), "[]");
    let d = setup.start(&[("JIRA_API_TOKEN", &key())]);
    poll_health::a_429_waits_for_its_retry_after(&d, &fake, SEARCH, WAIT);
}

/// A Jira Server / Data Center workflow (`api_version: "2"`, a personal access token, a
/// `user_agent`) over the fake REST v2 site.
fn server_workflow(fake: &FakeJira) -> String {
    mock_workflow(fake, "").replacen(
        "  project: PROJ\n",
        "  project: PROJ\n  api_version: \"2\"\n  user_agent: acme-sortie/1.0 (ops@acme.example)\n",
        1,
    )
}

#[test]
fn a_server_site_is_read_by_rest_v2_with_a_bearer_token_and_wiki_comments() {
    let fake = fake_jira::start_server();
    let id = fake.with_state(|s| s.add_issue(1, "Add dark mode", "To Do"));
    let setup = Setup::new(&server_workflow(&fake), "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "WORKFLOW.md"])
        .env("JIRA_API_TOKEN", fake_jira::PAT)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        !text.contains("api_version") && !text.contains("user_agent"),
        "{text}"
    );

    let d = setup.start(&[("JIRA_API_TOKEN", fake_jira::PAT)]);
    d.wait_until("PROJ-1 handed off to Human Review", WAIT, || {
        fake.with_state(|s| s.status(id)) == "Human Review"
    });
    let comments = |fake: &FakeJira| -> Vec<serde_json::Value> {
        fake.requests("POST", &format!("/rest/api/2/issue/{id}/comment"))
            .iter()
            .map(|r| r.json()["body"].clone())
            .collect()
    };
    d.wait_until("both lifecycle comments", WAIT, || {
        comments(&fake).len() >= 2
    });
    // Wiki-markup text, not ADF.
    assert!(
        comments(&fake).iter().all(|b| b.is_string()),
        "{:?}",
        comments(&fake)
    );
    let journal = fake.journal();
    assert!(journal.iter().any(|r| r.path == "/rest/api/2/search"));
    for r in &journal {
        assert!(r.path.starts_with("/rest/api/2/"), "{}", r.path);
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {}", fake_jira::PAT).as_str())
        );
        assert_eq!(
            r.header("user-agent"),
            Some("acme-sortie/1.0 (ops@acme.example)")
        );
    }
    assert!(!d.log_text().contains(fake_jira::PAT));
}

#[test]
fn api_version_2_refuses_a_cloud_site_and_other_kinds_warn_about_jira_keys() {
    let fake = fake_jira::start_server();
    let cloud = server_workflow(&fake).replace(
        &format!("endpoint: {}", fake.url),
        "endpoint: https://acme.atlassian.net",
    );
    let setup = Setup::new(&cloud, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "WORKFLOW.md"])
        .env("JIRA_API_TOKEN", fake_jira::PAT)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("tracker.api_version") && l.contains("Jira Cloud")),
        "{text}"
    );
    let github = "---\ntracker:\n  kind: github\n  api_key: x\n  project: o/r\n  api_version: \"2\"\n  user_agent: me\n---\nhi\n";
    let setup = Setup::new(github, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "WORKFLOW.md"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    for key in ["tracker.api_version", "tracker.user_agent"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("warning: unsupported_key") && l.contains(key)),
            "{text}"
        );
    }
}
