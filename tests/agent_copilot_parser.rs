//! Copilot CLI stream parser and command line: every recorded fixture replays to an exact
//! event sequence (in the API's event shape) with exact token totals, the newer per-request
//! usage lines are preferred without double counting, quota snapshots become rate-limit
//! windows, every arm of the turn-end decision tree yields exactly one terminal event, and the
//! argv follows the adapter rules for each session state and pass-through key.

use serde_json::{Map, Value, json};
use sortie::agent::copilot::argv::{Continuity, PromptArg, build_args};
use sortie::agent::copilot::parser::CopilotParser;
use sortie::agent::stream::{ExitInfo, SpawnError, StreamParser, TurnEnd};
use sortie::agent::{AgentErrorKind, AgentEvent, CancelReason, TokenUsage, TurnOutcome};
use sortie::clock::{Clock, ManualClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const WORKSPACE: &str = "/tmp/copilot-test";
const SID: &str = "aa778ea0-6eab-4ce9-b87e-11d6d33dab4f";
const START_MS: i64 = 1_700_000_000_000;
const PID: u32 = 4242;

fn fixture_lines(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/copilot")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(str::to_string).collect()
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

struct Replay {
    events: Vec<Value>,
    outcome: TurnOutcome,
    parser: CopilotParser,
    raw: Vec<AgentEvent>,
}

/// Spawns, feeds each line 100 ms after the previous one, and ends the turn with `end`.
fn replay(resume: Option<&str>, lines: &[String], end: &TurnEnd) -> Replay {
    let clock = Arc::new(ManualClock::new(START_MS));
    let mut p = CopilotParser::new(
        clock.clone() as Arc<dyn Clock>,
        PathBuf::from(WORKSPACE),
        resume.map(str::to_string),
    );
    let mut raw = p.on_spawn(PID);
    for l in lines {
        clock.advance(Duration::from_millis(100));
        raw.extend(p.on_line(l.as_bytes()));
    }
    let (outcome, tail) = p.finish(end);
    raw.extend(tail);
    let terminals = raw.iter().filter(|e| e.kind.is_terminal()).count();
    assert_eq!(terminals, 1, "exactly one terminal event: {raw:?}");
    assert!(raw.last().is_some_and(|e| e.kind.is_terminal()));
    let events = raw
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.remove("at");
            }
            v
        })
        .collect();
    Replay {
        events,
        outcome,
        parser: p,
        raw,
    }
}

