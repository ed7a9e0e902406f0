//! A per-destination token bucket: `per_minute` deliveries a minute, bursts up to the same.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Bucket {
    per_minute: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(per_minute: u32, now: Instant) -> Bucket {
        let per_minute = f64::from(per_minute.max(1));
        Bucket {
            per_minute,
            tokens: per_minute,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * self.per_minute / 60.0).min(self.per_minute);
        self.at = now;
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - self.tokens;
        Err(Duration::from_secs_f64(missing * 60.0 / self.per_minute))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_spends_the_bucket_then_waits_for_the_refill() {
        let t0 = Instant::now();
        let mut b = Bucket::new(2, t0);
        assert_eq!(b.take(t0), Ok(()));
        assert_eq!(b.take(t0), Ok(()));
        let wait = b.take(t0).err().unwrap_or_default();
        assert_eq!(wait.as_secs(), 30);
        assert_eq!(b.take(t0 + Duration::from_secs(30)), Ok(()));
    }
}
