//! Codex app-server parser: every recorded transcript in `tests/fixtures/codex/` replays, with
//! an injected clock, to an exact event sequence and token total; the handshake answers decide
//! the account and thread steps; usage, rate limits, usage limits and server requests follow
//! the adapter's rules.

use serde_json::{Value, json};
use sortie::agent::codex::handshake::{self, AccountNext};
use sortie::agent::codex::parser::{Approval, CodexParser, SessionCarry, TurnContext};
use sortie::agent::jsonrpc::Message;
use sortie::agent::stream::{StreamParser, TurnEnd};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentEventKind, CancelReason, RateLimitStatus, TokenUsage,
    TurnOutcome,
};
use sortie::clock::{Clock, ManualClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const THREAD: &str = "thr-1";

fn fixture(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codex")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn parser_with(
    first_turn: bool,
    approval: Approval,
    carry: SessionCarry,
) -> (CodexParser, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let p = CodexParser::new(
        clock.clone() as Arc<dyn Clock>,
        TurnContext {
            thread_id: THREAD.into(),
            pid: Some(4242),
            first_turn,
            workspace: PathBuf::from("/ws"),
            approval,
        },
        carry,
    );
    (p, clock)
}

struct Replay {
    events: Vec<AgentEvent>,
    outcome: TurnOutcome,
    parser: CodexParser,
    replies: Vec<(Value, Result<Value, String>)>,
}

/// Feeds the lines 10 ms apart, then ends the turn as `end` says.
fn replay_lines(lines: &[String], first_turn: bool, end: &TurnEnd) -> Replay {
    replay_with(
        lines,
        first_turn,
        Approval::AcceptForSession,
        SessionCarry::default(),
        end,
    )
}

fn replay_with(
    lines: &[String],
    first_turn: bool,
    approval: Approval,
    carry: SessionCarry,
    end: &TurnEnd,
) -> Replay {
    let (mut p, clock) = parser_with(first_turn, approval, carry);
    let mut events = Vec::new();
    let mut replies = Vec::new();
    for l in lines {
        clock.advance(Duration::from_millis(10));
        events.extend(p.on_line(l.as_bytes()));
        for (id, r) in p.take_replies() {
            replies.push((id, r.map_err(|e| e.message)));
        }
    }
    let (outcome, tail) = p.finish(end);
    events.extend(tail);
    Replay {
        events,
        outcome,
        parser: p,
        replies,
    }
}

/// One line per event: type, message, and the members a test cares about.
fn show(ev: &AgentEvent) -> String {
    let t = ev.kind.type_name();
    match &ev.kind {
        AgentEventKind::SessionStarted {
            session_id,
            agent_pid,
        } => format!("{t} {session_id} {agent_pid:?}"),
        AgentEventKind::TokenUsage { usage, model, .. } => format!(
            "{t} in={} out={} cache={} total={} model={model:?}",
            usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.total_tokens
        ),
        AgentEventKind::ToolResult {
            tool_name,
            tool_kind,
            tool_argument,
            duration_ms,
            tool_error,
            message,
        } => format!(
            "{t} {tool_name:?} {tool_kind:?} {tool_argument:?} {duration_ms:?} error={tool_error} {message:?}"
        ),
        AgentEventKind::UnsupportedToolCall { tool_name, message } => {
            format!("{t} {tool_name} {message:?}")
        }
        AgentEventKind::RateLimits { windows } => format!(
            "{t} {}",
            windows
                .iter()
                .map(|w| format!("{}={:?}@{:?}", w.label, w.used_percent, w.resets_at_ms))
                .collect::<Vec<_>>()
                .join(",")
        ),
        k => format!("{t} {:?}", k.message()),
    }
}

fn shown(r: &Replay) -> Vec<String> {
    r.events.iter().map(show).collect()
}

fn usage(i: u64, o: u64, c: u64) -> Option<TokenUsage> {
    Some(TokenUsage::new(i, o, c, 0))
}

fn terminals(r: &Replay) -> usize {
    r.events.iter().filter(|e| e.kind.is_terminal()).count()
}

#[test]
fn runturn_success_announces_the_thread_and_counts_cached_input_inside_input() {
    let r = replay_lines(&fixture("runturn_success.jsonl"), true, &TurnEnd::default());
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "token_usage in=100 out=50 cache=10 total=150 model=None",
            "turn_completed \"\"",
        ]
    );
    assert_eq!(
        r.outcome,
        TurnOutcome::Completed {
            message: String::new()
        }
    );
    assert_eq!(r.parser.usage(), usage(100, 50, 10));
    assert_eq!(r.parser.turn_id(), Some("turn-001"));
}

