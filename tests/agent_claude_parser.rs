//! Claude Code stream parser: every recorded fixture replays to an exact event sequence,
//! token accounting follows the API semantics, and each arm of the turn-end decision tree
//! yields exactly one terminal event.

use sortie::agent::claude::parser::ClaudeParser;
use sortie::agent::stream::{ExitInfo, SpawnError, StreamParser, TurnEnd};
use sortie::agent::{
    AgentErrorKind, AgentEvent, AgentEventKind, CancelReason, RateLimitStatus, TokenUsage,
    TurnOutcome,
};
use sortie::clock::{Clock, ManualClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MODEL: &str = "claude-sonnet-4-20250514";

fn fixture_lines(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if name.ends_with(".json") {
        // One pretty-printed object: the CLI writes it as one compact line.
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        vec![v.to_string()]
    } else {
        text.lines().map(str::to_string).collect()
    }
}

fn parser() -> (ClaudeParser, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let p = ClaudeParser::new(
        clock.clone() as Arc<dyn Clock>,
        PathBuf::from("/workspace"),
        Some("launch-id".into()),
    );
    (p, clock)
}

fn exit0() -> TurnEnd {
    TurnEnd {
        exit: Some(ExitInfo {
            code: Some(0),
            signal: None,
        }),
        ..TurnEnd::default()
    }
}

/// Replays lines and a clean exit; returns every event and the outcome.
fn replay(lines: &[String], end: &TurnEnd) -> (Vec<AgentEvent>, TurnOutcome, ClaudeParser) {
    let (mut p, _clock) = parser();
    let mut events = Vec::new();
    for l in lines {
        events.extend(p.on_line(l.as_bytes()));
    }
    let (outcome, tail) = p.finish(end);
    events.extend(tail);
    (events, outcome, p)
}

fn describe(ev: &AgentEvent) -> String {
    match &ev.kind {
        AgentEventKind::SessionStarted { session_id, .. } => {
            format!("session_started {session_id}")
        }
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
            "tool_result {} {:?} {:?} dur={:?} err={tool_error} msg={message:?}",
            tool_name.as_deref().unwrap_or("-"),
            tool_kind,
            tool_argument,
            duration_ms
        ),
        AgentEventKind::TurnCompleted {
            message,
            api_duration_ms,
        }
        | AgentEventKind::TurnFailed {
            message,
            api_duration_ms,
        } => {
            format!(
                "{} {message:?} api={api_duration_ms:?}",
                ev.kind.type_name()
            )
        }
        AgentEventKind::VendorAmount {
            unit,
            model,
            amount,
        } => format!("vendor_amount {unit} {amount} model={model:?}"),
        other => format!("{} {:?}", other.type_name(), other.message()),
    }
}

fn assert_sequence(name: &str, expected: &[&str]) -> (TurnOutcome, ClaudeParser) {
    let (events, outcome, p) = replay(&fixture_lines(name), &exit0());
    let got: Vec<String> = events.iter().map(describe).collect();
    assert_eq!(got, expected, "{name}");
    assert_eq!(
        events.iter().filter(|e| e.kind.is_terminal()).count(),
        1,
        "{name}"
    );
    assert!(
        events.last().is_some_and(|e| e.kind.is_terminal()),
        "{name}"
    );
    (outcome, p)
}

#[test]
fn init_event_starts_the_session() {
    let (outcome, p) = assert_sequence(
        "init_event.json",
        &[
            "session_started abc12345-def6-4789-abcd-ef0123456789",
            "turn_failed \"agent exited without output\" api=None",
        ],
    );
    assert_eq!(
        p.session_id().as_deref(),
        Some("abc12345-def6-4789-abcd-ef0123456789")
    );
    assert!(matches!(
        outcome,
        TurnOutcome::Failed {
            kind: AgentErrorKind::TurnFailed,
            ..
        }
    ));
    assert_eq!(
        p.usage(),
        None,
        "a turn that sent no figure is unmeasured, not zero"
    );
}

