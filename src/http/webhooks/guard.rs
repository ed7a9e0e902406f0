//! The bounds around verification, all taking the time as an argument (tested without
//! sleeping):
//! - a token bucket per kind, charged only by verified, new deliveries, so traffic without
//!   the secret can never use up a forge's allowance;
//! - a token bucket per sender (client address) charged by every delivery that is refused
//!   (not configured, unsigned, unverified, replayed): past its burst that sender's refusals
//!   are answered 429, so it is told to back off, while other senders, and that sender's own
//!   verified deliveries, are unaffected;
//! - a bounded memory of what was delivered, keyed on both the delivery id and the digest of
//!   the signed body, so a captured delivery replayed within the window has no effect even
//!   under a fresh (unsigned) delivery id.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// Verified deliveries per second a kind refills.
pub const RATE_PER_SEC: f64 = 10.0;
/// Verified deliveries a kind may send at once.
pub const BURST: f64 = 50.0;
/// Refused deliveries per second a sender refills.
pub const SENDER_RATE_PER_SEC: f64 = 1.0;
/// Refused deliveries a sender may cause at once before its refusals are answered 429.
pub const SENDER_BURST: f64 = 20.0;
/// Senders remembered at most (the idle ones are forgotten first).
pub const SENDERS: usize = 4096;
/// Delivery keys remembered at most (two per delivery: its id and its body's digest).
pub const REPLAY_CAPACITY: usize = 20_000;
/// How long a delivery is remembered.
pub const REPLAY_WINDOW_MS: i64 = 60 * 60 * 1000;

/// A token bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    at_ms: i64,
    rate: f64,
    burst: f64,
}

impl Bucket {
    /// A kind's bucket ([`RATE_PER_SEC`], [`BURST`]), full.
    pub fn full(now_ms: i64) -> Bucket {
        Bucket::new(RATE_PER_SEC, BURST, now_ms)
    }

    /// A bucket refilling `rate` tokens a second up to `burst`, full.
    pub fn new(rate: f64, burst: f64, now_ms: i64) -> Bucket {
        Bucket {
            tokens: burst,
            at_ms: now_ms,
            rate,
            burst,
        }
    }

    fn refill(&mut self, now_ms: i64) {
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at_ms = now_ms.max(self.at_ms);
    }

    /// Takes a token: `Ok`, or `Err(seconds)` until one is there (at least 1).
    pub fn take(&mut self, now_ms: i64) -> Result<(), u64> {
        self.refill(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - self.tokens) / self.rate;
            Err((wait.ceil() as u64).max(1))
        }
    }

    /// Whether the bucket has refilled to its burst by `now_ms` (nothing to remember).
    fn is_full(&self, now_ms: i64) -> bool {
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.tokens + elapsed * self.rate >= self.burst
    }
}

/// One bucket per sender, at most [`SENDERS`].
#[derive(Debug, Default)]
pub struct Senders(HashMap<Option<IpAddr>, Bucket>);

