//! The `copilot` mode of `fake-agent` (`FAKE_AGENT_KIND=copilot`, or a symlink named
//! `copilot`): a stand-in for the GitHub Copilot CLI in `-p … --output-format json` mode.
//!
//! It accepts exactly the flags sortie passes to `copilot` and exits 2 on any other. `--version`
//! (alone) prints a version line and exits 0, as the session preflight expects. The prompt is
//! the `-p` value, the `--prompt=` value, or stdin when neither is given. The session id is the
//! `--resume` value, else `FAKE_AGENT_SESSION_ID`, else `fake-copilot-session`; it fills
//! `${SESSION_ID}` in the steps. Invocations are logged to `FAKE_AGENT_ARGV_LOG` /
//! `FAKE_AGENT_ENV_LOG` in the Claude mode's format (`resume` is true for `--resume` and
//! `--continue`), and the turn is counted the same way (`FAKE_AGENT_STATE_DIR`).
//!
//! `FAKE_AGENT_SCENARIO` holds the steps (one JSON object a line, optionally `"turn": N`). When
//! no step applies to the turn, the default script runs: `assistant.turn_start`, one
//! `assistant.message` of 20 output tokens, `assistant.turn_end`, and a `result` line with the
//! session id, exit code 0 and one premium request. Copilot-format steps:
//!
//! | step | effect |
//! |---|---|
//! | `{"message": {"text": "…", "output_tokens": N, "tools": [{"id", "name", "arguments"}]}}` | one `assistant.message` line |
//! | `{"usage": {"model": "…", "input_tokens": N, "output_tokens": N, "cache_read_tokens": N, "cache_write_tokens": N, "quota": {…}}}` | one `assistant.usage` line; `quota` is copied as `quotaSnapshots` |
//! | `{"tool": {"id": "…", "name": "bash", "arguments": {…}, "success": true, "result": "…"}}` | `tool.execution_start` then `tool.execution_complete` |
//! | `{"result": {"session_id": "…", "exit_code": 0, "premium_requests": N, "api_ms": N}}` | the flat `result` line |
//! | `{"auth_failure": true}` | the CLI's refusal without credentials on stderr, then exit 1 |
//!
//! Every other step is the Claude mode's (`emit`, `raw`, `stderr`, `sleep_ms`, `cat_file`,
//! `big_line_bytes`, `write_file`, `spawn_grandchild`, `ignore_sigterm`, `hang`, `exit`,
//! `kill_self`, …; see the crate doc).

use crate::error::FakeError;
use serde_json::{Value, json};
use std::io::Read;

/// Flags that take a value, as sortie passes them to the Copilot CLI.
const VALUE_FLAGS: &[&str] = &[
    "-p",
    "--output-format",
    "--max-autopilot-continues",
    "--resume",
    "--model",
    "--agent",
    "--allow-tool",
    "--deny-tool",
    "--available-tools",
    "--excluded-tools",
    "--additional-mcp-config",
];
const BARE_FLAGS: &[&str] = &[
    "-s",
    "--autopilot",
    "--no-ask-user",
    "--continue",
    "--allow-all",
    "--disable-builtin-mcps",
    "--no-custom-instructions",
    "--experimental",
];
const DEFAULT_SESSION_ID: &str = "fake-copilot-session";

/// Plays this mode's scenario.
pub fn run() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.len() == 2 && matches!(argv[1].as_str(), "--version" | "-v") {
        println!("GitHub Copilot CLI 0.0.0-fake.");
        return;
    }
    let inv = match parse_args(argv) {
        Ok(inv) => inv,
        Err(msg) => {
            eprintln!("fake-agent (copilot): {msg}");
            std::process::exit(2);
        }
    };
    let turn = crate::next_turn(inv.resume);
    crate::log_invocation(&inv, turn);
    let steps = crate::load_steps(turn).unwrap_or_else(|e| {
        eprintln!("fake-agent: scenario: {e}");
        std::process::exit(3);
    });
    let steps = if steps.is_empty() {
        default_steps()
    } else {
        steps
    };
    for step in steps {
        run_step(&step, &inv.session_id);
    }
}

