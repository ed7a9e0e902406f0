//! Figures for `scripts/reliability/orchestrator.sh`, not pass/fail tests (every test here is
//! `#[ignore]`d; the script runs them against the release binary with `SORTIE_BIN`). Each
//! prints `figure <name> <value>` lines; the script compares them with their targets.
//!
//! - a tracker that accepts and never answers: how long after its last event a silent agent
//!   is stopped (stall limit 2 s), `/livez` latency and `/api/v1/state` answers throughout,
//!   ten refreshes at once, and SIGTERM to exit with an agent that ignores SIGTERM running;
//! - ten seconds of refreshes, and ten seconds of signed webhook deliveries at ten a second:
//!   the polls they make.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::fake_github::{self, FakeGithub, TOKEN};
use common::{Daemon, FAKE_AGENT, Setup, mock_workflow, raw_exchange};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const WAIT: Duration = Duration::from_secs(60);
const SECRET: &str = "reliability-webhook-secret";

/// Appends `figure <name> <value>` to the file `RELIABILITY_FIGURES` names (stdout when
/// unset), one line each, so a test harness's own output never runs into it.
fn figure(name: &str, value: f64) {
    let line = format!("figure {name} {value:.1}\n");
    match std::env::var("RELIABILITY_FIGURES") {
        Ok(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path);
            if let Ok(mut f) = file {
                let _ = f.write_all(line.as_bytes());
            }
        }
        Err(_) => print!("{line}"),
    }
}

fn github_workflow(fake: &FakeGithub, stall_ms: u64) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\npolling:\n  interval_ms: 1000\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {FAKE_AGENT}\n  max_turns: 1\n  stall_timeout_ms: {stall_ms}\n  env: [FAKE_AGENT_*]\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

/// A daemon over a fake GitHub whose one issue runs the agent `scenario`; the tracker hangs
/// once the session runs and its in-progress label is written.
fn hung_with(scenario: &str, stall_ms: u64) -> (FakeGithub, Setup, Daemon) {
    let fake = fake_github::start(&["backlog", "in-progress", "done"]);
    fake.with_state(|s| s.add_issue(1, "Hang on", &["backlog"], false));
    let setup = Setup::new(&github_workflow(&fake, stall_ms), "[]");
    let path = setup.path().join("scenario.jsonl");
    std::fs::write(&path, scenario).unwrap_or_else(|e| panic!("{e}"));
    let path = path.display().to_string();
    let d = setup.start(&[
        ("GITHUB_TOKEN", TOKEN),
        ("FAKE_AGENT_SCENARIO", path.as_str()),
    ]);
    // The agent itself runs: it has sent an event.
    d.wait_state("a running agent", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.len() == 1)
            && s["running"][0]["last_event_at"].is_string()
    });
    d.wait_until("the in-progress label", WAIT, || {
        fake.with_state(|s| s.labels(1)) == ["in-progress"]
    });
    fake.hang(true);
    (fake, setup, d)
}

