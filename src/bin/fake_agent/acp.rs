//! The Agent Client Protocol mode of `fake-agent` (`FAKE_AGENT_KIND=acp`, or a symlink named
//! `gemini` or `kiro-cli`): a scripted ACP agent speaking JSON-RPC 2.0 on stdin/stdout. It
//! answers `initialize` (with auth methods), `authenticate`, `session/new`, `session/load`
//! and `session/prompt` (after playing the turn's script), and takes `session/cancel`. It
//! exits 0 when stdin closes.
//!
//! Environment as in the codex mode: `FAKE_AGENT_SCENARIO` (lines with optional
//! `"session": N`, the N-th process counted in `$FAKE_AGENT_STATE_DIR/acp_sessions`, and
//! `"turn": N`, the N-th prompt), `FAKE_AGENT_ARGV_LOG` (`{"argv","cwd","session"}` per
//! process), `FAKE_AGENT_ENV_LOG` (the whole environment, one object per process) and
//! `FAKE_AGENT_RPC_LOG` (`{"session","received"}` per message, and
//! `{"session","reply_to","reply"}` for each answer to a request this mode sent).
//!
//! Configuration lines `{"config": {…}}`:
//!
//! | key | effect (default) |
//! |---|---|
//! | `auth_required` | `session/new` and `session/load` fail with code -32000 until `authenticate` succeeded (`false`) |
//! | `load_session` | `agentCapabilities.loadSession` (`true`) |
//! | `load` | `"fail"` answers `session/load` with an error |
//! | `session_id` | the id `session/new` returns (`sess-fake-<session>`) |
//!
//! Turn steps (others go to the Claude mode's vocabulary: `hang`, `exit`, `stderr`, `sleep_ms`,
//! `spawn_grandchild`, `ignore_sigterm`, `big_line_bytes`, …):
//!
//! | step | effect |
//! |---|---|
//! | `{"message": "text"}` | `agent_message_chunk` updates (the text in two chunks) |
//! | `{"tool": {"id": "t1", "title": "…", "kind": "execute", "status": "completed", "command": "…"}}` | `tool_call`, then `tool_call_update` with the status |
//! | `{"permission": {"title": "…"}}` | `session/request_permission` with allow/reject options; waits for and logs the answer |
//! | `{"plan": true}` | a `plan` update |
//! | `{"usage": {"inputTokens": N, "outputTokens": N, …}}` | put on the prompt's answer |
//! | `{"stop_reason": "end_turn"}` | the prompt's stop reason (`end_turn`) |
//! | `{"prompt_error": {"code": N, "message": "…"}}` | answer the prompt with this error |
//! | `{"wait_cancel": true}` | wait for `session/cancel`, then answer with `cancelled` |
//!
//! A prompt without steps plays `message "Done."` and answers `end_turn`.

use serde_json::{Map, Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};

struct Agent {
    session: u64,
    config: Map<String, Value>,
    steps: Vec<Value>,
    authenticated: bool,
    session_id: String,
    turn: u64,
    next_request_id: u64,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

/// Plays this mode's scenario.
pub fn run() {
    let session = next_session();
    if let Some(p) = std::env::var_os("FAKE_AGENT_ARGV_LOG") {
        let argv: Vec<String> = std::env::args().collect();
        let rec = json!({"argv": argv, "cwd": crate::cwd(), "session": session});
        crate::append_line(Path::new(&p), &rec.to_string());
    }
    if let Some(p) = std::env::var_os("FAKE_AGENT_ENV_LOG") {
        let env: Map<String, Value> = std::env::vars()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        crate::append_line(Path::new(&p), &Value::Object(env).to_string());
    }
    let (config, steps) = crate::load_session(session).unwrap_or_else(|e| {
        eprintln!("fake-agent: scenario: {e}");
        std::process::exit(3);
    });
    let mut agent = Agent {
        session,
        config,
        steps,
        authenticated: false,
        session_id: String::new(),
        turn: 0,
        next_request_id: 500,
        lines: std::io::stdin().lock().lines(),
    };
    while let Some(msg) = agent.read() {
        if let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        {
            agent.request(
                method,
                id.clone(),
                msg.get("params").unwrap_or(&Value::Null),
            );
        }
    }
}

fn next_session() -> u64 {
    let Some(dir) = std::env::var_os("FAKE_AGENT_STATE_DIR") else {
        return 1;
    };
    let path = PathBuf::from(dir).join("acp_sessions");
    let n = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    let _ = std::fs::write(&path, n.to_string());
    n
}

fn rpc_log(rec: &Value) {
    if let Some(p) = std::env::var_os("FAKE_AGENT_RPC_LOG") {
        crate::append_line(Path::new(&p), &rec.to_string());
    }
}

fn send(mut v: Value) {
    v["jsonrpc"] = json!("2.0");
    crate::out_line(&v.to_string());
}

impl Agent {
    fn read(&mut self) -> Option<Value> {
        loop {
            let line = self.lines.next()?.ok()?;
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            rpc_log(&json!({"session": self.session, "received": v}));
            return Some(v);
        }
    }

