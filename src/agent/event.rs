//! Normalized agent events, token usage and turn outcomes. Every adapter maps its output onto
//! these so the orchestrator, store and API never see a vendor format. Events serialize in the
//! HTTP API's run-event shape (`event`, `at`, `message`, then per-type members); the
//! orchestrator adds `seq`, `text` and `usage` totals when it keeps or serves them.

use super::cancel::CancelReason;
use super::error::AgentErrorKind;
use super::tool_kind::ToolKind;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// Normalized token counts. `cache_read_tokens` and `cache_write_tokens` are disjoint subsets
/// of `input_tokens`, and `total_tokens = input_tokens + output_tokens` (API semantics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl TokenUsage {
    /// From an input figure that already includes the cached parts.
    pub fn new(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input.saturating_add(output),
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
        }
    }

    /// From a provider that reports uncached input apart from cache reads and writes: the
    /// cache terms are added back into input, so `input_tokens` means the same for every agent.
    pub fn from_uncached_input(
        uncached: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
    ) -> Self {
        let input = uncached
            .saturating_add(cache_read)
            .saturating_add(cache_write);
        Self::new(input, output, cache_read, cache_write)
    }

    /// Field-wise sum.
    pub fn plus(&self, other: &TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_add(other.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(other.cache_write_tokens),
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == TokenUsage::default()
    }

    /// Tokens without cache reads (cache writes stay in), floored at zero.
    pub fn uncached_tokens(&self) -> u64 {
        self.total_tokens.saturating_sub(self.cache_read_tokens)
    }
}

/// Status of one provider rate-limit window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitStatus {
    Allowed,
    Warning,
    Exhausted,
}

/// One provider rate-limit window as the agent reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateLimitWindow {
    /// Human label such as `5-hour limit` or `Weekly limit`.
    pub label: String,
    pub used_percent: Option<f64>,
    pub status: Option<RateLimitStatus>,
    /// Reset time, epoch milliseconds.
    pub resets_at_ms: Option<i64>,
    /// How long the limit's window is, when the agent says (orders limits by length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
}

/// How a turn ended. Exactly one per turn, mirrored by one terminal event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TurnOutcome {
    Completed {
        message: String,
    },
    Failed {
        message: String,
        kind: AgentErrorKind,
    },
    Cancelled {
        reason: CancelReason,
    },
    EndedWithError {
        message: String,
        kind: AgentErrorKind,
    },
    InputRequired {
        message: String,
    },
    /// The provider refused for a usage limit before doing work.
    UsageLimited {
        message: String,
        resets_at_ms: Option<i64>,
        model: Option<String>,
    },
}

impl TurnOutcome {
    pub fn is_completed(&self) -> bool {
        matches!(self, TurnOutcome::Completed { .. })
    }

    /// The error kind of a non-successful outcome (`None` for `Completed`).
    pub fn error_kind(&self) -> Option<AgentErrorKind> {
        match self {
            TurnOutcome::Completed { .. } => None,
            TurnOutcome::Failed { kind, .. } | TurnOutcome::EndedWithError { kind, .. } => {
                Some(*kind)
            }
            TurnOutcome::Cancelled { reason } => Some(match reason {
                CancelReason::TurnTimeout => AgentErrorKind::TurnTimeout,
                _ => AgentErrorKind::TurnCancelled,
            }),
            TurnOutcome::InputRequired { .. } => Some(AgentErrorKind::TurnInputRequired),
            TurnOutcome::UsageLimited { .. } => Some(AgentErrorKind::TurnFailed),
        }
    }

    /// The message the terminal event carries.
    pub fn message(&self) -> String {
        match self {
            TurnOutcome::Completed { message }
            | TurnOutcome::Failed { message, .. }
            | TurnOutcome::EndedWithError { message, .. }
            | TurnOutcome::InputRequired { message }
            | TurnOutcome::UsageLimited { message, .. } => message.clone(),
            TurnOutcome::Cancelled { reason } => {
                format!("turn cancelled: {}", reason_code(*reason))
            }
        }
    }

    /// The terminal event announcing this outcome.
    pub fn terminal_event(&self, api_duration_ms: Option<u64>) -> AgentEventKind {
        let message = self.message();
        match self {
            TurnOutcome::Completed { .. } => AgentEventKind::TurnCompleted {
                message,
                api_duration_ms,
            },
            TurnOutcome::Failed { .. } | TurnOutcome::UsageLimited { .. } => {
                AgentEventKind::TurnFailed {
                    message,
                    api_duration_ms,
                }
            }
            TurnOutcome::Cancelled { .. } => AgentEventKind::TurnCancelled { message },
            TurnOutcome::EndedWithError { .. } => AgentEventKind::TurnEndedWithError { message },
            TurnOutcome::InputRequired { .. } => AgentEventKind::TurnInputRequired { message },
        }
    }
}

