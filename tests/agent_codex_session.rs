//! The JSON-RPC session supervisor and the codex adapter on it, driven against the fake
//! `codex app-server` (`fake-agent` in its codex mode): the handshake, turns on one thread,
//! resume and its fallback, usage limits, approvals, cancellation that leaves no process of the
//! group behind, a server that dies or floods mid-turn.

mod common;

use common::procs::processes_in;
use common::{FAKE_AGENT, holds_within};
use crossbeam_channel::unbounded;
use serde_json::{Value, json};
use sortie::agent::jsonrpc::{Dialect, Message, Recv, RpcPeer, RpcSpec};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentSession, AgentSettings, CancelReason, CancelToken,
    StartSessionParams, TokenUsage, TurnOutcome,
};
use sortie::clock::SystemClock;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(script: &[Value]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        let text: Vec<String> = script.iter().map(Value::to_string).collect();
        std::fs::write(dir.path().join("scenario.jsonl"), text.join("\n") + "\n").unwrap();
        Env { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn ws(&self) -> PathBuf {
        self.path("ws")
    }

    /// The fake's settings travel in the command (`env K=V … fake-agent`), so no test touches
    /// this process's environment.
    fn command(&self) -> String {
        format!(
            "env FAKE_AGENT_KIND=codex FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} FAKE_AGENT_RPC_LOG={} FAKE_AGENT_ARGV_LOG={} {FAKE_AGENT} app-server",
            self.path("scenario.jsonl").display(),
            self.path("state").display(),
            self.path("rpc.log").display(),
            self.path("argv.log").display(),
        )
    }

    fn settings(&self, block: Value) -> AgentSettings {
        AgentSettings {
            kind: "codex".into(),
            command: Some(self.command()),
            read_timeout_ms: 2000,
            block: block.as_object().cloned().unwrap_or_default(),
            workflow_dir: self.dir.path().to_path_buf(),
            ..AgentSettings::default()
        }
    }

    fn start(
        &self,
        block: Value,
        resume: Option<&str>,
    ) -> Result<Box<dyn AgentSession>, sortie::agent::AgentError> {
        let adapter =
            sortie::registry::adapter_for_with_clock(&self.settings(block), Arc::new(SystemClock))
                .unwrap();
        adapter.start_session(StartSessionParams {
            workspace: self.ws(),
            resume_session_id: resume.map(str::to_string),
            issue_id: "1".into(),
            issue_identifier: "A-1".into(),
            mcp_config_path: None,
            remote: None,
            attempt: None,
        })
    }

    /// Every message the fake received, in order.
    fn received(&self) -> Vec<Value> {
        self.log_records()
            .into_iter()
            .filter_map(|r| r.get("received").cloned())
            .collect()
    }

    fn log_records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("rpc.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_string))
            .collect()
    }
}

fn turn(
    session: &mut dyn AgentSession,
    cancel: &CancelToken,
) -> (TurnOutcome, Vec<AgentEvent>, Option<TokenUsage>) {
    let (tx, rx) = unbounded();
    let r = session.run_turn("do the work", &tx, cancel);
    drop(tx);
    let events: Vec<AgentEvent> = rx.try_iter().collect();
    assert_eq!(
        events.iter().filter(|e| e.kind.is_terminal()).count(),
        1,
        "exactly one terminal event: {events:?}"
    );
    (r.outcome, events, r.usage)
}

fn types(events: &[AgentEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

#[test]
fn two_turns_run_on_one_thread_with_the_sandbox_policy_on_the_first() {
    let env = Env::new(&[
        json!({"turn": 1, "started": true}),
        json!({"turn": 1, "token_usage": {"input": 300, "cached": 100, "output": 30}}),
        json!({"turn": 1, "message": "first done"}),
        json!({"turn": 1, "complete": {"status": "completed"}}),
        json!({"turn": 2, "started": true}),
        json!({"turn": 2, "token_usage": {"input": 200, "cached": 0, "output": 20}}),
    ]);
    let mut s = env
        .start(json!({"model": "o3", "effort": "medium", "approval_policy": "never", "thread_sandbox": "workspaceWrite"}), None)
        .unwrap();
    assert_eq!(s.session_id().as_deref(), Some("thr-fake-1"));
    let cancel = CancelToken::new();
    let (o1, e1, u1) = turn(s.as_mut(), &cancel);
    assert_eq!(
        o1,
        TurnOutcome::Completed {
            message: "first done".into()
        }
    );
    assert_eq!(
        types(&e1),
        [
            "session_started",
            "token_usage",
            "notification",
            "notification",
            "turn_completed"
        ]
    );
    assert_eq!(u1, Some(TokenUsage::new(300, 30, 100, 0)));
    let (o2, e2, u2) = turn(s.as_mut(), &cancel);
    assert!(o2.is_completed());
    assert_eq!(
        types(&e2)[0],
        "notification",
        "only the first turn starts the session"
    );
    assert_eq!(u2, Some(TokenUsage::new(200, 20, 0, 0)));
    s.stop().unwrap();
    s.stop().unwrap();

    assert_eq!(
        env.methods(),
        [
            "initialize",
            "initialized",
            "account/read",
            "thread/start",
            "turn/start",
            "turn/start"
        ]
    );
    let got = env.received();
    assert!(
        got.iter().all(|m| m.get("jsonrpc").is_none()),
        "codex speaks no jsonrpc member"
    );
    let ids: Vec<u64> = got.iter().filter_map(|m| m["id"].as_u64()).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    assert_eq!(
        got[0]["params"]["clientInfo"]["name"],
        "sortie_orchestrator"
    );
    assert_eq!(got[0]["params"]["capabilities"]["experimentalApi"], true);
    assert_eq!(got[2]["params"], json!({"refreshToken": false}));
    let ws = std::fs::canonicalize(env.ws())
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        got[3]["params"],
        json!({"cwd": ws, "approvalPolicy": "never", "sandbox": "workspace-write", "model": "o3"})
    );
    let t1 = &got[4]["params"];
    assert_eq!(t1["threadId"], "thr-fake-1");
    assert_eq!(
        t1["input"],
        json!([{"type": "text", "text": "do the work"}])
    );
    assert_eq!(t1["effort"], "medium");
    assert_eq!(
        t1["sandboxPolicy"],
        json!({"type": "workspaceWrite", "writableRoots": [ws], "networkAccess": false})
    );
    assert!(got[5]["params"].get("sandboxPolicy").is_none());
    assert!(
        processes_in(&env.ws()).is_empty(),
        "stop leaves nothing running"
    );
}

#[test]
fn resume_continues_the_thread_and_falls_back_to_a_new_one() {
    let env = Env::new(&[json!({"session": 2, "config": {"resume": "fail"}})]);
    let mut s = env.start(json!({}), Some("thr-old")).unwrap();
    assert_eq!(s.session_id().as_deref(), Some("thr-old"));
    s.stop().unwrap();
    let mut s = env.start(json!({}), Some("thr-old")).unwrap();
    assert_eq!(
        s.session_id().as_deref(),
        Some("thr-fake-2"),
        "a new thread after the failed resume"
    );
    s.stop().unwrap();
    let m = env.methods();
    assert_eq!(
        m.iter().filter(|x| *x == "thread/resume").count(),
        2,
        "{m:?}"
    );
    assert_eq!(m.last().map(String::as_str), Some("thread/start"));
}

#[test]
fn not_logged_in_fails_the_start_with_agent_auth_failed() {
    let env = Env::new(&[json!({"config": {"account": null, "requires_openai_auth": true}})]);
    if std::env::var_os("CODEX_API_KEY").is_some() {
        eprintln!("skipped: CODEX_API_KEY is set in the test environment");
        return;
    }
    let err = env
        .start(json!({}), None)
        .err()
        .expect("no account, no key");
    assert_eq!(err.kind, AgentErrorKind::AgentAuthFailed);
    assert!(err.message.contains("codex login") && err.message.contains("CODEX_API_KEY"));
    assert!(holds_within(Duration::from_secs(10), || processes_in(
        &env.ws()
    )
    .is_empty()));
}

#[test]
fn a_usage_limit_ends_the_turn_usage_limited_at_the_reported_reset() {
    let env = Env::new(&[
        json!({"started": true}),
        json!({"rate_limits": {"primary": {"usedPercent": 100.0, "windowDurationMins": 300, "resetsAt": 1_900_000_000}}}),
        json!({"usage_limit": "You've hit your usage limit."}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    let (o, e, _) = turn(s.as_mut(), &CancelToken::new());
    assert_eq!(
        o,
        TurnOutcome::UsageLimited {
            message: "UsageLimitExceeded: You've hit your usage limit.".into(),
            resets_at_ms: Some(1_900_000_000_000),
            model: Some("fake-codex-model".into()),
        }
    );
    assert_eq!(types(&e), ["session_started", "rate_limits", "turn_failed"]);
    s.stop().unwrap();
}

#[test]
fn approval_requests_are_answered_and_the_fake_records_the_decision() {
    let env = Env::new(&[
        json!({"started": true}),
        json!({"request": {"method": "item/commandExecution/requestApproval", "params": {"command": "make"}}}),
        json!({"request": {"method": "item/tool/call", "params": {"tool": "lookup", "arguments": {}}}}),
    ]);
    let mut s = env
        .start(json!({"approval_policy": "untrusted"}), None)
        .unwrap();
    let (o, e, _) = turn(s.as_mut(), &CancelToken::new());
    assert!(o.is_completed(), "{o:?}");
    assert!(types(&e).contains(&"unsupported_tool_call"));
    s.stop().unwrap();
    let replies: Vec<(String, Value)> = env
        .log_records()
        .into_iter()
        .filter_map(|r| {
            Some((
                r["reply_to"].as_str()?.to_string(),
                r["reply"]["result"].clone(),
            ))
        })
        .collect();
    assert_eq!(
        replies[0],
        (
            "item/commandExecution/requestApproval".into(),
            json!({"decision": "decline"})
        )
    );
    assert_eq!(replies[1].0, "item/tool/call");
    assert_eq!(replies[1].1["success"], false);
}

#[test]
fn a_cancel_interrupts_the_turn_once_and_then_stops_the_server() {
    let env = Env::new(&[json!({"started": true}), json!({"wait_interrupt": true})]);
    let mut s = env.start(json!({}), None).unwrap();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        c2.cancel(CancelReason::Stall);
    });
    let (o, e, _) = turn(s.as_mut(), &cancel);
    t.join().unwrap();
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    assert_eq!(types(&e).last(), Some(&"turn_cancelled"));
    assert_eq!(
        env.methods()
            .iter()
            .filter(|m| *m == "turn/interrupt")
            .count(),
        1
    );
    assert!(holds_within(Duration::from_secs(10), || processes_in(
        &env.ws()
    )
    .is_empty()));
    s.stop().unwrap();
}

#[test]
fn a_hung_server_is_killed_with_its_whole_group_after_the_read_timeout() {
    let env = Env::new(&[
        json!({"started": true}),
        json!({"spawn_grandchild": true}),
        json!({"ignore_sigterm": true}),
        json!({"hang": true}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let ws = env.ws();
    let t = std::thread::spawn(move || {
        // Cancel once the grandchild is up, so it is part of what must go.
        holds_within(Duration::from_secs(20), || processes_in(&ws).len() >= 2);
        c2.cancel(CancelReason::Stall);
    });
    let started = Instant::now();
    let (o, _, _) = turn(s.as_mut(), &cancel);
    t.join().unwrap();
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        holds_within(Duration::from_secs(10), || processes_in(&env.ws())
            .is_empty()),
        "left: {:?}",
        processes_in(&env.ws())
    );
    s.stop().unwrap();
}

#[test]
fn a_server_that_dies_mid_turn_is_port_exit_with_its_last_stderr_line() {
    let env = Env::new(&[
        json!({"started": true}),
        json!({"stderr": "fatal: the model backend went away"}),
        json!({"exit": 3}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    let (o, _, _) = turn(s.as_mut(), &CancelToken::new());
    assert_eq!(o.error_kind(), Some(AgentErrorKind::PortExit));
    assert!(
        o.message().contains("fatal: the model backend went away"),
        "{o:?}"
    );
    let (again, _, _) = turn(s.as_mut(), &CancelToken::new());
    assert_eq!(
        again.error_kind(),
        Some(AgentErrorKind::ResponseError),
        "no server left"
    );
    s.stop().unwrap();
}

#[test]
fn a_line_over_one_mebibyte_fails_the_turn() {
    let env = Env::new(&[
        json!({"started": true}),
        json!({"big_line_bytes": 1_100_000}),
        json!({"hang": true}),
    ]);
    let mut s = env.start(json!({}), None).unwrap();
    let (o, _, _) = turn(s.as_mut(), &CancelToken::new());
    assert_eq!(o.error_kind(), Some(AgentErrorKind::PortExit));
    assert!(o.message().contains("1048576"), "{o:?}");
    assert!(holds_within(Duration::from_secs(10), || processes_in(
        &env.ws()
    )
    .is_empty()));
    s.stop().unwrap();
}

#[test]
fn a_handshake_crash_is_a_response_error_naming_the_stderr() {
    let env = Env::new(&[json!({"config": {"crash_on": "thread/start"}})]);
    let err = env.start(json!({}), None).err().expect("crash");
    assert_eq!(err.kind, AgentErrorKind::ResponseError);
    assert!(
        err.message.contains("crashing on thread/start"),
        "{}",
        err.message
    );
}

fn peer(env: &Env) -> RpcPeer {
    let spec = RpcSpec {
        base_env: None,
        program: FAKE_AGENT.into(),
        args: vec!["app-server".into()],
        cwd: env.ws(),
        env: vec![
            ("FAKE_AGENT_KIND".into(), "codex".into()),
            (
                "FAKE_AGENT_SCENARIO".into(),
                env.path("scenario.jsonl").display().to_string(),
            ),
            (
                "FAKE_AGENT_RPC_LOG".into(),
                env.path("rpc.log").display().to_string(),
            ),
        ],
        max_line_bytes: 1 << 20,
        remote: None,
        sandbox: None,
    };
    RpcPeer::spawn(&spec, Dialect::V2).unwrap()
}

#[test]
fn the_peer_buffers_notifications_around_responses_and_answers_server_requests() {
    let env =
        Env::new(&[json!({"config": {"warn": "careful", "ask_on_initialize": "item/tool/call"}})]);
    let mut p = peer(&env);
    let mut asked = Vec::new();
    let r = p
        .request(
            "initialize",
            json!({}),
            Duration::from_secs(10),
            &mut |m, _| {
                asked.push(m.to_string());
                Ok(json!({"handled": true}))
            },
        )
        .unwrap();
    assert_eq!(r["userAgent"], "fake-codex/0.0.0");
    assert_eq!(asked, ["item/tool/call"]);
    // The notification sent before the response is delivered afterwards, in order.
    match p.recv(Some(Instant::now() + Duration::from_secs(5)), None) {
        Recv::Message(Message::Notification { method, params }) => {
            assert_eq!(method, "configWarning");
            assert_eq!(params["summary"], "careful");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        p.recv(Some(Instant::now() + Duration::from_millis(100)), None),
        Recv::TimedOut
    );
    let r = p
        .request(
            "account/read",
            json!({}),
            Duration::from_secs(10),
            &mut |_, _| Ok(json!({})),
        )
        .unwrap();
    assert!(r.get("account").is_some());
    p.stop(Duration::from_secs(5), None);
    let got = env.received();
    assert!(
        got.iter().all(|m| m["jsonrpc"] == "2.0"),
        "the 2.0 dialect marks every message"
    );
    assert_eq!(got[0]["id"], 1);
    assert_eq!(
        got[1]["result"],
        json!({"handled": true}),
        "the server request was answered"
    );
    assert_eq!(got[2]["id"], 2);
}

#[test]
fn the_read_timeout_bounds_a_request() {
    let env = Env::new(&[]);
    let spec_cmd = Path::new("/bin/sleep");
    let spec = RpcSpec {
        base_env: None,
        program: spec_cmd.display().to_string(),
        args: vec!["30".into()],
        cwd: env.ws(),
        env: Vec::new(),
        max_line_bytes: 1024,
        remote: None,
        sandbox: None,
    };
    let mut p = RpcPeer::spawn(&spec, Dialect::Bare).unwrap();
    let started = Instant::now();
    let r = p.request(
        "initialize",
        json!({}),
        Duration::from_millis(300),
        &mut |_, _| Ok(json!({})),
    );
    assert_eq!(r, Err(sortie::agent::jsonrpc::RpcFailure::Timeout));
    assert!(started.elapsed() >= Duration::from_millis(300));
    let exit = p.stop(Duration::from_secs(5), None);
    assert!(exit.is_some());
}
