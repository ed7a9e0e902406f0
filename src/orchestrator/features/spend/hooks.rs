//! Where the retry path reaches the spend feature (`spend::feature`): when a retry a spend
//! window stops checks again.

use crate::orchestrator::core::orchestrator::*;

impl Orchestrator {
    /// When a retry that a spend window stops checks again: after the ordinary failure
    /// backoff of its attempt (as a retry that found no free slot), or at the window's reset
    /// when that comes first. A raised ceiling lifts it at that check.
    pub(crate) fn spend_retry_due_ms(&self, attempt: u32, resets_at_ms: i64) -> i64 {
        let backoff = failure_delay_ms(attempt, self.backoff_cap());
        let next_check = self
            .clock
            .now_ms()
            .saturating_add(i64::try_from(backoff).unwrap_or(i64::MAX));
        resets_at_ms.min(next_check)
    }
}
