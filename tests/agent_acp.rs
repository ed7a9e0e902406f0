//! The agent-client-protocol kind: its prompt-turn parser replayed with an injected clock, the
//! session on the fake ACP agent (`fake-agent` in its acp mode), the real binary over it, and
//! the real Gemini CLI offline: `initialize` lists its auth methods and sortie's outcome
//! without credentials is a clear, non-looping `agent_auth_failed`.

mod common;

use common::procs::processes_in;
use common::real_cli::real_cli;
use common::{Daemon, FAKE_AGENT, Setup, holds_within, wait_for};
use crossbeam_channel::unbounded;
use serde_json::{Value, json};
use sortie::agent::acp::handshake;
use sortie::agent::acp::parser::{AcpParser, PromptContext};
use sortie::agent::jsonrpc::{Dialect, Message, RpcPeer, RpcSpec};
use sortie::agent::stream::{StreamParser, TurnEnd};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentSession, AgentSettings, CancelReason, CancelToken,
    StartSessionParams, TokenUsage, TurnOutcome,
};
use sortie::clock::{Clock, ManualClock, SystemClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(40);

fn replay(
    lines: &[Value],
    first_turn: bool,
    reject: bool,
    end: &TurnEnd,
) -> (Vec<AgentEvent>, TurnOutcome, AcpParser, Vec<Value>) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut p = AcpParser::new(
        clock.clone() as Arc<dyn Clock>,
        PromptContext {
            session_id: "sess-1".into(),
            pid: Some(7),
            first_turn,
            workspace: PathBuf::from("/ws"),
            reject_permissions: reject,
            prompt_id: 3,
        },
    );
    let mut events = Vec::new();
    let mut replies = Vec::new();
    for l in lines {
        clock.advance(Duration::from_millis(5));
        events.extend(p.on_line(l.to_string().as_bytes()));
        for (_, r) in p.take_replies() {
            replies.push(r.unwrap_or_else(|e| json!({"error": e.message})));
        }
    }
    let (outcome, tail) = p.finish(end);
    events.extend(tail);
    (events, outcome, p, replies)
}

fn shown(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.kind {
            sortie::agent::AgentEventKind::ToolResult {
                tool_name,
                tool_kind,
                tool_argument,
                tool_error,
                ..
            } => {
                format!(
                    "tool_result {tool_name:?} {tool_kind:?} {tool_argument:?} error={tool_error}"
                )
            }
            sortie::agent::AgentEventKind::TokenUsage { usage, .. } => format!(
                "token_usage in={} out={} cache={}",
                usage.input_tokens, usage.output_tokens, usage.cache_read_tokens
            ),
            k => format!("{} {:?}", k.type_name(), k.message()),
        })
        .collect()
}

fn update(u: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1", "update": u}})
}

#[test]
fn a_prompt_turn_maps_updates_tools_permissions_and_usage() {
    let lines = [
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Look"}}),
        ),
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ing."}}),
        ),
        update(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run tests", "kind": "execute",
            "status": "pending", "rawInput": {"command": "bash -lc 'cargo test'"}}),
        ),
        json!({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"sessionId": "sess-1",
            "toolCall": {"toolCallId": "t1", "title": "Run tests"},
            "options": [{"optionId": "a1", "kind": "allow_once"}, {"optionId": "a2", "kind": "allow_always"}, {"optionId": "r1", "kind": "reject_once"}]}}),
        update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        ),
        update(json!({"sessionUpdate": "plan", "entries": []})),
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "All green."}}),
        ),
        json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn",
            "usage": {"inputTokens": 1200, "outputTokens": 80, "cachedReadTokens": 200, "totalTokens": 1280}}}),
    ];
    let (events, outcome, parser, replies) = replay(&lines, true, false, &TurnEnd::default());
    assert_eq!(
        shown(&events),
        [
            "session_started \"\"",
            "notification \"\"",
            "notification \"\"",
            "notification \"Looking.\"",
            "notification \"[tool: Run tests]\"",
            "notification \"permission a2 for Run tests\"",
            "tool_result Some(\"Run tests\") Some(Shell) Some(\"cargo test\") error=false",
            "notification \"plan updated\"",
            "notification \"\"",
            "notification \"All green.\"",
            "token_usage in=1200 out=80 cache=200",
            "turn_completed \"All green.\"",
        ]
    );
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            message: "All green.".into()
        }
    );
    assert_eq!(parser.usage(), Some(TokenUsage::new(1200, 80, 200, 0)));
    assert_eq!(
        replies,
        [json!({"outcome": {"outcome": "selected", "optionId": "a2"}})]
    );

    let (_, _, _, replies) = replay(&lines[3..4], false, true, &TurnEnd::default());
    assert_eq!(
        replies,
        [json!({"outcome": {"outcome": "selected", "optionId": "r1"}})]
    );
}

