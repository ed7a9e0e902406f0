//! The copilot-cli kind through the real `sortie` binary, with `fake-agent` playing the Copilot
//! CLI (a symlink named `copilot`): turns resume the session the previous turn's `result`
//! named, token totals reach the served runs, a stalled turn loses its whole process group,
//! malformed lines do not end a turn, quota snapshots are served as rate limits, and missing
//! credentials end in `agent_auth_failed` instead of a retry loop.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::procs::processes_in;
use common::{Daemon, FAKE_AGENT, sortie_command, spawn, wait_for};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const TOKEN_VARS: &[&str] = &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"];

/// A temp project: workflow, one issue, a scenario, and `bin/copilot` → fake-agent.
struct CopilotProject {
    dir: tempfile::TempDir,
}

impl CopilotProject {
    fn new(agent_extra: &str, scenario: &[Value]) -> CopilotProject {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("gh-config")).unwrap();
        std::os::unix::fs::symlink(FAKE_AGENT, root.join("bin/copilot")).unwrap();
        let wf = format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: copilot-cli\n  command: {cmd}\n  env: [FAKE_AGENT_*]\n{sessions}{agent_extra}copilot-cli:\n  model: gpt-5-mini\n  max_autopilot_continues: 9\n---\nWork on {{{{ .issue.identifier }}}}.\n",
            cmd = root.join("bin/copilot").display(),
            sessions = if agent_extra.contains("max_sessions") {
                ""
            } else {
                "  max_sessions: 1\n"
            },
        );
        std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
        let issues = json!([{"id": "1", "identifier": "C-1", "title": "Copilot work", "state": "To Do", "priority": 1}]);
        std::fs::write(root.join("issues.json"), issues.to_string()).unwrap();
        let lines: Vec<String> = scenario.iter().map(Value::to_string).collect();
        std::fs::write(root.join("scenario.jsonl"), lines.join("\n") + "\n").unwrap();
        CopilotProject { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Starts the daemon; with `token`, the CLI's credential variable is set, otherwise every
    /// credential source is removed (and `gh` looks at an empty config).
    fn start(&self, token: bool) -> Daemon {
        spawn(&self.path("sortie.log"), None, |port| {
            let mut cmd: Command = sortie_command();
            cmd.current_dir(self.dir.path())
                .arg("--port")
                .arg(port.to_string())
                .arg(self.path("WORKFLOW.md"))
                .env("FAKE_AGENT_SCENARIO", self.path("scenario.jsonl"))
                .env("FAKE_AGENT_ARGV_LOG", self.path("argv.log"))
                .env("GH_CONFIG_DIR", self.path("gh-config"))
                .env_remove("RUST_LOG");
            for v in TOKEN_VARS {
                cmd.env_remove(v);
            }
            if token {
                cmd.env("COPILOT_GITHUB_TOKEN", "test-token-not-real");
            }
            cmd
        })
    }

    fn argv_log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("argv.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn stored_error(&self) -> String {
        let conn = rusqlite::Connection::open_with_flags(
            self.path(".sortie.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        conn.query_row(
            "SELECT COALESCE(error, '') FROM run_history WHERE issue_id = '1' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default()
    }
}

impl Drop for CopilotProject {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.path("sortie.log")).unwrap_or_default();
            eprintln!("---- sortie.log ----\n{log}");
        }
    }
}

fn runs(d: &Daemon) -> Vec<Value> {
    d.try_get("/api/v1/runs?issue=C-1")
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["runs"].as_array().cloned())
        .unwrap_or_default()
}

fn first_run(d: &Daemon) -> Value {
    d.wait_until("a recorded run", WAIT, || !runs(d).is_empty());
    runs(d).remove(0)
}

fn run_events(d: &Daemon, run: &Value) -> Vec<Value> {
    let dispatch = run["dispatch_id"].as_str().unwrap_or_default();
    d.get(&format!("/api/v1/runs/{dispatch}/events")).json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn flag_value(argv: &Value, flag: &str) -> Option<String> {
    let a = argv["argv"].as_array()?;
    let i = a.iter().position(|x| x == flag)?;
    a.get(i + 1).and_then(Value::as_str).map(str::to_string)
}

fn has_flag(argv: &Value, flag: &str) -> bool {
    argv["argv"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == flag))
}

