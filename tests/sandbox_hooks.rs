//! `worker.sandbox.hooks: true` through the real binary: every workspace hook runs under the
//! agents' `bwrap` profile (its workspace read-write, `read_only` paths visible, the database
//! not), with the same timeout and kill as outside. Needs `bwrap` (Debian's `bubblewrap`).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{FAKE_AGENT, Project, wait_for};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn bwrap_present() {
    assert!(
        Path::new("/usr/bin/bwrap").exists(),
        "these tests need bwrap: apt-get install -y bubblewrap"
    );
}

/// A fake-agent workflow whose `before_run` hook is `before_run`; with `sandbox`, agents and
/// hooks run sandboxed, the scenarios directory mounted read-only for `after_create`.
fn workflow(p: &Project, before_run: &str, sandbox: bool, timeout_ms: u64) {
    let worker = if sandbox {
        format!(
            "worker:\n  sandbox:\n    kind: bubblewrap\n    hooks: true\n    read_only: [{:?}]\n",
            p.path("scenarios").display().to_string()
        )
    } else {
        String::new()
    };
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  timeout_ms: {timeout_ms}
  after_create: cp "$SORTIE_TEST_SCENARIOS/default.jsonl" .scenario
  before_run: |
{before_run}
agent:
  kind: claude-code
  command: {FAKE_AGENT}
  env: [FAKE_AGENT_SCENARIO]
  max_turns: 1
{worker}server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}.
"#,
        root = p.path("ws").display(),
        before_run = before_run
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    p.issues(json!([{"id": "1", "identifier": "H-1", "title": "Hooked", "state": "To Do", "priority": 1}]));
    p.scenario(
        "default",
        &[json!({"init": {}}), json!({"result": {"text": "done"}})],
    );
}

/// A `before_run` hook that reads the database and writes what happened and its `$HOME` into
/// the workspace.
const READ_DB: &str = r#"echo "$HOME" > hook-home.txt
if cat "$SORTIE_TEST_DB" > /dev/null 2>&1; then echo read > hook.txt; else echo denied > hook.txt; exit 7; fi"#;

fn run_read_db(sandbox: bool) -> (Project, String, common::Daemon) {
    let p = Project::new();
    workflow(&p, READ_DB, sandbox, 30_000);
    let db = p.db().display().to_string();
    let d = p.start_with_env(&[("SORTIE_TEST_DB", &db)]);
    let said = wait_for("the hook's report", WAIT, || {
        let s = std::fs::read_to_string(p.path("ws/H-1/hook.txt")).ok()?;
        (!s.trim().is_empty()).then(|| s.trim().to_string())
    });
    (p, said, d)
}

#[test]
fn a_hook_in_the_sandbox_cannot_read_the_database_and_without_it_can() {
    bwrap_present();
    let (open, said, d) = run_read_db(false);
    assert_eq!(said, "read", "without a sandbox");
    d.wait_until("the run handed off", WAIT, || {
        open.issue_state("1") == "Review"
    });
    d.stop();

    let (boxed, said, d) = run_read_db(true);
    assert_eq!(said, "denied", "in the sandbox");
    d.wait_until("the hook failure logged", WAIT, || {
        let log = d.log_text();
        log.contains("msg=\"hook failed\" hook=before_run") && log.contains("exit_code=7")
    });
    // The hook wrote into its workspace, with the session's private home.
    let home = std::fs::read_to_string(boxed.path("ws/H-1/hook-home.txt")).unwrap_or_default();
    assert_eq!(
        home.trim(),
        boxed.path("ws/H-1/.sortie/home").display().to_string()
    );
    // after_create ran sandboxed too and saw the read-only scenarios directory.
    assert!(boxed.path("ws/H-1/.scenario").is_file());
    assert_eq!(boxed.issue_state("1"), "To Do");
    d.stop();
}

#[test]
fn a_sandboxed_hook_past_its_timeout_is_killed_with_its_whole_sandbox() {
    bwrap_present();
    let p = Project::new();
    workflow(&p, "touch started.txt\nsleep 120", true, 1500);
    let d = p.start();
    let procs = wait_for("the hook's sandbox running", WAIT, || {
        let procs = common::procs::processes_in(&p.path("ws/H-1"));
        (p.path("ws/H-1/started.txt").exists() && procs.len() >= 2).then_some(procs)
    });
    assert!(
        procs.iter().any(|pid| in_other_pid_namespace(pid)),
        "the hook runs in a PID namespace of its own: {procs:?}"
    );
    d.wait_until("the hook timeout logged", WAIT, || {
        let log = d.log_text();
        log.contains("msg=\"hook timed out\" hook=before_run")
    });
    wait_for("no process left in the workspace", WAIT, || {
        common::procs::processes_in(&p.path("ws/H-1"))
            .is_empty()
            .then_some(())
    });
    d.stop();
}

fn in_other_pid_namespace(pid: &str) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    ns(pid).is_some_and(|n| Some(n) != ns("self"))
}
