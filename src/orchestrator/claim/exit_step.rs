//! What happens to an issue's claim after its supervisor exited, decided without effects:
//! [`decide_exit`] maps the exit, the attempt and the configuration to an [`ExitStep`], and
//! after a plain normal exit [`decide_continue`] picks handoff, continuation or release from
//! the issue's current tracker state. The scheduler applies the step.

use crate::agent::AgentErrorKind;
use crate::agent::status_file::DeclaredOutcome;
use crate::config::TrackerConfig;
use crate::domain::{ParkReason, state_in};

use super::backoff::failure_delay_ms;
use super::run_error::RunError;
use crate::orchestrator::core::run_record::{ErrorCode, SupervisorExit, UsageLimit};

/// The label a parked issue gets when the configuration names none.
pub const DEFAULT_PARKING_LABEL: &str = "needs-human";

/// What happens to an issue's claim after its supervisor exited (its run is already recorded).
#[derive(Debug, Clone, PartialEq)]
pub enum ExitStep {
    /// Shutdown is draining: nothing is scheduled, the claim ends with the process.
    Nothing,
    /// A cancellation whose retry is already queued (a stall queues its own): leave it.
    KeepQueuedRetry,
    /// A cancellation (reconciliation, budget): release the claim.
    Release,
    /// A retryable failure: retry after the failure backoff.
    Retry {
        attempt: u32,
        delay_ms: u64,
        error: RunError,
    },
    /// A failure a plain retry is not expected to fix (missing agent, input required, …). It
    /// still waits the failure backoff, loudly: releasing the claim would dispatch the issue
    /// again at the next tick, forever.
    RetryUnfixable {
        attempt: u32,
        delay_ms: u64,
        error: RunError,
    },
    /// The provider refused the session for a usage limit: hold the agent kind until the reset
    /// and retry the issue then (trigger `usage_limit`).
    UsageLimited {
        attempt: u32,
        /// The reset, or the end of the failure backoff when that is later.
        due_at_ms: i64,
        limit: UsageLimit,
    },
    /// The agent could not log in: no retry (none could succeed); the agent kind is held and
    /// the claim released, so the issue dispatches again once the hold lifts.
    AuthFailed { message: String },
    /// The agent declared itself blocked, or handoffs were withheld up to the ceiling: park
    /// the issue under `label`, release the claim.
    Park { label: String, reason: ParkReason },
    /// The handoff was withheld for want of evidence of work: retry after the failure backoff
    /// (the failure breaker does not count it; the handoff-absence ceiling does).
    Withheld {
        attempt: u32,
        delay_ms: u64,
        error: RunError,
    },
    /// The agent declared an outcome: move the issue to `state` if one is configured, then
    /// release the claim. `no_change`: the declaration was `no-change-needed`, a success that
    /// makes the stage hop of a rule with `next` instead of the write.
    Declared {
        state: Option<String>,
        no_change: bool,
    },
    /// The session ended without a declaration: read the issue's state, then hand off or
    /// continue with `attempt` ([`decide_continue`]).
    Continue { attempt: u32 },
}

impl ExitStep {
    /// The step's name as a log field value (never Rust debug text).
    pub fn word(&self) -> &'static str {
        match self {
            ExitStep::Nothing => "nothing",
            ExitStep::KeepQueuedRetry => "keep_queued_retry",
            ExitStep::Release => "release",
            ExitStep::Retry { .. } => "retry",
            ExitStep::RetryUnfixable { .. } => "retry_unfixable",
            ExitStep::UsageLimited { .. } => "usage_limited",
            ExitStep::AuthFailed { .. } => "auth_failed",
            ExitStep::Park { .. } => "park",
            ExitStep::Withheld { .. } => "withheld",
            ExitStep::Declared { .. } => "declared",
            ExitStep::Continue { .. } => "continue",
        }
    }
}

/// What [`decide_exit`] reads.
pub struct ExitFacts<'a> {
    pub exit: &'a SupervisorExit,
    /// The attempt that just ended (0 on first dispatch).
    pub attempt: u32,
    pub draining: bool,
    /// Whether a retry of the issue is already queued.
    pub retry_queued: bool,
    pub backoff_cap_ms: u64,
    pub tracker: &'a TrackerConfig,
    pub now_ms: i64,
    /// Withheld handoffs in a row, this exit's included (`handoff_evidence::AbsenceStreaks`).
    pub withheld_in_a_row: u32,
}

