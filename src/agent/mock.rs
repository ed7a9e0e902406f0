//! The `mock` agent kind: an in-process scripted agent for the credential-free demo and for
//! orchestrator tests. Configured from the `mock:` block:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `session_id` | `mock-session-001` | the session id reported |
//! | `agent_pid` | none | pid put on `session_started` |
//! | `start_error` | false | `start_session` fails with `agent_not_found` |
//! | `start_error_kind` | `agent_not_found` | the error kind code a `start_error` fails with |
//! | `stop_error` | false | `stop` returns an error |
//! | `turn_outcomes` | `[]` | per turn: `completed`, `failed`, `cancelled`, `error`, `input_required`, `usage_limited`, `auth_failed`; missing = completed |
//! | `usage_limit_resets_at_ms` | none | the reset a `usage_limited` turn reports (epoch ms) |
//! | `usage_limit_model` | none | the model a `usage_limited` turn's limit names |
//! | `failing_outcome` | `failed` | how the turn of a session counted by `failing_sessions` ends |
//! | `model` | none | the configured model; the mock ignores it, the orchestrator's model-only usage holds read it |
//! | `events_per_turn` | 3 | notifications per turn |
//! | `input_tokens_per_turn` | 100 | input tokens per turn (cache reads included) |
//! | `output_tokens_per_turn` | 50 | |
//! | `cache_read_tokens_per_turn` | 0 | |
//! | `model_name` | none | model on `token_usage` |
//! | `api_duration_ms` | none | on `token_usage` |
//! | `turn_delay_ms` | 0 | wait before the terminal event; a cancel during it ends the turn |
//! | `event_interval_ms` | 0 | wait before each notification and tool result, so a turn unfolds over time |
//! | `time_scale` | 1 | factor on every wait above (> 0); `0.1` runs the script ten times faster |
//! | `messages` | `[]` | notification texts, taken in order across the session's turns (cycling); default `mock turn N event M` |
//! | `failure_message` | `mock turn failed` | the message of a `failed` turn |
//! | `tool_calls` | `[]` | `[{tool_name, duration_ms, error}]` reported every turn (no `duration_ms`: the event reports none) |
//! | `issues` | `{}` | per-issue overrides: `{<identifier>: {<any key above>…, failing_sessions: N}}` |
//!
//! A per-issue block is laid over the base block for sessions of that issue; with
//! `failing_sessions: N` the first N sessions of the issue (counted by this process) end
//! their first turn with `failing_outcome`, then sessions behave as configured. The demo uses it to show a retry
//! with backoff on one issue while the others hand off.
//! Each turn emits `session_started`, the notifications, one `token_usage` (this turn's
//! figure), the tool results, then the terminal event.

use super::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentEvent,
    AgentEventKind, AgentSession, AgentSettings, CancelReason, CancelToken, StartSessionParams,
    TokenUsage, TurnOutcome, TurnResult, UsageArrival, UsageAttribution, UsageProvenance,
    UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use crossbeam_channel::Sender;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The configuration name of this kind (`agent.kind`, and the `mock:` block).
pub const KIND: &str = "mock";
pub const CAPS: AdapterCaps = AdapterCaps {
    usage_arrival: UsageArrival::Incremental,
    usage_attribution: UsageAttribution::PerModel,
    usage_provenance: Some(UsageProvenance {
        source: UsageSource::Protocol,
        strategy: UsageStrategy::Live,
    }),
    resumable: true,
    requires_command: false,
    stdin_session: false,
};

