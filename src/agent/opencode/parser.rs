//! Pure parser for `opencode run --format json` stdout: one JSON envelope per line
//! (`{type, timestamp, sessionID, part, error?}`) in, normalized events out. Plain-text lines
//! (OpenCode's own warnings) pass as notifications or malformed lines.
//!
//! Usage is summed live from each `step_finish.tokens` (one figure per model request). After
//! the process is gone an optional export hook reads `opencode export` for the session: its last
//! assistant message cross-checks the live sum, and stands in for it when the stream carried no
//! tokens at all.

use super::export::{ExportUsage, model_of, normalized_tokens, parse_export};
use super::tools::classify;
use crate::agent::error::AgentErrorKind;
use crate::agent::event::{AgentEvent, AgentEventKind, TokenUsage, TurnOutcome};
use crate::agent::stream::{StreamParser, TurnEnd, shared_outcome};
use crate::agent::text::{cut_chars, strip_ansi};
use crate::clock::Clock;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The longest text, tool error or malformed line kept, in chars.
pub const TEXT_CHARS: usize = 500;
/// OpenCode's error name for refused or missing provider credentials.
const AUTH_ERROR: &str = "ProviderAuthError";

/// Reads a session's export: `Ok(document)` or why it could not.
pub type ExportHook = Box<dyn FnMut(&str) -> Result<String, crate::agent::AgentError> + Send>;

/// How this turn's session is known before the stream starts.
#[derive(Debug, Clone, Default)]
pub struct SessionContext {
    /// The id the turn continues (`--session`); `None` on a new conversation.
    pub expected: Option<String>,
    /// `session_started` was already sent for `expected`.
    pub announced: bool,
}

struct ErrorLine {
    message: String,
    auth: bool,
}

/// Parser state for one turn.
pub struct OpencodeParser {
    clock: Arc<dyn Clock>,
    workspace: PathBuf,
    pid: Option<u32>,
    ctx: SessionContext,
    session_id: Option<String>,
    session_checked: bool,
    mismatch: Option<String>,
    announced: bool,
    saw_json: bool,
    model: Option<String>,
    live: TokenUsage,
    last_step: Option<TokenUsage>,
    live_seen: bool,
    step_started_at: Option<i64>,
    last_text: String,
    errors: Vec<ErrorLine>,
    export: Option<ExportHook>,
    export_used: bool,
    export_usage: Option<TokenUsage>,
}

impl OpencodeParser {
    pub fn new(clock: Arc<dyn Clock>, workspace: PathBuf, ctx: SessionContext) -> Self {
        OpencodeParser {
            clock,
            workspace,
            pid: None,
            session_id: ctx.expected.clone(),
            announced: ctx.announced,
            ctx,
            session_checked: false,
            mismatch: None,
            saw_json: false,
            model: None,
            live: TokenUsage::default(),
            last_step: None,
            live_seen: false,
            step_started_at: None,
            last_text: String::new(),
            errors: Vec::new(),
            export: None,
            export_used: false,
            export_usage: None,
        }
    }

    /// Reads the session's export after the process is gone (see the module doc).
    pub fn with_export(mut self, hook: ExportHook) -> Self {
        self.export = Some(hook);
        self
    }

    /// Whether `session_started` has been sent for the current session.
    pub fn announced(&self) -> bool {
        self.announced
    }

    /// Whether the turn's usage figure came from the export rather than the stream.
    pub fn usage_from_export(&self) -> bool {
        self.export_used
    }

    /// The session id the stream named when it differed from the one continued.
    pub fn mismatched_session(&self) -> Option<&str> {
        self.mismatch.as_deref()
    }

    fn event(&self, kind: AgentEventKind) -> AgentEvent {
        AgentEvent::new(self.clock.now_ms(), kind)
    }

    fn notification(&self, message: impl Into<String>) -> AgentEvent {
        self.event(AgentEventKind::Notification {
            message: message.into(),
        })
    }

    fn malformed(&self, text: &str) -> AgentEvent {
        self.event(AgentEventKind::Malformed {
            message: cut_chars(text, TEXT_CHARS),
        })
    }

    fn plain_line(&self, text: &str) -> Vec<AgentEvent> {
        let clean = strip_ansi(text);
        let clean = clean.trim();
        // OpenCode prints its own warnings (a permission it auto-rejected, an agent it could not
        // find) as `! …` lines; anything else in plain text is not part of the JSON stream.
        if clean.starts_with('!') {
            vec![self.notification(cut_chars(clean, TEXT_CHARS))]
        } else {
            vec![self.malformed(clean)]
        }
    }