#[test]
fn runturn_agent_message_is_a_notification_and_the_completion_text() {
    let r = replay_lines(
        &fixture("runturn_agent_message.jsonl"),
        true,
        &TurnEnd::default(),
    );
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "notification \"Here is my analysis of the code.\"",
            "token_usage in=50 out=20 cache=0 total=70 model=None",
            "turn_completed \"Here is my analysis of the code.\"",
        ]
    );
    assert_eq!(r.parser.usage(), usage(50, 20, 0));
}

#[test]
fn runturn_items_turn_a_command_into_a_timed_shell_tool_result() {
    let r = replay_lines(&fixture("runturn_items.jsonl"), true, &TurnEnd::default());
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "notification \"[commandExecution] item-001\"",
            "tool_result Some(\"ls -la\") Some(Shell) Some(\"ls -la\") Some(10) error=false \"\"",
            "token_usage in=80 out=20 cache=0 total=100 model=None",
            "turn_completed \"\"",
        ]
    );
    assert_eq!(r.parser.usage(), usage(80, 20, 0));
}

#[test]
fn runturn_misc_notifications_are_heartbeats_other_messages_and_no_usage() {
    let r = replay_lines(
        &fixture("runturn_misc_notifications.jsonl"),
        true,
        &TurnEnd::default(),
    );
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "other_message \"some/unknown/method\"",
            "notification \"plan updated\"",
            "notification \"\"",
            "notification \"\"",
            "turn_completed \"\"",
        ]
    );
    assert_eq!(
        r.parser.usage(),
        None,
        "an empty usage object is unmeasured, not zero"
    );
}

#[test]
fn failed_turns_carry_the_error_info_and_fail_the_turn() {
    for name in ["runturn_failed.jsonl", "turn_completed_failed.jsonl"] {
        let r = replay_lines(&fixture(name), true, &TurnEnd::default());
        assert_eq!(
            shown(&r),
            [
                "session_started thr-1 Some(4242)",
                "token_usage in=200000 out=0 cache=0 total=200000 model=None",
                "turn_failed \"ContextWindowExceeded: Context window exceeded\"",
            ],
            "{name}"
        );
        assert_eq!(
            r.outcome.error_kind(),
            Some(AgentErrorKind::TurnFailed),
            "{name}"
        );
        assert_eq!(r.parser.usage(), usage(200_000, 0, 0));
    }
}

#[test]
fn turn_completed_success_keeps_the_agent_message() {
    let r = replay_lines(
        &fixture("turn_completed_success.jsonl"),
        true,
        &TurnEnd::default(),
    );
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "notification \"\"",
            "notification \"Task completed successfully.\"",
            "token_usage in=100 out=50 cache=10 total=150 model=None",
            "turn_completed \"Task completed successfully.\"",
        ]
    );
    assert_eq!(r.parser.turn_id(), Some("turn-001"));
}

