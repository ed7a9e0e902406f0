//! Pure parser for one codex `app-server` turn: every message the server sends while the turn
//! runs (notifications, server requests, the `turn/start` response) in, normalized events and
//! the answers to its requests out. No process is involved, so recorded transcripts replay
//! straight through it with an injected clock.
//!
//! Usage: `thread/tokenUsage/updated` carries the thread's running total; each report adds the
//! growth since the previous one as a delta (the session's first report adds its `last`
//! request, since a resumed thread's total includes earlier sessions). `turn/completed.usage`,
//! when present, is the turn's figure and replaces the running total: only what the deltas
//! missed is added.

use super::limits;
use crate::agent::cancel::CancelReason;
use crate::agent::error::AgentErrorKind;
use crate::agent::event::{AgentEvent, AgentEventKind, RateLimitWindow, TokenUsage, TurnOutcome};
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

/// What outlives one turn in a session: the usage baseline, the newest rate-limit report,
/// the model the thread runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionCarry {
    /// The thread total at the newest `thread/tokenUsage/updated`.
    pub thread_total: Option<TokenUsage>,
    pub rate_limits: Vec<RateLimitWindow>,
    pub model: Option<String>,
}

/// How the server request for approvals is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    AcceptForSession,
    Decline,
}

impl Approval {
    fn decision(self) -> &'static str {
        match self {
            Approval::AcceptForSession => "acceptForSession",
            Approval::Decline => "decline",
        }
    }
}

/// The turn's fixed facts.
#[derive(Debug, Clone)]
pub struct TurnContext {
    pub thread_id: String,
    pub pid: Option<u32>,
    /// The session's first turn announces the session (`session_started`).
    pub first_turn: bool,
    pub workspace: PathBuf,
    pub approval: Approval,
}

struct OpenTool {
    name: String,
    kind: Option<ToolKind>,
    argument: Option<String>,
    started: Instant,
}

#[derive(Debug, Clone)]
struct Completed {
    status: String,
    message: String,
    error_info: Option<String>,
}

/// Parser state for one turn.
pub struct CodexParser {
    clock: Arc<dyn Clock>,
    ctx: TurnContext,
    carry: SessionCarry,
    turn_id: Option<String>,
    tools: HashMap<String, OpenTool>,
    turn_usage: TokenUsage,
    usage_seen: bool,
    last_message: String,
    completed: Option<Completed>,
    start_error: Option<String>,
    input_required: Option<String>,
    replies: Vec<(Value, ServerReply)>,
    exit_hint: Option<String>,
}

impl CodexParser {
    pub fn new(clock: Arc<dyn Clock>, ctx: TurnContext, carry: SessionCarry) -> Self {
        CodexParser {
            clock,
            ctx,
            carry,
            turn_id: None,
            tools: HashMap::new(),
            turn_usage: TokenUsage::default(),
            usage_seen: false,
            last_message: String::new(),
            completed: None,
            start_error: None,
            input_required: None,
            replies: Vec::new(),
            exit_hint: None,
        }
    }

    /// The turn is over on the server's side (completed, refused, or waiting for a person).
    pub fn is_done(&self) -> bool {
        self.completed.is_some() || self.start_error.is_some() || self.input_required.is_some()
    }

    /// The server waits on a question nobody can answer: the turn must be interrupted.
    pub fn needs_interrupt(&self) -> bool {
        self.input_required.is_some() && self.completed.is_none()
    }

    /// Whether `turn/completed` arrived.
    pub fn saw_completion(&self) -> bool {
        self.completed.is_some()
    }

    /// The server's id of the running turn.
    pub fn turn_id(&self) -> Option<&str> {
        self.turn_id.as_deref()
    }

    /// The answers owed to server requests, oldest first.
    pub fn take_replies(&mut self) -> Vec<(Value, ServerReply)> {
        std::mem::take(&mut self.replies)
    }

    /// What survives into the next turn.
    pub fn carry(&self) -> &SessionCarry {
        &self.carry
    }

    /// A line about why the server went away (its last stderr line), for the failure message.
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

    /// One message from the server.
    pub fn on_message(&mut self, m: Message) -> Vec<AgentEvent> {
        match m {
            Message::Notification { method, params } => self.on_notification(&method, &params),
            Message::Request { id, method, params } => self.on_request(id, &method, &params),
            Message::Response { result, .. } => self.on_response(result),
            Message::Malformed(text) if text.is_empty() => Vec::new(),
            Message::Malformed(text) => vec![self.event(AgentEventKind::Malformed {
                message: cut_chars(&text, COMPLETION_CHARS),
            })],
        }
    }

