//! OpenCode stream parser, argv and managed environment: every recorded fixture replays to an
//! exact event sequence and token total (injected clock), the export cross-check and fallback,
//! every arm of the outcome order, and the command line and environment of each turn.

use serde_json::{Map, Value, json};
use sortie::agent::opencode::argv::{export_args, managed_env, permission_json, run_args};
use sortie::agent::opencode::parser::{OpencodeParser, SessionContext};
use sortie::agent::stream::{ExitInfo, SpawnError, StreamParser, TurnEnd};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentEventKind, AgentSettings, CancelReason, TokenUsage,
    TurnOutcome,
};
use sortie::clock::{Clock, ManualClock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const T0: i64 = 1_700_000_000_000;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/opencode")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn new_session() -> SessionContext {
    SessionContext::default()
}

fn continued(id: &str) -> SessionContext {
    SessionContext {
        expected: Some(id.into()),
        announced: true,
    }
}

fn parser(ctx: SessionContext) -> OpencodeParser {
    let clock = Arc::new(ManualClock::new(T0));
    let mut p = OpencodeParser::new(
        clock as Arc<dyn Clock>,
        PathBuf::from("/home/ubuntu/work/sortie"),
        ctx,
    );
    p.on_spawn(4242);
    p
}

fn exit(code: i32) -> TurnEnd {
    TurnEnd {
        exit: Some(ExitInfo {
            code: Some(code),
            signal: None,
        }),
        ..TurnEnd::default()
    }
}

fn feed(p: &mut OpencodeParser, text: &str) -> Vec<AgentEvent> {
    text.lines().flat_map(|l| p.on_line(l.as_bytes())).collect()
}

fn run(
    mut p: OpencodeParser,
    text: &str,
    end: &TurnEnd,
) -> (Vec<String>, TurnOutcome, OpencodeParser) {
    let mut events = feed(&mut p, text);
    let (outcome, tail) = p.finish(end);
    events.extend(tail);
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    assert!(events.last().is_some_and(|e| e.kind.is_terminal()));
    assert!(events.iter().all(|e| e.at_ms == T0));
    (events.iter().map(describe).collect(), outcome, p)
}

fn describe(ev: &AgentEvent) -> String {
    match &ev.kind {
        AgentEventKind::SessionStarted {
            session_id,
            agent_pid,
        } => format!("session_started {session_id} pid={agent_pid:?}"),
        AgentEventKind::TokenUsage {
            usage,
            model,
            api_duration_ms,
        } => format!(
            "token_usage in={} out={} total={} cr={} cw={} model={} api={:?}",
            usage.input_tokens,
            usage.output_tokens,
            usage.total_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            model.as_deref().unwrap_or("-"),
            api_duration_ms
        ),
        AgentEventKind::ToolResult {
            tool_name,
            tool_kind,
            tool_argument,
            duration_ms,
            tool_error,
            message,
        } => format!(
            "tool_result {} {tool_kind:?} {tool_argument:?} dur={duration_ms:?} err={tool_error} msg={message:?}",
            tool_name.as_deref().unwrap_or("-"),
        ),
        other => format!("{} {:?}", other.type_name(), other.message()),
    }
}

#[test]
fn simple_turn_replays_with_cache_reads_in_input() {
    let (events, outcome, p) = run(
        parser(new_session()),
        &fixture("simple_turn.jsonl"),
        &exit(0),
    );
    assert_eq!(
        events,
        [
            "session_started ses_abc123 pid=Some(4242)",
            "notification \"step started\"",
            "notification \"Hello, world!\"",
            "notification \"step finished: stop\"",
            "token_usage in=16246 out=21 total=16267 cr=1840 cw=0 model=- api=Some(67)",
            "turn_completed \"Hello, world!\"",
        ]
    );
    assert!(outcome.is_completed());
    assert_eq!(p.session_id().as_deref(), Some("ses_abc123"));
    // OpenCode's own total (16267) is input + output + cache.read + cache.write.
    assert_eq!(p.usage(), Some(TokenUsage::new(16246, 21, 1840, 0)));
    assert!(p.announced());
}

