//! The poll floor (`polling.min_interval_ms`, default 1 s) through the real binary: a flood
//! of refreshes or of signed webhook deliveries makes at most one poll per floor; the rest
//! are answered `202` and coalesce into the pending one.

mod common;

use std::time::{Duration, Instant};

use common::{Daemon, Setup, mock_workflow, raw_exchange};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const WAIT: Duration = Duration::from_secs(30);
const FLOOD: Duration = Duration::from_secs(3);
const SECRET: &str = "poll-floor-webhook-secret";

/// A ten-minute poll interval, so every poll after the first is a refresh's or a delivery's.
fn quiet_daemon() -> (Setup, Daemon) {
    let wf = mock_workflow("", "  turn_delay_ms: 600000\n")
        .replace("interval_ms: 60000", "interval_ms: 600000");
    let s = Setup::new(&wf, "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", SECRET)]);
    d.wait_until("the first poll", WAIT, || polls(&d) >= 1.0);
    (s, d)
}

/// `sortie_poll_cycles_total{result="success"}`.
fn polls(d: &Daemon) -> f64 {
    let text = d.get_ok("/metrics").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("sortie_poll_cycles_total{result=\"success\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Polls allowed in `took` at one per second, with the first and the last floor's.
fn allowed(took: Duration) -> f64 {
    (took.as_millis() / 1_000) as f64 + 2.0
}

#[test]
fn a_refresh_flood_polls_at_most_once_a_second() {
    let (_s, d) = quiet_daemon();
    let before = polls(&d);
    let start = Instant::now();
    let (mut answered, mut coalesced) = (0, 0);
    while start.elapsed() < FLOOD {
        let r = d.post("/api/v1/refresh");
        assert_eq!(r.status, 202, "{}", r.body);
        answered += 1;
        if r.json()["coalesced"] == true {
            coalesced += 1;
        }
    }
    let took = start.elapsed();
    let made = polls(&d) - before;
    assert!(
        made <= allowed(took),
        "{answered} refreshes in {took:?} made {made} polls"
    );
    assert!(
        coalesced > answered / 2,
        "{coalesced} of {answered} coalesced"
    );
    d.wait_until("the pending refresh's poll", WAIT, || {
        polls(&d) - before >= 1.0
    });
}

fn sign(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET.as_bytes())
        .unwrap_or_else(|e| panic!("hmac key: {e}"));
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// One signed delivery with its own delivery id and body; the answer's status.
fn deliver(d: &Daemon, n: usize) -> u16 {
    let body = serde_json::json!({"action": "opened", "issue": {"number": n}}).to_string();
    let raw = format!(
        "POST /api/v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len}\r\nX-GitHub-Event: issues\r\nX-GitHub-Delivery: flood-{n}\r\nX-Hub-Signature-256: {sig}\r\n\r\n{body}",
        port = d.port,
        len = body.len(),
        sig = sign(body.as_bytes()),
    );
    raw_exchange(d.port, raw.as_bytes(), WAIT)
        .map(|r| r.status)
        .unwrap_or(0)
}

#[test]
fn signed_deliveries_at_ten_a_second_poll_at_most_once_a_second() {
    let (_s, d) = quiet_daemon();
    let before = polls(&d);
    let start = Instant::now();
    let mut accepted = 0;
    let mut n = 0;
    while start.elapsed() < FLOOD {
        n += 1;
        if deliver(&d, n) == 202 {
            accepted += 1;
        }
        // Ten a second: the next delivery is due 100 ms after the previous one was.
        let next = start + Duration::from_millis(100 * n as u64);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let took = start.elapsed();
    let made = polls(&d) - before;
    assert!(accepted >= 1, "no delivery accepted");
    assert!(
        made <= allowed(took),
        "{accepted} deliveries in {took:?} made {made} polls"
    );
}