#[test]
fn two_turns_resume_the_session_and_their_tokens_are_served() {
    let p = CopilotProject::new(
        "  max_turns: 2\n",
        &[
            json!({"turn": 1, "message": {"text": "first", "output_tokens": 20}}),
            json!({"turn": 1, "result": {"session_id": "cop-sess-1", "premium_requests": 2}}),
            json!({"turn": 2, "usage": {"model": "gpt-5-mini", "input_tokens": 100, "output_tokens": 30, "cache_read_tokens": 40}}),
            json!({"turn": 2, "message": {"text": "second", "output_tokens": 30}}),
            json!({"turn": 2, "result": {"session_id": "cop-sess-1"}}),
        ],
    );
    let d = p.start(true);
    d.wait_until("the two-turn run recorded", WAIT, || {
        runs(&d).first().is_some_and(|r| r["status"] == "succeeded")
    });
    let argv = p.argv_log();
    assert!(argv.len() >= 2, "{argv:?}");
    assert!(!has_flag(&argv[0], "--resume") && !has_flag(&argv[0], "--continue"));
    // The prompt travels on stdin: no issue text on the command line.
    assert!(!has_flag(&argv[0], "-p"), "{:?}", argv[0]);
    assert_eq!(argv[0]["prompt_from_stdin"], true);
    assert!(
        argv[0]["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("Work on C-1.")),
        "{:?}",
        argv[0]
    );
    assert_eq!(
        flag_value(&argv[0], "--model").as_deref(),
        Some("gpt-5-mini")
    );
    assert_eq!(
        flag_value(&argv[0], "--max-autopilot-continues").as_deref(),
        Some("9")
    );
    assert!(has_flag(&argv[0], "--allow-all"));
    assert_eq!(
        flag_value(&argv[1], "--resume").as_deref(),
        Some("cop-sess-1"),
        "{:?}",
        argv[1]
    );
    assert_eq!(argv[0]["cwd"], argv[1]["cwd"]);

    let run = runs(&d).remove(0);
    assert_eq!(run["agent_kind"], "copilot-cli");
    assert_eq!(run["turns_completed"], 2, "{run}");
    assert_eq!(
        run["tokens"],
        json!({"input_tokens": 100, "output_tokens": 50, "total_tokens": 150,
               "cache_read_tokens": 40, "cache_write_tokens": 0}),
        "{run}"
    );
    assert_eq!(
        run["usage_provenance"],
        json!([{"source": "output", "strategy": "live"}])
    );
    // Premium requests of each turn's result line (the fake's default is 1), by the model
    // the turn named, ordered by unit then model.
    assert_eq!(
        run["vendor_amounts"],
        json!([
            {"unit": "premium_requests", "model": "", "amount": 2.0, "lower_bound": false},
            {"unit": "premium_requests", "model": "gpt-5-mini", "amount": 1.0, "lower_bound": false}
        ]),
        "{run}"
    );
    // The issue's totals sum them over its runs.
    let detail = d.get("/api/v1/C-1").json();
    assert_eq!(
        detail["history"]["totals"]["vendor_amounts"], run["vendor_amounts"],
        "{detail}"
    );
}

#[test]
fn a_hung_turn_is_stopped_by_the_stall_timeout_with_its_process_group() {
    let p = CopilotProject::new(
        "  max_turns: 1\n  stall_timeout_ms: 700\n",
        &[
            json!({"message": {"text": "thinking", "output_tokens": 5}}),
            json!({"spawn_grandchild": true}),
            json!({"hang": true}),
        ],
    );
    let ws = p.path("ws/C-1");
    let d = p.start(true);
    wait_for("the agent and its grandchild running", WAIT, || {
        (processes_in(&ws).len() >= 2).then_some(())
    });
    d.wait_until("the stalled run recorded", WAIT, || {
        runs(&d).first().is_some_and(|r| r["status"] == "cancelled")
    });
    wait_for("no process left in the workspace", WAIT, || {
        processes_in(&ws).is_empty().then_some(())
    });
    assert!(p.stored_error().contains("stall"), "{}", p.stored_error());
}

#[test]
fn malformed_lines_do_not_end_the_turn() {
    let p = CopilotProject::new(
        "  max_turns: 1\n",
        &[
            json!({"raw": "this is not json"}),
            json!({"emit": {"type": "future.event.type", "data": {"x": 1}}}),
            json!({"message": {"text": "still going", "output_tokens": 5}}),
            json!({"result": {}}),
        ],
    );
    let d = p.start(true);
    d.wait_until("the run recorded", WAIT, || {
        runs(&d).first().is_some_and(|r| r["status"] == "succeeded")
    });
    let run = runs(&d).remove(0);
    assert_eq!(run["tokens"]["output_tokens"], 5, "{run}");
    let events = run_events(&d, &run);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    let malformed = kinds.iter().position(|k| *k == "malformed");
    let completed = kinds.iter().position(|k| *k == "turn_completed");
    assert!(
        matches!((malformed, completed), (Some(m), Some(c)) if m < c),
        "{kinds:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "malformed" && e["message"] == "this is not json"),
        "{events:?}"
    );
}

#[test]
fn quota_snapshots_are_served_as_rate_limits() {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let reset = sortie::clock::rfc3339_ms(now_ms + 10 * 86_400_000);
    let p = CopilotProject::new(
        "  max_turns: 1\n",
        &[
            json!({"usage": {"model": "gpt-5-mini", "input_tokens": 10, "output_tokens": 2,
                "quota": {"premium_interactions": {"entitlementRequests": 300, "usedRequests": 75,
                    "remainingPercentage": 75.0, "resetDate": reset}}}}),
            json!({"message": {"text": "done", "output_tokens": 2}}),
            json!({"result": {}}),
        ],
    );
    let d = p.start(true);
    let s = d.wait_state("the copilot rate limits", WAIT, |s| {
        s["rate_limits"]["copilot-cli"]["windows"]
            .as_array()
            .is_some_and(|w| !w.is_empty())
    });
    let windows = s["rate_limits"]["copilot-cli"]["windows"].clone();
    assert_eq!(
        windows[0]["label"], "Monthly premium request limit",
        "{windows}"
    );
    assert_eq!(windows[0]["used_percent"], 25.0, "{windows}");
    assert_eq!(windows[0]["status"], "allowed", "{windows}");
    assert!(windows[0]["resets_at"].is_string(), "{windows}");
}

#[test]
fn an_exhausted_quota_is_a_usage_limited_run_retried_at_the_reset() {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    // Whole seconds, as the CLI reports them.
    let reset_ms = (now_ms / 1000 + 3600) * 1000;
    let reset = sortie::clock::rfc3339_ms(reset_ms);
    let p = CopilotProject::new(
        "  max_turns: 1\n  max_sessions: 3\n  max_retry_backoff_ms: 1000\n",
        &[
            json!({"usage": {"model": "gpt-5-mini", "input_tokens": 0, "output_tokens": 0,
                "quota": {"premium_interactions": {"entitlementRequests": 300, "usedRequests": 300,
                    "remainingPercentage": 0.0, "resetDate": reset}}}}),
            json!({"emit": {"type": "session.error", "data": {"errorType": "quota",
                "message": "You have exceeded your premium request quota"}}}),
            json!({"result": {"exit_code": 1}}),
            json!({"exit": 1}),
        ],
    );
    let d = p.start(true);
    let s = d.wait_state("the usage_limit retry", WAIT, |s| {
        s["retrying"][0]["trigger"] == "usage_limit"
    });
    assert_eq!(s["retrying"][0]["due_at"], reset.as_str(), "{s}");
    let run = first_run(&d);
    assert_eq!(run["status"], "usage_limited", "{run}");
    let windows = &s["rate_limits"]["copilot-cli"]["windows"];
    assert_eq!(windows[0]["status"], "exhausted", "{windows}");
}

/// Waits for `n` more completed polls than the state showed when called.
fn wait_polls(d: &Daemon, n: usize) {
    let mut seen: Vec<String> = Vec::new();
    d.wait_until("several more polls", WAIT, || {
        if let Some(at) = d.try_state().and_then(|s| {
            s["health"]["poll"]["checked_at"]
                .as_str()
                .map(str::to_string)
        }) && seen.last() != Some(&at)
        {
            seen.push(at);
        }
        seen.len() > n
    });
}

#[test]
fn missing_credentials_end_in_agent_auth_failed_without_a_retry_loop() {
    let p = CopilotProject::new("  max_turns: 1\n", &[json!({"result": {}})]);
    let d = p.start(false);
    let run = first_run(&d);
    assert_eq!(run["status"], "failed", "{run}");
    let stored = p.stored_error();
    assert!(stored.starts_with("agent_auth_failed: "), "{stored}");
    assert!(
        stored.contains("/login") && stored.contains("COPILOT_GITHUB_TOKEN"),
        "{stored}"
    );
    let events = run_events(&d, &run);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "startup_failed");
    wait_polls(&d, 5);
    assert_eq!(runs(&d).len(), 1, "a second session was started");
    assert!(
        p.argv_log().is_empty(),
        "no turn may run: {:?}",
        p.argv_log()
    );
}