#[test]
fn stop_reasons_errors_and_a_dead_agent_decide_the_outcome() {
    let answer = |r: Value| vec![json!({"jsonrpc": "2.0", "id": 3, "result": r})];
    let end_cancel = TurnEnd {
        cancelled: Some(CancelReason::Stall),
        ..TurnEnd::default()
    };
    let (_, o, _, _) = replay(
        &answer(json!({"stopReason": "cancelled"})),
        false,
        false,
        &end_cancel,
    );
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    let (_, o, p, _) = replay(
        &answer(json!({"stopReason": "max_tokens"})),
        false,
        false,
        &TurnEnd::default(),
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::TurnFailed));
    assert_eq!(p.usage(), None, "no usage reported is unmeasured");
    let err = vec![
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "Authentication required"}}),
    ];
    let (_, o, _, _) = replay(&err, false, false, &TurnEnd::default());
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentAuthFailed));
    let (events, o, _, _) = replay(&[], true, false, &TurnEnd::default());
    assert_eq!(o.error_kind(), Some(AgentErrorKind::PortExit));
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
}

#[test]
fn the_recorded_gemini_answers_make_a_clear_auth_failure() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/real_gemini_offline.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let msgs: Vec<Message> = text.lines().map(|l| Message::parse(l.as_bytes())).collect();
    let Message::Response {
        result: Ok(init), ..
    } = &msgs[0]
    else {
        panic!("initialize")
    };
    let methods = handshake::auth_methods(init);
    assert_eq!(methods[0], "oauth-personal (Log in with Google)");
    assert_eq!(methods.len(), 4);
    let Message::Response { result: Err(e), .. } = &msgs[1] else {
        panic!("session/new")
    };
    let err = handshake::session_error("session/new", e, &methods);
    assert_eq!(err.kind, AgentErrorKind::AgentAuthFailed);
    assert!(
        err.message.contains("Gemini API key is missing"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("auth_method") && err.message.contains("gemini-api-key"),
        "{}",
        err.message
    );
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(script: &[Value]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        for d in ["ws", "state"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let text: Vec<String> = script.iter().map(Value::to_string).collect();
        std::fs::write(dir.path().join("scenario.jsonl"), text.join("\n") + "\n").unwrap();
        Env { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn command(&self) -> String {
        format!(
            "env FAKE_AGENT_KIND=acp FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} FAKE_AGENT_RPC_LOG={} {FAKE_AGENT} --acp",
            self.path("scenario.jsonl").display(),
            self.path("state").display(),
            self.path("rpc.log").display(),
        )
    }

    fn start(
        &self,
        block: Value,
        resume: Option<&str>,
    ) -> Result<Box<dyn AgentSession>, sortie::agent::AgentError> {
        let settings = AgentSettings {
            kind: "agent-client-protocol".into(),
            command: Some(self.command()),
            read_timeout_ms: 2000,
            block: block.as_object().cloned().unwrap_or_default(),
            ..AgentSettings::default()
        };
        sortie::registry::adapter_for_with_clock(&settings, Arc::new(SystemClock))
            .unwrap()
            .start_session(StartSessionParams {
                workspace: self.path("ws"),
                resume_session_id: resume.map(str::to_string),
                issue_id: "1".into(),
                issue_identifier: "A-1".into(),
                mcp_config_path: None,
                remote: None,
                attempt: None,
            })
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("rpc.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.records()
            .iter()
            .filter_map(|r| r["received"]["method"].as_str().map(str::to_string))
            .collect()
    }
}

fn turn(
    s: &mut dyn AgentSession,
    cancel: &CancelToken,
) -> (TurnOutcome, Vec<AgentEvent>, Option<TokenUsage>) {
    let (tx, rx) = unbounded();
    let r = s.run_turn("fix it", &tx, cancel);
    drop(tx);
    let events: Vec<AgentEvent> = rx.try_iter().collect();
    assert_eq!(
        events.iter().filter(|e| e.kind.is_terminal()).count(),
        1,
        "{events:?}"
    );
    (r.outcome, events, r.usage)
}

#[test]
fn turns_run_on_one_session_and_permission_requests_are_answered() {
    let env = Env::new(&[
        json!({"turn": 1, "message": "Working"}),
        json!({"turn": 1, "permission": {"title": "Write src/lib.rs"}}),
        json!({"turn": 1, "tool": {"title": "Edit src/lib.rs", "kind": "edit", "path": "src/lib.rs"}}),
        json!({"turn": 1, "usage": {"inputTokens": 500, "outputTokens": 40}}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    assert_eq!(s.session_id().as_deref(), Some("sess-fake-1"));
    let (o, e, u) = turn(s.as_mut(), &CancelToken::new());
    assert!(o.is_completed(), "{o:?}");
    assert_eq!(e[0].kind.type_name(), "session_started");
    assert_eq!(u, Some(TokenUsage::new(500, 40, 0, 0)));
    let (o2, e2, u2) = turn(s.as_mut(), &CancelToken::new());
    assert_eq!(
        o2,
        TurnOutcome::Completed {
            message: "Done.".into()
        }
    );
    assert_ne!(e2[0].kind.type_name(), "session_started");
    assert_eq!(u2, None);
    s.stop().unwrap();
    assert_eq!(
        env.methods(),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/prompt"
        ]
    );
    let recs = env.records();
    assert!(
        recs.iter()
            .filter_map(|r| r.get("received"))
            .all(|m| m["jsonrpc"] == "2.0")
    );
    let init = &recs[0]["received"]["params"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["clientCapabilities"]["terminal"], false);
    let reply = recs.iter().find(|r| r.get("reply_to").is_some()).unwrap();
    assert_eq!(
        reply["reply"]["result"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow-always"}})
    );
}

#[test]
fn a_later_dispatch_loads_the_session_or_starts_a_new_one() {
    let env = Env::new(&[json!({"session": 2, "config": {"load": "fail"}})]);
    let mut s = env.start(json!({}), Some("sess-old")).unwrap();
    assert_eq!(s.session_id().as_deref(), Some("sess-old"));
    let (o, e, _) = turn(s.as_mut(), &CancelToken::new());
    assert!(o.is_completed());
    assert!(
        !e.iter().any(|ev| ev.kind.message() == "earlier prompt"),
        "the replay is not this turn's"
    );
    s.stop().unwrap();
    let mut s = env.start(json!({}), Some("sess-old")).unwrap();
    assert_eq!(s.session_id().as_deref(), Some("sess-fake-2"));
    s.stop().unwrap();
    let m = env.methods();
    assert_eq!(m.iter().filter(|x| *x == "session/load").count(), 2);
    assert_eq!(m.last().map(String::as_str), Some("session/new"));
}

#[test]
fn an_agent_that_needs_a_login_fails_the_start_unless_a_method_is_chosen() {
    let env = Env::new(&[json!({"config": {"auth_required": true}})]);
    let err = env.start(json!({}), None).err().expect("auth required");
    assert_eq!(err.kind, AgentErrorKind::AgentAuthFailed);
    assert!(
        err.message.contains("fake-login (Fake login)"),
        "{}",
        err.message
    );
    let mut s = env
        .start(json!({"auth_method": "fake-api-key"}), None)
        .unwrap();
    s.stop().unwrap();
    let auth = env
        .records()
        .into_iter()
        .find(|r| r["received"]["method"] == "authenticate")
        .unwrap();
    assert_eq!(
        auth["received"]["params"],
        json!({"methodId": "fake-api-key"})
    );
}

#[test]
fn a_cancel_sends_session_cancel_and_stops_the_agent_with_its_group() {
    let env = Env::new(&[
        json!({"spawn_grandchild": true}),
        json!({"wait_cancel": true}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let ws = env.path("ws");
    let t = std::thread::spawn(move || {
        holds_within(Duration::from_secs(20), || processes_in(&ws).len() >= 2);
        c2.cancel(CancelReason::Reconcile);
    });
    let (o, _, _) = turn(s.as_mut(), &cancel);
    t.join().unwrap();
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Reconcile
        }
    );
    assert_eq!(
        env.methods()
            .iter()
            .filter(|m| *m == "session/cancel")
            .count(),
        1
    );
    assert!(holds_within(Duration::from_secs(10), || processes_in(
        &env.path("ws")
    )
    .is_empty()));
    s.stop().unwrap();
}

fn runs(d: &Daemon) -> Vec<Value> {
    d.get_ok("/api/v1/runs")
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|v| v["runs"].as_array().cloned())
        .unwrap_or_default()
}

fn acp_workflow(command: &str, block: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: agent-client-protocol\n  command: {command}\n  env: [FAKE_AGENT_*]\n  max_turns: 2\n  read_timeout_ms: 30000\n{block}---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

/// No retry: three polls after the failure start nothing more.
fn assert_no_retry(d: &Daemon, run: &Value) {
    let completed = run["completed_at"].as_str().unwrap_or_default().to_string();
    let mut polls = std::collections::BTreeSet::new();
    d.wait_until("three polls after the failure", WAIT, || {
        if let Some(s) = d.try_state()
            && let Some(at) = s["health"]["poll"]["checked_at"].as_str()
            && at > completed.as_str()
        {
            polls.insert(at.to_string());
        }
        polls.len() >= 3
    });
    assert_eq!(runs(d).len(), 1, "no retry loop");
}

#[test]
fn through_the_daemon_two_turns_count_their_tokens_and_a_login_failure_does_not_loop() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("scenario.jsonl");
    std::fs::write(
        &script,
        [
            json!({"session": 1, "turn": 1, "usage": {"inputTokens": 300, "outputTokens": 30, "cachedReadTokens": 100}}),
            json!({"session": 1, "turn": 2, "usage": {"inputTokens": 200, "outputTokens": 20}}),
            json!({"session": 2, "config": {"auth_required": true}}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n"),
    )
    .unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let setup = Setup::new(
        &acp_workflow(&format!("{FAKE_AGENT} --acp"), ""),
        &common::issues(&[("1", "A-1", "To Do")]),
    );
    let (script_s, state_s) = (script.display().to_string(), state.display().to_string());
    let d = setup.start(&[
        ("FAKE_AGENT_KIND", "acp"),
        ("FAKE_AGENT_SCENARIO", &script_s),
        ("FAKE_AGENT_STATE_DIR", &state_s),
    ]);
    let all = wait_for("two runs", WAIT, || {
        let r = runs(&d);
        (r.len() >= 2).then_some(r)
    });
    let first = all.iter().min_by_key(|r| r["run_id"].as_i64()).unwrap();
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["agent_kind"], "agent-client-protocol");
    assert_eq!(first["tokens"]["input_tokens"], 500, "{first}");
    assert_eq!(first["tokens"]["output_tokens"], 50, "{first}");
    assert_eq!(first["tokens"]["cache_read_tokens"], 100, "{first}");
    let second = all.iter().max_by_key(|r| r["run_id"].as_i64()).unwrap();
    assert_eq!(second["status"], "failed", "{second}");
    assert!(
        second["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not logged in"),
        "{second}"
    );
    let completed = second["completed_at"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut polls = std::collections::BTreeSet::new();
    d.wait_until("three polls after the failure", WAIT, || {
        if let Some(s) = d.try_state()
            && let Some(at) = s["health"]["poll"]["checked_at"].as_str()
            && at > completed.as_str()
        {
            polls.insert(at.to_string());
        }
        polls.len() >= 3
    });
    assert_eq!(runs(&d).len(), 2, "no retry after the login failure");
}

/// An empty home without any Gemini credential variables.
fn gemini_env(dir: &Path) -> Vec<(String, String)> {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    vec![("HOME".into(), home.display().to_string())]
}

fn gemini_credentials_set() -> bool {
    let set = std::env::vars().any(|(k, _)| {
        k == "GEMINI_API_KEY" || k == "GOOGLE_API_KEY" || k == "GOOGLE_GENAI_USE_VERTEXAI"
    });
    if set {
        eprintln!("skipped: Gemini credentials are set in the test environment");
    }
    set
}

#[test]
fn the_real_gemini_answers_initialize_with_its_auth_methods() {
    let Some(gemini) = real_cli("gemini") else {
        return;
    };
    if gemini_credentials_set() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let spec = RpcSpec {
        base_env: None,
        program: gemini.display().to_string(),
        args: vec!["--experimental-acp".into()],
        cwd: ws.clone(),
        env: gemini_env(dir.path()),
        max_line_bytes: 10 << 20,
        remote: None,
        sandbox: None,
    };
    let mut peer = RpcPeer::spawn(&spec, Dialect::V2).unwrap();
    let t = Duration::from_secs(60);
    let init = peer
        .request(
            "initialize",
            handshake::initialize_params(),
            t,
            &mut |_, _| Ok(json!({})),
        )
        .unwrap_or_else(|e| panic!("initialize: {e}; stderr: {}", peer.child().stderr_text()));
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert!(!handshake::auth_methods(&init).is_empty(), "{init}");
    let new = peer.request(
        "session/new",
        json!({"cwd": ws.display().to_string(), "mcpServers": []}),
        t,
        &mut |_, _| Ok(json!({})),
    );
    match new {
        Err(sortie::agent::jsonrpc::RpcFailure::Error(e)) => {
            let err = handshake::session_error("session/new", &e, &handshake::auth_methods(&init));
            assert_eq!(err.kind, AgentErrorKind::AgentAuthFailed, "{e}");
        }
        other => panic!("session/new without credentials: {other:?}"),
    }
    peer.stop(Duration::from_secs(5), None);
}

#[test]
fn sortie_with_the_real_gemini_and_no_credentials_fails_clearly_once() {
    let Some(gemini) = real_cli("gemini") else {
        return;
    };
    if gemini_credentials_set() {
        return;
    }
    let setup = Setup::new(
        &acp_workflow(&format!("{} --experimental-acp", gemini.display()), ""),
        &common::issues(&[("1", "A-1", "To Do")]),
    );
    let env = gemini_env(setup.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let d = setup.start(&env);
    let run = wait_for("the failed run", Duration::from_secs(90), || {
        runs(&d).into_iter().next()
    });
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("not logged in") && error.contains("auth_method"),
        "{run}"
    );
    assert_no_retry(&d, &run);
}

/// `sortie validate --format json` with the agent's program on PATH (the fake stands in).
fn validate_with(dir: &Path, program: &str, workflow: &str) -> Value {
    std::fs::write(dir.join("WORKFLOW.md"), workflow).unwrap();
    std::fs::write(dir.join("issues.json"), "[]").unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if !bin.join(program).exists() {
        std::os::unix::fs::symlink(FAKE_AGENT, bin.join(program)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = common::sortie_command()
        .current_dir(dir)
        .env("PATH", path)
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn the_example_and_the_original_acp_front_matter_validate_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/agent-client-protocol/WORKFLOW.md"
    ))
    .unwrap();
    let v = validate_with(dir.path(), "gemini", &example);
    assert_eq!(v["errors"], json!([]), "{v}");
    assert_eq!(v["warnings"], json!([]), "{v}");

    // The original project's two ACP examples, their tracker swapped for the file tracker.
    for (program, command) in [
        ("gemini", "gemini --acp --skip-trust --approval-mode yolo"),
        ("kiro-cli", "kiro-cli acp -a"),
    ] {
        let original = format!(
            "---\ntracker:\n  kind: file\n  active_states: [backlog, in-progress]\n  in_progress_state: in-progress\n  handoff_state: review\n  terminal_states: [done, wontfix]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 120000\nworkspace:\n  root: ./ws\nagent:\n  kind: agent-client-protocol\n  command: {command}\n  env: [FAKE_AGENT_*]\n  max_turns: 15\n  max_concurrent_agents: 4\n  turn_timeout_ms: 1800000\n  stall_timeout_ms: 300000\n  stop_grace_ms: 5000\n  max_retry_backoff_ms: 300000\nserver:\n  port: 8642\n---\nWork on {{{{ .issue.identifier }}}}.\n"
        );
        let v = validate_with(dir.path(), program, &original);
        assert_eq!(v["errors"], json!([]), "{v}");
        let warnings = v["warnings"].as_array().cloned().unwrap_or_default();
        assert!(!warnings.iter().any(|w| w["check"] == "unknown_key"), "{v}");
    }
}