#[test]
fn an_interrupted_later_turn_is_cancelled_with_the_reason_sortie_gave() {
    let end = TurnEnd {
        cancelled: Some(CancelReason::Stall),
        ..TurnEnd::default()
    };
    let r = replay_lines(&fixture("turn_interrupted.jsonl"), false, &end);
    assert_eq!(
        shown(&r),
        [
            "notification \"turn started\"",
            "token_usage in=30 out=10 cache=0 total=40 model=None",
            "turn_cancelled \"turn cancelled: stall\"",
        ]
    );
    assert_eq!(
        r.outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    assert_eq!(r.parser.usage(), usage(30, 10, 0));
}

#[test]
fn tool_calls_of_unknown_tools_are_refused_and_reported() {
    for (name, id, u) in [
        ("runturn_tool_call.jsonl", 99, (60, 30)),
        ("turn_with_tool_call.jsonl", 42, (50, 25)),
    ] {
        let r = replay_lines(&fixture(name), true, &TurnEnd::default());
        let text = "tool create_issue is not provided by this orchestrator";
        assert_eq!(
            shown(&r),
            [
                "session_started thr-1 Some(4242)".to_string(),
                format!("unsupported_tool_call create_issue {text:?}"),
                format!(
                    "token_usage in={} out={} cache=0 total={} model=None",
                    u.0,
                    u.1,
                    u.0 + u.1
                ),
                "turn_completed \"\"".to_string(),
            ],
            "{name}"
        );
        assert_eq!(
            r.replies,
            [(
                json!(id),
                Ok(json!({"success": false, "output": text,
                    "contentItems": [{"type": "inputText", "text": text}]}))
            )],
            "{name}"
        );
    }
}

#[test]
fn handshake_fixtures_decide_the_account_and_thread_steps() {
    let result = |line: &str| match Message::parse(line.as_bytes()) {
        Message::Response { result: Ok(v), .. } => v,
        other => panic!("not a result: {other:?}"),
    };
    let init = fixture("initialize_response.jsonl");
    assert_eq!(result(&init[0])["serverInfo"]["name"], "codex-app-server");

    let logged_in = result(&fixture("account_read_logged_in.jsonl")[0]);
    assert_eq!(
        handshake::account_next(&logged_in, None),
        Ok(AccountNext::Ready)
    );

    let flow = fixture("account_login_flow.jsonl");
    assert_eq!(
        handshake::account_next(&result(&flow[0]), Some("sk-test")),
        Ok(AccountNext::Login("sk-test".into()))
    );
    assert_eq!(result(&flow[1])["success"], true);
    assert!(matches!(
        Message::parse(flow[2].as_bytes()),
        Message::Notification { method, params }
            if method == "account/login/completed" && params["success"] == true
    ));

    let start = fixture("thread_start_response.jsonl");
    assert_eq!(
        handshake::thread_id(&result(&start[0])).as_deref(),
        Some("thread-abc-123")
    );
}

#[test]
fn the_real_offline_handshake_ends_in_a_clear_auth_failure() {
    let lines = fixture("real_offline_handshake.jsonl");
    let msgs: Vec<Message> = lines.iter().map(|l| Message::parse(l.as_bytes())).collect();
    let methods: Vec<String> = msgs
        .iter()
        .map(|m| match m {
            Message::Notification { method, .. } => method.clone(),
            Message::Response { id, .. } => format!("response {id}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        methods,
        [
            "response 1",
            "configWarning",
            "remoteControl/status/changed",
            "response 2",
            "response 3",
            "thread/started",
        ]
    );
    let Message::Response {
        result: Ok(account),
        ..
    } = &msgs[3]
    else {
        panic!("account/read answer");
    };
    let err = handshake::account_next(account, None).expect_err("no account, no key");
    assert_eq!(err.kind, AgentErrorKind::AgentAuthFailed);
    assert!(err.message.contains("codex login"), "{}", err.message);
    assert!(err.message.contains("CODEX_API_KEY"), "{}", err.message);
    assert_eq!(
        handshake::account_next(account, Some("sk-x")),
        Ok(AccountNext::Login("sk-x".into()))
    );
    let Message::Response {
        result: Ok(thread), ..
    } = &msgs[4]
    else {
        panic!("thread/start answer");
    };
    assert_eq!(
        handshake::thread_id(thread).as_deref(),
        Some("01a22f8d-ce5b-7841-b5a9-778e4ea2f581")
    );
    assert_eq!(handshake::model(thread).as_deref(), Some("gpt-6.1-sol"));
}

fn lines(v: &[Value]) -> Vec<String> {
    v.iter().map(Value::to_string).collect()
}

fn token_update(total: (u64, u64, u64), last: (u64, u64, u64)) -> Value {
    let b = |t: (u64, u64, u64)| json!({"inputTokens": t.0, "cachedInputTokens": t.1, "outputTokens": t.2, "totalTokens": t.0 + t.2});
    json!({"method": "thread/tokenUsage/updated", "params": {"threadId": THREAD,
        "tokenUsage": {"total": b(total), "last": b(last)}}})
}

#[test]
fn thread_usage_reports_become_deltas_and_the_turn_figure_only_adds_the_remainder() {
    // A resumed thread: its first total includes earlier sessions, so only `last` counts.
    let msgs = lines(&[
        json!({"method": "turn/started", "params": {"turn": {"id": "t1"}}}),
        token_update((5000, 100, 900), (300, 100, 40)),
        token_update((5500, 150, 960), (500, 50, 60)),
        json!({"method": "turn/completed", "params": {"turn": {"id": "t1", "status": "completed"},
            "usage": {"input_tokens": 900, "output_tokens": 110, "cached_input_tokens": 150}}}),
    ]);
    let carry = SessionCarry {
        model: Some("gpt-test".into()),
        ..SessionCarry::default()
    };
    let r = replay_with(
        &msgs,
        true,
        Approval::AcceptForSession,
        carry,
        &TurnEnd::default(),
    );
    assert_eq!(
        shown(&r),
        [
            "session_started thr-1 Some(4242)",
            "token_usage in=300 out=40 cache=100 total=340 model=Some(\"gpt-test\")",
            "token_usage in=500 out=60 cache=50 total=560 model=Some(\"gpt-test\")",
            "token_usage in=100 out=10 cache=0 total=110 model=Some(\"gpt-test\")",
            "turn_completed \"\"",
        ]
    );
    assert_eq!(r.parser.usage(), usage(900, 110, 150));
    assert_eq!(
        r.parser.carry().thread_total,
        usage(5500, 960, 150),
        "the next turn diffs against this total"
    );
}

#[test]
fn rate_limit_reports_are_windows_and_a_usage_limit_waits_for_the_reset() {
    let msgs = lines(&[
        json!({"method": "account/rateLimits/updated", "params": {"rateLimits": {
            "primary": {"usedPercent": 100.0, "windowDurationMins": 300, "resetsAt": 1_700_003_600},
            "secondary": {"usedPercent": 35.5, "windowDurationMins": 10080, "resetsAt": 1_700_500_000}}}}),
        json!({"method": "turn/completed", "params": {"turn": {"id": "t1", "status": "failed",
            "error": {"message": "You've hit your usage limit.", "codexErrorInfo": "UsageLimitExceeded"}}}}),
    ]);
    let carry = SessionCarry {
        model: Some("gpt-test".into()),
        ..SessionCarry::default()
    };
    let r = replay_with(
        &msgs,
        false,
        Approval::AcceptForSession,
        carry,
        &TurnEnd::default(),
    );
    assert_eq!(
        shown(&r),
        [
            "rate_limits 5-hour limit=Some(100.0)@Some(1700003600000),Weekly limit=Some(35.5)@Some(1700500000000)",
            "turn_failed \"UsageLimitExceeded: You've hit your usage limit.\"",
        ]
    );
    assert_eq!(
        r.outcome,
        TurnOutcome::UsageLimited {
            message: "UsageLimitExceeded: You've hit your usage limit.".into(),
            resets_at_ms: Some(1_700_003_600_000),
            model: Some("gpt-test".into()),
        }
    );
    let w = &r.parser.carry().rate_limits;
    assert_eq!(w[0].status, Some(RateLimitStatus::Exhausted));
    assert_eq!(w[1].window_ms, Some(10_080 * 60_000));

    // Without a report the reset is unknown; an object-shaped error info reads the same.
    let msgs = lines(&[
        json!({"method": "turn/completed", "params": {"turn": {"id": "t1",
        "status": "failed", "error": {"message": "limit", "codexErrorInfo": {"usageLimitExceeded": {}}}}}}),
    ]);
    let r = replay_lines(&msgs, false, &TurnEnd::default());
    assert!(matches!(
        r.outcome,
        TurnOutcome::UsageLimited {
            resets_at_ms: None,
            ..
        }
    ));
}

#[test]
fn unauthorized_and_bad_request_are_response_errors() {
    for info in ["Unauthorized", "BadRequest"] {
        let msgs = lines(&[
            json!({"method": "turn/completed", "params": {"turn": {"id": "t",
            "status": "failed", "error": {"message": "nope", "codexErrorInfo": info}}}}),
        ]);
        let r = replay_lines(&msgs, false, &TurnEnd::default());
        assert_eq!(
            r.outcome.error_kind(),
            Some(AgentErrorKind::ResponseError),
            "{info}"
        );
    }
}

#[test]
fn approvals_are_answered_by_policy_and_user_input_ends_the_turn() {
    let msgs = lines(&[
        json!({"id": 7, "method": "item/commandExecution/requestApproval", "params": {"command": "rm -rf build"}}),
        json!({"id": 8, "method": "item/fileChange/requestApproval", "params": {}}),
    ]);
    let accept = replay_with(
        &msgs,
        false,
        Approval::AcceptForSession,
        SessionCarry::default(),
        &TurnEnd::default(),
    );
    assert_eq!(
        accept.replies,
        [
            (json!(7), Ok(json!({"decision": "acceptForSession"}))),
            (json!(8), Ok(json!({"decision": "acceptForSession"}))),
        ]
    );
    assert_eq!(
        shown(&accept)[0],
        "notification \"approval acceptForSession for item/commandExecution/requestApproval: rm -rf build\""
    );
    let decline = replay_with(
        &msgs,
        false,
        Approval::Decline,
        SessionCarry::default(),
        &TurnEnd::default(),
    );
    assert_eq!(decline.replies[0].1, Ok(json!({"decision": "decline"})));

    let msgs = lines(&[
        json!({"id": 9, "method": "item/tool/requestUserInput", "params": {"questions": []}}),
    ]);
    let (mut p, _) = parser_with(false, Approval::AcceptForSession, SessionCarry::default());
    p.on_line(msgs[0].as_bytes());
    assert!(p.is_done() && p.needs_interrupt());
    let replies = p.take_replies();
    assert_eq!(
        replies.len(),
        1,
        "the request is answered, never left hanging"
    );
    assert!(replies[0].1.is_err());
    let (outcome, tail) = p.finish(&TurnEnd::default());
    assert_eq!(
        outcome.error_kind(),
        Some(AgentErrorKind::TurnInputRequired)
    );
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0].kind.type_name(), "turn_input_required");
}

#[test]
fn a_stream_that_ends_mid_turn_is_port_exit_with_the_last_stderr_line() {
    let msgs = lines(&[json!({"method": "turn/started", "params": {"turn": {"id": "t1"}}})]);
    let (mut p, _) = parser_with(true, Approval::AcceptForSession, SessionCarry::default());
    for l in &msgs {
        p.on_line(l.as_bytes());
    }
    p.set_exit_hint(Some("thread 'main' panicked at 'boom'".into()));
    let (outcome, _) = p.finish(&TurnEnd::default());
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "the agent server exited mid-turn: thread 'main' panicked at 'boom'".into(),
            kind: AgentErrorKind::PortExit,
        }
    );

    let end = TurnEnd {
        read_error: Some("line exceeds the 1048576-byte limit".into()),
        ..TurnEnd::default()
    };
    let r = replay_lines(&msgs, true, &end);
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::PortExit));
    assert!(r.outcome.message().contains("1048576-byte"));
    assert_eq!(terminals(&r), 1);
}