#[test]
fn the_cli_refusing_at_run_time_is_agent_auth_failed() {
    let p = CopilotProject::new("  max_turns: 1\n", &[json!({"auth_failure": true})]);
    let d = p.start(true);
    let run = first_run(&d);
    assert_eq!(run["status"], "failed", "{run}");
    let stored = p.stored_error();
    assert!(stored.starts_with("agent_auth_failed: "), "{stored}");
    wait_polls(&d, 5);
    assert_eq!(runs(&d).len(), 1, "a second session was started");
    assert_eq!(p.argv_log().len(), 1);
}

/// `sortie validate --format json` of `workflow` with a `copilot` on PATH; (errors, warnings).
fn validate(workflow: &std::path::Path, env: &[(&str, &str)]) -> (Vec<Value>, Vec<Value>) {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, bin.path().join("copilot")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = sortie_command();
    cmd.arg("validate")
        .arg("--format")
        .arg("json")
        .arg(workflow)
        .env("PATH", path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    (list("errors"), list("warnings"))
}

fn copilot_block_warnings(warnings: &[Value]) -> Vec<&Value> {
    warnings
        .iter()
        .filter(|w| {
            w["check"] == "unknown_key"
                && w["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("copilot-cli"))
        })
        .collect()
}

#[test]
fn the_copilot_example_workflow_validates() {
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/copilot/WORKFLOW.md");
    let (errors, warnings) = validate(&example, &[]);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        !warnings.iter().any(|w| w["check"] == "unknown_key"),
        "{warnings:?}"
    );
}

#[test]
fn the_original_copilot_front_matter_validates() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("WORKFLOW.md");
    std::fs::write(dir.path().join("issues.json"), "[]").unwrap();
    std::fs::write(
        &wf,
        r#"---
tracker:
  kind: file
  active_states: [backlog, in-progress]
  in_progress_state: in-progress
  handoff_state: review
  terminal_states: [done, wontfix]
file:
  path: ./issues.json
polling:
  interval_ms: 120000
workspace:
  root: $SORTIE_WORKSPACE_ROOT
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
  kind: copilot-cli
  command: copilot
  env: [FAKE_AGENT_*]
  max_turns: 5
  max_concurrent_agents: 4
  turn_timeout_ms: 1800000
  stall_timeout_ms: 300000
  stop_grace_ms: 5000
  max_retry_backoff_ms: 300000
copilot-cli:
  model: gpt-5-mini
  max_autopilot_continues: 50
server:
  port: 8642
---
Work on {{ .issue.identifier }}.
"#,
    )
    .unwrap();
    let root = dir.path().join("workspaces");
    let root = root.to_string_lossy().into_owned();
    let (errors, warnings) = validate(
        &wf,
        &[
            ("SORTIE_WORKSPACE_ROOT", root.as_str()),
            ("SORTIE_REPO_URL", "https://example.invalid/repo.git"),
        ],
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        !warnings.iter().any(|w| w["check"] == "unknown_key"),
        "{warnings:?}"
    );
}