#[test]
fn tool_success_reports_the_read_with_its_duration() {
    let (events, outcome, p) = run(
        parser(new_session()),
        &fixture("tool_success.jsonl"),
        &exit(0),
    );
    assert_eq!(
        events,
        [
            "session_started ses_abc123 pid=Some(4242)",
            "notification \"step started\"",
            "tool_result read Some(Read) Some(\"README.md\") dur=Some(13) err=false msg=\"\"",
            "notification \"step finished: stop\"",
            "token_usage in=800 out=200 total=1000 cr=0 cw=0 model=- api=Some(600)",
            "turn_completed \"\"",
        ]
    );
    assert!(outcome.is_completed());
    assert_eq!(p.usage(), Some(TokenUsage::new(800, 200, 0, 0)));
}

#[test]
fn resume_turn_continues_without_a_second_session_start() {
    let (events, outcome, p) = run(
        parser(continued("ses_abc123")),
        &fixture("resume_turn.jsonl"),
        &exit(0),
    );
    assert_eq!(
        events,
        [
            "notification \"step started\"",
            "notification \"Resuming work.\"",
            "notification \"step finished: stop\"",
            "token_usage in=700 out=100 total=800 cr=0 cw=0 model=- api=Some(200)",
            "turn_completed \"Resuming work.\"",
        ]
    );
    assert!(outcome.is_completed());
    assert_eq!(p.session_id().as_deref(), Some("ses_abc123"));
}

#[test]
fn a_resumed_session_is_announced_once_when_first_confirmed() {
    let ctx = SessionContext {
        expected: Some("ses_abc123".into()),
        announced: false,
    };
    let (events, _, p) = run(parser(ctx), &fixture("resume_turn.jsonl"), &exit(0));
    assert_eq!(events[0], "session_started ses_abc123 pid=Some(4242)");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("session_started"))
            .count(),
        1
    );
    assert!(p.announced());
}

#[test]
fn a_different_session_id_ends_the_turn_with_a_response_error() {
    let (events, outcome, p) = run(
        parser(continued("ses_mine")),
        &fixture("resume_turn.jsonl"),
        &exit(0),
    );
    assert!(!events.iter().any(|e| e.starts_with("session_started")));
    assert_eq!(outcome.error_kind(), Some(AgentErrorKind::ResponseError));
    assert!(matches!(outcome, TurnOutcome::EndedWithError { .. }));
    assert!(outcome.message().contains("ses_abc123") && outcome.message().contains("ses_mine"));
    assert_eq!(
        events.last().map(String::as_str),
        Some(format!("turn_ended_with_error {:?}", outcome.message()).as_str())
    );
    assert_eq!(p.session_id().as_deref(), Some("ses_mine"));
    assert_eq!(p.mismatched_session(), Some("ses_abc123"));
}

#[test]
fn an_auth_error_with_exit_zero_fails_the_turn_as_agent_auth_failed() {
    let (events, outcome, _) = run(
        parser(new_session()),
        &fixture("logical_failure_exit0.jsonl"),
        &exit(0),
    );
    let msg = outcome.message();
    assert_eq!(
        events,
        [
            "session_started ses_fail123 pid=Some(4242)".to_string(),
            "notification \"step started\"".to_string(),
            format!("turn_failed {msg:?}"),
        ]
    );
    assert!(matches!(
        outcome,
        TurnOutcome::Failed {
            kind: AgentErrorKind::AgentAuthFailed,
            ..
        }
    ));
    assert!(msg.contains("ProviderAuthError: invalid api key"), "{msg}");
    assert!(msg.contains("opencode auth login"), "{msg}");
}

#[test]
fn other_error_lines_fail_the_turn_even_with_exit_zero() {
    let line = r#"{"type":"error","sessionID":"s1","error":{"name":"APIError","data":{"message":"overloaded"}}}
{"type":"error","sessionID":"s1","error":{"name":"UnknownError"}}"#;
    let (_, outcome, _) = run(parser(new_session()), line, &exit(0));
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "APIError: overloaded; UnknownError".into(),
            kind: AgentErrorKind::TurnFailed
        }
    );
}