    fn on_response(&mut self, result: Result<Value, RpcErrorObject>) -> Vec<AgentEvent> {
        match result {
            Ok(v) => {
                if self.turn_id.is_none()
                    && let Some(id) = v.pointer("/turn/id").and_then(Value::as_str)
                {
                    self.turn_id = Some(id.to_string());
                }
            }
            Err(e) if self.turn_id.is_none() && self.completed.is_none() => {
                self.start_error = Some(e.to_string());
            }
            Err(e) => log::debug!(error:% = e; "codex error response during a turn"),
        }
        Vec::new()
    }

    fn on_notification(&mut self, method: &str, p: &Value) -> Vec<AgentEvent> {
        match method {
            "turn/started" => {
                if self.turn_id.is_none() {
                    let id = p
                        .pointer("/turn/id")
                        .or_else(|| p.get("turnId"))
                        .and_then(Value::as_str);
                    self.turn_id = id.map(str::to_string);
                }
                if self.ctx.first_turn {
                    vec![self.event(AgentEventKind::SessionStarted {
                        session_id: self.ctx.thread_id.clone(),
                        agent_pid: self.ctx.pid,
                    })]
                } else {
                    vec![self.note("turn started")]
                }
            }
            "item/started" => self.on_item_started(p.get("item").unwrap_or(&Value::Null)),
            "item/completed" => self.on_item_completed(p.get("item").unwrap_or(&Value::Null)),
            "turn/completed" => self.on_turn_completed(p),
            "thread/tokenUsage/updated" => self.on_token_usage(p),
            "account/rateLimits/updated" => {
                let windows = limits::windows(p.get("rateLimits").unwrap_or(p));
                self.carry.rate_limits = windows.clone();
                if windows.is_empty() {
                    return Vec::new();
                }
                vec![self.event(AgentEventKind::RateLimits { windows })]
            }
            "turn/plan/updated" => vec![self.note("plan updated")],
            // The handshake's own announcement, when it arrives after the thread was started.
            "thread/started" => Vec::new(),
            "turn/diff/updated" => {
                log::debug!(thread_id:% = self.ctx.thread_id; "codex turn diff updated");
                Vec::new()
            }
            "error" => {
                let msg = p
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let retry = p.get("willRetry").and_then(Value::as_bool) == Some(true);
                let suffix = if retry { " (retrying)" } else { "" };
                vec![self.note(format!("error: {}{suffix}", cut_chars(msg, 300)))]
            }
            m if m.ends_with("/delta") || m.ends_with("Delta") => vec![self.note("")],
            other => vec![self.event(AgentEventKind::OtherMessage {
                message: other.to_string(),
            })],
        }
    }