#[test]
fn copilot_block_types_and_unknown_keys_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("WORKFLOW.md");
    std::fs::write(dir.path().join("issues.json"), "[]").unwrap();
    std::fs::write(
        &wf,
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\nfile:\n  path: ./issues.json\nworkspace:\n  root: ./ws\nagent:\n  kind: copilot-cli\n  command: copilot\n  env: [FAKE_AGENT_*]\ncopilot-cli:\n  max_autopilot_continues: many\n  allowed_tools: 5\n  experimental: \"yes\"\n  modle: gpt-5\n---\nWork.\n",
    )
    .unwrap();
    let (errors, warnings) = validate(&wf, &[]);
    let text = serde_json::to_string(&errors).unwrap();
    for field in [
        "copilot-cli.max_autopilot_continues",
        "copilot-cli.allowed_tools",
        "copilot-cli.experimental",
    ] {
        assert!(text.contains(field), "{field}: {errors:?}");
    }
    let unknown = copilot_block_warnings(&warnings);
    assert_eq!(unknown.len(), 1, "{warnings:?}");
    assert!(
        unknown[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("copilot-cli.modle") && m.contains("model")),
        "{unknown:?}"
    );
}

#[test]
fn without_a_reported_session_id_the_next_turn_continues() {
    let p = CopilotProject::new(
        "  max_turns: 2\n",
        &[
            json!({"message": {"text": "working", "output_tokens": 4}}),
            json!({"emit": {"type": "result", "exitCode": 0, "usage": {"premiumRequests": 1}}}),
        ],
    );
    let d = p.start(true);
    d.wait_until("the two-turn run recorded", WAIT, || {
        runs(&d).first().is_some_and(|r| r["status"] == "succeeded")
    });
    let argv = p.argv_log();
    assert!(argv.len() >= 2, "{argv:?}");
    assert!(!has_flag(&argv[0], "--continue") && !has_flag(&argv[0], "--resume"));
    assert!(has_flag(&argv[1], "--continue"), "{:?}", argv[1]);
    assert!(!has_flag(&argv[1], "--resume"), "{:?}", argv[1]);
}

