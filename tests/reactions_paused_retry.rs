//! A reaction's retry whose issue may not be dispatched is paused, not dropped, through the real
//! binary over the fake Jira (the tracker) and the fake GitHub (the forge): the CI-fix retry of
//! an issue an open issue blocks is put back with `paused: true` and the reference's
//! `reaction retry paused by an open blocking issue`; moved to a state that is neither active
//! nor the handoff state it reads `reaction retry paused by issue state`; back in the handoff
//! state with its blocker done, the same retry dispatches the fix with the CI context.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::fake_github::{self, check_run_json};
use common::fake_jira;
use common::reactions::{Forge, LABELS, PROMPT, ReactionProject};

const WAIT: Duration = Duration::from_secs(40);

fn workflow(jira_url: &str, github_url: &str) -> String {
    format!(
        "---\ntracker:\n  kind: jira\n  endpoint: {jira_url}\n  api_key: $JIRA_API_TOKEN\n  project: PROJ\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Human Review\njira:\n  retry_base_ms: 10\n  timeout_ms: 2000\nci_feedback:\n  kind: github\n  max_retries: 2\n  max_log_lines: 5\ngithub:\n  api_key: $GITHUB_TOKEN\n  endpoint: {github_url}\n  project: owner/repo\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\n  max_retry_backoff_ms: 1000\n  env: [FAKE_AGENT_*]\n---\n{PROMPT}",
        agent = common::FAKE_AGENT,
    )
}

/// The retrying row of `PROJ-1`.
fn retry_row(s: &Value) -> Option<Value> {
    s["retrying"]
        .as_array()?
        .iter()
        .find(|r| r["issue_identifier"] == "PROJ-1")
        .cloned()
}

fn paused_with(s: &Value, error: &str) -> bool {
    retry_row(s).is_some_and(|r| r["paused"] == true && r["error"] == error)
}

#[test]
fn a_reaction_retry_pauses_while_blocked_or_out_of_state_and_resumes() {
    let github = fake_github::start(LABELS);
    github.with_state(|s| s.add_pull(7, "sortie/PROJ-1", "sha1"));
    let jira = fake_jira::start();
    let issue = jira.with_state(|s| s.add_issue(1, "Add the export button", "To Do"));
    let blocker = jira.with_state(|s| s.add_issue(2, "Migrate the schema", "Backlog"));
    let forge = Forge {
        kind: "github",
        url: &github.url,
        token: fake_github::TOKEN,
        project: "owner/repo",
        owner: "owner",
        repo: "repo",
    };
    let env = vec![
        ("JIRA_API_TOKEN".to_string(), fake_jira::api_key()),
        ("GITHUB_TOKEN".to_string(), fake_github::TOKEN.to_string()),
    ];
    let p = ReactionProject::with_workflow(&workflow(&jira.url, &github.url), &forge, env);
    let d = p.start();

    // The first run hands off; then an open issue starts blocking it and its CI fails.
    d.wait_until("the handoff", WAIT, || {
        jira.with_state(|s| s.status(issue)) == "Human Review"
    });
    jira.with_state(|s| {
        if let Some(i) = s.issues.get_mut(&issue) {
            i.blocked_by = vec![blocker];
        }
    });
    github.with_state(|s| {
        s.set_check_runs(
            "sha1",
            vec![check_run_json(11, "Test", "completed", Some("failure"))],
        );
        s.set_job_log(11, "error: test_export failed\n");
    });

    // The CI-fix retry comes due and is paused by the blocker, its reaction kept.
    let s = d.wait_state("the retry paused by the blocker", WAIT, |s| {
        paused_with(s, "reaction retry paused by an open blocking issue")
    });
    let r = retry_row(&s).unwrap_or_default();
    assert_eq!(r["reaction_kind"], "ci", "{r}");
    assert_eq!(r["reaction_config_key"], "ci_failure", "{r}");
    assert_eq!(r["trigger"], "timer", "{r}");
    assert_eq!(p.prompts().len(), 1, "no fix while blocked");
    let attempt = r["attempt"].as_u64().unwrap_or_default();
    let s = d.wait_state("the paused retry advanced", WAIT, |s| {
        retry_row(s).is_some_and(|r| r["attempt"].as_u64().unwrap_or_default() > attempt)
    });
    assert!(
        paused_with(&s, "reaction retry paused by an open blocking issue"),
        "{s}"
    );
    let detail = d.get("/api/v1/PROJ-1").json();
    assert_eq!(
        detail["last_error"], "reaction retry paused by an open blocking issue",
        "{detail}"
    );

    // A person moves the issue to a state that is neither active nor the handoff state.
    jira.with_state(|s| s.set_status(issue, "On Hold"));
    d.wait_state("the retry paused by the state", WAIT, |s| {
        paused_with(s, "reaction retry paused by issue state")
    });
    assert_eq!(p.prompts().len(), 1, "no fix while on hold");

    // Back in the handoff state with the blocker done: the retry dispatches the fix.
    jira.with_state(|s| {
        s.set_status(blocker, "Done");
        s.set_status(issue, "Human Review");
    });
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    let fix = &p.prompts()[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(fix.contains("error: test_export failed"), "{fix}");
    let log = d.log_text();
    assert!(
        log.contains("reaction retry paused by issue state"),
        "{log}"
    );
}