    fn on_item_started(&mut self, item: &Value) -> Vec<AgentEvent> {
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        let (name, kind, argument) = match ty {
            "commandExecution" => {
                let cmd = item.get("command").and_then(Value::as_str).unwrap_or("");
                let arg = (!cmd.is_empty()).then(|| clean_argument(&strip_shell_wrapper(cmd)));
                let name = if cmd.is_empty() { ty } else { cmd };
                (name.to_string(), Some(ToolKind::Shell), arg)
            }
            "fileChange" => {
                let paths: Vec<String> = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("path").and_then(Value::as_str))
                    .map(|p| relative_to(p, &self.ctx.workspace))
                    .collect();
                let arg = (!paths.is_empty()).then(|| clean_argument(&paths.join(", ")));
                (ty.to_string(), Some(ToolKind::Edit), arg)
            }
            "mcpToolCall" | "dynamicToolCall" => {
                let tool = item.get("tool").and_then(Value::as_str);
                let name = match (item.get("server").and_then(Value::as_str), tool) {
                    (Some(s), Some(t)) => format!("{s}.{t}"),
                    (None, Some(t)) => t.to_string(),
                    _ => ty.to_string(),
                };
                (name, None, None)
            }
            _ => return vec![self.note("")],
        };
        self.tools.insert(
            id.to_string(),
            OpenTool {
                name,
                kind,
                argument,
                started: self.clock.instant(),
            },
        );
        vec![self.note(format!("[{ty}] {id}"))]
    }

    fn on_item_completed(&mut self, item: &Value) -> Vec<AgentEvent> {
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        if let Some(open) = self.tools.remove(id) {
            let status = item.get("status").and_then(Value::as_str).unwrap_or("");
            let exit_code = item.get("exitCode").and_then(Value::as_i64);
            let tool_error = matches!(status, "failed" | "declined")
                || exit_code.is_some_and(|c| c != 0)
                || item.get("success").and_then(Value::as_bool) == Some(false);
            let message = if tool_error {
                item.pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(|m| cut_chars(m, COMPLETION_CHARS))
                    .unwrap_or_else(|| match exit_code {
                        Some(c) => format!("exit code {c}"),
                        None => status.to_string(),
                    })
            } else {
                String::new()
            };
            let ms = self
                .clock
                .instant()
                .saturating_duration_since(open.started)
                .as_millis();
            let duration_ms = item
                .get("durationMs")
                .and_then(Value::as_u64)
                .or_else(|| Some(u64::try_from(ms).unwrap_or(u64::MAX)).filter(|d| *d > 0));
            return vec![self.event(AgentEventKind::ToolResult {
                tool_name: Some(open.name),
                tool_kind: open.kind,
                tool_argument: open.argument,
                duration_ms,
                tool_error,
                message,
            })];
        }
        if ty == "agentMessage" {
            let text = item
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if !text.is_empty() {
                self.last_message = text.to_string();
                return vec![self.note(cut_chars(text, NOTIFICATION_CHARS))];
            }
        }
        vec![self.note("")]
    }

    fn on_token_usage(&mut self, p: &Value) -> Vec<AgentEvent> {
        let Some(tu) = p.get("tokenUsage") else {
            return Vec::new();
        };
        let Some(total) = tu.get("total").map(camel_usage) else {
            return Vec::new();
        };
        let delta = match self.carry.thread_total {
            Some(prev) => minus(&total, &prev),
            None => tu.get("last").map(camel_usage).unwrap_or(total),
        };
        self.carry.thread_total = Some(total);
        self.add_usage(delta).into_iter().collect()
    }

    fn add_usage(&mut self, delta: TokenUsage) -> Option<AgentEvent> {
        if delta.is_zero() {
            return None;
        }
        self.usage_seen = true;
        self.turn_usage = self.turn_usage.plus(&delta);
        Some(self.event(AgentEventKind::TokenUsage {
            usage: delta,
            model: self.carry.model.clone(),
            api_duration_ms: None,
        }))
    }

    fn on_turn_completed(&mut self, p: &Value) -> Vec<AgentEvent> {
        let turn = p.get("turn").unwrap_or(&Value::Null);
        let status = turn
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("completed")
            .to_string();
        let error = turn.get("error").filter(|e| !e.is_null());
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let error_info = error
            .and_then(|e| e.get("codexErrorInfo"))
            .and_then(error_info_name);
        self.completed = Some(Completed {
            status,
            message,
            error_info,
        });
        let mut out = Vec::new();
        if let Some(u) = p.get("usage").filter(|u| has_counts(u)) {
            let figure = snake_usage(u);
            // The turn's own figure replaces the running total: add only what is missing.
            let remainder = minus(&figure, &self.turn_usage);
            self.usage_seen = true;
            out.extend(self.add_usage(remainder));
            self.turn_usage = figure;
        }
        out
    }

    fn on_request(&mut self, id: Value, method: &str, p: &Value) -> Vec<AgentEvent> {
        match method {
            "item/commandExecution/requestApproval"
            | "item/fileChange/requestApproval"
            | "execCommandApproval"
            | "applyPatchApproval" => {
                let decision = self.ctx.approval.decision();
                self.replies.push((id, Ok(json!({ "decision": decision }))));
                let what = p
                    .get("command")
                    .and_then(Value::as_str)
                    .map(|c| format!(": {}", cut_chars(c, NOTIFICATION_CHARS)))
                    .unwrap_or_default();
                vec![self.note(format!("approval {decision} for {method}{what}"))]
            }
            "item/tool/requestUserInput" => {
                self.replies.push((
                    id,
                    Err(RpcErrorObject {
                        code: -32000,
                        message: "sortie runs unattended: no user input is available".into(),
                        data: None,
                    }),
                ));
                self.input_required = Some("the agent asked for user input".into());
                Vec::new()
            }
            "item/tool/call" => {
                let tool = p
                    .get("tool")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string();
                let text = format!("tool {tool} is not provided by this orchestrator");
                self.replies.push((
                    id,
                    Ok(json!({
                        "success": false,
                        "output": text,
                        "contentItems": [{"type": "inputText", "text": text}],
                    })),
                ));
                vec![self.event(AgentEventKind::UnsupportedToolCall {
                    tool_name: tool,
                    message: text,
                })]
            }
            other => {
                self.replies.push((
                    id,
                    Err(RpcErrorObject {
                        code: -32601,
                        message: format!("method not supported: {other}"),
                        data: None,
                    }),
                ));
                vec![self.event(AgentEventKind::OtherMessage {
                    message: other.to_string(),
                })]
            }
        }
    }

    fn decide(&self, end: &TurnEnd) -> TurnOutcome {
        if let Some(m) = &self.input_required {
            return TurnOutcome::InputRequired { message: m.clone() };
        }
        if let Some(c) = &self.completed {
            return self.completed_outcome(c, end);
        }
        if let Some(e) = &self.start_error {
            return TurnOutcome::Failed {
                message: format!("turn/start failed: {e}"),
                kind: AgentErrorKind::TurnFailed,
            };
        }
        if let Some(reason) = end.cancelled {
            return TurnOutcome::Cancelled { reason };
        }
        if let Some(e) = &end.read_error {
            return TurnOutcome::Failed {
                message: format!("stdout read error: {e}"),
                kind: AgentErrorKind::PortExit,
            };
        }
        let why = match &self.exit_hint {
            Some(line) => format!(": {}", cut_chars(line, COMPLETION_CHARS)),
            None => String::new(),
        };
        TurnOutcome::Failed {
            message: format!("the agent server exited mid-turn{why}"),
            kind: AgentErrorKind::PortExit,
        }
    }

    fn completed_outcome(&self, c: &Completed, end: &TurnEnd) -> TurnOutcome {
        match c.status.as_str() {
            "completed" => TurnOutcome::Completed {
                message: cut_chars(&self.last_message, COMPLETION_CHARS),
            },
            "interrupted" => TurnOutcome::Cancelled {
                reason: end.cancelled.unwrap_or(CancelReason::User),
            },
            _ => {
                let info = c.error_info.as_deref().unwrap_or("");
                let text = if c.message.is_empty() {
                    format!("turn {}", c.status)
                } else {
                    cut_chars(&c.message, COMPLETION_CHARS)
                };
                let message = if info.is_empty() {
                    text
                } else {
                    format!("{info}: {text}")
                };
                match info {
                    "UsageLimitExceeded" => TurnOutcome::UsageLimited {
                        message,
                        resets_at_ms: limits::usage_limit_reset(&self.carry.rate_limits),
                        model: self.carry.model.clone(),
                    },
                    "Unauthorized" | "BadRequest" => TurnOutcome::Failed {
                        message,
                        kind: AgentErrorKind::ResponseError,
                    },
                    _ => TurnOutcome::Failed {
                        message,
                        kind: AgentErrorKind::TurnFailed,
                    },
                }
            }
        }
    }
}