/// Milliseconds one request takes to be answered (fresh connection); `None` when it is not
/// answered within 30 s.
fn timed(port: u16, method: &str, path: &str) -> Option<(u16, f64)> {
    let start = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(head.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let status = String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((status, start.elapsed().as_secs_f64() * 1000.0))
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn epoch_ms(rfc3339: &str) -> Option<f64> {
    let ts: jiff::Timestamp = rfc3339.parse().ok()?;
    Some(ts.as_millisecond() as f64)
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

#[test]
#[ignore = "a measurement for scripts/reliability/orchestrator.sh"]
fn hung_tracker_figures() {
    let (fake, _setup, d) = hung_with("{\"init\": {}}\n{\"hang\": true}\n", 2_000);
    let port = d.port;
    let last_event = d.state()["running"][0]["last_event_at"]
        .as_str()
        .and_then(epoch_ms)
        .unwrap_or_else(now_ms);
    let (livez, state_misses, cancelled_at) = std::thread::scope(|scope| {
        let probes = scope.spawn(move || {
            let end = Instant::now() + Duration::from_secs(10);
            let mut ms = Vec::new();
            while Instant::now() < end {
                ms.push(match timed(port, "GET", "/livez") {
                    Some((200, t)) => t,
                    _ => 30_000.0,
                });
                std::thread::sleep(Duration::from_millis(20));
            }
            ms
        });
        let states = scope.spawn(move || {
            let end = Instant::now() + Duration::from_secs(10);
            let (mut misses, mut cancelled) = (0, None);
            while Instant::now() < end {
                match common::http::get_ok(port, "/api/v1/state")
                    .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
                {
                    Some(s) => {
                        if cancelled.is_none() && s["running"].as_array().is_some_and(Vec::is_empty)
                        {
                            cancelled = Some(now_ms());
                        }
                    }
                    None => misses += 1,
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            (misses, cancelled)
        });
        let livez = probes.join().unwrap_or_default();
        let (misses, cancelled) = states.join().unwrap_or((usize::MAX, None));
        (livez, misses, cancelled)
    });
    figure(
        "stall_stop_after_last_event_ms",
        cancelled_at.map_or(f64::INFINITY, |c| c - last_event),
    );
    figure("livez_p50_ms", percentile(livez.clone(), 0.50));
    figure("livez_p99_ms", percentile(livez, 0.99));
    figure("state_not_answered", state_misses as f64);
    let refreshes: Vec<f64> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..10)
            .map(|_| scope.spawn(move || timed(port, "POST", "/api/v1/refresh")))
            .collect();
        asks.into_iter()
            .map(|a| match a.join().ok().flatten() {
                Some((202, t)) => t,
                _ => f64::INFINITY,
            })
            .collect()
    });
    figure("ten_refreshes_max_ms", percentile(refreshes, 1.0));
    drop(d);
    fake.hang(false);
}

#[test]
#[ignore = "a measurement for scripts/reliability/orchestrator.sh"]
fn hung_tracker_shutdown_figures() {
    // An agent that ignores SIGTERM and keeps talking, so only the drain stops it.
    let mut scenario = String::from("{\"init\": {}}\n{\"ignore_sigterm\": true}\n");
    for _ in 0..240 {
        scenario.push_str("{\"assistant\": {\"text\": \"working\"}}\n{\"sleep_ms\": 500}\n");
    }
    let (fake, setup, mut d) = hung_with(&scenario, 60_000);
    let start = Instant::now();
    let status = d.terminate_status();
    figure("sigterm_to_exit_ms", start.elapsed().as_secs_f64() * 1000.0);
    figure(
        "exit_code",
        status.and_then(|s| s.code()).map_or(-1.0, f64::from),
    );
    let left = common::procs::processes_in(&setup.path().join("ws")).len();
    figure("agents_left", left as f64);
    let runs: i64 = common::store::raw(&setup.path().join(".sortie.db"))
        .query_row("SELECT COUNT(*) FROM run_history", [], |r| r.get(0))
        .unwrap_or(-1);
    figure("runs_recorded", runs as f64);
    fake.hang(false);
}

fn quiet_daemon() -> (Setup, Daemon) {
    let wf = mock_workflow("", "  turn_delay_ms: 600000\n")
        .replace("interval_ms: 60000", "interval_ms: 600000");
    let s = Setup::new(&wf, "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", SECRET)]);
    d.wait_until("the first poll", WAIT, || polls(&d) >= 1.0);
    (s, d)
}

fn polls(d: &Daemon) -> f64 {
    let text = d.get_ok("/metrics").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("sortie_poll_cycles_total{result=\"success\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
#[ignore = "a measurement for scripts/reliability/orchestrator.sh"]
fn refresh_flood_figures() {
    let (_s, d) = quiet_daemon();
    let before = polls(&d);
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_secs(10) {
        let _ = timed(d.port, "POST", "/api/v1/refresh");
        sent += 1;
    }
    figure("refreshes_sent", sent as f64);
    figure("refresh_flood_polls", polls(&d) - before);
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

#[test]
#[ignore = "a measurement for scripts/reliability/orchestrator.sh"]
fn webhook_flood_figures() {
    let (_s, d) = quiet_daemon();
    let before = polls(&d);
    let start = Instant::now();
    let (mut n, mut accepted) = (0u64, 0);
    while start.elapsed() < Duration::from_secs(10) {
        n += 1;
        let body = serde_json::json!({"action": "opened", "issue": {"number": n}}).to_string();
        let raw = format!(
            "POST /api/v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len}\r\nX-GitHub-Event: issues\r\nX-GitHub-Delivery: probe-{n}\r\nX-Hub-Signature-256: {sig}\r\n\r\n{body}",
            port = d.port,
            len = body.len(),
            sig = sign(body.as_bytes()),
        );
        if raw_exchange(d.port, raw.as_bytes(), WAIT).is_some_and(|r| r.status == 202) {
            accepted += 1;
        }
        let next = start + Duration::from_millis(100 * n);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    figure("webhooks_accepted", accepted as f64);
    figure("webhook_flood_polls", polls(&d) - before);
}
