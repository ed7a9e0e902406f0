//! The CI reaction through the real binary, the fake GitHub forge and the fake agent, which
//! leaves a pull-request record (`.sortie/scm.json`): a failing check dispatches exactly one
//! CI-fix run carrying the failing checks and the log excerpt; the same failing head
//! dispatches nothing more; a failing head of the fix exhausts `max_retries` and escalates
//! with a label; the escalation's attention item survives a restart and clears when the
//! check passes.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, TOKEN, check_run_json};
use common::{FAKE_AGENT, Setup};
use serde_json::Value;

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "needs-human"];
const WAIT: Duration = Duration::from_secs(40);

fn workflow(fake: &FakeGithub) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\ngithub:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\nreactions:\n  ci_failure:\n    provider: github\n    max_retries: 1\n    max_log_lines: 5\n    escalation: label\n    escalation_label: needs-human\n---\nWork on {{{{ .issue.identifier }}}}.\n{{{{ if .ci_failure }}}}CI FAILING on {{{{ .ci_failure.ref }}}}: {{{{ .ci_failure.failing_count }}}} failing.{{{{ range .ci_failure.check_runs }}}} check={{{{ .name }}}}/{{{{ .conclusion }}}}{{{{ end }}}}\nLOG:\n{{{{ .ci_failure.log_excerpt }}}}\n{{{{ end }}}}\n",
        url = fake.url,
        agent = FAKE_AGENT,
    )
}

/// Turn 1 (the first run) records head `sha1`, turn 2 (the CI fix) records `sha2`.
fn scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let record = |sha: &str| {
        serde_json::json!({"branch": "sortie/1", "sha": sha, "pr_number": 7, "owner": "owner", "repo": "repo"}).to_string()
    };
    let lines = [
        serde_json::json!({"write_file": {"path": ".sortie/scm.json", "content": record("sha1")}, "turn": 1}),
        serde_json::json!({"write_file": {"path": ".sortie/scm.json", "content": record("sha2")}, "turn": 2}),
        serde_json::json!({"init": {}}),
        serde_json::json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        serde_json::json!({"result": {"subtype": "success", "text": "ok"}}),
    ];
    let path = dir.join("scenario.jsonl");
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&path, text.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn prompts(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["prompt"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.set_check_runs(
            sha,
            vec![
                check_run_json(11, "Test", "completed", Some("failure")),
                check_run_json(12, "Lint", "completed", Some("success")),
            ],
        );
        s.set_job_log(11, "2026-01-01T00:00:00.0000000Z \u{1b}[31merror\u{1b}[0m: test_export failed\n");
    });
}

fn ci_row(s: &Value) -> Option<Value> {
    s["pending_reactions"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "ci")
        .cloned()
}

fn escalation_items(s: &Value) -> usize {
    s["attention"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["kind"] == "reaction_escalated").count())
        .unwrap_or(0)
}

#[test]
fn a_failing_check_gets_one_fix_run_then_escalates_and_clears_when_it_passes() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(7, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let setup = Setup::new("", "[]");
    let dir = setup.path().to_path_buf();
    std::fs::write(dir.join("WORKFLOW.md"), workflow(&fake)).unwrap_or_else(|e| panic!("{e}"));
    let scenario = scenario(&dir);
    let argv_log = dir.join("argv.jsonl");
    let state_dir = dir.join("agent-state");
    std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("{e}"));
    let env = [
        ("GITHUB_TOKEN", TOKEN),
        ("FAKE_AGENT_SCENARIO", scenario.to_str().unwrap_or_default()),
        ("FAKE_AGENT_ARGV_LOG", argv_log.to_str().unwrap_or_default()),
        ("FAKE_AGENT_STATE_DIR", state_dir.to_str().unwrap_or_default()),
    ];
    let d = setup.start(&env);

    // The first run hands off and leaves the record; the failing check dispatches one fix.
    d.wait_until("the CI-fix run", WAIT, || prompts(&argv_log).len() >= 2);
    let fix = &prompts(&argv_log)[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(fix.contains("check=Test/failure") && fix.contains("check=Lint/success"), "{fix}");
    assert!(fix.contains("error: test_export failed"), "{fix}");
    assert!(!fix.contains("\u{1b}[") && !fix.contains("2026-01-01T00"), "{fix}");
    assert!(!prompts(&argv_log)[0].contains("CI FAILING"));

    // The fix recorded sha1 again before the forge moved; a second poll of the same failing
    // head dispatches nothing.
    let polls = fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs").len();
    d.wait_until("two more CI reads", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs").len() >= polls + 2
            || fake.with_state(|s| s.labels(1).contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the fix handed off again", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.is_empty())
            && s["retrying"].as_array().is_some_and(|r| r.is_empty())
    });
    assert_eq!(prompts(&argv_log).len(), 2, "{s}");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let ci_failed = runs["runs"]
        .as_array()
        .map(|r| r.iter().filter(|x| x["status"] == "ci_failed").count())
        .unwrap_or(0);
    assert!(ci_failed >= 1, "{runs}");

    // The fix's head (its own work) fails too: max_retries 1 is spent, so it escalates.
    fake.with_state(|s| s.set_head(7, "sha2"));
    failing(&fake, "sha2");
    d.wait_until("the escalation label", WAIT, || {
        fake.with_state(|s| s.labels(1).contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the escalation item", WAIT, |s| escalation_items(s) == 1);
    let row = ci_row(&s).unwrap_or_default();
    assert_eq!(row["escalation_trigger"], "budget_exhausted", "{row}");
    assert_eq!(row["used_attempts"], 1, "{row}");
    assert_eq!(row["max_attempts"], 1, "{row}");
    assert!(row["escalated_at"].is_string(), "{row}");
    assert_eq!(prompts(&argv_log).len(), 2, "no run after the budget is spent");
    let escalated_at = row["escalated_at"].clone();

    // A restart keeps the standing escalation.
    drop(d);
    let d = setup.start(&env);
    let s = d.wait_state("the escalation after a restart", WAIT, |s| escalation_items(s) == 1);
    let row = ci_row(&s).unwrap_or_default();
    assert_eq!(row["escalated_at"], escalated_at, "{row}");
    assert_eq!(row["escalation_trigger"], "budget_exhausted", "{row}");

    // A passing check ends it.
    fake.with_state(|s| {
        s.set_check_runs(
            "sha2",
            vec![check_run_json(13, "Test", "completed", Some("success"))],
        )
    });
    let s = d.wait_state("the escalation cleared", WAIT, |s| escalation_items(s) == 0);
    let row = ci_row(&s).unwrap_or_default();
    assert!(row["escalated_at"].is_null(), "{row}");
    assert_eq!(row["last_check"]["status"], "passing", "{row}");
    assert_eq!(prompts(&argv_log).len(), 2);
}
