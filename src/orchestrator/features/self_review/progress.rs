//! A running session's progress through the self-review phase, as its running row and its
//! stall clock read it (owned by `feature::SelfReviewFeature`, published in snapshots).

use crate::orchestrator::core::run_record::SelfReviewPhase;
use crate::orchestrator::core::state::RunFacts;

/// One session's self-review progress, as its running row shows it. A session that never
/// entered the phase has the default: outside the phase, no checks, no stall floor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReviewProgress {
    /// In the phase, with this many iterations completed; `None` outside it.
    pub iteration: Option<u32>,
    /// Sortie itself is working between turns (the diff and the verification commands, each
    /// bounded by its own timeout): the agent's silence is not a stall meanwhile, and the
    /// stall clock restarts at the next turn start (`stall_floor_ms`).
    pub checks_running: bool,
    pub stall_floor_ms: i64,
}

impl ReviewProgress {
    /// Takes a phase report; at the phase's end, returns its audit trail (the row then reads
    /// as outside the phase again).
    pub(crate) fn apply(&mut self, phase: SelfReviewPhase) -> Option<Option<serde_json::Value>> {
        // Any report other than `Checking` comes after the checks.
        self.checks_running = false;
        match phase {
            SelfReviewPhase::Started => self.iteration = Some(0),
            SelfReviewPhase::Checking => self.checks_running = true,
            SelfReviewPhase::Iteration(n) => self.iteration = Some(n),
            SelfReviewPhase::Done(meta) => {
                self.iteration = None;
                return Some(meta.map(|m| *m));
            }
        }
        None
    }

    /// Where the session's stall timeout counts from, `None` while Sortie's own checks run.
    pub fn stall_reference_ms(&self, facts: &RunFacts) -> Option<i64> {
        (!self.checks_running).then(|| self.stall_base_ms(facts))
    }

    /// The session's last sign of life: its last event (its start before any), or the first
    /// turn after self-review's checks when that is later.
    pub fn stall_base_ms(&self, facts: &RunFacts) -> i64 {
        facts
            .last_event_at_ms
            .unwrap_or(facts.started_at_ms)
            .max(self.stall_floor_ms)
    }

    /// The current turn has run `read_timeout_ms` or longer without any event from the agent
    /// (never while Sortie's own checks run).
    pub fn waiting_for_first_output(
        &self,
        facts: &RunFacts,
        read_timeout_ms: u64,
        now_ms: i64,
    ) -> bool {
        !self.checks_running && facts.waiting_for_first_output(read_timeout_ms, now_ms)
    }
}