#[test]
fn api_retry_is_a_notification() {
    assert_sequence(
        "api_retry_event.json",
        &[
            "notification \"api retry 1/5: rate_limit (status 429), retrying in 1000 ms\"",
            "turn_failed \"agent exited without output\" api=None",
        ],
    );
}

#[test]
fn assistant_message_usage_includes_cache_terms() {
    let (outcome, p) = assert_sequence(
        "assistant_message.json",
        &[
            "token_usage in=22000 out=350 total=22350 cr=8000 cw=1500 model=claude-sonnet-4-20250514 api=None",
            "notification \"I'll analyze the codebase and implement the requested changes. [tool: Read]\"",
            "turn_failed \"agent exited 0 without a result line\" api=None",
        ],
    );
    assert!(!outcome.is_completed());
    assert_eq!(p.model().as_deref(), Some(MODEL));
}

#[test]
fn old_layout_tool_result_in_the_same_message() {
    assert_sequence(
        "tool_use_message.json",
        &[
            "token_usage in=14000 out=200 total=14200 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result Bash Some(Shell) Some(\"go test ./...\") dur=None err=false msg=\"\"",
            "notification \"[tool: Bash] [tool_result: ok]\"",
            "turn_failed \"agent exited 0 without a result line\" api=None",
        ],
    );
}

#[test]
fn parallel_tool_calls() {
    assert_sequence(
        "tool_use_parallel.json",
        &[
            "token_usage in=3000 out=150 total=3150 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "notification \"I'll read both files simultaneously. [tool: Read] [tool: Read]\"",
            "turn_failed \"agent exited 0 without a result line\" api=None",
        ],
    );
}

#[test]
fn error_result_for_an_unseen_tool() {
    assert_sequence(
        "tool_use_error_result.json",
        &[
            "token_usage in=5000 out=200 total=5200 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result unknown None None dur=None err=true msg=\"bash: command not found: foobar\"",
            "notification \"[tool_result: error] The command failed. Let me try a different approach.\"",
            "turn_failed \"agent exited 0 without a result line\" api=None",
        ],
    );
}

#[test]
fn stream_event_is_a_heartbeat() {
    assert_sequence(
        "stream_event.json",
        &[
            "notification \"\"",
            "turn_failed \"agent exited without output\" api=None",
        ],
    );
}

#[test]
fn result_success_completes_with_its_usage() {
    let (outcome, p) = assert_sequence(
        "result_success.json",
        &[
            "token_usage in=25000 out=3200 total=28200 cr=8000 cw=2000 model=- api=None",
            "vendor_amount USD 0.0234 model=\"\"",
            "turn_completed \"I've implemented the changes. The tests pass and the code compiles successfully.\" api=Some(38000)",
        ],
    );
    assert!(outcome.is_completed());
    assert_eq!(p.usage(), Some(TokenUsage::new(25000, 3200, 8000, 2000)));
}

#[test]
fn result_error_max_turns_fails() {
    let (outcome, _) = assert_sequence(
        "result_error_max_turns.json",
        &[
            "token_usage in=85000 out=12000 total=97000 cr=30000 cw=5000 model=- api=None",
            "vendor_amount USD 0.15 model=\"\"",
            "turn_failed \"error_max_turns\" api=Some(95000)",
        ],
    );
    assert_eq!(outcome.error_kind(), Some(AgentErrorKind::TurnFailed));
}

#[test]
fn result_error_execution_fails_with_its_text() {
    assert_sequence(
        "result_error_execution.json",
        &[
            "token_usage in=5000 out=800 total=5800 cr=0 cw=0 model=- api=None",
            "vendor_amount USD 0.005 model=\"\"",
            "turn_failed \"error_during_execution: Error: EACCES: permission denied, open '/etc/shadow'\" api=Some(5000)",
        ],
    );
}