fn reason_code(r: CancelReason) -> &'static str {
    r.as_str()
}

/// The unit of an amount the agent reported in US dollars.
pub const USD_UNIT: &str = "USD";

/// What happened, with its type-specific members.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEventKind {
    SessionStarted {
        session_id: String,
        agent_pid: Option<u32>,
    },
    StartupFailed {
        message: String,
    },
    /// Informational; an empty message is a heartbeat (stall reset only).
    Notification {
        message: String,
    },
    OtherMessage {
        message: String,
    },
    Malformed {
        message: String,
    },
    ToolResult {
        tool_name: Option<String>,
        tool_kind: Option<ToolKind>,
        tool_argument: Option<String>,
        duration_ms: Option<u64>,
        tool_error: bool,
        message: String,
    },
    /// One usage figure: a per-request **delta**, never a running total. Summing every
    /// `token_usage` of a turn gives the turn's usage.
    TokenUsage {
        usage: TokenUsage,
        model: Option<String>,
        api_duration_ms: Option<u64>,
    },
    RateLimits {
        windows: Vec<RateLimitWindow>,
    },
    /// An amount the agent reported: in a vendor unit (premium requests, credits, another
    /// currency), added to the run's `vendor_amounts` and never converted; or in US dollars
    /// (unit `USD`), which prices a model's part no rate prices.
    VendorAmount {
        unit: String,
        /// The model the agent attributed it to; `""` when it named none.
        model: String,
        amount: f64,
    },
    /// The agent called a tool sortie does not provide; it was told so.
    UnsupportedToolCall {
        tool_name: String,
        message: String,
    },
    TurnCompleted {
        message: String,
        api_duration_ms: Option<u64>,
    },
    TurnFailed {
        message: String,
        api_duration_ms: Option<u64>,
    },
    TurnCancelled {
        message: String,
    },
    TurnEndedWithError {
        message: String,
    },
    TurnInputRequired {
        message: String,
    },
}

impl AgentEventKind {
    /// The API's snake_case event type.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentEventKind::SessionStarted { .. } => "session_started",
            AgentEventKind::StartupFailed { .. } => "startup_failed",
            AgentEventKind::Notification { .. } => "notification",
            AgentEventKind::OtherMessage { .. } => "other_message",
            AgentEventKind::Malformed { .. } => "malformed",
            AgentEventKind::ToolResult { .. } => "tool_result",
            AgentEventKind::TokenUsage { .. } => "token_usage",
            AgentEventKind::RateLimits { .. } => "rate_limits",
            AgentEventKind::VendorAmount { .. } => "vendor_amount",
            AgentEventKind::UnsupportedToolCall { .. } => "unsupported_tool_call",
            AgentEventKind::TurnCompleted { .. } => "turn_completed",
            AgentEventKind::TurnFailed { .. } => "turn_failed",
            AgentEventKind::TurnCancelled { .. } => "turn_cancelled",
            AgentEventKind::TurnEndedWithError { .. } => "turn_ended_with_error",
            AgentEventKind::TurnInputRequired { .. } => "turn_input_required",
        }
    }

    /// The event's message; "" when it carries none.
    pub fn message(&self) -> &str {
        match self {
            AgentEventKind::StartupFailed { message }
            | AgentEventKind::Notification { message }
            | AgentEventKind::OtherMessage { message }
            | AgentEventKind::Malformed { message }
            | AgentEventKind::ToolResult { message, .. }
            | AgentEventKind::UnsupportedToolCall { message, .. }
            | AgentEventKind::TurnCompleted { message, .. }
            | AgentEventKind::TurnFailed { message, .. }
            | AgentEventKind::TurnCancelled { message }
            | AgentEventKind::TurnEndedWithError { message }
            | AgentEventKind::TurnInputRequired { message } => message,
            AgentEventKind::SessionStarted { .. }
            | AgentEventKind::TokenUsage { .. }
            | AgentEventKind::RateLimits { .. }
            | AgentEventKind::VendorAmount { .. } => "",
        }
    }

    /// Whether this event may be dropped when its consumer falls behind (the shedding rule):
    /// messages and tool chatter only. Usage figures, rate limits, session starts and every
    /// terminal or failure event are never dropped: totals, budgets and outcomes depend on them.
    pub fn is_sheddable(&self) -> bool {
        matches!(
            self,
            AgentEventKind::Notification { .. }
                | AgentEventKind::OtherMessage { .. }
                | AgentEventKind::Malformed { .. }
                | AgentEventKind::ToolResult { .. }
                | AgentEventKind::UnsupportedToolCall { .. }
        )
    }

    /// Whether this event ends a turn.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AgentEventKind::TurnCompleted { .. }
                | AgentEventKind::TurnFailed { .. }
                | AgentEventKind::TurnCancelled { .. }
                | AgentEventKind::TurnEndedWithError { .. }
                | AgentEventKind::TurnInputRequired { .. }
        )
    }
}

