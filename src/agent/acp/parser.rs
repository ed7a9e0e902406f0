//! Pure parser for one Agent Client Protocol prompt turn: `session/update` notifications,
//! `session/request_permission` requests and the `session/prompt` response in, normalized
//! events and the answers owed to the agent out. Replayable without a process.
//!
//! Message chunks are joined and announced as one notification when something else happens
//! (a tool call, the end of the turn). Usage, when the agent reports it on the prompt
//! response (`usage`, or `_meta.usage`), is the turn's figure; input includes cached reads.

use crate::agent::cancel::CancelReason;
use crate::agent::error::AgentErrorKind;
use crate::agent::event::{AgentEvent, AgentEventKind, TokenUsage, TurnOutcome};
use crate::agent::jsonrpc::{Message, RpcErrorObject, ServerReply};
use crate::agent::stream::{StreamParser, TurnEnd};
use crate::agent::text::cut_chars;
use crate::agent::tool_kind::{ToolKind, clean_argument, relative_to, strip_shell_wrapper};
use crate::clock::Clock;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

const NOTIFICATION_CHARS: usize = 200;
const COMPLETION_CHARS: usize = 500;
/// The ACP error code for "authentication required".
pub const AUTH_REQUIRED: i64 = -32000;

/// The turn's fixed facts.
#[derive(Debug, Clone)]
pub struct PromptContext {
    pub session_id: String,
    pub pid: Option<u32>,
    pub first_turn: bool,
    pub workspace: PathBuf,
    /// Answer permission requests with a rejecting option.
    pub reject_permissions: bool,
    /// The id of this turn's `session/prompt` request.
    pub prompt_id: u64,
}

struct OpenTool {
    name: String,
    kind: Option<ToolKind>,
    argument: Option<String>,
    started: Instant,
}

/// Parser state for one prompt turn.
pub struct AcpParser {
    clock: Arc<dyn Clock>,
    ctx: PromptContext,
    tools: HashMap<String, OpenTool>,
    chunk: String,
    last_message: String,
    started_sent: bool,
    stop_reason: Option<String>,
    prompt_error: Option<RpcErrorObject>,
    usage: Option<TokenUsage>,
    replies: Vec<(Value, ServerReply)>,
    exit_hint: Option<String>,
}

impl AcpParser {
    pub fn new(clock: Arc<dyn Clock>, ctx: PromptContext) -> Self {
        AcpParser {
            clock,
            ctx,
            tools: HashMap::new(),
            chunk: String::new(),
            last_message: String::new(),
            started_sent: false,
            stop_reason: None,
            prompt_error: None,
            usage: None,
            replies: Vec::new(),
            exit_hint: None,
        }
    }

    /// The prompt was answered (with a stop reason or an error).
    pub fn is_done(&self) -> bool {
        self.stop_reason.is_some() || self.prompt_error.is_some()
    }

    pub fn take_replies(&mut self) -> Vec<(Value, ServerReply)> {
        std::mem::take(&mut self.replies)
    }

    pub fn set_exit_hint(&mut self, hint: Option<String>) {
        self.exit_hint = hint;
    }