fn parse_args(argv: Vec<String>) -> Result<crate::Invocation, FakeError> {
    let mut prompt = None;
    let mut session_id = None;
    let mut resume = false;
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if let Some(p) = a.strip_prefix("--prompt=") {
            prompt = Some(p.to_string());
        } else if VALUE_FLAGS.contains(&a) {
            let v = argv
                .get(i + 1)
                .ok_or_else(|| FakeError::Usage(format!("{a} needs a value")))?;
            match a {
                "-p" => prompt = Some(v.clone()),
                "--resume" => {
                    session_id = Some(v.clone());
                    resume = true;
                }
                "--output-format" if v != "json" => {
                    return Err(FakeError::Usage(format!(
                        "--output-format {v:?}: only json is played"
                    )));
                }
                "--max-autopilot-continues" if v.parse::<u64>().is_err() => {
                    return Err(FakeError::Usage(format!(
                        "--max-autopilot-continues {v:?} is not a count"
                    )));
                }
                _ => {}
            }
            i += 1;
        } else if a == "--continue" {
            resume = true;
        } else if !BARE_FLAGS.contains(&a) {
            return Err(FakeError::Usage(format!("unknown argument {a:?}")));
        }
        i += 1;
    }
    let prompt_from_stdin = prompt.is_none();
    let prompt = match prompt {
        Some(p) => p,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| FakeError::Stdin("the prompt from stdin", e))?;
            s
        }
    };
    let session_id = session_id
        .or_else(|| std::env::var("FAKE_AGENT_SESSION_ID").ok())
        .unwrap_or_else(|| DEFAULT_SESSION_ID.into());
    Ok(crate::Invocation {
        argv,
        prompt,
        prompt_from_stdin,
        session_id,
        resume,
    })
}

fn default_steps() -> Vec<Value> {
    vec![
        json!({"emit": {"type": "assistant.turn_start", "data": {"turnId": "0"}}}),
        json!({"message": {"text": "Working on it.", "output_tokens": 20}}),
        json!({"emit": {"type": "assistant.turn_end", "data": {"turnId": "0"}}}),
        json!({"result": {}}),
    ]
}

/// One line in the CLI's envelope: `{type, id, timestamp, data}`.
fn envelope(ty: &str, data: Value) -> String {
    json!({"type": ty, "id": format!("fake-{ty}"), "timestamp": "2026-01-01T00:00:00.000Z", "data": data})
        .to_string()
}

fn run_step(step: &Value, sid: &str) {
    let step = crate::substitute(step, sid);
    if let Some(m) = step.get("message") {
        let tools: Vec<Value> = m
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| json!({"toolCallId": crate::text(t, "id", "call_1"), "name": crate::text(t, "name", "bash"),
                "arguments": t.get("arguments").cloned().unwrap_or(json!({})), "type": "function"}))
            .collect();
        crate::out_line(&envelope(
            "assistant.message",
            json!({"messageId": "fake-message", "content": crate::text(m, "text", "Working."),
                "toolRequests": tools, "outputTokens": crate::num(m, "output_tokens", 20)}),
        ));
    } else if let Some(u) = step.get("usage") {
        let mut data = json!({"model": crate::text(u, "model", "fake-model-1"),
            "inputTokens": crate::num(u, "input_tokens", 100), "outputTokens": crate::num(u, "output_tokens", 20),
            "cacheReadTokens": crate::num(u, "cache_read_tokens", 0), "cacheWriteTokens": crate::num(u, "cache_write_tokens", 0),
            "cost": 1});
        if let Some(q) = u.get("quota") {
            data["quotaSnapshots"] = q.clone();
        }
        crate::out_line(&envelope("assistant.usage", data));
    } else if let Some(t) = step.get("tool") {
        let id = crate::text(t, "id", "call_1");
        let args = t.get("arguments").cloned().unwrap_or(json!({}));
        crate::out_line(&envelope(
            "tool.execution_start",
            json!({"toolCallId": id, "toolName": crate::text(t, "name", "bash"), "arguments": args}),
        ));
        let success = t.get("success").and_then(Value::as_bool).unwrap_or(true);
        crate::out_line(&envelope(
            "tool.execution_complete",
            json!({"toolCallId": id, "success": success, "result": {"content": crate::text(t, "result", "")}}),
        ));
    } else if let Some(r) = step.get("result") {
        crate::out_line(&json!({"type": "result", "timestamp": "2026-01-01T00:00:01.000Z",
            "sessionId": crate::text(r, "session_id", sid), "exitCode": crate::num(r, "exit_code", 0),
            "usage": {"premiumRequests": crate::num(r, "premium_requests", 1), "totalApiDurationMs": crate::num(r, "api_ms", 10),
                "sessionDurationMs": 20, "codeChanges": {"linesAdded": 0, "linesRemoved": 0, "filesModified": []}}})
        .to_string());
    } else if step.get("auth_failure").is_some() {
        eprintln!("Error: No authentication information found.");
        eprintln!();
        eprintln!("To authenticate, you can use any of the following methods:");
        eprintln!("  • Start 'copilot' and run the '/login' command");
        eprintln!(
            "  • Set the COPILOT_GITHUB_TOKEN, GH_TOKEN, or GITHUB_TOKEN environment variable"
        );
        std::process::exit(1);
    } else {
        crate::run_step(&step, sid);
    }
}