fn usage_json(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Value {
    serde_json::to_value(TokenUsage::new(input, output, cache_read, cache_write))
        .unwrap_or_default()
}

fn started(sid: &str) -> Value {
    json!({"event": "session_started", "message": "", "session_id": sid, "agent_pid": PID})
}

fn note(message: &str) -> Value {
    json!({"event": "notification", "message": message})
}

fn tokens(output: u64, model: Option<&str>) -> Value {
    let mut v =
        json!({"event": "token_usage", "message": "", "usage": usage_json(0, output, 0, 0)});
    if let Some(m) = model {
        v["model"] = json!(m);
    }
    v
}

/// The `vendor_amount` event of a `result` line's premium requests.
fn premium(amount: f64, model: &str) -> Value {
    json!({"event": "vendor_amount", "message": "", "unit": "premium_requests", "model": model, "amount": amount})
}

#[test]
fn simple_session_replays_exactly() {
    let r = replay(None, &fixture_lines("simple_session.jsonl"), &exit(0));
    assert_eq!(
        r.events,
        vec![
            started(""),
            note("assistant.turn_start"),
            note(""),
            tokens(6, Some("claude-opus-4.6")),
            note("hello world"),
            note("assistant.turn_end"),
            premium(6.0, "claude-opus-4.6"),
            json!({"event": "turn_completed", "message": "hello world", "usage": null, "api_duration_ms": 6866}),
        ]
    );
    assert_eq!(r.outcome.error_kind(), None);
    assert_eq!(r.parser.session_id().as_deref(), Some(SID));
    assert_eq!(r.parser.usage(), Some(TokenUsage::new(0, 6, 0, 0)));
    assert_eq!(r.parser.model().as_deref(), Some("claude-opus-4.6"));
    assert_eq!(r.parser.premium_requests(), Some(6));
    // Arrival times come from the injected clock: the spawn at the start, each line later.
    assert_eq!(r.raw[0].at_ms, START_MS);
    assert_eq!(r.raw[1].at_ms, START_MS + 400);
}

#[test]
fn tool_use_session_replays_exactly() {
    let r = replay(None, &fixture_lines("tool_use_session.jsonl"), &exit(0));
    assert_eq!(
        r.events,
        vec![
            started(""),
            note("assistant.turn_start"),
            tokens(102, None),
            note("requesting 1 tool(s): view"),
            note("[tool: view]"),
            json!({"event": "tool_result", "message": "", "tool_name": "view", "tool_kind": "read",
                   "tool_argument": "main.go", "duration_ms": 100, "tool_error": false}),
            tokens(20, Some("claude-opus-4.6")),
            note("The file contains a simple Go main package."),
            note("Read and summarized main.go"),
            note("assistant.turn_end"),
            premium(8.0, "claude-opus-4.6"),
            json!({"event": "turn_completed", "message": "Read and summarized main.go", "usage": null, "api_duration_ms": 4200}),
        ]
    );
    assert_eq!(
        r.parser.session_id().as_deref(),
        Some("bb889fb1-7fbc-5dea-c98f-22e7e44ebc50")
    );
    assert_eq!(r.parser.usage(), Some(TokenUsage::new(0, 122, 0, 0)));
    assert_eq!(r.parser.premium_requests(), Some(8));
}

#[test]
fn resume_session_reports_the_resumed_id_at_spawn() {
    let r = replay(Some(SID), &fixture_lines("resume_session.jsonl"), &exit(0));
    assert_eq!(
        r.events,
        vec![
            started(SID),
            note("assistant.turn_start"),
            tokens(10, None),
            note("Continuing from where we left off."),
            note("assistant.turn_end"),
            premium(2.0, ""),
            json!({"event": "turn_completed", "message": "Continuing from where we left off.", "usage": null, "api_duration_ms": 1500}),
        ]
    );
    assert_eq!(r.parser.session_id().as_deref(), Some(SID));
    assert_eq!(r.parser.usage(), Some(TokenUsage::new(0, 10, 0, 0)));
}

#[test]
fn malformed_and_unknown_lines_do_not_end_the_turn() {
    let r = replay(None, &fixture_lines("malformed_lines.jsonl"), &exit(0));
    assert_eq!(
        r.events,
        vec![
            started(""),
            json!({"event": "malformed", "message": "this is not json"}),
            json!({"event": "other_message", "message": "future.event.type"}),
            tokens(4, Some("claude-opus-4.6")),
            note("hello after malformed"),
            // No result line, exit 0, output seen: completed without a message (arm 10).
            json!({"event": "turn_completed", "message": "", "usage": null}),
        ]
    );
    assert_eq!(r.parser.usage(), Some(TokenUsage::new(0, 4, 0, 0)));
    assert_eq!(r.parser.session_id(), None);
}

#[test]
fn plain_text_auth_failure_on_stdout_is_agent_auth_failed() {
    let r = replay(None, &fixture_lines("auth_failure.jsonl"), &exit(1));
    assert_eq!(
        r.outcome.error_kind(),
        Some(AgentErrorKind::AgentAuthFailed)
    );
    assert_eq!(r.events[1]["event"], "malformed");
    let last = &r.events[r.events.len() - 1];
    assert_eq!(last["event"], "turn_failed");
    let msg = last["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("/login") && msg.contains("COPILOT_GITHUB_TOKEN"),
        "{msg}"
    );
    assert_eq!(r.parser.usage(), None);
}

#[test]
fn the_current_cli_refusal_on_stderr_is_agent_auth_failed() {
    let mut end = exit(1);
    end.stderr = "Error: No authentication information found.\n\nCopilot can be authenticated with GitHub using an OAuth Token.".into();
    let r = replay(None, &[], &end);
    assert_eq!(
        r.outcome.error_kind(),
        Some(AgentErrorKind::AgentAuthFailed)
    );
    // Any other failure on stderr stays a plain non-zero exit.
    let mut end = exit(1);
    end.stderr = "Error: something else broke".into();
    let r = replay(None, &[], &end);
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::PortExit));
}

fn usage_line(model: &str, input: u64, output: u64, cache_read: u64, extra: Value) -> String {
    let mut data = json!({"model": model, "inputTokens": input, "outputTokens": output,
        "cacheReadTokens": cache_read, "cacheWriteTokens": 0, "cost": 1});
    if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    json!({"type": "assistant.usage", "id": "u", "timestamp": "t", "data": data}).to_string()
}

fn message_line(text: &str, output: u64) -> String {
    json!({"type": "assistant.message", "id": "m", "timestamp": "t",
        "data": {"messageId": "x", "content": text, "toolRequests": [], "outputTokens": output}})
    .to_string()
}

