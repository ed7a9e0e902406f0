//! The process supervisor and the claude-code adapter against the scripted `fake-agent`:
//! flags and resume ids, group kill on cancel, line cap, missing binaries, deadlines.

mod common;

use common::{FAKE_AGENT as FAKE, holds_within};
use crossbeam_channel::{Receiver, unbounded};
use sortie::agent::claude::parser::ClaudeParser;
use sortie::agent::process::{self, MAX_LINE_BYTES, ProcessSpec, TurnLimits};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentEventKind, AgentSettings, CancelReason, CancelToken,
    StartSessionParams, TurnOutcome, status_file,
};
use sortie::clock::{Clock, SystemClock};
use sortie::registry::adapter_for;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(scenario: &str) -> Env {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::create_dir_all(dir.path().join("ws")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("state")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("scenario.jsonl"), scenario)
            .unwrap_or_else(|e| panic!("{e}"));
        Env { dir }
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn argv_log(&self) -> PathBuf {
        self.dir.path().join("argv.log")
    }
    /// `env VAR=… fake-agent`: passes the scenario without touching this process's env.
    fn command_args(&self) -> Vec<String> {
        let d = self.dir.path();
        vec![
            format!("FAKE_AGENT_SCENARIO={}", d.join("scenario.jsonl").display()),
            format!("FAKE_AGENT_STATE_DIR={}", d.join("state").display()),
            format!("FAKE_AGENT_ARGV_LOG={}", self.argv_log().display()),
            FAKE.to_string(),
        ]
    }
    fn command(&self) -> String {
        format!("env {}", self.command_args().join(" "))
    }
    fn settings(&self) -> AgentSettings {
        AgentSettings {
            kind: "claude-code".into(),
            command: Some(self.command()),
            turn_timeout_ms: 0,
            read_timeout_ms: 5000,
            stop_grace_ms: 0,
            block: serde_json::Map::new(),
            workflow_dir: self.dir.path().to_path_buf(),
            env: Default::default(),
            sandbox: None,
        }
    }
    fn spec(&self) -> ProcessSpec {
        let mut args = self.command_args();
        args.extend(["-p", "go", "--output-format", "stream-json", "--verbose"].map(String::from));
        ProcessSpec {
            program: "env".into(),
            args,
            cwd: self.ws(),
            stdin: None,
            base_env: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            max_line_bytes: MAX_LINE_BYTES,
            remote: None,
            sandbox: None,
        }
    }
    fn invocations(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.argv_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn params(ws: PathBuf) -> StartSessionParams {
    StartSessionParams {
        workspace: ws,
        resume_session_id: None,
        issue_id: "id-PROJ-1".into(),
        issue_identifier: "PROJ-1".into(),
        mcp_config_path: None,
        remote: None,
        attempt: None,
    }
}

fn flag_value(inv: &serde_json::Value, flag: &str) -> Option<String> {
    let argv: Vec<&str> = inv["argv"]
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let i = argv.iter().position(|a| *a == flag)?;
    argv.get(i + 1).map(|s| s.to_string())
}

fn drain(rx: &Receiver<AgentEvent>) -> Vec<AgentEvent> {
    rx.try_iter().collect()
}

#[test]
fn a_default_turn_completes_with_usage_and_exact_flags() {
    let env = Env::new("");
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = unbounded();
    let result = session.run_turn("fix the bug", &tx, &CancelToken::new());
    assert!(result.outcome.is_completed(), "{:?}", result.outcome);
    assert_eq!(
        result.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((100, 20))
    );
    assert_eq!(result.model.as_deref(), Some("fake-model-1"));
    let events = drain(&rx);
    assert!(matches!(
        &events[0].kind,
        AgentEventKind::SessionStarted {
            agent_pid: Some(_),
            ..
        }
    ));
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);

    let inv = env.invocations();
    assert_eq!(inv.len(), 1);
    let argv: Vec<&str> = inv[0]["argv"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    // The prompt travels on stdin, never on the command line.
    assert_eq!(inv[0]["prompt"], "fix the bug");
    assert_eq!(inv[0]["prompt_from_stdin"], true);
    assert!(!argv.contains(&"fix the bug"));
    assert_eq!(
        &argv[1..7],
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--session-id"
        ]
    );
    let sid = flag_value(&inv[0], "--session-id").unwrap_or_default();
    assert_eq!(sid.len(), 36);
    assert_eq!(result.session_id.as_deref(), Some(sid.as_str()));
    let ws = env.ws().canonicalize().unwrap_or_default();
    assert_eq!(inv[0]["cwd"].as_str(), ws.to_str());
}

#[test]
fn turn_two_resumes_the_id_turn_one_reported() {
    let env = Env::new(
        r#"{"turn":1,"init":{"session_id":"reported-by-init"}}
{"turn":1,"assistant":{"text":"one","input_tokens":10,"output_tokens":5}}
{"turn":1,"result":{"subtype":"success","text":"first","input_tokens":10,"output_tokens":5}}
"#,
    );
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let r1 = session.run_turn("one", &tx, &CancelToken::new());
    assert_eq!(r1.session_id.as_deref(), Some("reported-by-init"));
    let r2 = session.run_turn("two", &tx, &CancelToken::new());
    assert!(r2.outcome.is_completed());
    let inv = env.invocations();
    assert_eq!(inv.len(), 2);
    assert!(flag_value(&inv[0], "--session-id").is_some());
    assert_eq!(flag_value(&inv[0], "--resume"), None);
    assert_eq!(
        flag_value(&inv[1], "--resume").as_deref(),
        Some("reported-by-init")
    );
    assert_eq!(flag_value(&inv[1], "--session-id"), None);
    // Both turns counted in full.
    assert_eq!(r1.usage.map(|u| u.total_tokens), Some(15));
    assert_eq!(r2.usage.map(|u| u.total_tokens), Some(120));
}

#[test]
fn a_resumed_session_passes_resume_from_turn_one() {
    let env = Env::new("");
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut p = params(env.ws());
    p.resume_session_id = Some("earlier-attempt".into());
    let mut session = adapter.start_session(p).unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    session.run_turn("go on", &tx, &CancelToken::new());
    let inv = env.invocations();
    assert_eq!(
        flag_value(&inv[0], "--resume").as_deref(),
        Some("earlier-attempt")
    );
}

#[test]
fn a_huge_prompt_travels_on_stdin() {
    let env = Env::new("");
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let prompt = "p".repeat(300 * 1024);
    let r = session.run_turn(&prompt, &tx, &CancelToken::new());
    assert!(r.outcome.is_completed(), "{:?}", r.outcome);
    let inv = env.invocations();
    assert_eq!(inv[0]["prompt_from_stdin"], serde_json::Value::Bool(true));
    assert_eq!(inv[0]["prompt"].as_str().map(str::len), Some(prompt.len()));
}

/// Processes of group `pgid` that are still alive (zombies are dead).
fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() > 2 && f[2].parse::<u32>().ok() == Some(pgid) && f[0] != "Z" && f[0] != "X" {
            out.push(pid);
        }
    }
    out
}

