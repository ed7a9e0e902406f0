//! What the server said about its rate limits, kept so an adapter can show it and so retries
//! never come back before the server allows.

use std::time::Duration;

use super::request::header_value;

/// A rate-limit header: `X-RateLimit-<name>`, else the unprefixed `RateLimit-<name>` some
/// servers send instead (draft IETF names).
pub(crate) fn rate_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    header_value(headers, &format!("x-ratelimit-{name}"))
        .or_else(|| header_value(headers, &format!("ratelimit-{name}")))
}

/// The latest rate-limit figures a client saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitStatus {
    /// `X-RateLimit-Limit`.
    pub limit: Option<u64>,
    /// `X-RateLimit-Remaining`.
    pub remaining: Option<u64>,
    /// `X-RateLimit-Reset`, epoch milliseconds.
    pub reset_at_ms: Option<i64>,
    /// When the last 429 or rate-limit 403 arrived, epoch milliseconds.
    pub last_limited_at_ms: Option<i64>,
    /// Its status (429 or 403).
    pub last_limited_status: Option<u16>,
}

impl RateLimitStatus {
    /// Takes the `X-RateLimit-*` (or `RateLimit-*`) figures of a response; absent headers keep
    /// earlier values.
    pub fn observe(&mut self, headers: &[(String, String)]) {
        let num = |name| rate_header(headers, name).and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(v) = num("limit") {
            self.limit = Some(v);
        }
        if let Some(v) = num("remaining") {
            self.remaining = Some(v);
        }
        if let Some(v) = num("reset") {
            self.reset_at_ms = i64::try_from(v).ok().map(|s| s.saturating_mul(1000));
        }
    }

    /// Records a rate-limited answer.
    pub fn limited(&mut self, status: u16, now_ms: i64) {
        self.last_limited_at_ms = Some(now_ms);
        self.last_limited_status = Some(status);
    }

    /// Whether the primary budget is spent (`remaining == 0`).
    pub fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }
}

/// The wait a response asks for: `Retry-After` in seconds, else, when the budget is spent,
/// the time until `X-RateLimit-Reset`.
pub fn retry_after(headers: &[(String, String)], now_ms: i64) -> Option<Duration> {
    if let Some(secs) =
        header_value(headers, "retry-after").and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Some(Duration::from_secs(secs));
    }
    let remaining = rate_header(headers, "remaining")?.trim();
    if remaining != "0" {
        return None;
    }
    let reset_s = rate_header(headers, "reset")?.trim().parse::<i64>().ok()?;
    let wait_ms = reset_s.saturating_mul(1000).saturating_sub(now_ms).max(0);
    Some(Duration::from_millis(wait_ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn retry_after_prefers_the_header_then_the_reset() {
        assert_eq!(
            retry_after(&h(&[("retry-after", "2")]), 0),
            Some(Duration::from_secs(2))
        );
        let reset = h(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "100")]);
        assert_eq!(retry_after(&reset, 95_000), Some(Duration::from_secs(5)));
        assert_eq!(retry_after(&reset, 200_000), Some(Duration::ZERO));
        let left = h(&[("x-ratelimit-remaining", "3"), ("x-ratelimit-reset", "100")]);
        assert_eq!(retry_after(&left, 0), None);
    }

    #[test]
    fn observe_keeps_the_latest_figures() {
        let mut s = RateLimitStatus::default();
        s.observe(&h(&[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "7"),
        ]));
        s.observe(&h(&[]));
        assert_eq!(
            (s.limit, s.remaining, s.reset_at_ms),
            (Some(5000), Some(0), Some(7000))
        );
        assert!(s.exhausted());
        let mut u = RateLimitStatus::default();
        u.observe(&h(&[
            ("ratelimit-limit", "2000"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "9"),
        ]));
        assert_eq!(
            (u.limit, u.remaining, u.reset_at_ms),
            (Some(2000), Some(0), Some(9000))
        );
        let unprefixed = h(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "100")]);
        assert_eq!(
            retry_after(&unprefixed, 95_000),
            Some(Duration::from_secs(5))
        );
    }
}