#[test]
fn an_unknown_type_is_malformed_and_never_ends_the_turn() {
    let (events, outcome, _) = run(
        parser(new_session()),
        &fixture("malformed_event.jsonl"),
        &exit(0),
    );
    assert_eq!(
        events,
        [
            "session_started ses_abc123 pid=Some(4242)",
            "notification \"step started\"",
            "malformed \"{\\\"type\\\":\\\"unknown_future_type\\\",\\\"data\\\":\\\"something\\\"}\"",
            "turn_completed \"\"",
        ]
    );
    assert!(outcome.is_completed());
}

#[test]
fn a_permission_warning_is_a_notification_and_the_rejected_tool_an_error() {
    let (events, outcome, p) = run(
        parser(new_session()),
        &fixture("permission_warning_then_error.txt"),
        &exit(0),
    );
    assert_eq!(
        events,
        [
            "notification \"! permission requested: bash; auto-rejecting\"",
            "session_started ses_abc123 pid=Some(4242)",
            "tool_result bash Some(Shell) None dur=Some(1) err=true msg=\"The user rejected permission to use this specific tool call.\"",
            "turn_completed \"\"",
        ]
    );
    assert!(outcome.is_completed());
    assert_eq!(
        p.usage(),
        None,
        "no tokens were reported: unmeasured, not zero"
    );
}

#[test]
fn plain_text_is_malformed_and_bad_payloads_too() {
    let mut p = parser(new_session());
    let evs: Vec<String> = feed(
        &mut p,
        "Error: something odd\n[1, 2]\n{\"type\":\"text\"}\n{not json",
    )
    .iter()
    .map(describe)
    .collect();
    assert_eq!(
        evs,
        [
            "malformed \"Error: something odd\"",
            "malformed \"[1, 2]\"",
            "malformed \"{\\\"type\\\":\\\"text\\\"}\"",
            "malformed \"{not json\"",
        ]
    );
}

#[test]
fn reasoning_and_long_text_are_shaped() {
    let long = "é".repeat(700);
    let text = format!(
        "{}\n{}",
        json!({"type":"reasoning","sessionID":"s","part":{"type":"reasoning","text":"hmm"}}),
        json!({"type":"text","sessionID":"s","part":{"type":"text","text": long}})
    );
    let mut p = parser(new_session());
    let evs = feed(&mut p, &text);
    assert_eq!(describe(&evs[1]), "other_message \"reasoning block\"");
    let AgentEventKind::Notification { message } = &evs[2].kind else {
        panic!("{:?}", evs[2]);
    };
    assert_eq!(message.chars().count(), 501);
    assert!(message.ends_with('…'));
}

