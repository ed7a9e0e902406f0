//! Where the claim core reaches the agent holds feature (`agent_holds::feature`): an exit's
//! usage limit or failed login installs a hold, a completed turn lifts a login hold.

use crate::orchestrator::core::msg::UsageLimit;
use crate::orchestrator::core::orchestrator::*;

impl Orchestrator {
    /// Installs the usage hold of a refused session (`AgentHoldsFeature::note_usage_limit`).
    pub(crate) fn note_usage_limit(
        &mut self,
        issue: &Issue,
        limit: &UsageLimit,
        resets_at_ms: i64,
    ) {
        self.with_features(|f, cx| {
            f.agent_holds
                .note_usage_limit(issue, limit, resets_at_ms, cx)
        });
    }

    /// Installs the login hold of `kind` after a session failed to authenticate.
    pub(crate) fn note_auth_failed(&mut self, issue: &Issue, message: &str, kind: &str) {
        let now = self.clock.now_ms();
        self.features
            .agent_holds
            .note_auth_failed(issue, message, kind, now);
    }

    /// A session of `kind` completed a turn: its login works again.
    pub(crate) fn lift_auth_hold_after_success(&mut self, kind: &str) {
        self.features.agent_holds.lift_auth_after_success(kind);
    }
}

#[cfg(test)]
mod tests {
    use crate::orchestrator::claim::exit_step::usage_retry_due_ms;

    #[test]
    fn a_usage_retry_waits_for_the_reset_or_the_longer_backoff() {
        assert_eq!(usage_retry_due_ms(Some(100_000), 40_000, 10_000), 100_000);
        assert_eq!(usage_retry_due_ms(Some(45_000), 40_000, 10_000), 50_000);
        assert_eq!(usage_retry_due_ms(Some(1_000), 40_000, 10_000), 50_000);
        assert_eq!(usage_retry_due_ms(None, 40_000, 10_000), 50_000);
    }
}