/// This kind as the registry lists it; building parses the `mock:` block.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: &[
        "session_id",
        "agent_pid",
        "start_error",
        "start_error_kind",
        "stop_error",
        "turn_outcomes",
        "events_per_turn",
        "input_tokens_per_turn",
        "output_tokens_per_turn",
        "cache_read_tokens_per_turn",
        "model_name",
        "api_duration_ms",
        "turn_delay_ms",
        "tool_calls",
        "usage_limit_resets_at_ms",
        "usage_limit_model",
        "failing_outcome",
        "model",
        "event_interval_ms",
        "time_scale",
        "messages",
        "failure_message",
        "issues",
    ],
    env_vars: &[],
    egress_hosts: &[],
    validate: crate::agent::no_setting_problems,
    classify_failure: crate::agent::failure_class::no_kind_words,
    build: |settings, clock| Ok(Arc::new(MockAdapter::from_settings(settings, clock)?)),
    contract: crate::domain::contract::Contract::Suite("mock"),
};

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    pub tool_name: String,
    /// `None` when the script gives none: the event then reports no duration.
    pub duration_ms: Option<u64>,
    pub error: bool,
}

/// The parsed `mock:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct MockConfig {
    pub session_id: String,
    pub agent_pid: Option<u32>,
    pub start_error: bool,
    pub start_error_kind: AgentErrorKind,
    pub stop_error: bool,
    pub turn_outcomes: Vec<String>,
    pub events_per_turn: u64,
    pub input_tokens_per_turn: u64,
    pub output_tokens_per_turn: u64,
    pub cache_read_tokens_per_turn: u64,
    pub model_name: Option<String>,
    pub api_duration_ms: Option<u64>,
    pub turn_delay_ms: u64,
    pub event_interval_ms: u64,
    /// Factor on every wait (> 0).
    pub time_scale: f64,
    pub messages: Vec<String>,
    pub failure_message: String,
    pub tool_calls: Vec<MockToolCall>,
    pub usage_limit_resets_at_ms: Option<i64>,
    pub usage_limit_model: Option<String>,
    pub failing_outcome: String,
}

const OUTCOMES: &[&str] = &[
    "completed",
    "failed",
    "cancelled",
    "error",
    "input_required",
    "usage_limited",
    "auth_failed",
];

fn bad(msg: String) -> AgentError {
    AgentError::new(AgentErrorKind::ResponseError, format!("mock config: {msg}"))
}

/// A non-negative integer; JSON floats only when integral.
fn int(block: &Map<String, Value>, key: &str, default: u64) -> Result<u64, AgentError> {
    match block.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => as_int(v).ok_or_else(|| bad(format!("{key} must be a non-negative integer"))),
    }
}

fn as_int(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64).then_some(f as u64)
}