/// Decides the step after a supervisor exit, without effects.
pub fn decide_exit(f: &ExitFacts<'_>) -> ExitStep {
    if f.draining {
        return ExitStep::Nothing;
    }
    let next_attempt = f.attempt + 1;
    let failed = |code: &ErrorCode, message: &str| RunError::Failed {
        code: *code,
        message: message.to_string(),
    };
    match f.exit {
        SupervisorExit::Cancelled { .. } if f.retry_queued => ExitStep::KeepQueuedRetry,
        SupervisorExit::Cancelled { .. } => ExitStep::Release,
        SupervisorExit::UsageLimited(limit) => ExitStep::UsageLimited {
            attempt: next_attempt,
            due_at_ms: usage_retry_due_ms(
                limit.resets_at_ms,
                f.now_ms,
                failure_delay_ms(next_attempt, f.backoff_cap_ms),
            ),
            limit: limit.clone(),
        },
        SupervisorExit::Error {
            code: ErrorCode::Agent(AgentErrorKind::AgentAuthFailed),
            message,
            ..
        } => ExitStep::AuthFailed {
            message: message.clone(),
        },
        SupervisorExit::Error {
            code,
            message,
            retryable: true,
        } => ExitStep::Retry {
            attempt: next_attempt,
            delay_ms: failure_delay_ms(next_attempt, f.backoff_cap_ms),
            error: failed(code, message),
        },
        SupervisorExit::Error {
            code,
            message,
            retryable: false,
        } => ExitStep::RetryUnfixable {
            attempt: next_attempt,
            delay_ms: failure_delay_ms(next_attempt, f.backoff_cap_ms),
            error: failed(code, message),
        },
        SupervisorExit::HandoffWithheld { missing, .. } => {
            if f.withheld_in_a_row >= super::handoff_evidence::HANDOFF_ABSENCE_CEILING {
                ExitStep::Park {
                    label: DEFAULT_PARKING_LABEL.to_string(),
                    reason: ParkReason::HandoffAbsence,
                }
            } else {
                ExitStep::Withheld {
                    attempt: next_attempt,
                    delay_ms: failure_delay_ms(next_attempt, f.backoff_cap_ms),
                    error: RunError::Failed {
                        code: ErrorCode::HandoffWithheld,
                        message: missing.clone(),
                    },
                }
            }
        }
        SupervisorExit::Normal { declared, .. } => match declared {
            Some(DeclaredOutcome::Blocked) => ExitStep::Park {
                label: DEFAULT_PARKING_LABEL.to_string(),
                reason: ParkReason::AgentBlocked,
            },
            Some(DeclaredOutcome::NoChangeNeeded) => ExitStep::Declared {
                state: f.tracker.no_change_state.clone(),
                no_change: true,
            },
            Some(DeclaredOutcome::NeedsHumanReview) => ExitStep::Declared {
                state: f.tracker.handoff_state.clone(),
                no_change: false,
            },
            None => ExitStep::Continue {
                attempt: next_attempt,
            },
        },
    }
}

/// The step after a session that ended without a declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContinueStep {
    /// The issue left the active states: release; `handoff_skipped` when a handoff state is
    /// configured (the handoff metric counts it).
    Release { handoff_skipped: bool },
    /// Move the issue to the handoff state; if that fails, continue.
    HandOff { state: String },
    /// Queue a continuation retry.
    Continue,
}

/// Decides from the issue's current tracker state (`None`: it could not be read, so it is
/// taken as still active, as the supervisor last saw it).
pub fn decide_continue(current: Option<&str>, cfg: &TrackerConfig) -> ContinueStep {
    let still_active = match current {
        Some(s) => state_in(s, &cfg.active_states) && !state_in(s, &cfg.terminal_states),
        None => true,
    };
    match (still_active, &cfg.handoff_state) {
        (false, handoff) => ContinueStep::Release {
            handoff_skipped: handoff.is_some(),
        },
        (true, Some(state)) => ContinueStep::HandOff {
            state: state.clone(),
        },
        (true, None) => ContinueStep::Continue,
    }
}

