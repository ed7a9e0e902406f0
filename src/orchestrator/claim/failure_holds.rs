//! The failure breaker: an issue whose runs keep failing in a way a retry will not fix is held
//! for a person instead of being retried forever.
//!
//! - A failed run whose cause the agent kind's recogniser classifies
//!   ([`crate::agent::failure_class::FailureClass`]: not logged in, unsupported token, no
//!   provider, provider unreachable, quota or billing) holds its issue at once.
//! - Otherwise the cause is the run's error code; when `agent.max_same_failures` runs in a row
//!   end with the same cause (default 3), the issue is held.
//!
//! A held issue is not retried and not dispatched (`held[]` lists it with reason
//! `failure_held`, and an attention item quotes the agent's own words). A person releases it
//! by acknowledging the item or asking to retry it now; a workflow reload releases every such
//! hold. Holds are stored (`failure_holds`) and restored at start; the streaks that lead to one
//! live in memory, so a restart starts each count again.

use std::collections::BTreeMap;

use crate::agent::failure_class::FailureClass;
use crate::domain::Issue;

use super::dispatch_pass::HoldReason;

/// Why an issue is held, with the agent's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureHold {
    pub issue: Issue,
    /// The agent kind the failing runs used.
    pub agent_kind: String,
    /// A [`FailureClass`] code, else the repeated error code (e.g. `port_exit`).
    pub cause: String,
    /// Whether `cause` is a [`FailureClass`] (held on the first run).
    pub classified: bool,
    /// Consecutive runs that ended with the cause.
    pub runs: u32,
    /// The last run's error message (it quotes the agent's most informative lines), masked.
    pub message: String,
    pub since_ms: i64,
}

impl FailureHold {
    /// The class of a classified hold.
    pub fn class(&self) -> Option<FailureClass> {
        self.classified
            .then(|| FailureClass::from_code(&self.cause))
            .flatten()
    }

    /// What the dispatch pass lists for the issue.
    pub fn hold_reason(&self) -> HoldReason {
        HoldReason::FailureHeld {
            cause: self.cause.clone(),
            runs: self.runs,
        }
    }
}

/// What the breaker decides after a failed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Retry after the failure backoff; the issue's streak is now `runs` runs of the cause.
    Retry { runs: u32 },
    /// Hold the issue.
    Hold {
        cause: String,
        classified: bool,
        runs: u32,
    },
}

/// Per-issue streaks of failed runs with one cause.
#[derive(Debug, Clone, Default)]
pub struct Streaks {
    by_issue: BTreeMap<String, (String, u32)>,
}

impl Streaks {
    /// Counts a failed run of `issue_id` with `code` (its error code) and `class` (what the
    /// kind's recogniser found), and decides. `max_same` 0 turns the same-cause count off.
    pub fn failed(
        &mut self,
        issue_id: &str,
        code: &str,
        class: Option<FailureClass>,
        max_same: u32,
    ) -> Verdict {
        let cause = class.map_or_else(|| code.to_string(), |c| c.code().to_string());
        let entry = self
            .by_issue
            .entry(issue_id.to_string())
            .or_insert_with(|| (cause.clone(), 0));
        if entry.0 != cause {
            *entry = (cause.clone(), 0);
        }
        entry.1 = entry.1.saturating_add(1);
        let runs = entry.1;
        if class.is_some() || (max_same > 0 && runs >= max_same) {
            self.by_issue.remove(issue_id);
            return Verdict::Hold {
                cause,
                classified: class.is_some(),
                runs,
            };
        }
        Verdict::Retry { runs }
    }

    /// A run of the issue did not fail (or a person released it): its streak ends.
    pub fn reset(&mut self, issue_id: &str) {
        self.by_issue.remove(issue_id);
    }

    /// Every streak ends (a workflow reload).
    pub fn clear(&mut self) {
        self.by_issue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_cause_holds_after_max_runs_and_another_cause_starts_again() {
        let mut s = Streaks::default();
        assert_eq!(
            s.failed("1", "port_exit", None, 3),
            Verdict::Retry { runs: 1 }
        );
        assert_eq!(
            s.failed("1", "port_exit", None, 3),
            Verdict::Retry { runs: 2 }
        );
        assert_eq!(
            s.failed("1", "turn_failed", None, 3),
            Verdict::Retry { runs: 1 }
        );
        assert_eq!(
            s.failed("1", "turn_failed", None, 3),
            Verdict::Retry { runs: 2 }
        );
        assert_eq!(
            s.failed("1", "turn_failed", None, 3),
            Verdict::Hold {
                cause: "turn_failed".into(),
                classified: false,
                runs: 3
            }
        );
        assert_eq!(
            s.failed("1", "turn_failed", None, 3),
            Verdict::Retry { runs: 1 },
            "a hold ends the streak"
        );
        s.reset("1");
        assert_eq!(
            s.failed("1", "turn_failed", None, 0),
            Verdict::Retry { runs: 1 }
        );
        assert_eq!(
            s.failed("1", "turn_failed", None, 0),
            Verdict::Retry { runs: 2 },
            "0 turns the count off"
        );
    }

    #[test]
    fn a_classified_cause_holds_at_once_even_with_the_count_off() {
        let mut s = Streaks::default();
        assert_eq!(
            s.failed("1", "port_exit", Some(FailureClass::Unreachable), 0),
            Verdict::Hold {
                cause: "provider_unreachable".into(),
                classified: true,
                runs: 1
            }
        );
    }
}
