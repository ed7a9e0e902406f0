//! Pure parser for Claude Code's `--output-format stream-json --verbose` stdout: one JSON
//! object per line in, normalized events out. Usage is tracked per message id so repeated
//! snapshots count once, emitted as deltas, and reconciled with `result.usage` at the end.

use super::fast;
use super::tools::classify;
use crate::agent::error::AgentErrorKind;
use crate::agent::event::{
    AgentEvent, AgentEventKind, RateLimitStatus, RateLimitWindow, TokenUsage, TurnOutcome,
};
use crate::agent::stream::{StreamParser, TurnEnd, shared_outcome};
use crate::agent::text::{MESSAGE_CHARS, cut_chars, head_and_tail, strip_ansi};
use crate::agent::tool_kind::{ToolKind, display_tool_name};
use crate::clock::Clock;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

const TOOL_ERROR_BYTES: usize = 2048;
/// Message ids per generation whose usage snapshots the parser remembers.
const MESSAGE_IDS: usize = 1024;

/// Claude's raw counters: `input` excludes both cache terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RawUsage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_creation: u64,
}

impl RawUsage {
    fn from_json(v: &Value) -> RawUsage {
        let f = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        RawUsage {
            input: f("input_tokens"),
            output: f("output_tokens"),
            cache_read: f("cache_read_input_tokens"),
            cache_creation: f("cache_creation_input_tokens"),
        }
    }
    fn minus(&self, o: &RawUsage) -> RawUsage {
        RawUsage {
            input: self.input.saturating_sub(o.input),
            output: self.output.saturating_sub(o.output),
            cache_read: self.cache_read.saturating_sub(o.cache_read),
            cache_creation: self.cache_creation.saturating_sub(o.cache_creation),
        }
    }
    fn plus(&self, o: &RawUsage) -> RawUsage {
        RawUsage {
            input: self.input.saturating_add(o.input),
            output: self.output.saturating_add(o.output),
            cache_read: self.cache_read.saturating_add(o.cache_read),
            cache_creation: self.cache_creation.saturating_add(o.cache_creation),
        }
    }
    fn max(&self, o: &RawUsage) -> RawUsage {
        RawUsage {
            input: self.input.max(o.input),
            output: self.output.max(o.output),
            cache_read: self.cache_read.max(o.cache_read),
            cache_creation: self.cache_creation.max(o.cache_creation),
        }
    }
    fn is_zero(&self) -> bool {
        *self == RawUsage::default()
    }
    fn normalized(&self) -> TokenUsage {
        TokenUsage::from_uncached_input(
            self.input,
            self.output,
            self.cache_read,
            self.cache_creation,
        )
    }
}

struct OpenTool {
    name: String,
    kind: Option<ToolKind>,
    argument: Option<String>,
    started: Instant,
}

struct ResultLine {
    subtype: String,
    is_error: bool,
    text: String,
    duration_api_ms: Option<u64>,
}

/// Parser state for one turn.
pub struct ClaudeParser {
    clock: Arc<dyn Clock>,
    workspace: PathBuf,
    pid: Option<u32>,
    session_id: Option<String>,
    model: Option<String>,
    api_timer: Option<Instant>,
    sent_api_timing: bool,
    tools: HashMap<String, OpenTool>,
    /// Each message's latest usage snapshot by id, the newest [`MESSAGE_IDS`] at most; the
    /// generation before them in `older_messages`.
    usage_by_message: HashMap<String, RawUsage>,
    older_messages: HashMap<String, RawUsage>,
    anonymous_messages: u64,
    turn_usage: RawUsage,
    pending: RawUsage,
    usage_seen: bool,
    result: Option<ResultLine>,
    usage_limit_resets_at_ms: Option<Option<i64>>,
    /// The model family a rejected limit names (`seven_day_opus` → `opus`).
    usage_limit_model: Option<String>,
    /// The text of an assistant message Claude Code made up for a failed login
    /// (`"error": "authentication_failed"`).
    auth_failure: Option<String>,
}