impl Senders {
    /// Charges one refusal to `sender`: `Err(seconds)` when its bucket is empty.
    pub fn charge(&mut self, sender: Option<IpAddr>, now_ms: i64) -> Result<(), u64> {
        if !self.0.contains_key(&sender) && self.0.len() >= SENDERS {
            self.0.retain(|_, b| !b.is_full(now_ms));
            if self.0.len() >= SENDERS {
                let oldest = self.0.iter().min_by_key(|(_, b)| b.at_ms).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.0.remove(&k);
                }
            }
        }
        self.0
            .entry(sender)
            .or_insert_with(|| Bucket::new(SENDER_RATE_PER_SEC, SENDER_BURST, now_ms))
            .take(now_ms)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A remembered delivery key: a SHA-256 digest, so a key's size does not depend on what a
/// sender put in a header.
pub type Key = [u8; 32];

/// The key of `parts` (a kind, a key family, the value).
pub fn key(parts: &[&[u8]]) -> Key {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Delivery keys seen within [`REPLAY_WINDOW_MS`], at most [`REPLAY_CAPACITY`] (oldest
/// forgotten first).
#[derive(Debug, Default)]
pub struct Seen {
    order: VecDeque<(i64, Key)>,
    keys: HashSet<Key>,
}

impl Seen {
    fn forget_expired(&mut self, now_ms: i64) {
        while let Some((at, _)) = self.order.front() {
            if now_ms - *at > REPLAY_WINDOW_MS {
                if let Some((_, old)) = self.order.pop_front() {
                    self.keys.remove(&old);
                }
            } else {
                break;
            }
        }
    }

    /// Whether any of `keys` was seen within the window.
    pub fn any_seen(&mut self, keys: &[Key], now_ms: i64) -> bool {
        self.forget_expired(now_ms);
        keys.iter().any(|k| self.keys.contains(k))
    }

    /// Remembers `keys` (the oldest forgotten first beyond the capacity).
    pub fn remember(&mut self, keys: &[Key], now_ms: i64) {
        for k in keys {
            if self.keys.insert(*k) {
                self.order.push_back((now_ms, *k));
            }
        }
        while self.order.len() > REPLAY_CAPACITY {
            if let Some((_, old)) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
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
    fn each_sender_has_a_bucket_of_its_own() {
        let mut s = Senders::default();
        let a: Option<IpAddr> = "10.0.0.1".parse().ok();
        let b: Option<IpAddr> = "10.0.0.2".parse().ok();
        for _ in 0..SENDER_BURST as usize {
            assert_eq!(s.charge(a, 0), Ok(()));
        }
        assert_eq!(s.charge(a, 0), Err(1));
        assert_eq!(s.charge(b, 0), Ok(()));
        assert_eq!(s.charge(a, 1_000), Ok(()));
    }

    #[test]
    fn senders_are_bounded_forgetting_idle_ones_first() {
        let mut s = Senders::default();
        let addr = |i: usize| -> Option<IpAddr> {
            Some(IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]))
        };
        for i in 0..SENDERS {
            assert_eq!(s.charge(addr(i), 0), Ok(()));
        }
        // A busy sender, then a new one 5 s later: the idle ones have refilled and are
        // forgotten; the busy one has not, and is kept.
        for _ in 0..SENDER_BURST as usize {
            let _ = s.charge(addr(1), 0);
        }
        assert_eq!(s.charge(addr(SENDERS), 5_000), Ok(()));
        assert_eq!(s.len(), 2);
        for _ in 0..5 {
            assert_eq!(s.charge(addr(1), 5_000), Ok(()));
        }
        assert_eq!(s.charge(addr(1), 5_000), Err(1));
    }

    #[test]
    fn replays_are_refused_within_the_window_only() {
        let mut s = Seen::default();
        let (a, b) = (
            key(&[b"github", b"id", b"a"]),
            key(&[b"github", b"id", b"b"]),
        );
        assert!(!s.any_seen(&[a], 0));
        s.remember(&[a], 0);
        assert!(s.any_seen(&[a], 1_000));
        assert!(s.any_seen(&[b, a], 1_000));
        assert!(!s.any_seen(&[b], 1_000));
        assert!(!s.any_seen(&[a], REPLAY_WINDOW_MS + 1));
    }

    #[test]
    fn keys_do_not_run_together() {
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
    }

    #[test]
    fn the_memory_is_bounded() {
        let mut s = Seen::default();
        for i in 0..(REPLAY_CAPACITY + 10) {
            s.remember(&[key(&[&i.to_be_bytes()])], 5);
        }
        assert_eq!(s.len(), REPLAY_CAPACITY);
        // The oldest were forgotten, the newest are still known.
        assert!(s.any_seen(&[key(&[&(REPLAY_CAPACITY + 9).to_be_bytes()])], 5));
        assert!(!s.any_seen(&[key(&[&0usize.to_be_bytes()])], 5));
    }
}