#[test]
fn step_tokens_sum_live_as_deltas_with_reasoning_and_cache_writes() {
    let step = |input: u64, reasoning: u64, write: u64| {
        json!({"type":"step_finish","sessionID":"s","part":{"type":"step-finish","reason":"tool-calls",
            "providerID":"anthropic","modelID":"claude-sonnet-4-5",
            "tokens":{"input":input,"output":10,"reasoning":reasoning,"cache":{"read":5,"write":write}}}})
        .to_string()
    };
    let text = format!(
        "{}\n{}\n{}",
        step(100, 0, 7),
        step(50, 3, 0),
        json!({"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"input":0,"output":0}}})
    );
    let (events, _, p) = run(parser(new_session()), &text, &exit(0));
    let usage: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("token_usage"))
        .collect();
    assert_eq!(
        usage,
        [
            "token_usage in=112 out=10 total=122 cr=5 cw=7 model=anthropic/claude-sonnet-4-5 api=None",
            "token_usage in=55 out=13 total=68 cr=5 cw=0 model=anthropic/claude-sonnet-4-5 api=None",
        ],
        "a zero step sends no figure"
    );
    assert_eq!(p.usage(), Some(TokenUsage::new(167, 23, 10, 7)));
    assert_eq!(p.model().as_deref(), Some("anthropic/claude-sonnet-4-5"));
}

type Calls = Arc<Mutex<Vec<String>>>;

fn with_export(ctx: SessionContext, doc: Result<String, String>) -> (OpencodeParser, Calls) {
    let calls: Calls = Arc::default();
    let seen = Arc::clone(&calls);
    let p = parser(ctx).with_export(Box::new(move |sid: &str| {
        seen.lock().unwrap().push(sid.to_string());
        doc.clone()
            .map_err(|m| sortie::agent::AgentError::new(AgentErrorKind::ResponseError, m))
    }));
    (p, calls)
}

#[test]
fn the_export_stands_in_when_the_stream_had_no_tokens() {
    let (p, calls) = with_export(new_session(), Ok(fixture("export_usage.json")));
    let stream = "{\"type\":\"step_start\",\"sessionID\":\"ses_abc123\",\"part\":{}}";
    let (events, outcome, p) = run(p, stream, &exit(0));
    assert_eq!(
        events[2..],
        [
            "token_usage in=1750 out=300 total=2050 cr=200 cw=50 model=anthropic/claude-sonnet-4-5 api=None",
            "turn_completed \"\"",
        ]
    );
    assert!(outcome.is_completed());
    assert_eq!(*calls.lock().unwrap(), ["ses_abc123"]);
    assert!(p.usage_from_export());
    assert_eq!(p.usage(), Some(TokenUsage::new(1750, 300, 200, 50)));
    assert_eq!(p.model().as_deref(), Some("anthropic/claude-sonnet-4-5"));
}

#[test]
fn the_live_sum_wins_over_a_disagreeing_export() {
    let (p, calls) = with_export(new_session(), Ok(fixture("export_usage.json")));
    let (events, _, p) = run(p, &fixture("simple_turn.jsonl"), &exit(0));
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("token_usage"))
            .count(),
        1
    );
    assert_eq!(calls.lock().unwrap().len(), 1);
    assert!(!p.usage_from_export());
    assert_eq!(p.usage(), Some(TokenUsage::new(16246, 21, 1840, 0)));
    // The model the stream never named comes from the export.
    assert_eq!(p.model().as_deref(), Some("anthropic/claude-sonnet-4-5"));
}

#[test]
fn an_export_without_tokens_or_that_fails_leaves_the_turn_unmeasured() {
    for doc in [
        Ok(fixture("export_usage_missing_tokens.json")),
        Err("timed out".to_string()),
        Ok("garbage".into()),
    ] {
        let (p, _) = with_export(new_session(), doc);
        let (events, outcome, p) = run(p, &fixture("permission_warning_then_error.txt"), &exit(0));
        assert!(!events.iter().any(|e| e.starts_with("token_usage")));
        assert!(outcome.is_completed());
        assert_eq!(p.usage(), None);
    }
}

#[test]
fn no_export_after_a_cancel_or_without_a_session() {
    let counter = Arc::new(AtomicUsize::new(0));
    for (stream, end) in [
        (
            fixture("simple_turn.jsonl"),
            TurnEnd {
                cancelled: Some(CancelReason::Stall),
                ..exit(0)
            },
        ),
        (String::new(), exit(0)),
    ] {
        let c = Arc::clone(&counter);
        let p = parser(new_session()).with_export(Box::new(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(String::new())
        }));
        run(p, &stream, &end);
    }
    assert_eq!(counter.load(Ordering::SeqCst), 0);
}

