//! The limit on operator messages an agent may send (`notify_operator`): per issue, at most
//! [`PER_WINDOW`] messages within [`WINDOW_MS`]. A runaway agent cannot flood the operator;
//! the destinations' own rate limits come on top.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Messages one issue may send within [`WINDOW_MS`].
pub const PER_WINDOW: usize = 5;
pub const WINDOW_MS: i64 = 10 * 60 * 1000;
/// The longest message taken, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// Issues remembered; the one idle longest is forgotten first.
const ISSUE_CAP: usize = 1024;

#[derive(Debug, Default)]
pub struct Limiter {
    sent: BTreeMap<String, VecDeque<i64>>,
}

impl Limiter {
    /// Takes one message of `issue` at `now_ms`, or says how many ms until one is taken.
    pub fn take(&mut self, issue: &str, now_ms: i64) -> Result<(), i64> {
        if !self.sent.contains_key(issue) && self.sent.len() >= ISSUE_CAP {
            let idle = self
                .sent
                .iter()
                .min_by_key(|(_, t)| t.back().copied().unwrap_or(i64::MIN))
                .map(|(k, _)| k.clone());
            if let Some(k) = idle {
                self.sent.remove(&k);
            }
        }
        let times = self.sent.entry(issue.to_string()).or_default();
        while times.front().is_some_and(|t| *t <= now_ms - WINDOW_MS) {
            times.pop_front();
        }
        if times.len() >= PER_WINDOW {
            let oldest = times.front().copied().unwrap_or(now_ms);
            return Err((oldest + WINDOW_MS - now_ms).max(1));
        }
        times.push_back(now_ms);
        Ok(())
    }
}

static LIMITER: Mutex<Option<Limiter>> = Mutex::new(None);

/// [`Limiter::take`] on the process's limiter.
pub fn take(issue: &str, now_ms: i64) -> Result<(), i64> {
    let mut g = LIMITER.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(Limiter::default).take(issue, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_gets_its_window_s_messages_then_waits() {
        let mut l = Limiter::default();
        for i in 0..PER_WINDOW as i64 {
            assert_eq!(l.take("A-1", 1_000 + i), Ok(()));
        }
        assert_eq!(l.take("A-1", 2_000), Err(WINDOW_MS - 1_000));
        assert_eq!(l.take("A-2", 2_000), Ok(()), "per issue");
        assert_eq!(l.take("A-1", 1_000 + WINDOW_MS), Ok(()));
    }
}