fn run_supervised(
    env: &Env,
    limits: TurnLimits,
    cancel: CancelToken,
) -> (
    std::thread::JoinHandle<process::SupervisedTurn>,
    Receiver<AgentEvent>,
) {
    let (tx, rx) = unbounded();
    let spec = env.spec();
    let ws = env.ws();
    let handle = std::thread::spawn(move || {
        let mut parser = ClaudeParser::new(Arc::new(SystemClock) as Arc<dyn Clock>, ws, None);
        process::run_turn(&spec, &mut parser, &tx, &cancel, limits)
    });
    (handle, rx)
}

#[test]
fn cancel_kills_a_sigterm_ignoring_agent_and_its_grandchild() {
    let env = Env::new(
        r#"{"ignore_sigterm":true}
{"spawn_grandchild":true}
{"init":{}}
{"hang":true}
"#,
    );
    let grace = Duration::from_millis(500);
    let cancel = CancelToken::new();
    let limits = TurnLimits {
        grace,
        ..TurnLimits::default()
    };
    let (handle, rx) = run_supervised(&env, limits, cancel.clone());
    let started = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("no event: {e}"));
    let AgentEventKind::SessionStarted {
        agent_pid: Some(pgid),
        ..
    } = started.kind
    else {
        panic!("expected session_started, got {started:?}");
    };
    assert!(
        holds_within(Duration::from_secs(10), || live_group_members(pgid).len()
            >= 2),
        "agent and grandchild should both be running"
    );
    let t0 = Instant::now();
    cancel.cancel(CancelReason::Reconcile);
    let turn = handle
        .join()
        .unwrap_or_else(|_| panic!("supervisor panicked"));
    assert_eq!(
        turn.outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::Reconcile
        }
    );
    assert!(
        holds_within(
            (grace + Duration::from_secs(1)).saturating_sub(t0.elapsed()),
            || live_group_members(pgid).is_empty()
        ),
        "group {pgid} still has {:?}",
        live_group_members(pgid)
    );
    assert!(t0.elapsed() <= grace + Duration::from_secs(1));
    let events = drain(&rx);
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    assert_eq!(
        events.last().map(|e| e.kind.type_name()),
        Some("turn_cancelled")
    );
}

