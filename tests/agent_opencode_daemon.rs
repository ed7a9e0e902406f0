//! The opencode kind through the real `sortie` binary, with `fake-agent` playing OpenCode (a
//! symlink named `opencode`): session continuation with `--session`, token totals in the run
//! API, stall and startup deadlines killing the whole process group, a session id mismatch,
//! and an auth failure that ends without a retry loop.

mod common;

use std::path::Path;
use std::time::Duration;

use common::procs::processes_in;
use common::{FAKE_AGENT, Project, holds_within, wait_for};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(40);

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/opencode")
        .join(name)
        .display()
        .to_string()
}

/// A project whose agent is the fake OpenCode; `agent_yaml` lines go under `agent:`.
fn project(agent_yaml: &str, opencode_yaml: &str) -> Project {
    let p = Project::new();
    std::fs::create_dir_all(p.path("bin")).unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, p.path("bin/opencode")).unwrap();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Agent work", "state": "To Do", "priority": 1}]));
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  after_create: |
    cp "$SORTIE_TEST_SCENARIOS/default.jsonl" .scenario 2>/dev/null || true
agent:
  kind: opencode
  command: {agent}
  env: [FAKE_AGENT_*]
{agent_yaml}
opencode:
  model: fake/fake-model-1
{opencode_yaml}
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}: {{{{ .issue.title }}}}
"#,
        root = p.path("ws").display(),
        agent = p.path("bin/opencode").display(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    p
}