impl StreamParser for CodexParser {
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent> {
        self.ctx.pid = Some(pid);
        Vec::new()
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        self.on_message(Message::parse(line))
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let outcome = self.decide(end);
        (
            outcome.clone(),
            vec![self.event(outcome.terminal_event(None))],
        )
    }

    fn session_id(&self) -> Option<String> {
        Some(self.ctx.thread_id.clone())
    }

    fn usage(&self) -> Option<TokenUsage> {
        self.usage_seen.then_some(self.turn_usage)
    }

    fn model(&self) -> Option<String> {
        self.carry.model.clone()
    }
}

/// `codexErrorInfo` is a string (`"UsageLimitExceeded"`) or an object with one key
/// (`{"httpConnectionFailed": {…}}`); the name in PascalCase either way.
fn error_info_name(v: &Value) -> Option<String> {
    let raw = match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => m.keys().next()?.clone(),
        _ => return None,
    };
    let mut chars = raw.chars();
    let first = chars.next()?;
    Some(first.to_ascii_uppercase().to_string() + chars.as_str())
}

fn has_counts(u: &Value) -> bool {
    ["input_tokens", "output_tokens", "cached_input_tokens"]
        .iter()
        .any(|k| u.get(*k).and_then(Value::as_u64).is_some())
}

/// `turn/completed.usage`: codex's input already includes the cached part.
fn snake_usage(u: &Value) -> TokenUsage {
    let f = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage::new(
        f("input_tokens"),
        f("output_tokens"),
        f("cached_input_tokens"),
        0,
    )
}

/// `thread/tokenUsage/updated` breakdowns.
fn camel_usage(u: &Value) -> TokenUsage {
    let f = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage::new(
        f("inputTokens"),
        f("outputTokens"),
        f("cachedInputTokens"),
        0,
    )
}

fn minus(a: &TokenUsage, b: &TokenUsage) -> TokenUsage {
    TokenUsage::new(
        a.input_tokens.saturating_sub(b.input_tokens),
        a.output_tokens.saturating_sub(b.output_tokens),
        a.cache_read_tokens.saturating_sub(b.cache_read_tokens),
        0,
    )
}