fn result_line(exit_code: i64) -> String {
    json!({"type": "result", "sessionId": "s-1", "exitCode": exit_code,
        "usage": {"premiumRequests": 1, "totalApiDurationMs": 50, "sessionDurationMs": 60}})
    .to_string()
}

#[test]
fn per_request_usage_lines_are_preferred_and_never_double_counted() {
    let lines = vec![
        // Message first, then its request's usage: the message's output is credited.
        message_line("one", 6),
        usage_line("gpt-5", 100, 6, 40, json!({})),
        // Usage first, then the message: the message's count is ignored.
        usage_line("gpt-5", 50, 10, 0, json!({})),
        message_line("two", 10),
        result_line(0),
    ];
    let r = replay(None, &lines, &exit(0));
    let figures: Vec<Value> = r
        .events
        .iter()
        .filter(|e| e["event"] == "token_usage")
        .cloned()
        .collect();
    assert_eq!(
        figures,
        vec![
            tokens(6, None),
            json!({"event": "token_usage", "message": "", "usage": usage_json(100, 0, 40, 0), "model": "gpt-5"}),
            json!({"event": "token_usage", "message": "", "usage": usage_json(50, 10, 0, 0), "model": "gpt-5"}),
        ]
    );
    assert_eq!(r.parser.usage(), Some(TokenUsage::new(150, 16, 40, 0)));
    assert_eq!(r.parser.model().as_deref(), Some("gpt-5"));
}

#[test]
fn quota_snapshots_become_a_monthly_premium_window() {
    let quota = json!({"quotaSnapshots": {"premium_interactions": {
        "entitlementRequests": 300, "usedRequests": 30, "remainingPercentage": 90.0,
        "resetDate": "2026-04-01T00:00:00Z"}}});
    let lines = vec![usage_line("gpt-5", 10, 2, 0, quota), result_line(0)];
    let r = replay(None, &lines, &exit(0));
    let limits: Vec<&Value> = r
        .events
        .iter()
        .filter(|e| e["event"] == "rate_limits")
        .collect();
    assert_eq!(limits.len(), 1);
    assert_eq!(
        limits[0]["windows"],
        json!([{"label": "Monthly premium request limit", "used_percent": 10.0, "status": "allowed",
                "resets_at_ms": 1_775_001_600_000_i64, "window_ms": 2_592_000_000_u64}])
    );
    assert!(r.outcome.is_completed());
}

#[test]
fn an_exhausted_quota_before_any_output_is_a_usage_limit() {
    let quota = json!({"quotaSnapshots": {"premium_interactions": {
        "entitlementRequests": 300, "usedRequests": 300, "remainingPercentage": 0.0,
        "resetDate": "2026-04-01T00:00:00Z"}}});
    let lines = vec![
        usage_line("gpt-5", 0, 0, 0, quota.clone()),
        json!({"type": "session.error", "data": {"errorType": "quota", "message": "You have exceeded your premium request quota"}}).to_string(),
        result_line(1),
    ];
    let r = replay(None, &lines, &exit(1));
    assert_eq!(
        r.outcome,
        TurnOutcome::UsageLimited {
            message: "premium request quota exhausted".into(),
            resets_at_ms: Some(1_775_001_600_000),
            model: Some("gpt-5".into()),
        }
    );
    assert_eq!(r.events[r.events.len() - 1]["event"], "turn_failed");

    // Without a snapshot the refusal still counts, with no reset time.
    let lines = vec![
        json!({"type": "session.error", "data": {"errorType": "quota", "message": "quota exceeded"}})
            .to_string(),
    ];
    let r = replay(None, &lines, &exit(1));
    assert!(matches!(
        r.outcome,
        TurnOutcome::UsageLimited {
            resets_at_ms: None,
            ..
        }
    ));

    // After output, the same refusal is an ordinary failed turn.
    let lines = vec![
        message_line("did some work", 30),
        usage_line("gpt-5", 0, 0, 0, quota),
        result_line(1),
    ];
    let r = replay(None, &lines, &exit(1));
    assert_eq!(r.outcome.error_kind(), Some(AgentErrorKind::TurnFailed));
    assert!(!matches!(r.outcome, TurnOutcome::UsageLimited { .. }));
}