fn calls(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn runs_of(p: &Project) -> Vec<Value> {
    calls(p)
        .into_iter()
        .filter(|c| c["command"] == "run")
        .collect()
}

fn argv(c: &Value) -> Vec<String> {
    c["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .skip(1)
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The run rows' status and error, oldest first.
fn run_rows(p: &Project) -> Vec<(String, String)> {
    if !p.db().exists() {
        return Vec::new();
    }
    let conn = p.db_conn();
    let mut st = conn
        .prepare(
            "SELECT status, COALESCE(error, '') FROM run_history WHERE issue_id = '1' ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .filter_map(Result::ok)
        .collect()
}

fn retry_row(p: &Project) -> Option<(String, String)> {
    if !p.db().exists() {
        return None;
    }
    p.db_conn()
        .query_row(
            "SELECT COALESCE(retry_trigger, ''), COALESCE(error, '') FROM retry_entries WHERE issue_id = '1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()
}

/// Waits until the agent and its grandchild both run in the workspace.
fn grandchild_running(p: &Project) {
    let ws = p.path("ws");
    wait_for("the agent and its grandchild", WAIT, || {
        (p.workspace("A-1").join("grandchild.started").exists() && processes_in(&ws).len() >= 2)
            .then_some(())
    });
}

/// Waits until no process runs in any workspace.
fn no_process_left(p: &Project) {
    let ws = p.path("ws");
    wait_for("every agent process gone", Duration::from_secs(20), || {
        processes_in(&ws).is_empty().then_some(())
    });
}

#[test]
fn two_turns_continue_the_session_and_the_run_counts_the_streamed_tokens() {
    let p = project("  max_turns: 2", "");
    p.scenario(
        "default",
        &[
            json!({"turn": 1, "cat_file": fixture("simple_turn.jsonl")}),
            json!({"turn": 2, "cat_file": fixture("resume_turn.jsonl")}),
        ],
    );
    let d = p.start();
    wait_for("the handoff", WAIT, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let runs = runs_of(&p);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let ws = p
        .workspace("A-1")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let first = argv(&runs[0]);
    assert_eq!(
        first[..8],
        [
            "run",
            "--format",
            "json",
            "--dir",
            ws.as_str(),
            "--model",
            "fake/fake-model-1",
            "--dangerously-skip-permissions"
        ]
    );
    // The prompt travels on stdin: no `-- <prompt>` on the command line.
    assert_eq!(first.len(), 8, "{first:?}");
    assert!(!first.contains(&"--session".to_string()));
    let second = argv(&runs[1]);
    assert_eq!(second[4..7], [ws.as_str(), "--session", "ses_abc123"]);
    let exports: Vec<Vec<String>> = calls(&p)
        .iter()
        .filter(|c| c["command"] == "export")
        .map(argv)
        .collect();
    assert_eq!(exports, vec![vec!["export", "--sanitize", "ses_abc123"]; 2]);

    let body = d.get_ok("/api/v1/runs").expect("runs");
    let v: Value = serde_json::from_str(&body).unwrap();
    let run = v["runs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["issue_id"] == "1"))
        .unwrap_or_else(|| panic!("no run in {v}"));
    // simple_turn (14406 + 1840 cached, 21 out) plus resume_turn (700, 100).
    let t = &run["tokens"];
    assert_eq!(t["input_tokens"], 16946, "{run}");
    assert_eq!(t["output_tokens"], 121, "{run}");
    assert_eq!(t["total_tokens"], 17067, "{run}");
    assert_eq!(t["cache_read_tokens"], 1840, "{run}");
    assert_eq!(run["turns_completed"], 2, "{run}");
    assert_eq!(
        run["usage_provenance"],
        json!([{"source": "output", "strategy": "live"}]),
        "{run}"
    );
    // The fake export (100/20) disagrees with the streamed sum: logged, not used.
    assert!(p.log().contains("opencode export disagrees"), "{}", p.log());
}

#[test]
fn a_hung_turn_is_stopped_by_the_stall_timeout_with_its_grandchild() {
    let p = project("  max_turns: 1\n  stall_timeout_ms: 3000", "");
    p.scenario(
        "default",
        &[
            json!({"step_start": {}}),
            json!({"spawn_grandchild": true}),
            json!({"write_file": {"path": "grandchild.started", "content": "1"}}),
            json!({"hang": true}),
        ],
    );
    let _d = p.start();
    grandchild_running(&p);
    let (trigger, _) = wait_for("a stall retry", WAIT, || retry_row(&p));
    assert_eq!(trigger, "stall");
    no_process_left(&p);
}

#[test]
fn the_startup_deadline_stops_a_cli_that_prints_no_json_and_says_why() {
    let p = project(
        "  max_turns: 1\n  read_timeout_ms: 3000\n  stall_timeout_ms: 0",
        "",
    );
    p.scenario(
        "default",
        &[
            json!({"raw": "! loading"}),
            json!({"spawn_grandchild": true}),
            json!({"write_file": {"path": "grandchild.started", "content": "1"}}),
            json!({"hang": true}),
        ],
    );
    let _d = p.start();
    grandchild_running(&p);
    let (_, error) = wait_for("a retry after the startup deadline", WAIT, || {
        retry_row(&p).filter(|(_, e)| !e.is_empty())
    });
    assert!(error.contains("response_timeout"), "{error}");
    assert!(error.contains("printed no JSON within 3000 ms"), "{error}");
    no_process_left(&p);
    let rows = run_rows(&p);
    assert!(
        rows.iter().any(|(_, e)| e.contains("no network")),
        "{rows:?}"
    );
}

#[test]
fn a_different_session_id_on_the_second_turn_is_a_response_error() {
    let p = project("  max_turns: 2", "");
    let line =
        |sid: &str| json!({"type": "step_start", "timestamp": 1, "sessionID": sid, "part": {}});
    p.scenario(
        "default",
        &[
            json!({"turn": 1, "emit": line("ses_first")}),
            json!({"turn": 1, "step_finish": {"input": 10, "output": 2}}),
            json!({"turn": 2, "emit": line("ses_other")}),
        ],
    );
    let _d = p.start();
    let (_, error) = wait_for("a retry after the mismatch", WAIT, || {
        retry_row(&p).filter(|(_, e)| !e.is_empty())
    });
    assert!(
        error.contains("ses_other") && error.contains("ses_first"),
        "{error}"
    );
    let runs = runs_of(&p);
    assert!(
        argv(&runs[1])
            .windows(2)
            .any(|w| w == ["--session", "ses_first"]),
        "{runs:?}"
    );
}

#[test]
fn an_auth_error_ends_in_agent_auth_failed_without_a_retry() {
    let p = project("  max_turns: 1", "");
    p.scenario(
        "default",
        &[json!({"cat_file": fixture("logical_failure_exit0.jsonl")})],
    );
    let d = p.start();
    wait_for("the failed run", WAIT, || {
        run_rows(&p)
            .first()
            .filter(|(s, _)| s != "running")
            .cloned()
    });
    let body = d.get_ok("/api/v1/runs").expect("runs");
    assert!(
        body.contains("agent_auth_failed") || body.contains("opencode auth login"),
        "{body}"
    );
    let rows = run_rows(&p);
    assert!(rows[0].1.contains("opencode auth login"), "{rows:?}");
    // A failed login is not retried: the kind is held, with its attention item, and the CLI
    // is not started again within several poll ticks.
    let s = d.wait_state("the login hold", WAIT, |s| {
        let listed = |list: &str, key: &str, want: &str| {
            s[list]
                .as_array()
                .is_some_and(|a| a.iter().any(|i| i[key] == want))
        };
        listed("attention", "kind", "agent_auth_failed")
            && listed("held", "issue_identifier", "A-1")
    });
    assert_eq!(s["counts"]["retrying"], 0, "{s}");
    assert!(retry_row(&p).is_none(), "{:?}", retry_row(&p));
    assert_eq!(runs_of(&p).len(), 1);
    assert!(
        !holds_within(Duration::from_secs(2), || runs_of(&p).len() > 1),
        "{:?}",
        runs_of(&p)
    );
}

/// `sortie validate` on `workflow` (written into a temp dir with an empty backlog), with a
/// fake `opencode` first on PATH; returns the exit code and stderr.
fn validate(workflow: &str) -> (i32, String) {
    let p = Project::new();
    std::fs::create_dir_all(p.path("bin")).unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, p.path("bin/opencode")).unwrap();
    p.issues(json!([]));
    p.write("WORKFLOW.md", workflow);
    let path = format!(
        "{}:{}",
        p.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .env("PATH", path)
        .arg("validate")
        .arg(p.workflow())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_accepted(what: &str, workflow: &str) {
    let (code, stderr) = validate(workflow);
    assert_eq!(code, 0, "{what}: {stderr}");
    assert!(!stderr.contains("error:"), "{what}: {stderr}");
    assert!(!stderr.contains("unknown_key"), "{what}: {stderr}");
}

#[test]
fn validate_accepts_the_example_workflow() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/opencode/WORKFLOW.md"),
    )
    .unwrap();
    assert_accepted("examples/opencode/WORKFLOW.md", &text);
}

#[test]
fn validate_accepts_the_original_projects_opencode_settings() {
    // The original project's OpenCode example, its tracker swapped for the file tracker.
    let wf = r#"---
tracker:
  kind: file
  active_states:
    - To Do
    - In Progress
  in_progress_state: In Progress
  handoff_state: Human Review
  terminal_states:
    - Done
    - Won't Do
file:
  path: ./issues.json
polling:
  interval_ms: 45000
workspace:
  root: ./workspaces
hooks:
  after_create: |
    git clone --depth 1 $SORTIE_REPO_URL .
  before_run: |
    git fetch origin main
  after_run: |
    git add -A
  before_remove: |
    true
  timeout_ms: 120000
agent:
  kind: opencode
  command: opencode
  env: [FAKE_AGENT_*]
  max_turns: 15
  max_concurrent_agents: 4
  turn_timeout_ms: 3600000
  read_timeout_ms: 5000
  stall_timeout_ms: 300000
  stop_grace_ms: 5000
  max_retry_backoff_ms: 300000
opencode:
  model: anthropic/claude-sonnet-4-6
  dangerously_skip_permissions: true
  disable_autocompact: true
  allowed_tools:
    - read
    - glob
    - grep
    - edit
    - bash
server:
  port: 8642
---
Work on {{ .issue.identifier }}.
"#;
    assert_accepted("the original's settings", wf);
}

#[test]
fn validate_refuses_contradictory_tool_scoping() {
    let wf = "---\ntracker:\n  kind: file\n  active_states: [To Do]\nfile:\n  path: ./issues.json\nagent:\n  kind: opencode\nopencode:\n  allowed_tools: [read, bash]\n  denied_tools: [bash]\n  thinking: maybe\n  mystery: 1\n---\nGo.\n";
    let (code, stderr) = validate(wf);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("both name bash"), "{stderr}");
    assert!(stderr.contains("opencode.thinking"), "{stderr}");
    assert!(stderr.contains("unknown_key: opencode.mystery"), "{stderr}");
}

#[test]
fn a_prompt_too_large_for_argv_travels_on_stdin() {
    let p = project("  max_turns: 1", "");
    let title = "x".repeat(120 * 1024);
    p.issues(
        json!([{"id": "1", "identifier": "A-1", "title": title, "state": "To Do", "priority": 1}]),
    );
    // No steps: the default script.
    p.scenario("default", &[]);
    let _d = p.start();
    wait_for("the handoff", WAIT, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let runs = runs_of(&p);
    let args = argv(&runs[0]);
    assert!(
        !args.contains(&"--".to_string()),
        "{:?}",
        &args[..args.len().min(12)]
    );
    let prompt = runs[0]["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("Work on A-1: xxx") && prompt.contains(&title),
        "{}",
        prompt.len()
    );
}

#[test]
fn the_managed_environment_replaces_inherited_copies() {
    let issues =
        json!([{"id": "1", "identifier": "E-1", "title": "Env", "state": "To Do", "priority": 1}]);
    let setup = common::Setup::new("", &issues.to_string());
    let root = setup.path().to_path_buf();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, root.join("bin/opencode")).unwrap();
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n  handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: {root}/ws\nagent:\n  kind: opencode\n  command: {root}/bin/opencode\n  env: [FAKE_AGENT_*]\n  max_turns: 1\nopencode:\n  disable_autocompact: false\n---\nGo.\n",
        root = root.display()
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
    let env_log = root.join("env.log");
    let env_log_s = env_log.display().to_string();
    let _d = setup.start(&[
        ("FAKE_AGENT_ENV_LOG", env_log_s.as_str()),
        ("OPENCODE_PERMISSION", r#"{"bash":"allow"}"#),
        ("OPENCODE_DISABLE_AUTOCOMPACT", "inherited"),
        ("OPENCODE_AUTO_SHARE", "true"),
        ("OPENCODE_UNRELATED", "kept"),
    ]);
    let envs: Vec<Value> = wait_for("the run and the export logged", WAIT, || {
        let envs: Vec<Value> = std::fs::read_to_string(&env_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (envs.len() >= 2).then_some(envs)
    });
    for env in &envs {
        assert!(env.get("OPENCODE_PERMISSION").is_none(), "{env}");
        assert_eq!(env["OPENCODE_DISABLE_AUTOCOMPACT"], "false");
        assert_eq!(env["OPENCODE_AUTO_SHARE"], "false");
        assert_eq!(env["OPENCODE_DISABLE_AUTOUPDATE"], "true");
        assert_eq!(env["OPENCODE_DISABLE_LSP_DOWNLOAD"], "true");
        assert_eq!(env["OPENCODE_UNRELATED"], "kept");
    }
}

#[test]
fn a_turn_after_stop_is_a_response_error() {
    use sortie::agent::{AgentErrorKind, AgentSettings, CancelToken, StartSessionParams};
    let ws = tempfile::tempdir().unwrap();
    let settings = AgentSettings {
        kind: "opencode".into(),
        command: Some(FAKE_AGENT.into()),
        ..AgentSettings::default()
    };
    let adapter = sortie::registry::adapter_for(&settings).unwrap();
    let mut session = adapter
        .start_session(StartSessionParams {
            workspace: ws.path().to_path_buf(),
            ..StartSessionParams::default()
        })
        .unwrap();
    session.stop().unwrap();
    session.stop().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let result = session.run_turn("go", &tx, &CancelToken::new());
    assert_eq!(
        result.outcome.error_kind(),
        Some(AgentErrorKind::ResponseError)
    );
    let events: Vec<_> = rx.try_iter().collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind.type_name(), "turn_ended_with_error");
}