#[test]
fn malformed_line_is_reported_not_fatal() {
    assert_sequence(
        "malformed_line.txt",
        &[
            "malformed \"this is not json {{{ garbage line <<<\"",
            "turn_failed \"agent exited without output\" api=None",
        ],
    );
}

#[test]
fn full_session_sums_to_its_result_usage() {
    let (outcome, p) = assert_sequence(
        "full_session.jsonl",
        &[
            "session_started full-session-id-001",
            "token_usage in=1000 out=100 total=1100 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"I'll read the file first. [tool: Read]\"",
            "token_usage in=2000 out=150 total=2150 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "notification \"[tool: Write]\"",
            "token_usage in=3000 out=50 total=3050 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "notification \"Done. The changes have been applied.\"",
            "token_usage in=4500 out=0 total=4500 cr=4000 cw=500 model=claude-sonnet-4-20250514 api=None",
            "vendor_amount USD 0.01 model=\"claude-sonnet-4-20250514\"",
            "turn_completed \"Done. The changes have been applied.\" api=None",
        ],
    );
    assert!(outcome.is_completed());
    // result.usage: 6000 uncached + 4000 cache read + 500 cache write in, 300 out.
    let expected = TokenUsage::from_uncached_input(6000, 300, 4000, 500);
    assert_eq!(p.usage(), Some(expected));
    let (events, _, _) = replay(&fixture_lines("full_session.jsonl"), &exit0());
    let summed = events
        .iter()
        .fold(TokenUsage::default(), |acc, e| match &e.kind {
            AgentEventKind::TokenUsage { usage, .. } => acc.plus(usage),
            _ => acc,
        });
    assert_eq!(summed, expected);
}

#[test]
fn tool_error_result_stream() {
    assert_sequence(
        "tool_use_error_result.jsonl",
        &[
            "session_started err-session-001",
            "token_usage in=100 out=20 total=120 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"Running the command. [tool: Bash]\"",
            "token_usage in=200 out=30 total=230 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result Bash Some(Shell) Some(\"foobar\") dur=None err=true msg=\"bash: command not found: foobar\"",
            "notification \"[tool_result: error] The command failed.\"",
            "vendor_amount USD 0.001 model=\"claude-sonnet-4-20250514\"",
            "turn_completed \"The command failed.\" api=None",
        ],
    );
}

#[test]
fn xml_wrapped_tool_error_is_unwrapped() {
    assert_sequence(
        "tool_use_error_xml_wrapped.jsonl",
        &[
            "session_started xml-err-001",
            "token_usage in=100 out=20 total=120 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"Editing file. [tool: Edit]\"",
            "token_usage in=200 out=30 total=230 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result Edit Some(Edit) Some(\"main.go\") dur=None err=true msg=\"Found 3 matches of the string to replace, but replace_all is false. Use the str_replace API with replace_all=true to replace all instances.\"",
            "notification \"[tool_result: error] The edit failed.\"",
            "vendor_amount USD 0.001 model=\"claude-sonnet-4-20250514\"",
            "turn_completed \"Done.\" api=None",
        ],
    );
}

#[test]
fn tool_results_in_later_assistant_messages() {
    assert_sequence(
        "tool_use_result_separate.jsonl",
        &[
            "session_started tool-test-session-001",
            "token_usage in=1000 out=50 total=1050 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"Let me read the file. [tool: Read]\"",
            "token_usage in=2000 out=100 total=2100 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result Read Some(Read) Some(\"main.go\") dur=None err=false msg=\"\"",
            "notification \"[tool_result: ok] I see the file. Let me also run the tests. [tool: Bash]\"",
            "token_usage in=3000 out=80 total=3080 cr=0 cw=0 model=claude-sonnet-4-20250514 api=None",
            "tool_result Bash Some(Shell) Some(\"go test ./...\") dur=None err=false msg=\"\"",
            "notification \"[tool_result: ok] All tests pass.\"",
            "vendor_amount USD 0.005 model=\"claude-sonnet-4-20250514\"",
            "turn_completed \"All tests pass.\" api=None",
        ],
    );
}