/// When the retry of a refused session is due: the reset, or the end of the ordinary failure
/// backoff from `now_ms` when that is later (or when the agent named no reset).
pub fn usage_retry_due_ms(resets_at_ms: Option<i64>, now_ms: i64, backoff_ms: u64) -> i64 {
    let backoff_end = now_ms.saturating_add(i64::try_from(backoff_ms).unwrap_or(i64::MAX));
    resets_at_ms.map_or(backoff_end, |reset| reset.max(backoff_end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::CancelReason;

    fn tracker() -> TrackerConfig {
        TrackerConfig {
            active_states: vec!["To Do".into(), "In Progress".into()],
            terminal_states: vec!["Done".into()],
            handoff_state: Some("Human Review".into()),
            ..Default::default()
        }
    }

    fn decide(exit: SupervisorExit, retry_queued: bool, draining: bool) -> ExitStep {
        decide_exit(&ExitFacts {
            exit: &exit,
            attempt: 2,
            draining,
            retry_queued,
            backoff_cap_ms: 300_000,
            tracker: &tracker(),
            now_ms: 1_000_000,
            withheld_in_a_row: 1,
        })
    }

    fn normal(declared: Option<DeclaredOutcome>) -> SupervisorExit {
        SupervisorExit::Normal {
            declared,
            statement: None,
        }
    }

    #[test]
    fn every_failure_waits_the_backoff_before_the_next_dispatch() {
        let boom = || RunError::Failed {
            code: crate::orchestrator::core::msg::ErrorCode::Agent(
                crate::agent::AgentErrorKind::TurnFailed,
            ),
            message: "boom".into(),
        };
        let err = |retryable| SupervisorExit::Error {
            code: crate::orchestrator::core::msg::ErrorCode::Agent(
                crate::agent::AgentErrorKind::TurnFailed,
            ),
            message: "boom".into(),
            retryable,
        };
        assert_eq!(
            decide(err(true), false, false),
            ExitStep::Retry {
                attempt: 3,
                delay_ms: failure_delay_ms(3, 300_000),
                error: boom(),
            }
        );
        assert_eq!(
            decide(err(false), false, false),
            ExitStep::RetryUnfixable {
                attempt: 3,
                delay_ms: failure_delay_ms(3, 300_000),
                error: boom()
            }
        );
    }

    #[test]
    fn a_usage_limit_retries_at_the_reset_and_a_failed_login_is_not_retried() {
        let limited = |resets_at_ms| {
            SupervisorExit::UsageLimited(UsageLimit {
                message: "limit".into(),
                resets_at_ms,
                model: None,
            })
        };
        // now 1_000_000; attempt 3 backs off 40 s.
        let due = |exit| match decide(exit, false, false) {
            ExitStep::UsageLimited {
                attempt, due_at_ms, ..
            } => (attempt, due_at_ms),
            other => panic!("{other:?}"),
        };
        assert_eq!(due(limited(Some(5_000_000))), (3, 5_000_000));
        assert_eq!(due(limited(Some(1_010_000))), (3, 1_040_000));
        assert_eq!(due(limited(None)), (3, 1_040_000));
        let auth = SupervisorExit::Error {
            code: ErrorCode::Agent(AgentErrorKind::AgentAuthFailed),
            message: "not logged in".into(),
            retryable: false,
        };
        assert_eq!(
            decide(auth, false, false),
            ExitStep::AuthFailed {
                message: "not logged in".into()
            }
        );
    }

    #[test]
    fn a_cancellation_keeps_a_stall_retry_and_otherwise_releases() {
        let cancelled = || SupervisorExit::Cancelled {
            reason: CancelReason::Stall,
        };
        assert_eq!(decide(cancelled(), true, false), ExitStep::KeepQueuedRetry);
        assert_eq!(decide(cancelled(), false, false), ExitStep::Release);
        assert_eq!(decide(cancelled(), false, true), ExitStep::Nothing);
    }

    #[test]
    fn declarations_park_or_move_the_issue_and_silence_continues() {
        assert_eq!(
            decide(normal(Some(DeclaredOutcome::Blocked)), false, false),
            ExitStep::Park {
                label: DEFAULT_PARKING_LABEL.into(),
                reason: ParkReason::AgentBlocked,
            }
        );
        assert_eq!(
            decide(
                normal(Some(DeclaredOutcome::NeedsHumanReview)),
                false,
                false
            ),
            ExitStep::Declared {
                state: Some("Human Review".into()),
                no_change: false
            }
        );
        assert_eq!(
            decide(normal(Some(DeclaredOutcome::NoChangeNeeded)), false, false),
            ExitStep::Declared {
                state: None,
                no_change: true
            }
        );
        assert_eq!(
            decide(normal(None), false, false),
            ExitStep::Continue { attempt: 3 }
        );
    }

    #[test]
    fn a_withheld_handoff_retries_after_the_backoff_and_parks_at_the_ceiling() {
        let exit = SupervisorExit::HandoffWithheld {
            declared: Some(DeclaredOutcome::NeedsHumanReview),
            statement: None,
            missing: "no new commit".into(),
        };
        let at = |withheld_in_a_row| {
            decide_exit(&ExitFacts {
                exit: &exit,
                attempt: 2,
                draining: false,
                retry_queued: false,
                backoff_cap_ms: 300_000,
                tracker: &tracker(),
                now_ms: 1_000_000,
                withheld_in_a_row,
            })
        };
        assert_eq!(
            at(2),
            ExitStep::Withheld {
                attempt: 3,
                delay_ms: failure_delay_ms(3, 300_000),
                error: RunError::Failed {
                    code: ErrorCode::HandoffWithheld,
                    message: "no new commit".into()
                },
            }
        );
        assert_eq!(
            at(super::super::handoff_evidence::HANDOFF_ABSENCE_CEILING),
            ExitStep::Park {
                label: DEFAULT_PARKING_LABEL.into(),
                reason: ParkReason::HandoffAbsence,
            }
        );
    }

    #[test]
    fn after_a_plain_exit_the_tracker_state_decides() {
        let mut cfg = tracker();
        assert_eq!(
            decide_continue(Some("Done"), &cfg),
            ContinueStep::Release {
                handoff_skipped: true
            }
        );
        assert_eq!(
            decide_continue(None, &cfg),
            ContinueStep::HandOff {
                state: "Human Review".into()
            }
        );
        cfg.handoff_state = None;
        assert_eq!(
            decide_continue(Some("in progress"), &cfg),
            ContinueStep::Continue
        );
        assert_eq!(
            decide_continue(Some("Backlog"), &cfg),
            ContinueStep::Release {
                handoff_skipped: false
            }
        );
    }
}
