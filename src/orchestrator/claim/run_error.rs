//! A run's and a retry's stored error as typed values. The database keeps the text
//! ([`RunError::stored`], [`RetryError::stored`]); readers parse it back here, so the API words
//! each kind by variant and never by matching on text. Text that parses as none of them (a
//! restart's `interrupted: …`, an older release's words) is served as stored.

use crate::agent::CancelReason;
use crate::domain::RescheduleReason;

use crate::orchestrator::core::run_record::{ErrorCode, SupervisorExit};

/// What starts the error of a retry queued after a failed run; the run's own error follows.
const WORKER_EXITED: &str = "worker exited: ";
/// The error of a retry queued by the stall rule.
const STALL_RETRY: &str = "stall timeout exceeded";
const CANCELLED: &str = "cancelled";

/// The figures behind a token budget stop: the uncached tokens when the session was
/// stopped, and `agent.max_tokens` then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenStop {
    pub used: u64,
    pub limit: u64,
}

/// The figures behind a money budget stop: the estimated cost when the session was
/// stopped, and `agent.max_cost_usd` then, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoneyStop {
    pub used_usd: f64,
    pub limit_usd: f64,
}

/// Which per-issue ceiling stopped a running session, with its figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetStop {
    Tokens(TokenStop),
    Money(MoneyStop),
}

/// How a run ended in error.
#[derive(Debug, Clone, PartialEq)]
pub enum RunError {
    /// The attempt failed (`code: message`; the message may be empty).
    Failed { code: ErrorCode, message: String },
    /// Sortie cancelled the run (`cancelled: reason`). A budget stop recorded without its
    /// figures reads [`CancelReason::Budget`] here.
    Cancelled(CancelReason),
    /// The token budget stopped the run (`cancelled: budget: used_tokens=N max_tokens=M`).
    TokenBudget(TokenStop),
    /// The money budget stopped the run (`cancelled: budget: used_usd=X max_usd=Y`).
    MoneyBudget(MoneyStop),
}

impl RunError {
    /// The error a supervisor exit records (`None` for a normal exit); `budget_stop` holds the
    /// figures when a budget stopped the session.
    pub fn of_exit(exit: &SupervisorExit, budget_stop: Option<BudgetStop>) -> Option<RunError> {
        match exit {
            SupervisorExit::Normal { .. } => None,
            SupervisorExit::Error { code, message, .. } => Some(RunError::Failed {
                code: *code,
                message: message.clone(),
            }),
            SupervisorExit::Cancelled { reason } => Some(match (reason, budget_stop) {
                (CancelReason::Budget, Some(BudgetStop::Tokens(t))) => RunError::TokenBudget(t),
                (CancelReason::Budget, Some(BudgetStop::Money(m))) => RunError::MoneyBudget(m),
                _ => RunError::Cancelled(*reason),
            }),
            SupervisorExit::UsageLimited(limit) => Some(RunError::Failed {
                code: ErrorCode::UsageLimited,
                message: limit.message.clone(),
            }),
            SupervisorExit::HandoffWithheld { missing, .. } => Some(RunError::Failed {
                code: ErrorCode::HandoffWithheld,
                message: missing.clone(),
            }),
        }
    }

    /// The text the database keeps.
    pub fn stored(&self) -> String {
        match self {
            RunError::Failed { code, message } => format!("{code}: {message}"),
            RunError::Cancelled(reason) => format!("{CANCELLED}: {}", reason.as_str()),
            RunError::TokenBudget(t) => format!(
                "{CANCELLED}: {}: used_tokens={} max_tokens={}",
                CancelReason::Budget.as_str(),
                t.used,
                t.limit
            ),
            RunError::MoneyBudget(m) => format!(
                "{CANCELLED}: {}: used_usd={} max_usd={}",
                CancelReason::Budget.as_str(),
                m.used_usd,
                m.limit_usd
            ),
        }
    }

    /// Reads a stored text back; `None` for text no variant stores.
    pub fn parse(text: &str) -> Option<RunError> {
        let (head, rest) = match text.split_once(':') {
            Some((h, r)) => (h, r.strip_prefix(' ').unwrap_or(r)),
            None => (text, ""),
        };
        if head == CANCELLED {
            let (reason, figures) = match rest.split_once(':') {
                Some((r, f)) => (r, Some(f.trim())),
                None => (rest, None),
            };
            let reason = CancelReason::from_code(reason.trim())?;
            return Some(match (reason, figures.and_then(budget_figures)) {
                (CancelReason::Budget, Some(BudgetStop::Tokens(t))) => RunError::TokenBudget(t),
                (CancelReason::Budget, Some(BudgetStop::Money(m))) => RunError::MoneyBudget(m),
                _ => RunError::Cancelled(reason),
            });
        }
        let code = ErrorCode::from_code(head)?;
        Some(RunError::Failed {
            code,
            message: rest.to_string(),
        })
    }
}