#[test]
fn tool_results_in_user_events_restart_the_api_timer() {
    assert_sequence(
        "tool_use_result_user_event.jsonl",
        &[
            "session_started user-tool-session-001",
            "token_usage in=500 out=30 total=530 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"Let me read the file. [tool: Read]\"",
            "tool_result Read Some(Read) Some(\"main.go\") dur=None err=false msg=\"\"",
            "token_usage in=800 out=20 total=820 cr=0 cw=0 model=claude-sonnet-4-20250514 api=Some(1)",
            "notification \"The file contains a basic main package.\"",
            "vendor_amount USD 0.002 model=\"claude-sonnet-4-20250514\"",
            "turn_completed \"The file contains a basic main package.\" api=None",
        ],
    );
}

#[test]
fn tool_duration_and_api_timing_follow_the_injected_clock() {
    let (mut p, clock) = parser();
    p.on_line(br#"{"type":"system","subtype":"init","session_id":"s"}"#);
    clock.advance(std::time::Duration::from_millis(700));
    let evs = p.on_line(br#"{"type":"assistant","message":{"id":"m1","model":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sh -c 'make test'"}}],"usage":{"input_tokens":10,"output_tokens":5}}}"#);
    assert!(evs.iter().any(|e| matches!(
        e.kind,
        AgentEventKind::TokenUsage {
            api_duration_ms: Some(700),
            ..
        }
    )));
    clock.advance(std::time::Duration::from_millis(2400));
    let evs = p.on_line(br#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}}"#);
    let got: Vec<String> = evs.iter().map(describe).collect();
    assert_eq!(
        got,
        ["tool_result Bash Some(Shell) Some(\"make test\") dur=Some(2400) err=false msg=\"\""]
    );
    assert_eq!(evs[0].at_ms, 1_700_000_000_000 + 3100);
}

#[test]
fn malformed_lines_never_end_a_turn() {
    let mut lines = fixture_lines("full_session.jsonl");
    lines.insert(2, "{not json".into());
    lines.insert(4, "[1,2,3]".into());
    lines.insert(5, String::new());
    let (events, outcome, p) = replay(&lines, &exit0());
    assert!(outcome.is_completed());
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind.type_name() == "malformed")
            .count(),
        2
    );
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    assert_eq!(
        p.usage(),
        Some(TokenUsage::from_uncached_input(6000, 300, 4000, 500))
    );
}

#[test]
fn token_normalization_example() {
    let (events, _, p) = replay(
        &[r#"{"type":"assistant","message":{"id":"m","model":"x","content":[],"usage":{"input_tokens":100,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":50}}}"#.into()],
        &exit0(),
    );
    let expected = TokenUsage {
        input_tokens: 125,
        output_tokens: 50,
        total_tokens: 175,
        cache_read_tokens: 20,
        cache_write_tokens: 5,
    };
    assert_eq!(p.usage(), Some(expected));
    assert!(events.iter().any(
        |e| matches!(&e.kind, AgentEventKind::TokenUsage { usage, .. } if *usage == expected)
    ));
}

#[test]
fn repeated_usage_snapshots_count_once() {
    let line = |out: u64| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"msg_same","model":"x","content":[],"usage":{{"input_tokens":100,"output_tokens":{out}}}}}}}"#
        )
    };
    let result = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":100,"output_tokens":30}}"#;
    let (events, _, p) = replay(&[line(10), line(10), line(30), result.into()], &exit0());
    let deltas: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::TokenUsage { usage, .. } => {
                Some((usage.input_tokens, usage.output_tokens))
            }
            _ => None,
        })
        .collect();
    assert_eq!(deltas, [(100, 10), (0, 20)]);
    assert_eq!(p.usage(), Some(TokenUsage::new(100, 30, 0, 0)));
}

