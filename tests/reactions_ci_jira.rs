//! Sortie's documented production shape through the real binary: a Jira tracker with CI
//! feedback on GitHub (`ci_feedback.kind: github` and a top-level `github:` block holding the
//! forge's endpoint and token), over the fake Jira and the fake GitHub together. `validate`
//! accepts it; a failing check on the run's pull request dispatches one CI-fix run carrying
//! the failure; the next failing head spends `max_retries` and the escalation label lands on
//! the Jira issue. Each server only ever sees its own credential.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, check_run_json};
use common::fake_jira;
use common::reactions::{Forge, LABELS, PROMPT, ReactionProject, escalation_items, row};

const WAIT: Duration = Duration::from_secs(40);

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.set_check_runs(
            sha,
            vec![
                check_run_json(11, "Test", "completed", Some("failure")),
                check_run_json(12, "Lint", "completed", Some("success")),
            ],
        );
        s.set_job_log(11, "error: test_export failed\n");
    });
}

fn workflow(jira_url: &str, github_url: &str) -> String {
    format!(
        "---\ntracker:\n  kind: jira\n  endpoint: {jira_url}\n  api_key: $JIRA_API_TOKEN\n  project: PROJ\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Human Review\njira:\n  retry_base_ms: 10\n  timeout_ms: 2000\nci_feedback:\n  kind: github\n  max_retries: 1\n  max_log_lines: 5\n  escalation: label\n  escalation_label: needs-human\ngithub:\n  api_key: $GITHUB_TOKEN\n  endpoint: {github_url}\n  project: owner/repo\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\n  env: [FAKE_AGENT_*]\n---\n{PROMPT}",
        agent = common::FAKE_AGENT,
    )
}

#[test]
fn a_jira_workflow_with_ci_feedback_on_github_fixes_and_escalates() {
    let github = fake_github::start(LABELS);
    github.with_state(|s| s.add_pull(7, "sortie/PROJ-1", "sha1"));
    failing(&github, "sha1");
    let jira = fake_jira::start();
    let issue = jira.with_state(|s| s.add_issue(1, "Add the export button", "To Do"));
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
    let p = ReactionProject::with_workflow(&workflow(&jira.url, &github.url), &forge, env.clone());

    // validate accepts the shape and says what it runs.
    let out = common::sortie_command()
        .current_dir(p.setup.path())
        .args(["validate", "WORKFLOW.md"])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("ok: WORKFLOW.md — tracker jira (PROJ)")
            && stderr.contains("pull-request reactions on github"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("github: block of an adapter kind"),
        "{stderr}"
    );

    // The first run hands off in Jira and leaves the record; the failing check on GitHub
    // dispatches one fix with the failure in its prompt.
    let d = p.start();
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    // The handoff reached Jira ("Send to Review", transition 31) before the fix started.
    let handoffs = jira
        .requests("POST", &format!("/rest/api/3/issue/{issue}/transitions"))
        .into_iter()
        .filter(|r| r.body.contains("\"31\""))
        .count();
    assert!(handoffs >= 1, "{:?}", jira.journal());
    let fix = &p.prompts()[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(fix.contains("error: test_export failed"), "{fix}");

    // The fix's head fails too: max_retries 1 is spent, and the Jira issue gets the label.
    github.with_state(|s| s.set_head(7, "sha2"));
    failing(&github, "sha2");
    d.wait_until("the escalation label in Jira", WAIT, || {
        jira.with_state(|s| s.issues[&issue].labels.contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the escalation item", WAIT, |s| escalation_items(s) == 1);
    assert_eq!(
        row(&s, "ci").unwrap_or_default()["escalation_trigger"],
        "budget_exhausted"
    );
    assert_eq!(s["health"]["scm"]["provider"], "github", "{}", s["health"]);

    // GitHub saw only the GitHub token, Jira only its own.
    let header = |r: &common::fake_server::Recorded| {
        r.headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let to_github = github.journal();
    assert!(!to_github.is_empty());
    for r in &to_github {
        assert_eq!(
            header(r),
            format!("Bearer {}", fake_github::TOKEN),
            "{} {}",
            r.method,
            r.path
        );
    }
    for r in &jira.journal() {
        assert!(
            !header(r).contains(fake_github::TOKEN),
            "{} {}",
            r.method,
            r.path
        );
    }
}