impl ClaudeParser {
    /// A parser for one turn; `session_id` is the id the turn was launched with.
    pub fn new(clock: Arc<dyn Clock>, workspace: PathBuf, session_id: Option<String>) -> Self {
        ClaudeParser {
            clock,
            workspace,
            pid: None,
            session_id,
            model: None,
            api_timer: None,
            sent_api_timing: false,
            tools: HashMap::new(),
            usage_by_message: HashMap::new(),
            older_messages: HashMap::new(),
            anonymous_messages: 0,
            turn_usage: RawUsage::default(),
            pending: RawUsage::default(),
            usage_seen: false,
            result: None,
            usage_limit_resets_at_ms: None,
            usage_limit_model: None,
            auth_failure: None,
        }
    }

    fn event(&self, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.clock.now_ms(), kind)
    }

    fn notification(&self, message: String) -> AgentEvent {
        self.event(AgentEventKind::Notification { message })
    }

    fn parse(&mut self, v: &Value) -> Vec<AgentEvent> {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        let subtype = v.get("subtype").and_then(Value::as_str);
        match (ty, subtype) {
            ("system", Some("init")) => self.on_init(v),
            ("system", Some("api_retry")) => vec![self.notification(api_retry_message(v))],
            ("system", sub) => vec![self.notification(format!("system/{}", sub.unwrap_or("")))],
            ("assistant", _) => self.on_assistant(v),
            ("user", _) => self.on_user(v),
            ("result", _) => self.on_result(v),
            ("stream_event", _) => vec![self.notification(String::new())],
            ("rate_limit_event", _) => self.on_rate_limit(v),
            (other, sub) => {
                let label = match sub {
                    Some(s) => format!("{other}/{s}"),
                    None => other.to_string(),
                };
                vec![self.event(AgentEventKind::OtherMessage { message: label })]
            }
        }
    }

    fn on_init(&mut self, v: &Value) -> Vec<AgentEvent> {
        if let Some(sid) = v.get("session_id").and_then(Value::as_str) {
            self.session_id = Some(sid.to_string());
        }
        self.api_timer = Some(self.clock.instant());
        vec![self.event(AgentEventKind::SessionStarted {
            session_id: self.session_id.clone().unwrap_or_default(),
            agent_pid: self.pid,
        })]
    }

    fn on_assistant(&mut self, v: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        let Some(msg) = v.get("message") else {
            return vec![self.event(AgentEventKind::OtherMessage {
                message: "assistant".into(),
            })];
        };
        self.note_model(msg.get("model").and_then(Value::as_str));
        if v.get("error").and_then(Value::as_str) == Some("authentication_failed") {
            self.auth_failure = Some(message_text(msg));
        }
        if let Some(usage) = msg.get("usage").filter(|u| u.is_object()) {
            let raw = RawUsage::from_json(usage);
            self.take_message_usage(msg.get("id").and_then(Value::as_str), raw, &mut out);
        }
        let mut parts = Vec::new();
        for block in msg
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .trim();
                    if !text.is_empty() {
                        parts.push(cut_chars(text, MESSAGE_CHARS));
                    }
                }
                Some("tool_use") => {
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown");
                    self.open_tool(block);
                    parts.push(format!("[tool: {name}]"));
                }
                Some("tool_result") => {
                    let ev = self.close_tool(block);
                    let ok = !block
                        .get("is_error")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    parts.push(format!(
                        "[tool_result: {}]",
                        if ok { "ok" } else { "error" }
                    ));
                    out.push(ev);
                }
                _ => {}
            }
        }
        self.push_parts(parts, &mut out);
        out
    }

    /// An assistant line read by [`fast::assistant`]: the same steps as [`Self::on_assistant`]
    /// for a message of text blocks.
    fn on_fast_assistant(&mut self, line: fast::AssistantLine<'_>) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        self.note_model(line.model.as_ref().map(|m| &*m.0));
        if let Some(u) = line.usage {
            let raw = RawUsage {
                input: u.input,
                output: u.output,
                cache_read: u.cache_read,
                cache_creation: u.cache_creation,
            };
            self.take_message_usage(line.id.as_ref().map(|id| &*id.0), raw, &mut out);
        }
        // The parts joined as `push_parts` joins them, without a list of parts.
        let mut text: Option<String> = None;
        for part in line.texts.iter().map(str::trim).filter(|t| !t.is_empty()) {
            let part = cut_chars(part, MESSAGE_CHARS);
            match &mut text {
                Some(text) => {
                    text.push(' ');
                    text.push_str(&part);
                }
                None => text = Some(part),
            }
        }
        if let Some(text) = text {
            out.push(self.notification(text));
        }
        out
    }

    /// The model an assistant message names; `<synthetic>` marks a message Claude Code wrote
    /// itself, not a model's.
    fn note_model(&mut self, model: Option<&str>) {
        if let Some(model) = model.filter(|m| !m.starts_with('<'))
            && self.model.as_deref() != Some(model)
        {
            self.model = Some(model.to_string());
        }
    }

    /// Counts a message's usage snapshot once: only what it adds to the message's previous
    /// snapshot (by id) is new.
    fn take_message_usage(&mut self, id: Option<&str>, raw: RawUsage, out: &mut Vec<AgentEvent>) {
        // A repeated snapshot of a known message updates its entry in place.
        let (newer, older) = (&mut self.usage_by_message, &mut self.older_messages);
        let known = id.and_then(|id| match newer.get_mut(id) {
            Some(prev) => Some(prev),
            None => older.get_mut(id),
        });
        let delta = match (id, known) {
            (_, Some(prev)) => {
                let delta = raw.minus(prev);
                *prev = prev.max(&raw);
                delta
            }
            (Some(id), None) => {
                self.remember_message(id.to_string(), raw);
                raw
            }
            (None, None) => {
                self.anonymous_messages += 1;
                let id = format!("\u{0}anonymous-{}", self.anonymous_messages);
                self.remember_message(id, raw);
                raw
            }
        };
        self.add_usage(delta);
        // Hold input-only figures until the turn has output, so no zero-output event.
        if self.turn_usage.output > 0
            && let Some(ev) = self.flush_usage()
        {
            out.push(ev);
        }
    }

    /// Remembers a new message's snapshot. A full generation becomes the older one (the oldest
    /// is forgotten, its room reused): a message's snapshots come together, and a flood of
    /// message ids does not grow the parser without limit.
    fn remember_message(&mut self, id: String, raw: RawUsage) {
        if self.usage_by_message.len() >= MESSAGE_IDS {
            std::mem::swap(&mut self.usage_by_message, &mut self.older_messages);
            self.usage_by_message.clear();
        }
        self.usage_by_message.insert(id, raw);
    }

    /// The message's parts as one notification (none when it has none).
    fn push_parts(&self, mut parts: Vec<String>, out: &mut Vec<AgentEvent>) {
        let text = if parts.len() == 1 {
            parts.pop()
        } else {
            (!parts.is_empty()).then(|| parts.join(" "))
        };
        if let Some(text) = text {
            out.push(self.notification(text));
        }
    }

    fn on_user(&mut self, v: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        let blocks = v
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array);
        for block in blocks.into_iter().flatten() {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                out.push(self.close_tool(block));
            }
        }
        // Tool output goes back to the model: a new API request starts now.
        self.api_timer = Some(self.clock.instant());
        if out.is_empty() {
            out.push(self.notification(String::new()));
        }
        out
    }

    fn on_result(&mut self, v: &Value) -> Vec<AgentEvent> {
        if self.session_id.is_none()
            && let Some(sid) = v.get("session_id").and_then(Value::as_str)
        {
            self.session_id = Some(sid.to_string());
        }
        if self.model.is_none()
            && let Some(m) = v.get("modelUsage").and_then(Value::as_object)
        {
            self.model = m.keys().next().cloned();
        }
        self.result = Some(ResultLine {
            subtype: v
                .get("subtype")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            text: v
                .get("result")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            duration_api_ms: v.get("duration_api_ms").and_then(Value::as_u64),
        });
        let mut out = Vec::new();
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            // Only the part the per-message figures missed is added, never a second count.
            let remainder = RawUsage::from_json(usage).minus(&self.turn_usage);
            self.add_usage(remainder);
            if let Some(ev) = self.flush_usage() {
                out.push(ev);
            }
        }
        if let Some(usd) = result_cost_usd(v) {
            out.push(self.event(AgentEventKind::VendorAmount {
                unit: crate::agent::event::USD_UNIT.to_string(),
                model: self.model.clone().unwrap_or_default(),
                amount: usd,
            }));
        }
        out
    }

    fn on_rate_limit(&mut self, v: &Value) -> Vec<AgentEvent> {
        let Some(info) = v.get("rate_limit_info") else {
            return vec![self.event(AgentEventKind::OtherMessage {
                message: "rate_limit_event".into(),
            })];
        };
        let status = match info.get("status").and_then(Value::as_str) {
            Some("allowed") => Some(RateLimitStatus::Allowed),
            Some("allowed_warning") => Some(RateLimitStatus::Warning),
            Some("rejected") => Some(RateLimitStatus::Exhausted),
            _ => None,
        };
        let resets_at_ms = info
            .get("resetsAt")
            .and_then(Value::as_i64)
            .map(|s| s.saturating_mul(1000));
        let limit_type = info.get("rateLimitType").and_then(Value::as_str);
        if status == Some(RateLimitStatus::Exhausted) {
            self.usage_limit_resets_at_ms = Some(resets_at_ms);
            self.usage_limit_model = match limit_type {
                Some("seven_day_opus") => Some("opus".into()),
                Some("seven_day_sonnet") => Some("sonnet".into()),
                _ => None,
            };
        }
        const HOUR_MS: u64 = 3_600_000;
        let (label, window_ms) = match limit_type {
            Some("five_hour") => ("5-hour limit".to_string(), Some(5 * HOUR_MS)),
            Some("seven_day") => ("Weekly limit".to_string(), Some(7 * 24 * HOUR_MS)),
            Some("seven_day_opus") => ("Weekly Opus limit".to_string(), Some(7 * 24 * HOUR_MS)),
            Some("seven_day_sonnet") => ("Weekly Sonnet limit".to_string(), Some(7 * 24 * HOUR_MS)),
            Some(other) => (other.to_string(), None),
            None => ("Rate limit".to_string(), None),
        };
        let window = RateLimitWindow {
            label,
            used_percent: info
                .get("utilization")
                .and_then(Value::as_f64)
                .map(|u| u * 100.0),
            status,
            resets_at_ms,
            window_ms,
        };
        vec![self.event(AgentEventKind::RateLimits {
            windows: vec![window],
        })]
    }

    fn add_usage(&mut self, delta: RawUsage) {
        self.usage_seen = true;
        self.turn_usage = self.turn_usage.plus(&delta);
        self.pending = self.pending.plus(&delta);
    }

    fn flush_usage(&mut self) -> Option<AgentEvent> {
        if self.pending.is_zero() {
            return None;
        }
        let usage = self.pending.normalized();
        self.pending = RawUsage::default();
        let api_duration_ms = self.api_timer.take().map(|t| {
            let ms = self
                .clock
                .instant()
                .saturating_duration_since(t)
                .as_millis();
            u64::try_from(ms).unwrap_or(u64::MAX).max(1)
        });
        if api_duration_ms.is_some() {
            self.sent_api_timing = true;
        }
        Some(self.event(AgentEventKind::TokenUsage {
            usage,
            model: self.model.clone(),
            api_duration_ms,
        }))
    }

    fn open_tool(&mut self, block: &Value) {
        let Some(id) = block.get("id").and_then(Value::as_str) else {
            return;
        };
        let name = block
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let (kind, argument) = classify(name, &input, &self.workspace);
        self.tools.insert(
            id.to_string(),
            OpenTool {
                name: display_tool_name(name),
                kind,
                argument,
                started: self.clock.instant(),
            },
        );
    }

    fn close_tool(&mut self, block: &Value) -> AgentEvent {
        let id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let tool_error = block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let open = self.tools.remove(id);
        let now = self.clock.instant();
        let message = if tool_error {
            tool_error_text(block.get("content"))
        } else {
            String::new()
        };
        let (tool_name, tool_kind, tool_argument, duration_ms) = match open {
            Some(t) => {
                // Timed from the use line to the result line: both read within the same
                // millisecond (one buffered read) measured nothing, so no duration is reported.
                let ms = now.saturating_duration_since(t.started).as_millis();
                let ms = u64::try_from(ms).unwrap_or(u64::MAX);
                (Some(t.name), t.kind, t.argument, (ms > 0).then_some(ms))
            }
            None => (Some("unknown".to_string()), None, None, None),
        };
        self.event(AgentEventKind::ToolResult {
            tool_name,
            tool_kind,
            tool_argument,
            duration_ms,
            tool_error,
            message,
        })
    }

    fn decide(&self, end: &TurnEnd) -> TurnOutcome {
        if let Some(o) = shared_outcome(end) {
            return o;
        }
        match &self.result {
            Some(r) if r.subtype == "success" && !r.is_error => TurnOutcome::Completed {
                message: cut_chars(&r.text, MESSAGE_CHARS),
            },
            Some(r) => {
                if let Some(resets_at_ms) = self.usage_limit_resets_at_ms
                    && self.turn_usage.output == 0
                {
                    return TurnOutcome::UsageLimited {
                        message: "usage limit reached".into(),
                        resets_at_ms,
                        // A limit on one model family holds the model the session ran on.
                        model: self
                            .usage_limit_model
                            .as_ref()
                            .map(|family| self.model.clone().unwrap_or_else(|| family.clone())),
                    };
                }
                if r.is_error
                    && let Some(outcome) = self.auth_outcome()
                {
                    return outcome;
                }
                let subtype = if r.subtype.is_empty() {
                    "error"
                } else {
                    &r.subtype
                };
                let text = r.text.trim();
                let message = if text.is_empty() {
                    subtype.to_string()
                } else {
                    format!("{subtype}: {}", cut_chars(text, MESSAGE_CHARS))
                };
                TurnOutcome::Failed {
                    message,
                    kind: AgentErrorKind::TurnFailed,
                }
            }
            None => {
                let code = end.exit.and_then(|e| e.code).unwrap_or(0);
                if code != 0
                    && let Some(outcome) = self.auth_outcome()
                {
                    outcome
                } else if code != 0 {
                    TurnOutcome::Failed {
                        message: format!("non-zero exit (code {code})"),
                        kind: AgentErrorKind::PortExit,
                    }
                } else if self.turn_usage.output == 0 {
                    TurnOutcome::Failed {
                        message: "agent exited without output".into(),
                        kind: AgentErrorKind::TurnFailed,
                    }
                } else {
                    // Claude Code ends every finished turn with a result line; a clean exit
                    // without one is a turn cut short (a crash that kept exit status 0).
                    TurnOutcome::Failed {
                        message: "agent exited 0 without a result line".into(),
                        kind: AgentErrorKind::TurnFailed,
                    }
                }
            }
        }
    }
}