#[test]
fn a_failed_tool_carries_its_error_text() {
    let lines = vec![
        json!({"type": "tool.execution_start", "data": {"toolCallId": "c1", "toolName": "bash",
            "arguments": {"command": "bash -lc 'cargo test'"}}})
        .to_string(),
        json!({"type": "tool.execution_complete", "data": {"toolCallId": "c1", "success": false,
            "error": {"message": "\u{1b}[31mexit status 101\u{1b}[0m", "code": "failure"}}})
        .to_string(),
        json!({"type": "tool.execution_complete", "data": {"toolCallId": "never-started", "success": true}})
            .to_string(),
    ];
    let r = replay(None, &lines, &exit(0));
    assert_eq!(
        r.events[2],
        json!({"event": "tool_result", "message": "exit status 101", "tool_name": "bash",
               "tool_kind": "shell", "tool_argument": "cargo test", "duration_ms": 100, "tool_error": true})
    );
    assert_eq!(
        r.events[3],
        json!({"event": "tool_result", "message": "", "tool_name": "unknown", "tool_error": false})
    );
}

fn outcome_of(lines: &[String], end: TurnEnd) -> TurnOutcome {
    replay(None, lines, &end).outcome
}

#[test]
fn decision_tree_arms() {
    let spawn_missing = TurnEnd {
        spawn_error: Some(SpawnError::NotFound("copilot".into())),
        ..TurnEnd::default()
    };
    assert_eq!(
        outcome_of(&[], spawn_missing).error_kind(),
        Some(AgentErrorKind::AgentNotFound)
    );
    let read_error = TurnEnd {
        read_error: Some("line too long".into()),
        ..exit(0)
    };
    assert_eq!(
        outcome_of(&[], read_error).error_kind(),
        Some(AgentErrorKind::PortExit)
    );
    let stalled = TurnEnd {
        cancelled: Some(CancelReason::Stall),
        exit: Some(ExitInfo {
            code: None,
            signal: Some(15),
        }),
        ..TurnEnd::default()
    };
    assert_eq!(
        outcome_of(&[message_line("x", 3)], stalled),
        TurnOutcome::Cancelled {
            reason: CancelReason::Stall
        }
    );
    assert_eq!(
        outcome_of(&[], exit(127)).error_kind(),
        Some(AgentErrorKind::AgentNotFound)
    );
    let o = outcome_of(&[message_line("x", 3), result_line(2)], exit(0));
    assert_eq!(
        o,
        TurnOutcome::Failed {
            message: "copilot reported exit code 2".into(),
            kind: AgentErrorKind::TurnFailed
        }
    );
    let o = outcome_of(&[message_line("x", 3)], exit(3));
    assert_eq!(
        o,
        TurnOutcome::Failed {
            message: "non-zero exit (code 3)".into(),
            kind: AgentErrorKind::PortExit
        }
    );
    let o = outcome_of(&[], exit(0));
    assert_eq!(o.error_kind(), Some(AgentErrorKind::TurnFailed));
    // A result line without an exit code is judged by the process's exit status.
    let bare_result = json!({"type": "result", "sessionId": "s-2", "usage": {}}).to_string();
    assert!(outcome_of(&[message_line("x", 3), bare_result.clone()], exit(0)).is_completed());
    assert_eq!(
        outcome_of(&[message_line("x", 3), bare_result], exit(1)).error_kind(),
        Some(AgentErrorKind::TurnFailed)
    );
    let o = outcome_of(&[message_line("done", 3), result_line(0)], exit(0));
    assert_eq!(
        o,
        TurnOutcome::Completed {
            message: "done".into()
        }
    );
}

// ---- argv ----

