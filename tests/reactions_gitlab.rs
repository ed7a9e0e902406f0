//! Auto-merge and merge completion on GitLab through the real binary and the fake GitLab: the
//! run records merge request !7 of `group/sub/project`; with a mergeable merge request and a
//! passing head pipeline it is merged once (squash, guarded by its head sha), its source
//! branch is deleted, and merge completion moves the issue to `done` with outcome `merged`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::fake_gitlab::{self, FakeGitlab, TOKEN, job_json, pipeline_json};
use common::{FAKE_AGENT, Setup};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);
const MR: u64 = 7;

fn workflow(fake: &FakeGitlab) -> String {
    format!(
        "---\ntracker:\n  kind: gitlab\n  endpoint: {url}\n  api_key: $GITLAB_TOKEN\n  project: {project}\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\ngitlab:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\nreactions:\n  auto_merge:\n    provider: gitlab\n    strategy: squash\n    require_ci: true\n    delete_branch: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url,
        project = fake_gitlab::PROJECT,
        agent = FAKE_AGENT,
    )
}

/// The fake agent's run records merge request !7 at head `sha1`, then succeeds.
fn write_scenario(dir: &Path) -> String {
    let record = json!({"branch": "sortie/1", "sha": "sha1", "pr_number": MR,
        "owner": "group/sub", "repo": "project"})
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

#[test]
fn a_mergeable_passing_merge_request_is_merged_once_and_the_issue_moves_on() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_mr(MR, "sortie/1", "sha1");
        s.add_pipeline(
            pipeline_json(9001, "sha1", "sortie/1", "success"),
            vec![job_json(8001, "test", "success")],
        );
    });
    let setup = Setup::new(&workflow(&fake), "[]");
    let dir = setup.path().to_path_buf();
    let scenario = write_scenario(&dir);
    let state_dir = dir.join("agent-state");
    std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("{e}"));
    let argv_log = dir.join("argv.jsonl").display().to_string();
    let state = state_dir.display().to_string();
    let d = setup.start(&[
        ("GITLAB_TOKEN", TOKEN),
        ("FAKE_AGENT_SCENARIO", &scenario),
        ("FAKE_AGENT_ARGV_LOG", &argv_log),
        ("FAKE_AGENT_STATE_DIR", &state),
    ]);
    let merge_path = format!("{}/merge_requests/{MR}/merge", fake_gitlab::project_path());
    d.wait_until("the merge", WAIT, || {
        !fake.requests("PUT", &merge_path).is_empty()
    });
    let put = fake.requests("PUT", &merge_path)[0].json();
    assert_eq!(put, json!({"sha": "sha1", "squash": true}));
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
    assert_eq!(fake.requests("PUT", &merge_path).len(), 1, "{s}");
    let issue = d.get("/api/v1/1").json();
    let outcome = &issue["history"]["issue_outcome"];
    assert_eq!(outcome["kind"], "merged", "{issue}");
    assert_eq!(outcome["merge_path"], "auto_merge", "{issue}");
    assert_eq!(outcome["pull_request"]["number"], MR, "{issue}");
}