#[test]
fn the_outcome_order() {
    let stream = fixture("simple_turn.jsonl");
    let error = fixture("logical_failure_exit0.jsonl");
    let outcome = |ctx: SessionContext, text: &str, end: TurnEnd| run(parser(ctx), text, &end).1;

    let o = outcome(
        new_session(),
        "",
        TurnEnd {
            first_line_timeout: Some(Duration::from_millis(3000)),
            exit: Some(ExitInfo {
                code: None,
                signal: Some(15),
            }),
            ..TurnEnd::default()
        },
    );
    assert!(
        matches!(
            o,
            TurnOutcome::EndedWithError {
                kind: AgentErrorKind::ResponseTimeout,
                ..
            }
        ),
        "{o:?}"
    );
    assert!(
        o.message().contains("no JSON within 3000 ms") && o.message().contains("no network"),
        "{}",
        o.message()
    );

    let o = outcome(
        new_session(),
        "",
        TurnEnd {
            spawn_error: Some(SpawnError::NotFound("opencode".into())),
            ..TurnEnd::default()
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentNotFound));

    // An error line wins over a cancel and a non-zero exit.
    let o = outcome(
        new_session(),
        &error,
        TurnEnd {
            cancelled: Some(CancelReason::Stall),
            ..exit(1)
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentAuthFailed));

    let o = outcome(
        new_session(),
        &stream,
        TurnEnd {
            cancelled: Some(CancelReason::Stall),
            ..exit(0)
        },
    );
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );

    let o = outcome(
        new_session(),
        &stream,
        TurnEnd {
            read_error: Some("line exceeds the 10485760-byte limit".into()),
            ..exit(0)
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::PortExit));
    assert!(
        o.message().starts_with("stdout read error"),
        "{}",
        o.message()
    );

    let o = outcome(new_session(), "", exit(127));
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentNotFound));

    let o = outcome(new_session(), "Error: Session not found", exit(1));
    assert_eq!(
        o,
        TurnOutcome::EndedWithError {
            message: "opencode exited with code 1 before printing any JSON".into(),
            kind: AgentErrorKind::PortExit
        }
    );

    let o = outcome(new_session(), &stream, exit(3));
    assert_eq!(
        o,
        TurnOutcome::EndedWithError {
            message: "opencode exited with code 3".into(),
            kind: AgentErrorKind::PortExit
        }
    );

    let o = outcome(new_session(), &stream, exit(0));
    assert!(o.is_completed());
}

#[test]
fn only_a_json_line_ends_the_startup_wait() {
    let mut p = parser(new_session());
    assert!(!p.started());
    feed(&mut p, "! loading plugins");
    assert!(!p.started());
    feed(&mut p, &fixture("simple_turn.jsonl"));
    assert!(p.started());
}