#[test]
fn input_only_figures_wait_for_output() {
    let (mut p, _) = parser();
    let evs = p.on_line(br#"{"type":"assistant","message":{"id":"a","content":[],"usage":{"input_tokens":40,"output_tokens":0}}}"#);
    assert!(evs.iter().all(|e| e.kind.type_name() != "token_usage"));
    let evs = p.on_line(br#"{"type":"assistant","message":{"id":"b","content":[],"usage":{"input_tokens":60,"output_tokens":7}}}"#);
    let u: Vec<TokenUsage> = evs
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::TokenUsage { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(u, [TokenUsage::new(100, 7, 0, 0)]);
}

#[test]
fn two_turns_are_each_counted_in_full() {
    // The Go orchestrator undercounted turn 2 by diffing against turn 1's cumulative figure.
    let turn = |input: u64, output: u64| {
        let lines = vec![
            r#"{"type":"system","subtype":"init","session_id":"s"}"#.to_string(),
            format!(
                r#"{{"type":"assistant","message":{{"id":"m","model":"x","content":[],"usage":{{"input_tokens":{input},"output_tokens":{output}}}}}}}"#
            ),
            format!(
                r#"{{"type":"result","subtype":"success","is_error":false,"result":"","usage":{{"input_tokens":{input},"output_tokens":{output}}}}}"#
            ),
        ];
        replay(&lines, &exit0()).2.usage()
    };
    let t1 = turn(1000, 200);
    let t2 = turn(400, 80);
    assert_eq!(t1, Some(TokenUsage::new(1000, 200, 0, 0)));
    assert_eq!(t2, Some(TokenUsage::new(400, 80, 0, 0)));
    let both = t1.unwrap_or_default().plus(&t2.unwrap_or_default());
    assert_eq!(both, TokenUsage::new(1400, 280, 0, 0));
}

#[test]
fn rate_limit_events_become_windows_and_a_rejection_is_a_usage_limit() {
    let (events, outcome, _) = replay(
        &[
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1700003600,"rateLimitType":"five_hour","utilization":1.0}}"#.into(),
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached"}"#.into(),
        ],
        &exit0(),
    );
    match &events[0].kind {
        AgentEventKind::RateLimits { windows } => {
            assert_eq!(windows.len(), 1);
            assert_eq!(windows[0].label, "5-hour limit");
            assert_eq!(windows[0].status, Some(RateLimitStatus::Exhausted));
            assert_eq!(windows[0].used_percent, Some(100.0));
            assert_eq!(windows[0].resets_at_ms, Some(1_700_003_600_000));
        }
        other => panic!("expected rate limits, got {other:?}"),
    }
    assert!(matches!(
        outcome,
        TurnOutcome::UsageLimited {
            resets_at_ms: Some(1_700_003_600_000),
            ..
        }
    ));
}

// ---- the ten arms of the turn-end decision tree ----

fn outcome_of(lines: &[&str], end: TurnEnd) -> TurnOutcome {
    let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    let (events, outcome, _) = replay(&lines, &end);
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    outcome
}

const SUCCESS: &str =
    r#"{"type":"result","subtype":"success","is_error":false,"result":"all done"}"#;
const WITH_OUTPUT: &str = r#"{"type":"assistant","message":{"id":"m","content":[],"usage":{"input_tokens":5,"output_tokens":5}}}"#;

fn exit(code: Option<i32>, signal: Option<i32>) -> Option<ExitInfo> {
    Some(ExitInfo { code, signal })
}

#[test]
fn arm1_spawn_failure() {
    let o = outcome_of(
        &[],
        TurnEnd {
            spawn_error: Some(SpawnError::NotFound("claude".into())),
            ..TurnEnd::default()
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentNotFound));
    let o = outcome_of(
        &[],
        TurnEnd {
            spawn_error: Some(SpawnError::Other("EMFILE".into())),
            ..TurnEnd::default()
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::PortExit));
    let o = outcome_of(
        &[],
        TurnEnd {
            spawn_error: Some(SpawnError::Other("x".into())),
            cancelled: Some(CancelReason::Shutdown),
            ..TurnEnd::default()
        },
    );
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Shutdown
        }
    );
}

