//! Pure parser for the Copilot CLI's `--output-format json` stdout: one JSON object per line
//! (`{type,id,timestamp,parentId,ephemeral?,data{…}}`, except the flat `result` line) in,
//! normalized events out.
//!
//! Usage: older CLIs report only `assistant.message.data.outputTokens`, each added as an
//! output-only delta; newer ones also write `assistant.usage` per request with input, cache
//! and model. Once an `assistant.usage` line is seen the messages' counts are ignored, and
//! output a message already reported is credited against the next usage line, so nothing
//! counts twice. Quota snapshots become rate-limit windows; an exhausted quota that ends the
//! turn before any output is a usage limit.

use super::preflight::{auth_failed_message, is_auth_failure_text};
use super::quota;
use super::tools::classify;
use crate::agent::error::AgentErrorKind;
use crate::agent::event::{AgentEvent, AgentEventKind, RateLimitStatus, TokenUsage, TurnOutcome};
use crate::agent::stream::{StreamParser, TurnEnd, shared_outcome};
use crate::agent::text::{MESSAGE_CHARS, cut_chars, head_and_tail, strip_ansi};
use crate::agent::tool_kind::{ToolKind, display_tool_name};
use crate::clock::Clock;
use serde_json::Value;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The vendor unit of Copilot's billing, as a run's `vendor_amounts` names it.
pub const PREMIUM_UNIT: &str = "premium_requests";

const TOOL_ERROR_BYTES: usize = 2048;

struct OpenTool {
    name: String,
    kind: Option<ToolKind>,
    argument: Option<String>,
    started: Option<Instant>,
}

struct ResultLine {
    exit_code: Option<i64>,
    api_duration_ms: Option<u64>,
}

/// Parser state for one turn.
pub struct CopilotParser {
    clock: Arc<dyn Clock>,
    workspace: PathBuf,
    pid: Option<u32>,
    /// The id the turn was launched with, replaced by the one the stream reports.
    session_id: Option<String>,
    model: Option<String>,
    tools: HashMap<String, OpenTool>,
    turn_usage: TokenUsage,
    /// Counted but not yet sent (input-only figures wait for output).
    pending: TokenUsage,
    usage_seen: bool,
    /// An `assistant.usage` line was seen: message counts are no longer added.
    per_request_usage: bool,
    /// Output counted from messages that no usage line has covered yet.
    message_output_credit: u64,
    assistant_messages: u64,
    last_text: Option<String>,
    task_summary: Option<String>,
    premium_requests: Option<u64>,
    result: Option<ResultLine>,
    auth_failure: bool,
    /// Set when a quota was reported exhausted (or a quota error arrived), with its reset.
    quota_exhausted: Option<Option<i64>>,
}

impl CopilotParser {
    /// A parser for one turn; `session_id` is the id the turn resumes, if any.
    pub fn new(clock: Arc<dyn Clock>, workspace: PathBuf, session_id: Option<String>) -> Self {
        CopilotParser {
            clock,
            workspace,
            pid: None,
            session_id: session_id.filter(|s| !s.is_empty()),
            model: None,
            tools: HashMap::new(),
            turn_usage: TokenUsage::default(),
            pending: TokenUsage::default(),
            usage_seen: false,
            per_request_usage: false,
            message_output_credit: 0,
            assistant_messages: 0,
            last_text: None,
            task_summary: None,
            premium_requests: None,
            result: None,
            auth_failure: false,
            quota_exhausted: None,
        }
    }

    /// The premium requests the turn's `result` line reported (Copilot's billing unit).
    pub fn premium_requests(&self) -> Option<u64> {
        self.premium_requests
    }