impl MockConfig {
    pub fn from_block(block: &Map<String, Value>) -> Result<MockConfig, AgentError> {
        let s = |k: &str| block.get(k).and_then(Value::as_str).map(str::to_string);
        let b = |k: &str| block.get(k).and_then(Value::as_bool).unwrap_or(false);
        let mut turn_outcomes = Vec::new();
        for v in block
            .get("turn_outcomes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let o = v.as_str().unwrap_or("");
            if !OUTCOMES.contains(&o) {
                return Err(bad(format!("unknown turn outcome {v}")));
            }
            turn_outcomes.push(o.to_string());
        }
        let mut tool_calls = Vec::new();
        for v in block
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            tool_calls.push(MockToolCall {
                tool_name: v
                    .get("tool_name")
                    .and_then(Value::as_str)
                    .unwrap_or("tool")
                    .to_string(),
                duration_ms: v.get("duration_ms").and_then(as_int),
                error: v.get("error").and_then(Value::as_bool).unwrap_or(false),
            });
        }
        let opt = |k: &str| -> Result<Option<u64>, AgentError> {
            match block.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(_) => int(block, k, 0).map(Some),
            }
        };
        let time_scale = match block.get("time_scale") {
            None | Some(Value::Null) => 1.0,
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or_else(|| bad("time_scale must be a number above 0".into()))?,
        };
        let mut messages = Vec::new();
        for v in block
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let m = v
                .as_str()
                .ok_or_else(|| bad(format!("messages: {v} is not a string")))?;
            messages.push(m.to_string());
        }
        Ok(MockConfig {
            session_id: s("session_id").unwrap_or_else(|| "mock-session-001".into()),
            agent_pid: opt("agent_pid")?.and_then(|p| u32::try_from(p).ok()),
            start_error: b("start_error"),
            start_error_kind: match s("start_error_kind") {
                None => AgentErrorKind::AgentNotFound,
                Some(code) => AgentErrorKind::from_code(&code)
                    .ok_or_else(|| bad(format!("unknown start_error_kind {code:?}")))?,
            },
            stop_error: b("stop_error"),
            turn_outcomes,
            events_per_turn: int(block, "events_per_turn", 3)?,
            input_tokens_per_turn: int(block, "input_tokens_per_turn", 100)?,
            output_tokens_per_turn: int(block, "output_tokens_per_turn", 50)?,
            cache_read_tokens_per_turn: int(block, "cache_read_tokens_per_turn", 0)?,
            model_name: s("model_name"),
            api_duration_ms: opt("api_duration_ms")?,
            turn_delay_ms: int(block, "turn_delay_ms", 0)?,
            event_interval_ms: int(block, "event_interval_ms", 0)?,
            time_scale,
            messages,
            failure_message: s("failure_message").unwrap_or_else(|| "mock turn failed".into()),
            tool_calls,
            usage_limit_resets_at_ms: opt("usage_limit_resets_at_ms")?
                .and_then(|v| i64::try_from(v).ok()),
            usage_limit_model: s("usage_limit_model"),
            failing_outcome: match s("failing_outcome") {
                None => "failed".into(),
                Some(o) if OUTCOMES.contains(&o.as_str()) => o,
                Some(o) => return Err(bad(format!("unknown failing_outcome {o:?}"))),
            },
        })
    }
}

impl MockConfig {
    /// `ms` under `time_scale`.
    fn scaled(&self, ms: u64) -> u64 {
        (ms as f64 * self.time_scale).round() as u64
    }

    /// The text of notification `i` of turn `turn` (both from 0).
    fn message(&self, turn: usize, i: u64) -> String {
        if self.messages.is_empty() {
            return format!("mock turn {} event {}", turn + 1, i + 1);
        }
        let n = (turn as u64)
            .saturating_mul(self.events_per_turn)
            .saturating_add(i);
        let at = usize::try_from(n % self.messages.len() as u64).unwrap_or(0);
        self.messages[at].clone()
    }

    /// How turn `turn` (from 0) ends when nothing cancels it.
    fn outcome(&self, turn: usize) -> TurnOutcome {
        match self.turn_outcomes.get(turn).map(String::as_str) {
            Some("failed") => TurnOutcome::Failed {
                message: self.failure_message.clone(),
                kind: AgentErrorKind::TurnFailed,
            },
            Some("cancelled") => TurnOutcome::Cancelled {
                reason: CancelReason::User,
            },
            Some("error") => TurnOutcome::EndedWithError {
                message: "mock turn ended with error".into(),
                kind: AgentErrorKind::PortExit,
            },
            Some("input_required") => TurnOutcome::InputRequired {
                message: "mock agent needs input".into(),
            },
            Some("usage_limited") => TurnOutcome::UsageLimited {
                message: "mock usage limit reached".into(),
                resets_at_ms: self.usage_limit_resets_at_ms,
                model: self.usage_limit_model.clone(),
            },
            Some("auth_failed") => TurnOutcome::Failed {
                message: "mock agent not logged in".into(),
                kind: AgentErrorKind::AgentAuthFailed,
            },
            _ => TurnOutcome::Completed {
                message: format!("mock turn {} completed", turn + 1),
            },
        }
    }
}

/// Waits `ms`, or until the token fires (its receiver disconnects); `false` when it fired.
fn pause(cancel: &CancelToken, ms: u64) -> bool {
    if ms == 0 {
        return true;
    }
    !matches!(
        cancel.receiver().recv_timeout(Duration::from_millis(ms)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected)
    )
}