fn block(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn argv_turn_one_and_turn_two() {
    let ws = Path::new("/ws/ABC-1");
    assert_eq!(
        run_args(ws, None, &Map::new(), Some("fix it")),
        strings(&[
            "run",
            "--format",
            "json",
            "--dir",
            "/ws/ABC-1",
            "--dangerously-skip-permissions",
            "--",
            "fix it"
        ])
    );
    assert_eq!(
        run_args(ws, Some("ses_1"), &Map::new(), Some("-continue")),
        strings(&[
            "run",
            "--format",
            "json",
            "--dir",
            "/ws/ABC-1",
            "--session",
            "ses_1",
            "--dangerously-skip-permissions",
            "--",
            "-continue"
        ])
    );
    assert_eq!(
        export_args("ses_1"),
        strings(&["export", "--sanitize", "ses_1"])
    );
}

#[test]
fn argv_every_passthrough_key() {
    let b = block(json!({
        "model": "anthropic/claude-sonnet-4-6", "agent": "build", "variant": "high",
        "thinking": true, "pure": true, "dangerously_skip_permissions": false,
        "disable_autocompact": false, "allowed_tools": ["read"]
    }));
    assert_eq!(
        run_args(Path::new("/ws"), Some("ses_2"), &b, None),
        strings(&[
            "run",
            "--format",
            "json",
            "--dir",
            "/ws",
            "--session",
            "ses_2",
            "--model",
            "anthropic/claude-sonnet-4-6",
            "--agent",
            "build",
            "--variant",
            "high",
            "--thinking",
            "--pure"
        ]),
        "a prompt sent on stdin leaves no message in argv"
    );
    let off = block(
        json!({"thinking": false, "pure": false, "dangerously_skip_permissions": true, "model": " "}),
    );
    assert_eq!(
        run_args(Path::new("/ws"), None, &off, Some("go")),
        strings(&[
            "run",
            "--format",
            "json",
            "--dir",
            "/ws",
            "--dangerously-skip-permissions",
            "--",
            "go"
        ])
    );
}

fn env_of(b: Value) -> Vec<(String, String)> {
    managed_env(&block(b)).unwrap()
}

#[test]
fn managed_env_defaults_and_autocompact() {
    let base = |autocompact: &str| {
        vec![
            ("OPENCODE_AUTO_SHARE".to_string(), "false".to_string()),
            (
                "OPENCODE_DISABLE_AUTOCOMPACT".to_string(),
                autocompact.to_string(),
            ),
            (
                "OPENCODE_DISABLE_AUTOUPDATE".to_string(),
                "true".to_string(),
            ),
            (
                "OPENCODE_DISABLE_LSP_DOWNLOAD".to_string(),
                "true".to_string(),
            ),
        ]
    };
    assert_eq!(env_of(json!({})), base("true"));
    assert_eq!(env_of(json!({"disable_autocompact": false})), base("false"));
}

#[test]
fn permission_scoping_json() {
    let allowed = env_of(json!({"allowed_tools": ["read", "glob", "grep", "edit", "bash"]}));
    assert_eq!(
        allowed.last(),
        Some(&(
            "OPENCODE_PERMISSION".to_string(),
            r#"{"bash":"allow","codesearch":"deny","doom_loop":"deny","edit":"allow","external_directory":"deny","glob":"allow","grep":"allow","list":"deny","lsp":"deny","question":"deny","read":"allow","skill":"deny","task":"deny","todowrite":"deny","webfetch":"deny","websearch":"deny"}"#.to_string()
        ))
    );
    assert_eq!(
        permission_json(&block(json!({"denied_tools": "webfetch, websearch"}))),
        Ok(Some(
            r#"{"webfetch":"deny","websearch":"deny"}"#.to_string()
        ))
    );
    assert_eq!(
        permission_json(&block(
            json!({"allowed_tools": ["read", "mcp_docs"], "denied_tools": ["bash"]})
        ))
        .map(|j| j.map(|s| serde_json::from_str::<Value>(&s).unwrap())),
        Ok(Some(
            json!({"bash":"deny","codesearch":"deny","doom_loop":"deny","edit":"deny","external_directory":"deny","glob":"deny","grep":"deny","list":"deny","lsp":"deny","mcp_docs":"allow","question":"deny","read":"allow","skill":"deny","task":"deny","todowrite":"deny","webfetch":"deny","websearch":"deny"})
        ))
    );
    assert_eq!(permission_json(&Map::new()), Ok(None));
    assert!(
        !env_of(json!({"allowed_tools": []}))
            .iter()
            .any(|(k, _)| k == "OPENCODE_PERMISSION")
    );
    let overlap = permission_json(&block(
        json!({"allowed_tools": ["read", "bash"], "denied_tools": ["bash"]}),
    ));
    assert_eq!(
        overlap.map_err(|p| p.message),
        Err("opencode.allowed_tools and opencode.denied_tools both name bash".into())
    );
}

fn settings(b: Value) -> AgentSettings {
    AgentSettings {
        kind: "opencode".into(),
        block: block(b),
        ..AgentSettings::default()
    }
}

#[test]
fn validate_checks_types_and_overlap_and_build_refuses_an_overlap() {
    let d = sortie::registry::agent("opencode").expect("opencode is registered");
    assert!((d.validate)(&settings(json!({
        "model": "anthropic/claude-sonnet-4-6", "dangerously_skip_permissions": true,
        "disable_autocompact": true, "allowed_tools": ["read", "bash"], "denied_tools": ["webfetch"]
    }))).is_empty());
    let problems = (d.validate)(&settings(json!({
        "model": 3, "thinking": "yes", "allowed_tools": {"read": true}, "denied_tools": ["bash", 1]
    })));
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "opencode.model",
            "opencode.thinking",
            "opencode.allowed_tools",
            "opencode.denied_tools"
        ]
    );
    let overlap = settings(json!({"allowed_tools": ["bash"], "denied_tools": ["bash"]}));
    let problems = (d.validate)(&overlap);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].message.contains("both name bash"));
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(T0));
    assert!((d.build)(&overlap, clock).is_err());
    for key in [
        "model",
        "agent",
        "variant",
        "thinking",
        "pure",
        "dangerously_skip_permissions",
        "disable_autocompact",
        "allowed_tools",
        "denied_tools",
    ] {
        assert!(d.block_keys.contains(&key), "{key}");
    }
}