    fn on_envelope(&mut self, v: &Value, raw: &str) -> Vec<AgentEvent> {
        let mut out = self.check_session(v);
        let part = v.get("part");
        if let Some(m) = part.and_then(model_of).or_else(|| model_of(v)) {
            self.model = Some(m);
        }
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        let ev = match (ty, part) {
            ("step_start", _) => {
                self.step_started_at = v.get("timestamp").and_then(Value::as_i64);
                vec![self.notification("step started")]
            }
            ("text", Some(p)) => {
                let text = p.get("text").and_then(Value::as_str).unwrap_or("").trim();
                if !text.is_empty() {
                    self.last_text = text.to_string();
                }
                vec![self.notification(cut_chars(text, TEXT_CHARS))]
            }
            ("reasoning", _) => vec![self.event(AgentEventKind::OtherMessage {
                message: "reasoning block".into(),
            })],
            ("tool_use", Some(p)) if p.get("tool").and_then(Value::as_str).is_some() => {
                vec![self.tool_result(p)]
            }
            ("step_finish", Some(p)) => self.step_finish(v, p),
            ("error", _) => {
                self.on_error(v);
                Vec::new()
            }
            _ => vec![self.malformed(raw)],
        };
        out.extend(ev);
        out
    }

    /// The first envelope naming a session adopts it, or must match the one continued.
    fn check_session(&mut self, v: &Value) -> Vec<AgentEvent> {
        if self.session_checked {
            return Vec::new();
        }
        let Some(sid) = v
            .get("sessionID")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return Vec::new();
        };
        self.session_checked = true;
        match &self.ctx.expected {
            Some(expected) if expected != sid => {
                self.mismatch = Some(sid.to_string());
                return Vec::new();
            }
            Some(_) => {}
            None => {
                self.session_id = Some(sid.to_string());
                self.announced = false;
            }
        }
        if self.announced {
            return Vec::new();
        }
        self.announced = true;
        vec![self.event(AgentEventKind::SessionStarted {
            session_id: sid.to_string(),
            agent_pid: self.pid,
        })]
    }

    fn tool_result(&self, part: &Value) -> AgentEvent {
        let name = part
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let state = part.get("state").cloned().unwrap_or(Value::Null);
        let tool_error = state.get("status").and_then(Value::as_str) == Some("error");
        let time = state.get("time");
        let at = |k: &str| time.and_then(|t| t.get(k)).and_then(Value::as_i64);
        let duration_ms = match (at("start"), at("end")) {
            (Some(s), Some(e)) if e >= s => u64::try_from(e - s).ok(),
            _ => None,
        };
        let message = if tool_error {
            let text = state.get("error").and_then(Value::as_str).unwrap_or("");
            cut_chars(strip_ansi(text).trim(), TEXT_CHARS)
        } else {
            String::new()
        };
        let input = state.get("input").cloned().unwrap_or(Value::Null);
        let (tool_kind, tool_argument) = classify(name, &input, &self.workspace);
        self.event(AgentEventKind::ToolResult {
            tool_name: Some(name.to_string()),
            tool_kind,
            tool_argument,
            duration_ms,
            tool_error,
            message,
        })
    }

    fn step_finish(&mut self, v: &Value, part: &Value) -> Vec<AgentEvent> {
        let reason = part.get("reason").and_then(Value::as_str).unwrap_or("");
        let mut out = vec![self.notification(format!("step finished: {reason}"))];
        let started = self.step_started_at.take();
        if let Some(usage) = part.get("tokens").and_then(normalized_tokens) {
            self.live = self.live.plus(&usage);
            self.last_step = Some(usage);
            self.live_seen = true;
            let api_duration_ms = match (started, v.get("timestamp").and_then(Value::as_i64)) {
                (Some(s), Some(e)) => u64::try_from(e.saturating_sub(s)).ok().map(|d| d.max(1)),
                _ => None,
            };
            out.push(self.event(AgentEventKind::TokenUsage {
                usage,
                model: self.model.clone(),
                api_duration_ms,
            }));
        }
        out
    }

    fn on_error(&mut self, v: &Value) {
        let err = v.get("error");
        let name = err
            .and_then(|e| e.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let data_message = err
            .and_then(|e| e.get("data"))
            .and_then(|d| d.get("message"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty());
        let message = match (data_message, name) {
            (Some(m), _) => m.to_string(),
            (None, "") => "unknown error".to_string(),
            (None, n) => n.to_string(),
        };
        let auth = name == AUTH_ERROR;
        let message = if auth {
            format!(
                "opencode could not authenticate with its model provider ({AUTH_ERROR}: {message}); \
                 log it in with `opencode auth login` (or set the provider's API key) on the host \
                 that runs sortie"
            )
        } else if !name.is_empty() && data_message.is_some() {
            format!("{name}: {message}")
        } else {
            message
        };
        self.errors.push(ErrorLine {
            message: cut_chars(&message, TEXT_CHARS),
            auth,
        });
    }

    /// Reads the export (when wired and the turn got that far) and reconciles it with the live
    /// sum. Returns the event to send when the export is the turn's only figure.
    fn read_export(&mut self, end: &TurnEnd) -> Option<AgentEvent> {
        if end.cancelled.is_some() || end.spawn_error.is_some() || self.mismatch.is_some() {
            return None;
        }
        let sid = self.session_id.clone().filter(|_| self.session_checked)?;
        let hook = self.export.as_mut()?;
        let parsed = match hook(&sid) {
            Ok(text) => parse_export(&text),
            Err(e) => {
                log::warn!(session_id:% = sid, error:% = e; "opencode export failed");
                return None;
            }
        };
        let Some(ExportUsage { usage, model, cost }) = parsed else {
            log::warn!(session_id:% = sid; "opencode export has no assistant message");
            return None;
        };
        if self.model.is_none() {
            self.model = model;
        }
        log::debug!(
            session_id:% = sid,
            total_tokens:% = crate::log_field::opt(&usage.map(|u| u.total_tokens)),
            cost_usd:% = crate::log_field::opt(&cost),
            model:% = crate::log_field::opt(&self.model);
            "opencode export read"
        );
        let usage = usage?;
        self.export_usage = Some(usage);
        if self.live_seen {
            // The export's last message holds the figure of its final request only, so it
            // matches the live sum on a one-step turn and the last step on a longer one.
            if usage != self.live && Some(usage) != self.last_step {
                log::warn!(
                    session_id:% = sid,
                    live_total_tokens:% = self.live.total_tokens,
                    export_total_tokens:% = usage.total_tokens;
                    "opencode export disagrees with the streamed usage, keeping the streamed sum"
                );
            }
            return None;
        }
        self.export_used = true;
        Some(self.event(AgentEventKind::TokenUsage {
            usage,
            model: self.model.clone(),
            api_duration_ms: None,
        }))
    }

    fn decide(&self, end: &TurnEnd) -> TurnOutcome {
        if let Some(t) = end.first_line_timeout {
            return TurnOutcome::EndedWithError {
                message: format!(
                    "opencode printed no JSON within {} ms (agent.read_timeout_ms): it likely \
                     cannot reach its model provider (no network, or no provider configured)",
                    t.as_millis()
                ),
                kind: AgentErrorKind::ResponseTimeout,
            };
        }
        if let Some(got) = &self.mismatch {
            return TurnOutcome::EndedWithError {
                message: format!(
                    "opencode reported session {got}, not the session {} it was asked to continue",
                    self.ctx.expected.as_deref().unwrap_or("")
                ),
                kind: AgentErrorKind::ResponseError,
            };
        }
        if end.spawn_error.is_some()
            && let Some(o) = shared_outcome(end)
        {
            return o;
        }
        if !self.errors.is_empty() {
            let auth = self.errors.iter().any(|e| e.auth);
            let message: Vec<&str> = self.errors.iter().map(|e| e.message.as_str()).collect();
            return TurnOutcome::Failed {
                message: message.join("; "),
                kind: if auth {
                    AgentErrorKind::AgentAuthFailed
                } else {
                    AgentErrorKind::TurnFailed
                },
            };
        }
        if let Some(o) = shared_outcome(end) {
            return o;
        }
        let code = end.exit.and_then(|e| e.code).unwrap_or(0);
        if !self.saw_json {
            return TurnOutcome::EndedWithError {
                message: format!("opencode exited with code {code} before printing any JSON"),
                kind: AgentErrorKind::PortExit,
            };
        }
        if code != 0 {
            return TurnOutcome::EndedWithError {
                message: format!("opencode exited with code {code}"),
                kind: AgentErrorKind::PortExit,
            };
        }
        TurnOutcome::Completed {
            message: cut_chars(&self.last_text, TEXT_CHARS),
        }
    }
}

impl StreamParser for OpencodeParser {
    fn on_spawn(&mut self, pid: u32) -> Vec<AgentEvent> {
        self.pid = Some(pid);
        Vec::new()
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        let text = String::from_utf8_lossy(line);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Vec::new();
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v) if v.is_object() => {
                self.saw_json = true;
                self.on_envelope(&v, trimmed)
            }
            Ok(_) => vec![self.malformed(trimmed)],
            Err(_) if trimmed.starts_with('{') => vec![self.malformed(trimmed)],
            Err(_) => self.plain_line(trimmed),
        }
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let mut out = Vec::new();
        if let Some(ev) = self.read_export(end) {
            out.push(ev);
        }
        let outcome = self.decide(end);
        out.push(self.event(outcome.terminal_event(None)));
        (outcome, out)
    }

    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn usage(&self) -> Option<TokenUsage> {
        if self.live_seen {
            Some(self.live)
        } else {
            self.export_usage.filter(|_| self.export_used)
        }
    }

    fn model(&self) -> Option<String> {
        self.model.clone()
    }

    fn started(&self) -> bool {
        self.saw_json
    }
}