    fn flag(&self, key: &str, default: bool) -> bool {
        self.config
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    fn update(&self, update: Value) {
        send(json!({"method": "session/update",
            "params": {"sessionId": self.session_id, "update": update}}));
    }

    fn request(&mut self, method: &str, id: Value, params: &Value) {
        match method {
            "initialize" => send(json!({"id": id, "result": {
                "protocolVersion": 1,
                "authMethods": [{"id": "fake-login", "name": "Fake login"}, {"id": "fake-api-key", "name": "Fake API key"}],
                "agentInfo": {"name": "fake-acp", "version": "0.0.0"},
                "agentCapabilities": {"loadSession": self.flag("load_session", true)}}})),
            "authenticate" => {
                self.authenticated = true;
                send(json!({"id": id, "result": {}}));
            }
            "session/new" => {
                if self.flag("auth_required", false) && !self.authenticated {
                    send(
                        json!({"id": id, "error": {"code": -32000, "message": "Authentication required"}}),
                    );
                    return;
                }
                self.session_id = self
                    .config
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("sess-fake-{}", self.session));
                send(json!({"id": id, "result": {"sessionId": self.session_id}}));
            }
            "session/load" => {
                if self.flag("auth_required", false) && !self.authenticated {
                    send(
                        json!({"id": id, "error": {"code": -32000, "message": "Authentication required"}}),
                    );
                    return;
                }
                if self.config.get("load").and_then(Value::as_str) == Some("fail") {
                    send(
                        json!({"id": id, "error": {"code": -32602, "message": "session not found"}}),
                    );
                    return;
                }
                self.session_id = params
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                // History replays before the answer.
                self.update(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "earlier prompt"}}));
                send(json!({"id": id, "result": null}));
            }
            "session/prompt" => {
                self.turn += 1;
                self.prompt(id);
            }
            other => send(json!({"id": id, "error": {"code": -32601,
                "message": format!("fake acp does not know {other}")}})),
        }
    }

    fn prompt(&mut self, id: Value) {
        let turn = self.turn;
        let mut steps: Vec<Value> = self
            .steps
            .iter()
            .filter(|s| {
                s.get("turn")
                    .and_then(Value::as_u64)
                    .is_none_or(|t| t == turn)
            })
            .cloned()
            .collect();
        if steps.is_empty() {
            steps = vec![json!({"message": "Done."})];
        }
        let mut result = json!({"stopReason": "end_turn"});
        for step in &steps {
            if let Some(u) = step.get("usage") {
                result["usage"] = u.clone();
            } else if let Some(r) = step.get("stop_reason") {
                result["stopReason"] = r.clone();
            } else if let Some(e) = step.get("prompt_error") {
                send(json!({"id": id, "error": e}));
                return;
            } else if step.get("wait_cancel").is_some() {
                self.wait_cancel();
                result["stopReason"] = json!("cancelled");
            } else {
                self.step(step);
            }
        }
        send(json!({"id": id, "result": result}));
    }

    fn step(&mut self, step: &Value) {
        if let Some(text) = step.get("message").and_then(Value::as_str) {
            let mid = text.len() / 2;
            let mid = (0..=mid)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            for part in [&text[..mid], &text[mid..]] {
                self.update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": part}}));
            }
        } else if let Some(t) = step.get("tool") {
            let id = t.get("id").cloned().unwrap_or(json!("tool-1"));
            let mut call = json!({"sessionUpdate": "tool_call", "toolCallId": id,
                "title": t.get("title").cloned().unwrap_or(json!("Run a command")),
                "kind": t.get("kind").cloned().unwrap_or(json!("execute")),
                "status": "pending"});
            if let Some(c) = t.get("command") {
                call["rawInput"] = json!({"command": c});
            }
            if let Some(p) = t.get("path") {
                call["locations"] = json!([{"path": p}]);
            }
            self.update(call);
            self.update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                "status": t.get("status").cloned().unwrap_or(json!("completed"))}),
            );
        } else if let Some(p) = step.get("permission") {
            self.permission(p);
        } else if step.get("plan").is_some() {
            self.update(json!({"sessionUpdate": "plan", "entries": [{"content": "do it", "priority": "high", "status": "pending"}]}));
        } else {
            crate::run_step(step, &self.session_id);
        }
    }

    fn permission(&mut self, p: &Value) {
        let id = self.next_request_id;
        self.next_request_id += 1;
        send(
            json!({"id": id, "method": "session/request_permission", "params": {
            "sessionId": self.session_id,
            "toolCall": {"toolCallId": "perm-1", "title": p.get("title").cloned().unwrap_or(json!("Edit a file"))},
            "options": [
                {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]}}),
        );
        while let Some(msg) = self.read() {
            if msg.get("method").is_none() && msg.get("id").and_then(Value::as_u64) == Some(id) {
                rpc_log(
                    &json!({"session": self.session, "reply_to": "session/request_permission", "reply": msg}),
                );
                return;
            }
        }
        std::process::exit(0);
    }

    fn wait_cancel(&mut self) {
        while let Some(msg) = self.read() {
            if msg.get("method").and_then(Value::as_str) == Some("session/cancel") {
                return;
            }
        }
        std::process::exit(0);
    }
}