#[test]
fn a_later_session_resumes_from_its_first_turn() {
    let p = CopilotProject::new(
        "  max_turns: 1\n  max_sessions: 2\n",
        &[
            json!({"message": {"text": "working", "output_tokens": 4}}),
            json!({"result": {"session_id": "cop-sess-7"}}),
        ],
    );
    // The project's workflow caps sessions at 1; this test needs a second one.
    let wf = std::fs::read_to_string(p.path("WORKFLOW.md"))
        .unwrap()
        .replacen("  max_sessions: 1\n", "", 1);
    std::fs::write(p.path("WORKFLOW.md"), wf).unwrap();
    let d = p.start(true);
    d.wait_until("two recorded runs", WAIT, || runs(&d).len() >= 2);
    let argv = p.argv_log();
    assert!(argv.len() >= 2, "{argv:?}");
    assert!(!has_flag(&argv[0], "--resume"));
    assert_eq!(
        flag_value(&argv[1], "--resume").as_deref(),
        Some("cop-sess-7"),
        "{:?}",
        argv[1]
    );
}

#[test]
fn a_recorded_stream_plays_through_the_daemon() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/copilot/tool_use_session.jsonl");
    let p = CopilotProject::new(
        "  max_turns: 1\n",
        &[json!({"cat_file": fixture.to_string_lossy()})],
    );
    let d = p.start(true);
    d.wait_until("the run recorded", WAIT, || {
        runs(&d).first().is_some_and(|r| r["status"] == "succeeded")
    });
    let run = runs(&d).remove(0);
    assert_eq!(
        run["tokens"],
        json!({"input_tokens": 0, "output_tokens": 122, "total_tokens": 122,
               "cache_read_tokens": 0, "cache_write_tokens": 0}),
        "{run}"
    );
    let events = run_events(&d, &run);
    let tool = events
        .iter()
        .find(|e| e["event"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool_result: {events:?}"));
    assert_eq!(tool["tool_name"], "view", "{tool}");
    assert_eq!(tool["tool_kind"], "read", "{tool}");
    assert_eq!(tool["tool_error"], false, "{tool}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "turn_completed", "{events:?}");
    assert_eq!(last["message"], "Read and summarized main.go", "{last}");
}

/// Replaces the project's prompt template with `body`.
fn set_prompt(p: &CopilotProject, body: &str) {
    let wf = std::fs::read_to_string(p.path("WORKFLOW.md")).unwrap();
    let wf = wf.replacen("Work on {{ .issue.identifier }}.\n", body, 1);
    std::fs::write(p.path("WORKFLOW.md"), wf).unwrap();
}

#[test]
fn every_prompt_travels_on_stdin_an_oversized_one_and_a_dash_one_too() {
    let big = format!(
        "Work on {{{{ .issue.identifier }}}}.\n{}\n",
        "context ".repeat(16 * 1024)
    );
    let p = CopilotProject::new("  max_turns: 1\n", &[json!({"result": {}})]);
    set_prompt(&p, &big);
    let d = p.start(true);
    d.wait_until("the run recorded", WAIT, || !runs(&d).is_empty());
    let argv = p.argv_log();
    assert_eq!(argv[0]["prompt_from_stdin"], true, "{:?}", argv[0]["argv"]);
    assert!(!has_flag(&argv[0], "-p"));
    let prompt = argv[0]["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("Work on C-1.\ncontext context"),
        "{}",
        &prompt[..40]
    );
    assert!(prompt.len() > 128 * 1024);
    drop(d);

    let p = CopilotProject::new("  max_turns: 1\n", &[json!({"result": {}})]);
    set_prompt(&p, "- fix {{ .issue.identifier }} first\n");
    let d = p.start(true);
    d.wait_until("the run recorded", WAIT, || !runs(&d).is_empty());
    let argv = p.argv_log();
    assert_eq!(argv[0]["prompt_from_stdin"], true);
    assert!(!has_flag(&argv[0], "-p"));
    assert!(
        !argv[0]["argv"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a.as_str().is_some_and(|a| a.contains("fix C-1"))),
        "{:?}",
        argv[0]["argv"]
    );
    assert!(
        argv[0]["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("- fix C-1 first"))
    );
}