#[test]
fn a_twenty_mib_line_fails_the_turn_cleanly() {
    let env = Env::new(
        r#"{"init":{}}
{"big_line_bytes":20971520}
{"result":{"subtype":"success","text":"never seen"}}
"#,
    );
    let (handle, rx) = run_supervised(&env, TurnLimits::default(), CancelToken::new());
    let turn = handle
        .join()
        .unwrap_or_else(|_| panic!("supervisor panicked"));
    match &turn.outcome {
        TurnOutcome::Failed {
            kind: AgentErrorKind::PortExit,
            message,
        } => {
            assert!(message.starts_with("stdout read error"), "{message}")
        }
        other => panic!("expected a port_exit failure, got {other:?}"),
    }
    let events = drain(&rx);
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    assert!(turn.pid.is_some_and(|p| live_group_members(p).is_empty()));
}

#[test]
fn a_missing_binary_is_agent_not_found() {
    let env = Env::new("");
    let mut settings = env.settings();
    settings.command = Some("/nonexistent/dir/claude".into());
    let adapter = adapter_for(&settings).unwrap_or_else(|e| panic!("{e}"));
    let err = adapter
        .start_session(params(env.ws()))
        .err()
        .map(|e| e.kind);
    assert_eq!(err, Some(AgentErrorKind::AgentNotFound));

    // The same at spawn time, straight through the supervisor.
    let mut spec = env.spec();
    spec.program = "/nonexistent/dir/claude".into();
    let (tx, rx) = unbounded();
    let mut parser = ClaudeParser::new(Arc::new(SystemClock) as Arc<dyn Clock>, env.ws(), None);
    let turn = process::run_turn(
        &spec,
        &mut parser,
        &tx,
        &CancelToken::new(),
        TurnLimits::default(),
    );
    assert_eq!(
        turn.outcome.error_kind(),
        Some(AgentErrorKind::AgentNotFound)
    );
    assert_eq!(
        drain(&rx).iter().filter(|e| e.kind.is_terminal()).count(),
        1
    );
}

#[test]
fn exit_127_is_agent_not_found() {
    let env = Env::new("");
    let mut settings = env.settings();
    // `env` itself exits 127 when it cannot find the program it should run.
    settings.command = Some("env /nonexistent/fake-agent-binary".into());
    let adapter = adapter_for(&settings).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let r = session.run_turn("x", &tx, &CancelToken::new());
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::AgentNotFound));
    assert_eq!(r.usage, None);
}