impl ClaudeParser {
    /// A turn Claude Code ended on its own failed-login message, before any output: the CLI
    /// is not logged in, which no retry fixes.
    fn auth_outcome(&self) -> Option<TurnOutcome> {
        let said = self
            .auth_failure
            .as_ref()
            .filter(|_| self.turn_usage.output == 0)?;
        let said = if said.is_empty() {
            "authentication failed"
        } else {
            said.as_str()
        };
        Some(TurnOutcome::Failed {
            message: format!(
                "Claude Code is not logged in ({said}): log it in with `claude /login` as the user sortie runs as, or set ANTHROPIC_API_KEY in sortie's environment"
            ),
            kind: AgentErrorKind::AgentAuthFailed,
        })
    }
}

/// The text blocks of an assistant message, joined and cut.
fn message_text(msg: &Value) -> String {
    let parts: Vec<&str> = msg
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    cut_chars(&parts.join(" "), MESSAGE_CHARS)
}

impl StreamParser for ClaudeParser {
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent> {
        self.pid = Some(pid);
        Vec::new()
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        // The plain check is much faster than the lossy decoding it spares a valid line.
        let text = match std::str::from_utf8(line) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(line),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        if let Some(line) = fast::assistant(trimmed) {
            return self.on_fast_assistant(line);
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v) if v.is_object() => self.parse(&v),
            _ => vec![self.event(AgentEventKind::Malformed {
                message: cut_chars(trimmed, MESSAGE_CHARS),
            })],
        }
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let mut out = Vec::new();
        if let Some(ev) = self.flush_usage() {
            out.push(ev);
        }
        let outcome = self.decide(end);
        let api_duration_ms = if self.sent_api_timing {
            None
        } else {
            self.result.as_ref().and_then(|r| r.duration_api_ms)
        };
        out.push(self.event(outcome.terminal_event(api_duration_ms)));
        (outcome, out)
    }

    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn usage(&self) -> Option<TokenUsage> {
        self.usage_seen.then(|| self.turn_usage.normalized())
    }

    fn model(&self) -> Option<String> {
        self.model.clone()
    }
}

