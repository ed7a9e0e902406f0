//! The log of refused requests and connections, bounded: a flood of refusals (one keep-alive
//! connection can send a hundred thousand refused requests in ten seconds) must not become a
//! flood of log lines. A reason is a scope (a webhook kind, `http` for the server's own
//! refusals) and a word (`bad_signature`, `too_many_connections`…); each is logged at most
//! once per [`LOG_EVERY`]; the refusals in between are counted, and the next line of that
//! reason carries the count as `suppressed=N`. A count nobody carried on is logged on its own
//! (`msg="refusals not logged" scope=… reason=… suppressed=N`) once the second is over, by
//! [`Refusals::flush`], which the request threads call whenever they are idle for a second.
//! So every refusal is in the log: as a line, or in a count.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest time between two lines of one reason.
pub const LOG_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Reason {
    last_line: Option<Instant>,
    suppressed: u64,
}

/// A reason: its scope and its word.
pub type Key = (&'static str, &'static str);

/// The refusal log of one server. Scopes and words are fixed sets, so the map stays small.
#[derive(Debug, Default)]
pub struct Refusals(Mutex<HashMap<Key, Reason>>);

impl Refusals {
    /// One refusal for `reason` at `now`: `Some(n)` when it is to be logged now, `n` being
    /// the refusals of this reason counted without a line since the previous one; `None`
    /// when it is counted instead.
    pub fn note(&self, reason: Key, now: Instant) -> Option<u64> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let r = map.entry(reason).or_default();
        let due = r
            .last_line
            .is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
        if due {
            r.last_line = Some(now);
            Some(std::mem::take(&mut r.suppressed))
        } else {
            r.suppressed += 1;
            None
        }
    }

    /// Takes the counts of reasons whose last line is at least [`LOG_EVERY`] old and which
    /// counted refusals since: each is logged now (the summary counts as that reason's line).
    pub fn due(&self, now: Instant) -> Vec<(Key, u64)> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (reason, r) in map.iter_mut() {
            let old = r
                .last_line
                .is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
            if r.suppressed > 0 && old {
                out.push((*reason, std::mem::take(&mut r.suppressed)));
                r.last_line = Some(now);
            }
        }
        out.sort_unstable();
        out
    }

    /// Logs the counts [`Refusals::due`] at `now`.
    pub fn flush(&self, now: Instant) {
        for ((scope, reason), suppressed) in self.due(now) {
            log::warn!(scope = scope, reason = reason, suppressed = suppressed; "refusals not logged");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Key = ("github", "bad_signature");
    const B: Key = ("http", "too_many_connections");

    #[test]
    fn one_line_a_second_per_reason_carrying_the_count() {
        let r = Refusals::default();
        let t0 = Instant::now();
        assert_eq!(r.note(A, t0), Some(0));
        for i in 1..=99 {
            assert_eq!(r.note(A, t0 + Duration::from_millis(i * 5)), None);
        }
        // Another reason has a line of its own.
        assert_eq!(r.note(B, t0), Some(0));
        assert_eq!(r.note(A, t0 + LOG_EVERY), Some(99));
        assert_eq!(r.note(A, t0 + LOG_EVERY), None);
    }

    #[test]
    fn counts_left_over_are_logged_once_the_second_is_over() {
        let r = Refusals::default();
        let t0 = Instant::now();
        assert_eq!(r.note(A, t0), Some(0));
        assert_eq!(r.note(A, t0), None);
        assert_eq!(r.note(A, t0), None);
        assert_eq!(r.note(B, t0), Some(0));
        assert!(r.due(t0 + Duration::from_millis(500)).is_empty());
        assert_eq!(r.due(t0 + LOG_EVERY), vec![(A, 2)]);
        assert!(r.due(t0 + 3 * LOG_EVERY).is_empty());
        // The summary was that reason's line: the next refusal within the second is counted.
        assert_eq!(r.note(A, t0 + LOG_EVERY + Duration::from_millis(10)), None);
        assert_eq!(r.due(t0 + 2 * LOG_EVERY), vec![(A, 1)]);
    }
}
