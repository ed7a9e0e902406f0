//! Reactions on Gitea through the real binary and the fake Gitea; the run records pull
//! request 7 of `owner/repo`. A failing status context of the head dispatches a CI-fix run
//! naming the failing context (Gitea gives no log to quote). With a mergeable pull request
//! and passing statuses it is merged once (squash, guarded by its head sha), its head branch
//! is deleted, and merge completion moves the issue to `done` with outcome `merged`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::fake_gitea::pulls::status_json;
use common::fake_gitea::{self, FakeGitea, TOKEN};
use common::{FAKE_AGENT, Setup};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);
const PR: u64 = 7;
const LABELS: &[&str] = &["backlog", "in-progress", "review", "done"];

const MERGE: &str = "  auto_merge:\n    provider: gitea\n    strategy: squash\n    require_ci: true\n    delete_branch: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n";
const CI: &str = "  ci_failure:\n    provider: gitea\n    max_retries: 1\n    max_log_lines: 5\n";

fn workflow(fake: &FakeGitea, reactions: &str) -> String {
    format!(
        "---\ntracker:\n  kind: gitea\n  endpoint: {url}\n  api_key: $GITEA_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\ngitea:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\nreactions:\n{reactions}---\nWork on {{{{ .issue.identifier }}}}.\n{{{{ if .ci_failure }}}}CI FAILING on {{{{ .ci_failure.ref }}}}: {{{{ .ci_failure.failing_count }}}} failing.{{{{ range .ci_failure.check_runs }}}} check={{{{ .name }}}}/{{{{ .conclusion }}}}{{{{ end }}}}\nLOG:[{{{{ .ci_failure.log_excerpt }}}}]\n{{{{ end }}}}",
        url = fake.url,
        agent = FAKE_AGENT,
    )
}

/// The fake agent's run records pull request 7 at head `sha1`, then succeeds.
fn write_scenario(dir: &Path) -> String {
    let record = json!({"branch": "sortie/1", "sha": "sha1", "pr_number": PR,
        "owner": "owner", "repo": "repo"})
    .to_string();
    let lines = [
        json!({"write_file": {"path": ".sortie/scm.json", "content": record}, "turn": 1}),
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let path = dir.join("scenario.jsonl");
    std::fs::write(&path, text.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    path.display().to_string()
}

/// A fake with issue 1 in the backlog and pull request 7 from `sortie/1` at `sha1`.
fn fake_with_pull() -> FakeGitea {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1", &[]);
    });
    fake
}

/// Starts the daemon on the repository with `reactions`; the argv log's path comes back too.
fn start(fake: &FakeGitea, reactions: &str) -> (Setup, common::daemon::Daemon, std::path::PathBuf) {
    let setup = Setup::new(&workflow(fake, reactions), "[]");
    let dir = setup.path().to_path_buf();
    let scenario = write_scenario(&dir);
    let state_dir = dir.join("agent-state");
    std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("{e}"));
    let argv_log = dir.join("argv.jsonl");
    let (log, state) = (
        argv_log.display().to_string(),
        state_dir.display().to_string(),
    );
    let d = setup.start(&[
        ("GITEA_TOKEN", TOKEN),
        ("FAKE_AGENT_SCENARIO", &scenario),
        ("FAKE_AGENT_ARGV_LOG", &log),
        ("FAKE_AGENT_STATE_DIR", &state),
    ]);
    (setup, d, argv_log)
}

fn prompts(argv_log: &Path) -> Vec<String> {
    std::fs::read_to_string(argv_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["prompt"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_failing_status_context_dispatches_one_ci_fix_run_naming_it() {
    let fake = fake_with_pull();
    fake.with_state(|s| {
        s.set_status("sha1", status_json(801, "ci / build", "success", ""));
        s.set_status("sha1", status_json(802, "ci / test", "failure", ""));
    });
    let (_setup, d, argv_log) = start(&fake, CI);
    d.wait_until("the CI-fix run", WAIT, || prompts(&argv_log).len() >= 2);
    let fix = &prompts(&argv_log)[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(
        fix.contains("check=ci / test/failure") && fix.contains("check=ci / build/success"),
        "{fix}"
    );
    assert!(fix.contains("LOG:[]"), "{fix}");
    assert!(!prompts(&argv_log)[0].contains("CI FAILING"));
    let status = "/api/v1/repos/owner/repo/commits/sha1/status";
    assert!(!fake.requests("GET", status).is_empty());
}

#[test]
fn a_mergeable_passing_pull_request_is_merged_once_and_the_issue_moves_on() {
    let fake = fake_with_pull();
    fake.with_state(|s| s.set_status("sha1", status_json(801, "ci / test", "success", "")));
    let (_setup, d, _) = start(&fake, MERGE);
    let merge_path = format!("/api/v1/repos/owner/repo/pulls/{PR}/merge");
    d.wait_until("the merge", WAIT, || {
        !fake.requests("POST", &merge_path).is_empty()
    });
    let sent = fake.requests("POST", &merge_path)[0].json();
    assert_eq!(
        sent,
        json!({"Do": "squash", "head_commit_id": "sha1", "delete_branch_after_merge": false})
    );
    d.wait_until("the issue moved to done", WAIT, || {
        fake.with_state(|s| s.labels(1))
            .contains(&"done".to_string())
    });
    d.wait_until("the branch deleted", WAIT, || {
        !fake.with_state(|s| s.branch_exists("sortie/1"))
    });
    let s = d.wait_state("no reaction left", WAIT, |s| {
        s["pending_reactions"]
            .as_array()
            .is_some_and(|r| r.is_empty())
    });
    assert_eq!(fake.requests("POST", &merge_path).len(), 1, "{s}");
    let issue = d.get("/api/v1/1").json();
    let outcome = &issue["history"]["issue_outcome"];
    assert_eq!(outcome["kind"], "merged", "{issue}");
    assert_eq!(outcome["merge_path"], "auto_merge", "{issue}");
    assert_eq!(outcome["pull_request"]["number"], PR, "{issue}");
    assert_eq!(
        outcome["pull_request"]["repository"], "owner/repo",
        "{issue}"
    );
}