/// One normalized event with the time it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEvent {
    /// Arrival time, epoch milliseconds from the injected clock.
    pub at_ms: i64,
    pub kind: AgentEventKind,
    /// The run's token totals when this turn-ending event was kept, set by the orchestrator
    /// (agents never set it); `None` while the run is unmeasured. Served as `usage`.
    pub run_usage: Option<TokenUsage>,
}

impl AgentEvent {
    pub fn new(at_ms: i64, kind: AgentEventKind) -> Self {
        AgentEvent {
            at_ms,
            kind,
            run_usage: None,
        }
    }
}

impl Serialize for AgentEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("event", self.kind.type_name())?;
        m.serialize_entry("at", &crate::clock::rfc3339_ms(self.at_ms))?;
        m.serialize_entry("message", self.kind.message())?;
        if self.kind.is_terminal() {
            m.serialize_entry("usage", &self.run_usage)?;
        }
        match &self.kind {
            AgentEventKind::SessionStarted {
                session_id,
                agent_pid,
            } => {
                m.serialize_entry("session_id", session_id)?;
                if let Some(pid) = agent_pid {
                    m.serialize_entry("agent_pid", pid)?;
                }
            }
            AgentEventKind::ToolResult {
                tool_name,
                tool_kind,
                tool_argument,
                duration_ms,
                tool_error,
                ..
            } => {
                if let Some(n) = tool_name {
                    m.serialize_entry("tool_name", n)?;
                }
                if let Some(k) = tool_kind {
                    m.serialize_entry("tool_kind", k)?;
                    if let Some(a) = tool_argument {
                        m.serialize_entry("tool_argument", a)?;
                    }
                }
                if let Some(d) = duration_ms {
                    m.serialize_entry("duration_ms", d)?;
                }
                m.serialize_entry("tool_error", tool_error)?;
            }
            AgentEventKind::TokenUsage {
                usage,
                model,
                api_duration_ms,
            } => {
                m.serialize_entry("usage", usage)?;
                if let Some(model) = model {
                    m.serialize_entry("model", model)?;
                }
                if let Some(d) = api_duration_ms {
                    m.serialize_entry("api_duration_ms", d)?;
                }
            }
            AgentEventKind::RateLimits { windows } => {
                m.serialize_entry("windows", windows)?;
            }
            AgentEventKind::VendorAmount {
                unit,
                model,
                amount,
            } => {
                m.serialize_entry("unit", unit)?;
                m.serialize_entry("model", model)?;
                m.serialize_entry("amount", amount)?;
            }
            AgentEventKind::UnsupportedToolCall { tool_name, .. } => {
                m.serialize_entry("tool_name", tool_name)?;
            }
            AgentEventKind::TurnCompleted {
                api_duration_ms, ..
            }
            | AgentEventKind::TurnFailed {
                api_duration_ms, ..
            } => {
                if let Some(d) = api_duration_ms {
                    m.serialize_entry("api_duration_ms", d)?;
                }
            }
            _ => {}
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncached_input_normalization_adds_cache_terms_into_input() {
        let u = TokenUsage::from_uncached_input(100, 50, 20, 5);
        assert_eq!(u, TokenUsage::new(125, 50, 20, 5));
        assert_eq!(u.total_tokens, 175);
        assert_eq!(u.uncached_tokens(), 155);
    }

    #[test]
    fn tool_result_serializes_in_the_api_shape() {
        let ev = AgentEvent::new(
            0,
            AgentEventKind::ToolResult {
                tool_name: Some("Bash".into()),
                tool_kind: Some(ToolKind::Shell),
                tool_argument: Some("go test ./...".into()),
                duration_ms: Some(2400),
                tool_error: false,
                message: String::new(),
            },
        );
        let json = serde_json::to_string(&ev).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"event":"tool_result","at":"1970-01-01T00:00:00.000Z","message":"","tool_name":"Bash","tool_kind":"shell","tool_argument":"go test ./...","duration_ms":2400,"tool_error":false}"#
        );
    }

    #[test]
    fn timeout_cancellation_maps_to_turn_timeout() {
        let o = TurnOutcome::Cancelled {
            reason: CancelReason::TurnTimeout,
        };
        assert_eq!(o.error_kind(), Some(AgentErrorKind::TurnTimeout));
        assert_eq!(o.terminal_event(None).type_name(), "turn_cancelled");
    }
}