/// Per-issue overrides: the merged config and how many first sessions fail.
#[derive(Debug, Clone)]
struct IssueOverride {
    config: MockConfig,
    failing_sessions: u64,
}

/// The mock kind.
pub struct MockAdapter {
    config: MockConfig,
    overrides: std::collections::HashMap<String, IssueOverride>,
    sessions_started: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    clock: Arc<dyn Clock>,
}

impl MockAdapter {
    pub fn new(config: MockConfig, clock: Arc<dyn Clock>) -> Self {
        MockAdapter {
            config,
            overrides: Default::default(),
            sessions_started: Default::default(),
            clock,
        }
    }

    pub fn from_settings(
        settings: &AgentSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AgentError> {
        let mut adapter = Self::new(MockConfig::from_block(&settings.block)?, clock);
        if let Some(issues) = settings.block.get("issues") {
            let issues = issues
                .as_object()
                .ok_or_else(|| bad("issues must be a map of identifier to settings".into()))?;
            for (identifier, over) in issues {
                let over = over
                    .as_object()
                    .ok_or_else(|| bad(format!("issues.{identifier} must be a map")))?;
                let mut merged = settings.block.clone();
                merged.remove("issues");
                for (k, v) in over {
                    merged.insert(k.clone(), v.clone());
                }
                adapter.overrides.insert(
                    identifier.clone(),
                    IssueOverride {
                        config: MockConfig::from_block(&merged)?,
                        failing_sessions: int(over, "failing_sessions", 0)?,
                    },
                );
            }
        }
        Ok(adapter)
    }

    /// The configuration of the next session of `identifier`.
    fn session_config(&self, identifier: &str) -> MockConfig {
        let Some(over) = self.overrides.get(identifier) else {
            return self.config.clone();
        };
        let mut started = self
            .sessions_started
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let n = started.entry(identifier.to_string()).or_insert(0);
        *n += 1;
        let mut config = over.config.clone();
        if *n <= over.failing_sessions {
            config.turn_outcomes = vec![config.failing_outcome.clone()];
        }
        config
    }
}

impl AgentAdapter for MockAdapter {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn caps(&self) -> AdapterCaps {
        CAPS
    }

    fn start_session(
        &self,
        params: StartSessionParams,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        if params.workspace.as_os_str().is_empty() {
            return Err(AgentError::new(
                AgentErrorKind::InvalidWorkspaceCwd,
                "empty workspace path",
            ));
        }
        let config = self.session_config(&params.issue_identifier);
        if config.start_error {
            return Err(AgentError::new(config.start_error_kind, "mock start_error"));
        }
        let session_id = params
            .resume_session_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| config.session_id.clone());
        Ok(Box::new(MockSession {
            config,
            clock: Arc::clone(&self.clock),
            session_id,
            turn_index: 0,
        }))
    }
}

/// One mock conversation.
pub struct MockSession {
    config: MockConfig,
    clock: Arc<dyn Clock>,
    session_id: String,
    turn_index: usize,
}

impl AgentSession for MockSession {
    fn session_id(&self) -> Option<String> {
        Some(self.session_id.clone())
    }