fn block(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const BASE: &[&str] = &[
    "--output-format",
    "json",
    "-s",
    "--autopilot",
    "--no-ask-user",
    "--max-autopilot-continues",
];

fn expected(prompt: &[&str], rest: &[&str]) -> Vec<String> {
    let mut v = strings(prompt);
    v.extend(strings(BASE));
    v.extend(strings(rest));
    v
}

#[test]
fn argv_turn_one_of_a_new_conversation() {
    let args = build_args(
        PromptArg::Flag("fix the bug"),
        &Continuity::New,
        &Map::new(),
        Path::new("/wf"),
        None,
    );
    assert_eq!(
        args,
        expected(&["-p", "fix the bug"], &["50", "--allow-all"])
    );
}

#[test]
fn argv_later_turns_resume_or_continue() {
    let args = build_args(
        PromptArg::Flag("go on"),
        &Continuity::Resume(SID.into()),
        &Map::new(),
        Path::new("/wf"),
        None,
    );
    assert_eq!(
        args,
        expected(&["-p", "go on"], &["50", "--resume", SID, "--allow-all"])
    );
    let args = build_args(
        PromptArg::Flag("go on"),
        &Continuity::Continue,
        &Map::new(),
        Path::new("/wf"),
        None,
    );
    assert_eq!(
        args,
        expected(&["-p", "go on"], &["50", "--continue", "--allow-all"])
    );
}

#[test]
fn argv_every_pass_through_key_in_order() {
    let b = block(json!({
        "model": "gpt-5-mini", "max_autopilot_continues": 7, "agent": "reviewer",
        "allowed_tools": ["shell(git:*)", "write"], "denied_tools": "shell(git push)",
        "available_tools": ["view", "edit"], "excluded_tools": ["bash"],
        "mcp_config": "mcp.json", "disable_builtin_mcps": true,
        "no_custom_instructions": true, "experimental": true
    }));
    let args = build_args(
        PromptArg::Flag("x"),
        &Continuity::Resume("s-9".into()),
        &b,
        Path::new("/wf"),
        None,
    );
    assert_eq!(
        args,
        expected(
            &["-p", "x"],
            &[
                "7",
                "--resume",
                "s-9",
                "--model",
                "gpt-5-mini",
                "--agent",
                "reviewer",
                "--allow-tool",
                "shell(git:*)",
                "--allow-tool",
                "write",
                "--deny-tool",
                "shell(git push)",
                "--available-tools",
                "view",
                "--available-tools",
                "edit",
                "--excluded-tools",
                "bash",
                "--additional-mcp-config",
                "@/wf/mcp.json",
                "--disable-builtin-mcps",
                "--no-custom-instructions",
                "--experimental",
            ]
        )
    );
}

#[test]
fn argv_any_tool_scoping_key_replaces_allow_all() {
    for key in [
        "allowed_tools",
        "denied_tools",
        "available_tools",
        "excluded_tools",
    ] {
        let b = block(json!({ key: ["view"] }));
        let args = build_args(
            PromptArg::Flag("x"),
            &Continuity::New,
            &b,
            Path::new("/wf"),
            None,
        );
        assert!(
            !args.contains(&"--allow-all".to_string()),
            "{key}: {args:?}"
        );
    }
    // Empty values scope nothing.
    let b = block(json!({"allowed_tools": [], "denied_tools": " "}));
    let args = build_args(
        PromptArg::Flag("x"),
        &Continuity::New,
        &b,
        Path::new("/wf"),
        None,
    );
    assert!(args.contains(&"--allow-all".to_string()));
    // False flags and a non-positive count add nothing; the count falls back to 50.
    let b = block(json!({"experimental": false, "max_autopilot_continues": 0}));
    let args = build_args(
        PromptArg::Flag("x"),
        &Continuity::New,
        &b,
        Path::new("/wf"),
        None,
    );
    assert_eq!(args, expected(&["-p", "x"], &["50", "--allow-all"]));
}

#[test]
fn argv_mcp_config_precedence() {
    let mcp = |value: Value, worker: Option<&Path>| {
        let b = block(json!({ "mcp_config": value }));
        let args = build_args(
            PromptArg::Flag("x"),
            &Continuity::New,
            &b,
            Path::new("/wf"),
            worker,
        );
        let i = args.iter().position(|a| a == "--additional-mcp-config");
        i.and_then(|i| args.get(i + 1).cloned())
    };
    let worker = Path::new("/ws/.sortie/mcp.json");
    assert_eq!(
        mcp(json!("mcp.json"), Some(worker)).as_deref(),
        Some("@/ws/.sortie/mcp.json")
    );
    assert_eq!(
        mcp(json!(r#"{"mcpServers":{}}"#), None).as_deref(),
        Some(r#"{"mcpServers":{}}"#)
    );
    assert_eq!(
        mcp(json!("@servers.json"), None).as_deref(),
        Some("@servers.json")
    );
    assert_eq!(
        mcp(json!("/etc/mcp.json"), None).as_deref(),
        Some("@/etc/mcp.json")
    );
    assert_eq!(
        mcp(json!("conf/mcp.json"), None).as_deref(),
        Some("@/wf/conf/mcp.json")
    );
    assert_eq!(mcp(Value::Null, None), None);
}

#[test]
fn argv_prompt_guards() {
    let args = build_args(
        PromptArg::for_prompt("--help me"),
        &Continuity::New,
        &Map::new(),
        Path::new("/wf"),
        None,
    );
    assert_eq!(args[0], "--prompt=--help me");
    assert_eq!(args[1], "--output-format");
    let long = "z".repeat(200 * 1024);
    let args = build_args(
        PromptArg::for_prompt(&long),
        &Continuity::New,
        &Map::new(),
        Path::new("/wf"),
        None,
    );
    assert_eq!(args, expected(&[], &["50", "--allow-all"]));
}
