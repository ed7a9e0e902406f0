//! What a tracker fault must do to a running daemon's poll health: fail the poll with a
//! `consecutive_failures` count, a `failing_since` time and the tracker's error, then pass
//! again on a later poll.

use std::time::Duration;

use super::daemon::Daemon;

/// Waits for the poll to fail, checks the failure's members and hands its error text to
/// `check_error`, then waits for the poll to pass again.
pub fn fails_then_recovers(d: &Daemon, label: &str, wait: Duration, check_error: impl Fn(&str)) {
    let s = d.wait_state(&format!("the poll failing on {label}"), wait, |s| {
        s["health"]["poll"]["status"] == "fail"
    });
    let poll = &s["health"]["poll"];
    assert!(
        poll["consecutive_failures"].as_u64() >= Some(1),
        "{label}: {poll}"
    );
    assert!(poll["failing_since"].is_string(), "{label}: {poll}");
    check_error(poll["error"].as_str().unwrap_or_default());
    d.wait_state(&format!("recovery after {label}"), wait, |s| {
        s["health"]["poll"]["status"] == "pass"
    });
}