#[test]
fn a_turn_start_error_fails_the_turn_and_malformed_lines_never_end_it() {
    let msgs = vec![
        "this is not json".to_string(),
        json!({"id": 1, "error": {"code": -32600, "message": "thread not found"}}).to_string(),
    ];
    let r = replay_lines(&msgs, true, &TurnEnd::default());
    assert_eq!(
        shown(&r),
        [
            "malformed \"this is not json\"",
            "turn_failed \"turn/start failed: thread not found (code -32600)\"",
        ]
    );
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::TurnFailed));
}

#[test]
fn file_changes_are_edits_with_workspace_relative_paths() {
    let msgs = lines(&[
        json!({"method": "item/started", "params": {"item": {"id": "fc1", "type": "fileChange",
            "changes": [{"path": "/ws/src/a.rs"}, {"path": "/elsewhere/b.rs"}]}}}),
        json!({"method": "item/completed", "params": {"item": {"id": "fc1", "type": "fileChange", "status": "failed"}}}),
    ]);
    let r = replay_lines(&msgs, false, &TurnEnd::default());
    assert_eq!(
        shown(&r)[1],
        "tool_result Some(\"fileChange\") Some(Edit) Some(\"src/a.rs, /elsewhere/b.rs\") Some(10) error=true \"failed\""
    );
}

#[test]
fn a_late_thread_started_from_the_handshake_adds_no_event() {
    let msgs = lines(&[
        json!({"method": "thread/started", "params": {"thread": {"id": THREAD}}}),
        json!({"method": "turn/started", "params": {"turn": {"id": "t1"}}}),
    ]);
    let r = replay_lines(&msgs, true, &TurnEnd::default());
    assert_eq!(shown(&r)[0], "session_started thr-1 Some(4242)");
}
