//! What a tracker fault must do to a running daemon's poll health: fail the poll with a
//! `consecutive_failures` count, a `failing_since` time and the tracker's error, then pass
//! again on a later poll; and what a rate-limited read must do: wait for its `Retry-After`.

use std::time::Duration;

use super::daemon::Daemon;
use super::fake_server::{FakeServer, Fault};

/// Queues `group` on `method path`, waits for the poll to fail, checks the failure's members
/// and hands its error text to `check_error`, then waits for the poll to pass again. A failing
/// poll lasts only until the next one passes, which a loaded machine can miss between two
/// looks; so while no failure has been seen and the queue ran dry, the group is queued again.
pub fn fails_then_recovers<S: Send + 'static>(
    d: &Daemon,
    fake: &FakeServer<S>,
    (method, path): (&str, &str),
    group: &[Fault],
    label: &str,
    wait: Duration,
    check_error: impl Fn(&str),
) {
    let queue = || {
        for f in group {
            fake.push_fault(method, path, f.clone());
        }
    };
    queue();
    let s = d.wait_state(&format!("the poll failing on {label}"), wait, |s| {
        let failing = s["health"]["poll"]["status"] == "fail";
        if !failing && fake.pending_faults(method, path) == 0 {
            queue();
        }
        failing
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

/// A 429 with `Retry-After: 2` on `GET path` (a read every poll makes) is retried no sooner
/// than 2 s later. Reads are sequential and polls 200 ms apart, so only the wait before the
/// 429's retry leaves a gap of 2 s; which read got the 429 depends on where a poll was when it
/// was queued, so every gap from the last read before it is looked at.
pub fn a_429_waits_for_its_retry_after<S: Send + 'static>(
    d: &Daemon,
    fake: &FakeServer<S>,
    path: &str,
    wait: Duration,
) {
    d.wait_state("a first good poll", wait, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    let start = fake.requests("GET", path).len();
    fake.push_fault("GET", path, Fault::too_many_requests(2));
    d.wait_until("the 429 and its retry", wait, || {
        fake.pending_faults("GET", path) == 0 && fake.requests("GET", path).len() >= start + 2
    });
    let reads = fake.requests("GET", path);
    let gaps: Vec<Duration> = reads[start.saturating_sub(1)..]
        .windows(2)
        .map(|w| w[1].at.duration_since(w[0].at))
        .collect();
    assert!(
        gaps.iter().any(|g| *g >= Duration::from_secs(2)),
        "no wait of 2 s: {gaps:?}"
    );
    assert!(!d.log_text().contains("panicked"));
}