    fn event(&self, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.clock.now_ms(), kind)
    }

    fn notification(&self, message: String) -> AgentEvent {
        self.event(AgentEventKind::Notification { message })
    }

    fn parse(&mut self, v: &Value) -> Vec<AgentEvent> {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        let data = v.get("data").unwrap_or(&Value::Null);
        let text = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").trim();
        match ty {
            "result" => self.on_result(v),
            "assistant.message" => self.on_message(data),
            "assistant.usage" => self.on_usage(data),
            "assistant.turn_start" | "assistant.turn_end" => vec![self.notification(ty.into())],
            "tool.execution_start" => self.on_tool_start(data),
            "tool.execution_complete" => vec![self.on_tool_complete(data)],
            "session.warning" | "session.info" => vec![self.notification(cut(text("message")))],
            "session.error" => self.on_session_error(data),
            "session.task_complete" => {
                let summary = text("summary");
                if !summary.is_empty() {
                    self.task_summary = Some(summary.to_string());
                }
                vec![self.notification(cut(summary))]
            }
            "session.start" | "session.resume" => {
                if let Some(sid) = data.get("sessionId").and_then(Value::as_str) {
                    self.adopt_session(sid);
                }
                Vec::new()
            }
            "session.tools_updated" => {
                self.remember_model(data.get("model"));
                Vec::new()
            }
            "session.mcp_server_status_changed"
            | "session.mcp_servers_loaded"
            | "session.shutdown"
            | "user.message" => {
                log::debug!("type":% = ty; "copilot stream line");
                Vec::new()
            }
            t if t.ends_with("_delta") => vec![self.notification(String::new())],
            other => vec![self.event(AgentEventKind::OtherMessage {
                message: cut(other),
            })],
        }
    }

    fn adopt_session(&mut self, sid: &str) {
        let sid = sid.trim();
        if !sid.is_empty() {
            self.session_id = Some(sid.to_string());
        }
    }

    fn remember_model(&mut self, model: Option<&Value>) {
        if let Some(m) = model.and_then(Value::as_str).filter(|m| !m.is_empty()) {
            self.model = Some(m.to_string());
        }
    }

    fn on_message(&mut self, data: &Value) -> Vec<AgentEvent> {
        self.assistant_messages += 1;
        let mut out = Vec::new();
        let tokens = data
            .get("outputTokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if !self.per_request_usage && tokens > 0 {
            self.message_output_credit = self.message_output_credit.saturating_add(tokens);
            out.extend(self.add_usage(TokenUsage::new(0, tokens, 0, 0)));
        }
        let requests: Vec<&Value> = data
            .get("toolRequests")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        for r in &requests {
            self.note_tool_request(r);
        }
        let content = data
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let message = if !content.is_empty() {
            self.last_text = Some(content.to_string());
            cut(content)
        } else if !requests.is_empty() {
            let names: Vec<&str> = requests
                .iter()
                .map(|r| r.get("name").and_then(Value::as_str).unwrap_or("unknown"))
                .collect();
            format!(
                "requesting {} tool(s): {}",
                requests.len(),
                names.join(", ")
            )
        } else {
            String::new()
        };
        out.push(self.notification(message));
        out
    }

    fn on_usage(&mut self, data: &Value) -> Vec<AgentEvent> {
        self.remember_model(data.get("model"));
        let n = |k: &str| data.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (cache_read, cache_write) = (n("cacheReadTokens"), n("cacheWriteTokens"));
        // Copilot's input count includes the cached part (the cache terms are its subsets).
        let input = n("inputTokens").max(cache_read.saturating_add(cache_write));
        let reported_output = n("outputTokens");
        let covered = self.message_output_credit.min(reported_output);
        self.message_output_credit -= covered;
        self.per_request_usage = true;
        let mut out = self.add_usage(TokenUsage::new(
            input,
            reported_output - covered,
            cache_read,
            cache_write,
        ));
        if let Some(snaps) = data.get("quotaSnapshots").and_then(Value::as_object) {
            let windows = quota::windows(snaps);
            if let Some(w) = windows
                .iter()
                .find(|w| w.label == quota::PREMIUM_LABEL)
                .filter(|w| w.status == Some(RateLimitStatus::Exhausted))
            {
                self.quota_exhausted = Some(w.resets_at_ms);
            }
            if !windows.is_empty() {
                out.push(self.event(AgentEventKind::RateLimits { windows }));
            }
        }
        out
    }

    /// Counts a delta. A figure without output waits, joined to the next one, until the turn
    /// has output (so no zero-output event); `finish` sends what is still held.
    fn add_usage(&mut self, delta: TokenUsage) -> Vec<AgentEvent> {
        if delta.is_zero() {
            return Vec::new();
        }
        self.usage_seen = true;
        self.turn_usage = self.turn_usage.plus(&delta);
        self.pending = self.pending.plus(&delta);
        if self.turn_usage.output_tokens == 0 {
            return Vec::new();
        }
        self.flush_usage().into_iter().collect()
    }

    fn flush_usage(&mut self) -> Option<AgentEvent> {
        if self.pending.is_zero() {
            return None;
        }
        let usage = std::mem::take(&mut self.pending);
        Some(self.event(AgentEventKind::TokenUsage {
            usage,
            model: self.model.clone(),
            api_duration_ms: None,
        }))
    }

    fn on_session_error(&mut self, data: &Value) -> Vec<AgentEvent> {
        let kind = data.get("errorType").and_then(Value::as_str).unwrap_or("");
        let message = data
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if kind.contains("quota") || is_quota_text(message) {
            self.quota_exhausted.get_or_insert(None);
        }
        if is_auth_failure_text(message) || kind == "authentication" {
            self.auth_failure = true;
        }
        let label = match (kind.is_empty(), message.is_empty()) {
            (false, false) => format!("{kind}: {message}"),
            (false, true) => kind.to_string(),
            _ => message.to_string(),
        };
        vec![self.notification(cut(&label))]
    }

    fn note_tool_request(&mut self, r: &Value) {
        let Some(id) = r.get("toolCallId").and_then(Value::as_str) else {
            return;
        };
        if self.tools.contains_key(id) {
            return;
        }
        let name = r.get("name").and_then(Value::as_str).unwrap_or("unknown");
        let args = r.get("arguments").cloned().unwrap_or(Value::Null);
        let tool = self.tool(name, &args, None);
        self.tools.insert(id.to_string(), tool);
    }

    fn tool(&self, name: &str, args: &Value, started: Option<Instant>) -> OpenTool {
        let (kind, argument) = classify(name, args, &self.workspace);
        OpenTool {
            name: display_tool_name(name),
            kind,
            argument,
            started,
        }
    }

    fn on_tool_start(&mut self, data: &Value) -> Vec<AgentEvent> {
        let name = data
            .get("toolName")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        if let Some(id) = data.get("toolCallId").and_then(Value::as_str) {
            let args = data.get("arguments").cloned().unwrap_or(Value::Null);
            let tool = self.tool(name, &args, Some(self.clock.instant()));
            self.tools.insert(id.to_string(), tool);
        }
        vec![self.notification(format!("[tool: {name}]"))]
    }

    fn on_tool_complete(&mut self, data: &Value) -> AgentEvent {
        self.remember_model(data.get("model"));
        let id = data.get("toolCallId").and_then(Value::as_str).unwrap_or("");
        let success = data
            .get("success")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let message = if success {
            String::new()
        } else {
            tool_error_text(data)
        };
        let now = self.clock.instant();
        let (tool_name, tool_kind, tool_argument, duration_ms) = match self.tools.remove(id) {
            Some(t) => {
                // Both lines read within one millisecond measured nothing: no duration.
                let ms = t
                    .started
                    .map(|s| now.saturating_duration_since(s).as_millis())
                    .and_then(|ms| u64::try_from(ms).ok())
                    .filter(|ms| *ms > 0);
                (Some(t.name), t.kind, t.argument, ms)
            }
            None => {
                let name = data.get("toolName").and_then(Value::as_str);
                (
                    Some(name.map_or_else(|| "unknown".to_string(), display_tool_name)),
                    None,
                    None,
                    None,
                )
            }
        };
        self.event(AgentEventKind::ToolResult {
            tool_name,
            tool_kind,
            tool_argument,
            duration_ms,
            tool_error: !success,
            message,
        })
    }

    fn on_result(&mut self, v: &Value) -> Vec<AgentEvent> {
        if let Some(sid) = v.get("sessionId").and_then(Value::as_str) {
            self.adopt_session(sid);
        }
        let usage = v.get("usage");
        let field = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
        let mut events = Vec::new();
        if let Some(p) = field("premiumRequests") {
            self.premium_requests = Some(p);
            if p > 0 {
                // Copilot bills in premium requests: the run's vendor amount in that unit.
                events.push(self.event(AgentEventKind::VendorAmount {
                    unit: PREMIUM_UNIT.into(),
                    model: self.model.clone().unwrap_or_default(),
                    amount: p as f64,
                }));
            }
        }
        self.result = Some(ResultLine {
            exit_code: v.get("exitCode").and_then(Value::as_i64),
            api_duration_ms: field("totalApiDurationMs"),
        });
        events
    }

    /// Whether the turn produced anything: output tokens or an assistant message.
    fn had_output(&self) -> bool {
        self.turn_usage.output_tokens > 0 || self.assistant_messages > 0
    }

    /// A refusal that the stream or stderr explains: missing credentials, or a quota.
    fn refusal(&self, end: &TurnEnd) -> Option<TurnOutcome> {
        if self.auth_failure || end.stderr.lines().any(is_auth_failure_text) {
            return Some(TurnOutcome::Failed {
                message: auth_failed_message("the CLI reported no authentication"),
                kind: AgentErrorKind::AgentAuthFailed,
            });
        }
        let quota_stderr = end.stderr.lines().any(is_quota_text);
        match self.quota_exhausted {
            Some(resets_at_ms) if !self.had_output() => Some(TurnOutcome::UsageLimited {
                message: "premium request quota exhausted".into(),
                resets_at_ms,
                model: self.model.clone(),
            }),
            None if quota_stderr && !self.had_output() => Some(TurnOutcome::UsageLimited {
                message: "premium request quota exhausted".into(),
                resets_at_ms: None,
                model: self.model.clone(),
            }),
            _ => None,
        }
    }

    fn decide(&self, end: &TurnEnd) -> TurnOutcome {
        if let Some(o) = shared_outcome(end) {
            return o;
        }
        let code = end.exit.and_then(|e| e.code).unwrap_or(0);
        // A result line without `exitCode` is judged by the process's own exit status.
        let result_code = self
            .result
            .as_ref()
            .map(|r| r.exit_code.unwrap_or(i64::from(code)));
        match result_code {
            Some(0) => TurnOutcome::Completed {
                message: self.completion_text(),
            },
            Some(c) => self.refusal(end).unwrap_or_else(|| TurnOutcome::Failed {
                message: format!("copilot reported exit code {c}"),
                kind: AgentErrorKind::TurnFailed,
            }),
            None if code != 0 => self.refusal(end).unwrap_or_else(|| TurnOutcome::Failed {
                message: format!("non-zero exit (code {code})"),
                kind: AgentErrorKind::PortExit,
            }),
            None if !self.had_output() => {
                self.refusal(end).unwrap_or_else(|| TurnOutcome::Failed {
                    message: "agent exited without output".into(),
                    kind: AgentErrorKind::TurnFailed,
                })
            }
            None => TurnOutcome::Completed {
                message: String::new(),
            },
        }
    }

    fn completion_text(&self) -> String {
        self.task_summary
            .as_deref()
            .or(self.last_text.as_deref())
            .map(cut)
            .unwrap_or_default()
    }
}

