//! Condition waits with deadlines: poll until the condition holds, never sleep and hope.

use std::time::{Duration, Instant};

/// How often a wait re-checks its condition.
pub const POLL: Duration = Duration::from_millis(50);

/// Polls `f` until it returns `Some`, or panics naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll(timeout, POLL, f)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes; whether it held (checked once
/// more at the deadline, so a condition that became true meanwhile counts).
pub fn holds_within(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    poll(timeout, Duration::from_millis(20), || cond().then_some(())).is_some()
}

/// Polls `f` every `every` until it returns `Some`; `None` when `timeout` passed first.
pub fn poll<T>(timeout: Duration, every: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}
