//! What a check reads: the clock, the forge (each read recorded in `health.scm`), the
//! settings, and whether the one retry slot is taken.

use crate::config::reactions::ReactionsConfig;
use crate::domain::ReactionWait;
use crate::orchestrator::core::state::CheckHealth;
use crate::scm::{ScmAdapter, ScmError, ScmResult};

use super::step::Step;

/// Longest wait after failed checks.
pub const MAX_BACKOFF_MS: u64 = 5 * 60 * 1000;

/// The context of one check.
pub struct CheckCx<'a> {
    pub now_ms: i64,
    pub scm: &'a dyn ScmAdapter,
    pub health: &'a mut CheckHealth<ScmError>,
    pub cfg: &'a ReactionsConfig,
    /// `polling.interval_ms`: the CI kind's cadence and backoff base.
    pub poll_interval_ms: u64,
    /// Another retry holds the slot, or a session of the issue runs.
    pub slot_busy: bool,
}

impl CheckCx<'_> {
    /// A forge read, recorded in the provider's health.
    pub fn read<T>(&mut self, f: impl FnOnce(&dyn ScmAdapter) -> ScmResult<T>) -> ScmResult<T> {
        let r = f(self.scm);
        self.health
            .record(self.now_ms, r.as_ref().map(|_| ()).map_err(Clone::clone));
        r
    }

    /// Wait `interval_ms` (the kind's cadence).
    pub fn wait(&self, wait: ReactionWait, interval_ms: u64) -> Step {
        Step::Wait {
            wait,
            next_poll_at_ms: self.now_ms.saturating_add(interval_ms as i64),
        }
    }

    /// After a failed read: `base × 2^n`, capped, where `n` counts failed checks (so the first
    /// recheck waits twice the base).
    pub fn backoff(&self, base_ms: u64, failures: u32) -> Step {
        let factor = 1u64 << failures.min(16);
        let delay = base_ms
            .max(1_000)
            .saturating_mul(factor)
            .min(MAX_BACKOFF_MS);
        Step::Wait {
            wait: ReactionWait::Backoff,
            next_poll_at_ms: self.now_ms.saturating_add(delay as i64),
        }
    }
}

impl CheckCx<'_> {
    /// Reads the row's pull request, keeping its link; a failed read is a backoff step.
    pub fn pull_request(
        &mut self,
        row: &mut super::row::ReactionRow,
        base_ms: u64,
    ) -> Result<crate::scm::PullRequestInfo, Box<Step>> {
        let pr = row.pr.pr.clone();
        let info = match self.read(|s| s.pull_request(&pr)) {
            Ok(i) => i,
            Err(_) => return Err(Box::new(self.backoff(base_ms, row.backoff_count + 1))),
        };
        if !info.url.is_empty() {
            row.pr.url = info.url.clone();
        }
        Ok(info)
    }

    /// Reads the row's pull request (keeping its link) while it is open: a failed read is a
    /// backoff step, a merged or closed pull request ends the watch.
    pub fn open_pull_request(
        &mut self,
        row: &mut super::row::ReactionRow,
        base_ms: u64,
    ) -> Result<crate::scm::PullRequestInfo, Box<Step>> {
        let info = self.pull_request(row, base_ms)?;
        if info.merged || !info.open {
            return Err(Box::new(Step::End {
                why: "the pull request merged or closed",
            }));
        }
        Ok(info)
    }
}