impl StreamParser for CopilotParser {
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent> {
        self.pid = Some(pid);
        vec![self.event(AgentEventKind::SessionStarted {
            session_id: self.session_id.clone().unwrap_or_default(),
            agent_pid: Some(pid),
        })]
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        let text = String::from_utf8_lossy(line);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v) if v.is_object() => self.parse(&v),
            _ => {
                if is_auth_failure_text(trimmed) {
                    self.auth_failure = true;
                }
                vec![self.event(AgentEventKind::Malformed {
                    message: cut(&strip_ansi(trimmed)),
                })]
            }
        }
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let mut out: Vec<AgentEvent> = self.flush_usage().into_iter().collect();
        let outcome = self.decide(end);
        let api_duration_ms = self.result.as_ref().and_then(|r| r.api_duration_ms);
        out.push(self.event(outcome.terminal_event(api_duration_ms)));
        (outcome, out)
    }

    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn usage(&self) -> Option<TokenUsage> {
        self.usage_seen.then_some(self.turn_usage)
    }

    fn model(&self) -> Option<String> {
        self.model.clone()
    }
}

fn cut(s: &str) -> String {
    cut_chars(s, MESSAGE_CHARS)
}

/// Whether an error text is Copilot refusing for an exhausted request quota (not, say, a full
/// disk's "quota exceeded").
fn is_quota_text(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    let about_requests = t.contains("premium") || t.contains("request") || t.contains("copilot");
    let used_up = t.contains("exceed") || t.contains("exhaust") || t.contains("reached");
    t.contains("quota") && about_requests && used_up || t.contains("premium request limit")
}

/// The text of a failed tool call: `error.message`, else the result's content, cut to the
/// first line and the tail.
fn tool_error_text(data: &Value) -> String {
    let from_error = data.get("error").and_then(|e| {
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
    });
    let from_result = data.get("result").and_then(|r| {
        r.get("content")
            .and_then(Value::as_str)
            .or_else(|| r.as_str())
    });
    let raw = from_error.or(from_result).unwrap_or("").trim();
    head_and_tail(&strip_ansi(raw), TOOL_ERROR_BYTES)
}