#[test]
fn the_turn_timeout_is_enforced() {
    let env = Env::new("{\"init\":{}}\n{\"hang\":true}\n");
    let mut settings = env.settings();
    settings.turn_timeout_ms = 300;
    let adapter = adapter_for(&settings).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let r = session.run_turn("x", &tx, &CancelToken::new());
    assert_eq!(
        r.outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::TurnTimeout
        }
    );
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::TurnTimeout));
}

#[test]
fn a_crash_keeps_stderr_and_fails_with_port_exit() {
    let env = Env::new(
        r#"{"init":{}}
{"raw":"not json at all"}
{"stderr":"panic: something broke"}
{"exit":1}
"#,
    );
    let (handle, rx) = run_supervised(&env, TurnLimits::default(), CancelToken::new());
    let turn = handle
        .join()
        .unwrap_or_else(|_| panic!("supervisor panicked"));
    assert_eq!(turn.outcome.error_kind(), Some(AgentErrorKind::PortExit));
    assert!(
        turn.stderr.contains("panic: something broke"),
        "{:?}",
        turn.stderr
    );
    let kinds: Vec<&str> = drain(&rx).iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(kinds, ["session_started", "malformed", "turn_failed"]);
}

#[test]
fn a_result_error_from_the_agent_fails_the_turn() {
    let env = Env::new(
        r#"{"init":{}}
{"result":{"subtype":"error_during_execution","text":"tool crashed","input_tokens":3,"output_tokens":1}}
"#,
    );
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let r = session.run_turn("x", &tx, &CancelToken::new());
    assert_eq!(
        r.outcome,
        TurnOutcome::Failed {
            message: "error_during_execution: tool crashed".into(),
            kind: AgentErrorKind::TurnFailed
        }
    );
    assert_eq!(r.usage.map(|u| u.total_tokens), Some(4));
}

#[test]
fn the_agent_can_declare_a_stop_with_a_statement() {
    let env = Env::new(
        r#"{"init":{}}
{"write_file":{"path":".sortie/status","content":"needs-human-review\nPlease check the migration.\n"}}
{"assistant":{"text":"done","input_tokens":1,"output_tokens":1}}
{"result":{"subtype":"success","text":"ok"}}
"#,
    );
    status_file::clear(&env.ws()).unwrap_or_else(|e| panic!("{e}"));
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let r = session.run_turn("x", &tx, &CancelToken::new());
    assert!(r.outcome.is_completed());
    let s = status_file::read(&env.ws());
    assert_eq!(
        s.outcome,
        Some(status_file::DeclaredOutcome::NeedsHumanReview)
    );
    assert_eq!(s.statement.as_deref(), Some("Please check the migration."));
}

#[test]
fn an_invalid_workspace_is_refused_before_spawning() {
    let env = Env::new("");
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let err = adapter
        .start_session(params(Path::new("/definitely/missing/ws").to_path_buf()))
        .err()
        .map(|e| e.kind);
    assert_eq!(err, Some(AgentErrorKind::InvalidWorkspaceCwd));
}

#[test]
fn unknown_kinds_are_clear_errors_naming_the_supported_ones() {
    let s = AgentSettings {
        kind: "aider".into(),
        ..AgentSettings::default()
    };
    let e = adapter_for(&s).err();
    assert_eq!(
        e.as_ref().map(|e| e.kind),
        Some(AgentErrorKind::AgentNotFound)
    );
    assert_eq!(
        e.map(|e| e.message).as_deref(),
        Some(
            "agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)"
        )
    );
}

#[test]
fn stop_is_idempotent_and_a_stopped_session_runs_no_turn() {
    let env = Env::new("");
    let adapter = adapter_for(&env.settings()).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(params(env.ws()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(session.stop().is_ok());
    assert!(session.stop().is_ok());
    let (tx, rx) = unbounded();
    let r = session.run_turn("x", &tx, &CancelToken::new());
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::ResponseError));
    assert_eq!(
        drain(&rx).iter().filter(|e| e.kind.is_terminal()).count(),
        1
    );
    assert!(env.invocations().is_empty(), "no process may be spawned");
}