    fn event(&self, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.clock.now_ms(), kind)
    }

    fn note(&self, message: impl Into<String>) -> AgentEvent {
        self.event(AgentEventKind::Notification {
            message: message.into(),
        })
    }

    /// The session starts with the turn's first sign of life (on the first turn only).
    fn started(&mut self) -> Vec<AgentEvent> {
        if self.started_sent || !self.ctx.first_turn {
            return Vec::new();
        }
        self.started_sent = true;
        vec![self.event(AgentEventKind::SessionStarted {
            session_id: self.ctx.session_id.clone(),
            agent_pid: self.ctx.pid,
        })]
    }

    fn flush_chunk(&mut self) -> Vec<AgentEvent> {
        let text = std::mem::take(&mut self.chunk);
        let text = text.trim();
        if text.is_empty() {
            return Vec::new();
        }
        self.last_message = text.to_string();
        vec![self.note(cut_chars(text, NOTIFICATION_CHARS))]
    }

    /// One message from the agent.
    pub fn on_message(&mut self, m: Message) -> Vec<AgentEvent> {
        let mut out = self.started();
        out.extend(match m {
            Message::Notification { method, params } if method == "session/update" => {
                self.on_update(params.get("update").unwrap_or(&Value::Null))
            }
            Message::Notification { method, .. } => {
                vec![self.event(AgentEventKind::OtherMessage { message: method })]
            }
            Message::Request { id, method, params } => self.on_request(id, &method, &params),
            Message::Response { id, result } if id.as_u64() == Some(self.ctx.prompt_id) => {
                self.on_prompt_response(result)
            }
            Message::Response { .. } => Vec::new(),
            Message::Malformed(t) if t.is_empty() => Vec::new(),
            Message::Malformed(t) => vec![self.event(AgentEventKind::Malformed {
                message: cut_chars(&t, COMPLETION_CHARS),
            })],
        });
        out
    }

    fn on_update(&mut self, u: &Value) -> Vec<AgentEvent> {
        let kind = u.get("sessionUpdate").and_then(Value::as_str).unwrap_or("");
        match kind {
            "agent_message_chunk" => {
                if let Some(t) = u.pointer("/content/text").and_then(Value::as_str) {
                    self.chunk.push_str(t);
                }
                vec![self.note("")]
            }
            "agent_thought_chunk"
            | "user_message_chunk"
            | "available_commands_update"
            | "current_mode_update"
            | "usage_update"
            | "session_info_update" => {
                vec![self.note("")]
            }
            "plan" => {
                let mut out = self.flush_chunk();
                out.push(self.note("plan updated"));
                out
            }
            "tool_call" => {
                let mut out = self.flush_chunk();
                out.extend(self.on_tool_call(u));
                out
            }
            "tool_call_update" => self.on_tool_update(u),
            other => vec![self.event(AgentEventKind::OtherMessage {
                message: format!("session/update {other}"),
            })],
        }
    }

    fn on_tool_call(&mut self, u: &Value) -> Vec<AgentEvent> {
        let id = u.get("toolCallId").and_then(Value::as_str).unwrap_or("");
        let title = u.get("title").and_then(Value::as_str).unwrap_or("tool");
        let paths: Vec<String> = u
            .get("locations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|l| l.get("path").and_then(Value::as_str))
            .map(|p| relative_to(p, &self.ctx.workspace))
            .collect();
        let (kind, argument) = match u.get("kind").and_then(Value::as_str) {
            Some("execute") => {
                let cmd = u
                    .pointer("/rawInput/command")
                    .and_then(Value::as_str)
                    .unwrap_or(title);
                (
                    Some(ToolKind::Shell),
                    Some(clean_argument(&strip_shell_wrapper(cmd))),
                )
            }
            Some("read") => (
                Some(ToolKind::Read),
                Some(clean_argument(&paths.join(", "))),
            ),
            Some("edit" | "delete" | "move") => (
                Some(ToolKind::Edit),
                Some(clean_argument(&paths.join(", "))),
            ),
            _ => (None, None),
        };
        let argument = argument.filter(|a| !a.is_empty());
        self.tools.insert(
            id.to_string(),
            OpenTool {
                name: cut_chars(title, 100),
                kind,
                argument,
                started: self.clock.instant(),
            },
        );
        let mut out = vec![self.note(format!("[tool: {}]", cut_chars(title, 100)))];
        if matches!(
            u.get("status").and_then(Value::as_str),
            Some("completed" | "failed")
        ) {
            out.extend(self.on_tool_update(u));
        }
        out
    }

    fn on_tool_update(&mut self, u: &Value) -> Vec<AgentEvent> {
        let id = u.get("toolCallId").and_then(Value::as_str).unwrap_or("");
        let status = u.get("status").and_then(Value::as_str).unwrap_or("");
        if !matches!(status, "completed" | "failed") {
            return vec![self.note("")];
        }
        let Some(open) = self.tools.remove(id) else {
            return vec![self.note("")];
        };
        let tool_error = status == "failed";
        let ms = self
            .clock
            .instant()
            .saturating_duration_since(open.started)
            .as_millis();
        let message = if tool_error {
            u.get("content")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find_map(|b| b.pointer("/content/text")))
                .and_then(Value::as_str)
                .map(|t| cut_chars(t, COMPLETION_CHARS))
                .unwrap_or_else(|| "failed".into())
        } else {
            String::new()
        };
        vec![self.event(AgentEventKind::ToolResult {
            tool_name: Some(open.name),
            tool_kind: open.kind,
            tool_argument: open.argument,
            duration_ms: Some(u64::try_from(ms).unwrap_or(u64::MAX)).filter(|d| *d > 0),
            tool_error,
            message,
        })]
    }

    fn on_request(&mut self, id: Value, method: &str, p: &Value) -> Vec<AgentEvent> {
        if method != "session/request_permission" {
            self.replies.push((
                id,
                Err(RpcErrorObject {
                    code: -32601,
                    message: format!("method not supported: {method}"),
                    data: None,
                }),
            ));
            return vec![self.event(AgentEventKind::OtherMessage {
                message: method.to_string(),
            })];
        }
        let options: Vec<(&str, &str)> = p
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| {
                Some((
                    o.get("optionId").and_then(Value::as_str)?,
                    o.get("kind").and_then(Value::as_str).unwrap_or(""),
                ))
            })
            .collect();
        let wanted: &[&str] = if self.ctx.reject_permissions {
            &["reject_once", "reject_always"]
        } else {
            &["allow_always", "allow_once"]
        };
        let chosen = wanted.iter().find_map(|k| {
            options
                .iter()
                .find(|(_, kind)| kind == k)
                .map(|(id, _)| *id)
        });
        let title = p
            .pointer("/toolCall/title")
            .and_then(Value::as_str)
            .unwrap_or("a tool call");
        let (reply, what) = match chosen {
            Some(option) => (
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
                format!(
                    "permission {option} for {}",
                    cut_chars(title, NOTIFICATION_CHARS)
                ),
            ),
            None => (
                json!({"outcome": {"outcome": "cancelled"}}),
                format!(
                    "permission refused for {}",
                    cut_chars(title, NOTIFICATION_CHARS)
                ),
            ),
        };
        self.replies.push((id, Ok(reply)));
        vec![self.note(what)]
    }

    fn on_prompt_response(&mut self, result: Result<Value, RpcErrorObject>) -> Vec<AgentEvent> {
        let mut out = self.flush_chunk();
        match result {
            Ok(v) => {
                self.stop_reason = Some(
                    v.get("stopReason")
                        .and_then(Value::as_str)
                        .unwrap_or("end_turn")
                        .to_string(),
                );
                let u = v.get("usage").or_else(|| v.pointer("/_meta/usage"));
                if let Some(u) = u.filter(|u| u.is_object()).map(usage) {
                    self.usage = Some(u);
                    if !u.is_zero() {
                        out.push(self.event(AgentEventKind::TokenUsage {
                            usage: u,
                            model: None,
                            api_duration_ms: None,
                        }));
                    }
                }
            }
            Err(e) => self.prompt_error = Some(e),
        }
        out
    }

    fn decide(&self, end: &TurnEnd) -> TurnOutcome {
        if let Some(e) = &self.prompt_error {
            let kind = if e.code == AUTH_REQUIRED {
                AgentErrorKind::AgentAuthFailed
            } else {
                AgentErrorKind::TurnFailed
            };
            return TurnOutcome::Failed {
                message: format!("session/prompt failed: {e}"),
                kind,
            };
        }
        match self.stop_reason.as_deref() {
            Some("end_turn") => TurnOutcome::Completed {
                message: cut_chars(&self.last_message, COMPLETION_CHARS),
            },
            Some("cancelled") => TurnOutcome::Cancelled {
                reason: end.cancelled.unwrap_or(CancelReason::User),
            },
            Some(other) => TurnOutcome::Failed {
                message: format!("the agent stopped: {other}"),
                kind: AgentErrorKind::TurnFailed,
            },
            None => {
                if let Some(reason) = end.cancelled {
                    return TurnOutcome::Cancelled { reason };
                }
                if let Some(e) = &end.read_error {
                    return TurnOutcome::Failed {
                        message: format!("stdout read error: {e}"),
                        kind: AgentErrorKind::PortExit,
                    };
                }
                let why = self
                    .exit_hint
                    .as_deref()
                    .map(|l| format!(": {}", cut_chars(l, COMPLETION_CHARS)))
                    .unwrap_or_default();
                TurnOutcome::Failed {
                    message: format!("the agent server exited mid-turn{why}"),
                    kind: AgentErrorKind::PortExit,
                }
            }
        }
    }
}

impl StreamParser for AcpParser {
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent> {
        self.ctx.pid = Some(pid);
        Vec::new()
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        self.on_message(Message::parse(line))
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let mut out = self.started();
        out.extend(self.flush_chunk());
        let outcome = self.decide(end);
        out.push(self.event(outcome.terminal_event(None)));
        (outcome, out)
    }

    fn session_id(&self) -> Option<String> {
        Some(self.ctx.session_id.clone())
    }

    fn usage(&self) -> Option<TokenUsage> {
        self.usage
    }

    fn model(&self) -> Option<String> {
        None
    }
}

/// A usage object in camelCase or snake_case; input includes cached reads and writes.
fn usage(u: &Value) -> TokenUsage {
    let f = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| u.get(*k).and_then(Value::as_u64))
            .unwrap_or(0)
    };
    TokenUsage::new(
        f(&["inputTokens", "input_tokens"]),
        f(&["outputTokens", "output_tokens"]),
        f(&["cachedReadTokens", "cacheReadTokens", "cached_read_tokens"]),
        f(&[
            "cachedWriteTokens",
            "cacheWriteTokens",
            "cached_write_tokens",
        ]),
    )
}
