//! Retry delays: a short fixed delay before a continuation, exponential backoff from 10 s
//! (capped by `agent.max_retry_backoff_ms`) after a failure.

/// Delay before a continuation retry after a normal exit.
pub const CONTINUATION_DELAY_MS: u64 = 1_000;

/// The cap used when `agent.max_retry_backoff_ms` is not positive.
pub const DEFAULT_MAX_BACKOFF_MS: u64 = 300_000;

/// Backoff before failure retry number `attempt` (1-based; 0 is treated as 1):
/// `min(10000 · 2^(attempt−1), cap)`.
pub fn failure_delay_ms(attempt: u32, cap_ms: u64) -> u64 {
    let cap = if cap_ms == 0 {
        DEFAULT_MAX_BACKOFF_MS
    } else {
        cap_ms
    };
    let exp = attempt.max(1) - 1;
    // 10_000 · 2^exp overflows u64 past exp ≈ 50; saturate instead.
    let delay = 10_000u64
        .checked_shl(exp.min(63))
        .filter(|d| d >> exp.min(63) == 10_000);
    delay.unwrap_or(u64::MAX).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_ten_seconds_and_caps() {
        let got: Vec<u64> = (1..=7).map(|a| failure_delay_ms(a, 300_000)).collect();
        assert_eq!(
            got,
            vec![10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]
        );
    }

    #[test]
    fn zero_attempt_is_first_and_zero_cap_is_default() {
        assert_eq!(failure_delay_ms(0, 0), 10_000);
        assert_eq!(failure_delay_ms(9, 0), DEFAULT_MAX_BACKOFF_MS);
    }

    #[test]
    fn huge_attempts_saturate_at_the_cap() {
        assert_eq!(failure_delay_ms(200, 45_000), 45_000);
        assert_eq!(failure_delay_ms(u32::MAX, 45_000), 45_000);
    }
}