    fn run_turn(
        &mut self,
        _prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        let c = &self.config;
        let emit = |kind: AgentEventKind| {
            let _ = events.send(AgentEvent::new(self.clock.now_ms(), kind));
        };
        let index = self.turn_index;
        self.turn_index += 1;
        // A cancel during any wait ends the turn at once.
        let mut cancelled = cancel.reason();
        let mut wait = |ms: u64| {
            if cancelled.is_none() {
                cancelled = cancel.reason();
            }
            if cancelled.is_none() && !pause(cancel, c.scaled(ms)) {
                cancelled = Some(cancel.reason().unwrap_or(CancelReason::User));
            }
            cancelled.is_none()
        };
        emit(AgentEventKind::SessionStarted {
            session_id: self.session_id.clone(),
            agent_pid: c.agent_pid,
        });
        for i in 0..c.events_per_turn {
            if !wait(c.event_interval_ms) {
                break;
            }
            emit(AgentEventKind::Notification {
                message: c.message(index, i),
            });
        }
        let usage = TokenUsage::new(
            c.input_tokens_per_turn,
            c.output_tokens_per_turn,
            c.cache_read_tokens_per_turn.min(c.input_tokens_per_turn),
            0,
        );
        emit(AgentEventKind::TokenUsage {
            usage,
            model: c.model_name.clone(),
            api_duration_ms: c.api_duration_ms,
        });
        for t in &c.tool_calls {
            if !wait(c.event_interval_ms) {
                break;
            }
            emit(AgentEventKind::ToolResult {
                tool_name: Some(t.tool_name.clone()),
                tool_kind: None,
                tool_argument: None,
                duration_ms: t.duration_ms,
                tool_error: t.error,
                message: if t.error {
                    "mock tool error".into()
                } else {
                    String::new()
                },
            });
        }
        wait(c.turn_delay_ms);
        let outcome = match cancelled {
            Some(reason) => TurnOutcome::Cancelled { reason },
            None => c.outcome(index),
        };
        emit(outcome.terminal_event(None));
        TurnResult {
            outcome,
            session_id: Some(self.session_id.clone()),
            usage: Some(usage),
            model: c.model_name.clone(),
        }
    }

    fn stop(&mut self) -> Result<(), AgentError> {
        if self.config.stop_error {
            return Err(AgentError::new(
                AgentErrorKind::ResponseError,
                "mock stop_error",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_issue_overrides_and_failing_sessions() {
        let block: Map<String, Value> = serde_json::from_str(
            r#"{"events_per_turn": 1, "issues": {"X-1": {"failing_sessions": 1, "events_per_turn": 2}}}"#,
        )
        .unwrap();
        let settings = AgentSettings {
            kind: "mock".into(),
            block,
            ..Default::default()
        };
        let a = MockAdapter::from_settings(&settings, Arc::new(crate::clock::SystemClock)).unwrap();
        let first = a.session_config("X-1");
        assert_eq!(first.turn_outcomes, vec!["failed".to_string()]);
        assert_eq!(first.events_per_turn, 2);
        let second = a.session_config("X-1");
        assert!(second.turn_outcomes.is_empty());
        assert_eq!(a.session_config("Y-2").events_per_turn, 1);
    }

    #[test]
    fn messages_cycle_across_turns_and_time_scale_scales_every_wait() {
        let block: Map<String, Value> = serde_json::from_str(
            r#"{"events_per_turn": 2, "messages": ["a", "b", "c"], "time_scale": 0.5, "failure_message": "boom"}"#,
        )
        .unwrap();
        let c = MockConfig::from_block(&block).unwrap();
        let said: Vec<String> = (0..2)
            .flat_map(|t| (0..2).map(move |i| (t, i)))
            .map(|(t, i)| c.message(t, i))
            .collect();
        assert_eq!(said, ["a", "b", "c", "a"]);
        assert_eq!(c.scaled(2500), 1250);
        let failed = MockConfig {
            turn_outcomes: vec!["failed".into()],
            ..c
        };
        assert!(
            matches!(failed.outcome(0), TurnOutcome::Failed { message, .. } if message == "boom")
        );
        for bad_scale in ["0", "-1", "\"fast\""] {
            let block: Map<String, Value> =
                serde_json::from_str(&format!(r#"{{"time_scale": {bad_scale}}}"#)).unwrap();
            assert!(MockConfig::from_block(&block).is_err(), "{bad_scale}");
        }
    }

    #[test]
    fn issues_block_must_be_a_map() {
        let block: Map<String, Value> = serde_json::from_str(r#"{"issues": [1]}"#).unwrap();
        let settings = AgentSettings {
            kind: "mock".into(),
            block,
            ..Default::default()
        };
        assert!(
            MockAdapter::from_settings(&settings, Arc::new(crate::clock::SystemClock)).is_err()
        );
    }
}