fn api_retry_message(v: &Value) -> String {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x.to_string());
    let error = v.get("error").and_then(Value::as_str).unwrap_or("unknown");
    let mut msg = format!(
        "api retry {}/{}: {error}",
        n("attempt").unwrap_or_else(|| "?".into()),
        n("max_retries").unwrap_or_else(|| "?".into())
    );
    if let Some(status) = n("error_status") {
        msg.push_str(&format!(" (status {status})"));
    }
    if let Some(delay) = n("retry_delay_ms") {
        msg.push_str(&format!(", retrying in {delay} ms"));
    }
    msg
}

/// The text of a failed tool result: a string or the first text block, without the
/// `<tool_use_error>` wrapper and ANSI codes, long output cut to first line + tail.
fn tool_error_text(content: Option<&Value>) -> String {
    let raw = match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|b| b.get("text").and_then(Value::as_str))
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    let mut text = raw.trim();
    if let Some(inner) = text
        .strip_prefix("<tool_use_error>")
        .and_then(|t| t.strip_suffix("</tool_use_error>"))
    {
        text = inner.trim();
    }
    head_and_tail(&strip_ansi(text), TOOL_ERROR_BYTES)
}

/// The US-dollar cost a `result` line reports for its invocation: `total_cost_usd`, else the
/// sum of `modelUsage.<model>.costUSD`. It is attributed to the model the token figures name,
/// so it prices the same part of the session those figures fill.
fn result_cost_usd(v: &Value) -> Option<f64> {
    let valid = |n: f64| n.is_finite() && n >= 0.0;
    if let Some(total) = v.get("total_cost_usd").and_then(Value::as_f64) {
        return valid(total).then_some(total);
    }
    let per_model = v.get("modelUsage").and_then(Value::as_object)?;
    let costs: Vec<f64> = per_model
        .values()
        .filter_map(|m| m.get("costUSD").and_then(Value::as_f64))
        .filter(|n| valid(*n))
        .collect();
    (!costs.is_empty()).then(|| costs.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn assistant(id: usize, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","message":{{"id":"m{id}","content":[],"usage":{{"input_tokens":1,"output_tokens":{output}}}}}}}"#
        )
    }

    #[test]
    fn message_ids_stay_bounded_and_a_recent_snapshot_counts_once() {
        let mut p = ClaudeParser::new(Arc::new(ManualClock::new(0)), "/ws".into(), None);
        for id in 0..5 * MESSAGE_IDS {
            p.on_line(assistant(id, 2).as_bytes());
        }
        assert!(p.usage_by_message.len() + p.older_messages.len() <= 2 * MESSAGE_IDS);
        let before = p.usage().expect("usage");
        // The newest message again, grown: only the growth counts.
        let last = 5 * MESSAGE_IDS - 1;
        p.on_line(assistant(last, 3).as_bytes());
        let after = p.usage().expect("usage");
        assert_eq!(after.output_tokens, before.output_tokens + 1);
        assert_eq!(after.input_tokens, before.input_tokens);
        assert_eq!(before.output_tokens, 2 * 5 * MESSAGE_IDS as u64);
    }
}
