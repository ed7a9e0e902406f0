//! The bounds around verification: a token bucket per kind (so a flood, signed or not, costs
//! little) and a bounded memory of delivery ids (so a captured delivery replayed within the
//! window has no effect). Both take the time as an argument, so they are tested without
//! sleeping.

use std::collections::{HashSet, VecDeque};

/// Deliveries per second a kind refills.
pub const RATE_PER_SEC: f64 = 10.0;
/// Deliveries a kind may send at once.
pub const BURST: f64 = 50.0;
/// Delivery ids remembered at most.
pub const REPLAY_CAPACITY: usize = 10_000;
/// How long a delivery id is remembered.
pub const REPLAY_WINDOW_MS: i64 = 60 * 60 * 1000;

/// A token bucket.
#[derive(Debug)]
pub struct Bucket {
    tokens: f64,
    at_ms: i64,
}

impl Bucket {
    pub fn full(now_ms: i64) -> Bucket {
        Bucket {
            tokens: BURST,
            at_ms: now_ms,
        }
    }

    /// Takes a token: `Ok`, or `Err(seconds)` until one is there (at least 1).
    pub fn take(&mut self, now_ms: i64) -> Result<(), u64> {
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * RATE_PER_SEC).min(BURST);
        self.at_ms = now_ms.max(self.at_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - self.tokens) / RATE_PER_SEC;
            Err((wait.ceil() as u64).max(1))
        }
    }
}

/// Delivery ids seen within [`REPLAY_WINDOW_MS`], at most [`REPLAY_CAPACITY`] (oldest
/// forgotten first).
#[derive(Debug, Default)]
pub struct Seen {
    order: VecDeque<(i64, String)>,
    ids: HashSet<String>,
}

impl Seen {
    /// Records `id`; `false` when it was already seen within the window (a replay).
    pub fn first_time(&mut self, id: &str, now_ms: i64) -> bool {
        while let Some((at, _)) = self.order.front() {
            if now_ms - *at > REPLAY_WINDOW_MS || self.order.len() >= REPLAY_CAPACITY {
                if let Some((_, old)) = self.order.pop_front() {
                    self.ids.remove(&old);
                }
            } else {
                break;
            }
        }
        if self.ids.contains(id) {
            return false;
        }
        self.ids.insert(id.to_string());
        self.order.push_back((now_ms, id.to_string()));
        true
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut b = Bucket::full(0);
        for _ in 0..50 {
            assert_eq!(b.take(0), Ok(()));
        }
        assert_eq!(b.take(0), Err(1));
        // 100 ms refill one token at 10/s.
        assert_eq!(b.take(100), Ok(()));
        assert_eq!(b.take(100), Err(1));
        // A long pause refills to the burst, no further.
        for _ in 0..50 {
            assert_eq!(b.take(3_600_000), Ok(()));
        }
        assert!(b.take(3_600_000).is_err());
    }

    #[test]
    fn replays_are_refused_within_the_window_only() {
        let mut s = Seen::default();
        assert!(s.first_time("a", 0));
        assert!(!s.first_time("a", 1_000));
        assert!(s.first_time("b", 1_000));
        assert!(s.first_time("a", REPLAY_WINDOW_MS + 1));
        assert!(!s.first_time("a", REPLAY_WINDOW_MS + 2));
    }

    #[test]
    fn the_memory_is_bounded() {
        let mut s = Seen::default();
        for i in 0..(REPLAY_CAPACITY + 10) {
            assert!(s.first_time(&i.to_string(), 5));
        }
        assert_eq!(s.len(), REPLAY_CAPACITY);
        // The oldest were forgotten, the newest are still known.
        assert!(!s.first_time(&(REPLAY_CAPACITY + 9).to_string(), 5));
        assert!(s.first_time("0", 5));
    }
}
