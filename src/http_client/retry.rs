//! When an idempotent read is sent again: at most twice, after a capped, jittered exponential
//! backoff that never ends before the server's `Retry-After`.

use std::time::Duration;

/// Retry rules for automatically retried reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Extra attempts after the first.
    pub max_retries: u32,
    /// The first backoff; doubled per attempt.
    pub base: Duration,
    /// No backoff is longer, and a server asking for a longer wait is not retried inline: the
    /// error goes back to the caller, whose own schedule (the next poll) covers it.
    pub cap: Duration,
    /// Relative jitter, e.g. 0.3 for ±30 %.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            base: Duration::from_secs(2),
            cap: Duration::from_secs(30),
            jitter: 0.3,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based), given the server's requested wait
    /// and a uniform sample `unit` in `[0, 1)`; `None` when no retry should be made.
    pub fn delay(
        &self,
        attempt: u32,
        server_wait: Option<Duration>,
        unit: f64,
    ) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        if server_wait.is_some_and(|w| w > self.cap) {
            return None;
        }
        let exp = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(self.cap);
        let factor = 1.0 + self.jitter * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
        let jittered = exp.mul_f64(factor.max(0.0)).min(self.cap);
        Some(jittered.max(server_wait.unwrap_or(Duration::ZERO)))
    }
}

/// A uniform sample in `[0, 1)` for jitter; 0.5 (no jitter) if the OS has no randomness.
pub(crate) fn jitter_unit() -> f64 {
    let mut b = [0u8; 4];
    match getrandom::fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_two_retries_with_capped_jittered_backoff() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, None, 0.5), Some(Duration::from_secs(2)));
        assert_eq!(p.delay(1, None, 0.5), Some(Duration::from_secs(4)));
        assert_eq!(p.delay(2, None, 0.5), None);
        let low = p.delay(0, None, 0.0).unwrap_or_default();
        let high = p.delay(0, None, 0.999).unwrap_or_default();
        assert!(low >= Duration::from_millis(1400) && high <= Duration::from_millis(2600));
        let capped = RetryPolicy {
            max_retries: 10,
            ..p
        };
        assert_eq!(capped.delay(8, None, 0.999), Some(Duration::from_secs(30)));
    }

    #[test]
    fn never_before_the_server_wait_and_never_past_the_cap() {
        let p = RetryPolicy::default();
        for unit in [0.0, 0.5, 0.999] {
            let d = p
                .delay(0, Some(Duration::from_secs(5)), unit)
                .unwrap_or_default();
            assert!(d >= Duration::from_secs(5));
        }
        assert_eq!(p.delay(0, Some(Duration::from_secs(31)), 0.5), None);
    }

    #[test]
    fn jitter_samples_are_units() {
        let u = jitter_unit();
        assert!((0.0..1.0).contains(&u));
    }
}