#[test]
fn arm2_stdout_read_error() {
    let o = outcome_of(
        &[SUCCESS],
        TurnEnd {
            read_error: Some("line too long".into()),
            exit: exit(None, Some(9)),
            ..TurnEnd::default()
        },
    );
    assert!(
        matches!(&o, TurnOutcome::Failed { kind: AgentErrorKind::PortExit, message } if message.starts_with("stdout read error"))
    );
}

#[test]
fn arm3_cancelled() {
    let o = outcome_of(
        &[SUCCESS],
        TurnEnd {
            cancelled: Some(CancelReason::Stall),
            exit: exit(None, Some(15)),
            ..TurnEnd::default()
        },
    );
    assert_eq!(
        o,
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::TurnCancelled));
}

#[test]
fn arm4_exit_127() {
    let o = outcome_of(
        &[],
        TurnEnd {
            exit: exit(Some(127), None),
            ..TurnEnd::default()
        },
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::AgentNotFound));
}

#[test]
fn arm5_killed_by_signal() {
    let o = outcome_of(
        &[WITH_OUTPUT],
        TurnEnd {
            exit: exit(None, Some(9)),
            ..TurnEnd::default()
        },
    );
    // A signal sortie did not send is a failed turn (retried with backoff), not a cancellation.
    assert!(
        matches!(&o, TurnOutcome::Failed { kind: AgentErrorKind::PortExit, message } if message.contains("signal 9"))
    );
}

#[test]
fn arm6_result_success() {
    let o = outcome_of(
        &[SUCCESS],
        TurnEnd {
            exit: exit(Some(0), None),
            ..TurnEnd::default()
        },
    );
    assert_eq!(
        o,
        TurnOutcome::Completed {
            message: "all done".into()
        }
    );
    let long = format!(
        r#"{{"type":"result","subtype":"success","is_error":false,"result":"{}"}}"#,
        "é".repeat(1200)
    );
    let o = outcome_of(&[&long], exit0());
    assert_eq!(
        o.message().chars().count(),
        1000,
        "999 runes plus the ellipsis"
    );
}

#[test]
fn arm7_result_with_another_subtype() {
    let o = outcome_of(
        &[r#"{"type":"result","subtype":"error_max_budget_usd","is_error":true,"result":""}"#],
        exit0(),
    );
    assert_eq!(
        o,
        TurnOutcome::Failed {
            message: "error_max_budget_usd".into(),
            kind: AgentErrorKind::TurnFailed
        }
    );
    let o = outcome_of(
        &[r#"{"type":"result","subtype":"success","is_error":true,"result":"boom"}"#],
        exit0(),
    );
    assert_eq!(o.error_kind(), Some(AgentErrorKind::TurnFailed));
}

#[test]
fn arm8_no_result_nonzero_exit() {
    let o = outcome_of(
        &[WITH_OUTPUT],
        TurnEnd {
            exit: exit(Some(3), None),
            ..TurnEnd::default()
        },
    );
    assert!(
        matches!(&o, TurnOutcome::Failed { kind: AgentErrorKind::PortExit, message } if message.contains("non-zero exit"))
    );
}

#[test]
fn arm9_no_result_clean_exit_without_output() {
    let o = outcome_of(
        &[r#"{"type":"system","subtype":"init","session_id":"s"}"#],
        exit0(),
    );
    assert!(matches!(
        o,
        TurnOutcome::Failed {
            kind: AgentErrorKind::TurnFailed,
            ..
        }
    ));
}

#[test]
fn arm10_no_result_clean_exit_with_output() {
    // Without a result line the turn did not finish: a failure, not a success.
    let o = outcome_of(&[WITH_OUTPUT], exit0());
    assert!(
        matches!(&o, TurnOutcome::Failed { kind: AgentErrorKind::TurnFailed, message } if message.contains("without a result line"))
    );
}