/// `used_tokens=N max_tokens=M` or `used_usd=X max_usd=Y`.
fn budget_figures(figures: &str) -> Option<BudgetStop> {
    let pairs: Vec<(&str, &str)> = figures
        .split_whitespace()
        .map(|p| p.split_once('='))
        .collect::<Option<_>>()?;
    let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    if pairs.len() != 2 {
        return None;
    }
    if let (Some(u), Some(l)) = (get("used_tokens"), get("max_tokens")) {
        return Some(BudgetStop::Tokens(TokenStop {
            used: u.parse().ok()?,
            limit: l.parse().ok()?,
        }));
    }
    let (u, l) = (get("used_usd")?, get("max_usd")?);
    let money = MoneyStop {
        used_usd: u.parse().ok()?,
        limit_usd: l.parse().ok()?,
    };
    (money.used_usd.is_finite() && money.limit_usd.is_finite()).then_some(BudgetStop::Money(money))
}

/// What a queued retry's error says.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryError {
    /// The run before it failed or was cancelled with this error.
    WorkerExited(RunError),
    /// The run before it sent no event within the stall timeout.
    Stall,
    /// The retry came due and was put back for this reason.
    Reschedule(RescheduleReason),
}

impl RetryError {
    /// The text the database keeps.
    pub fn stored(&self) -> String {
        match self {
            RetryError::WorkerExited(e) => format!("{WORKER_EXITED}{}", e.stored()),
            RetryError::Stall => STALL_RETRY.to_string(),
            RetryError::Reschedule(r) => r.as_str().to_string(),
        }
    }

    /// Reads a stored text back; `None` for text no variant stores.
    pub fn parse(text: &str) -> Option<RetryError> {
        if let Some(run) = text.strip_prefix(WORKER_EXITED) {
            return RunError::parse(run).map(RetryError::WorkerExited);
        }
        if text == STALL_RETRY {
            return Some(RetryError::Stall);
        }
        text.parse().ok().map(RetryError::Reschedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentErrorKind;

    #[test]
    fn stored_texts_read_back_as_the_same_value() {
        let runs = [
            RunError::Failed {
                code: ErrorCode::Agent(AgentErrorKind::TurnFailed),
                message: "error_during_execution: boom: again".into(),
            },
            RunError::Failed {
                code: ErrorCode::Hook,
                message: String::new(),
            },
            RunError::Cancelled(CancelReason::Stall),
            RunError::Cancelled(CancelReason::Budget),
            RunError::TokenBudget(TokenStop {
                used: 155,
                limit: 100,
            }),
            RunError::MoneyBudget(MoneyStop {
                used_usd: 12.4,
                limit_usd: 10.0,
            }),
        ];
        for r in runs {
            assert_eq!(
                RunError::parse(&r.stored()),
                Some(r.clone()),
                "{}",
                r.stored()
            );
            let retry = RetryError::WorkerExited(r);
            assert_eq!(RetryError::parse(&retry.stored()), Some(retry));
        }
        assert_eq!(
            RunError::Cancelled(CancelReason::Reconcile).stored(),
            "cancelled: reconcile"
        );
        assert_eq!(
            RunError::TokenBudget(TokenStop {
                used: 155,
                limit: 100
            })
            .stored(),
            "cancelled: budget: used_tokens=155 max_tokens=100"
        );
        assert_eq!(
            RetryError::parse("stall timeout exceeded"),
            Some(RetryError::Stall)
        );
        assert_eq!(
            RetryError::parse("no available orchestrator slots"),
            Some(RetryError::Reschedule(RescheduleReason::NoSlots))
        );
    }

    #[test]
    fn other_texts_are_not_read_as_a_kind() {
        assert_eq!(RunError::parse("interrupted: sortie restarted"), None);
        assert_eq!(RunError::parse("cancelled: nope"), None);
        assert_eq!(RetryError::parse("failed to spawn agent"), None);
        assert_eq!(RetryError::parse("worker exited: something else"), None);
        assert_eq!(
            RunError::parse("turn_failed"),
            Some(RunError::Failed {
                code: ErrorCode::Agent(AgentErrorKind::TurnFailed),
                message: String::new()
            })
        );
    }
}
