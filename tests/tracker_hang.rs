//! A tracker that accepts connections and never answers, through the real binary: the
//! orchestrator thread never waits on it, so stall detection, the API, refreshes and a
//! SIGTERM all keep working while every tracker read is out; the slow poll shows in
//! `health.poll`, ticks that find it still out are skipped (not queued), and the shutdown
//! ends within `shutdown.drain_timeout_ms` with the stalled run recorded.

mod common;

use std::time::{Duration, Instant};

use common::fake_github::{self, FakeGithub, TOKEN};
use common::{FAKE_AGENT, Setup};

const WAIT: Duration = Duration::from_secs(30);
/// Far below what a blocked orchestrator took (a tracker read is 3 tries of 30 s).
const PROMPTLY: Duration = Duration::from_secs(10);

fn workflow(fake: &FakeGithub) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  comments: {{on_completion: true, on_failure: true}}\npolling:\n  interval_ms: 300\n  min_interval_ms: 100\nshutdown:\n  drain_timeout_ms: 4000\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {FAKE_AGENT}\n  max_turns: 1\n  stall_timeout_ms: 2000\n  env: [FAKE_AGENT_*]\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

/// A daemon whose one issue runs an agent that says hello and then goes silent.
fn running_then_hung() -> (FakeGithub, Setup, common::Daemon) {
    let fake = fake_github::start(&["backlog", "in-progress", "done"]);
    fake.with_state(|s| s.add_issue(1, "Hang on", &["backlog"], false));
    let setup = Setup::new(&workflow(&fake), "[]");
    let scenario = setup.path().join("scenario.jsonl");
    std::fs::write(&scenario, "{\"init\": {}}\n{\"hang\": true}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = scenario.display().to_string();
    let d = setup.start(&[
        ("GITHUB_TOKEN", TOKEN),
        ("FAKE_AGENT_SCENARIO", scenario.as_str()),
    ]);
    d.wait_state("issue 1 running", WAIT, |s| {
        s["running"].as_array().is_some_and(|r| r.len() == 1)
    });
    d.wait_until("the in-progress label", WAIT, || {
        fake.with_state(|s| s.labels(1)) == ["in-progress"]
    });
    fake.hang(true);
    (fake, setup, d)
}

/// Candidate listings the fake was asked for (a listing or a search).
fn candidate_reads(fake: &FakeGithub) -> usize {
    fake.requests("GET", "/repos/owner/repo/issues").len()
        + fake.requests("GET", "/search/issues").len()
}

/// A GET or POST with a short read deadline: `None` when not answered within it.
fn quick(port: u16, method: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(PROMPTLY)).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(head.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_hung_tracker_stops_nothing_but_the_poll() {
    let (fake, setup, mut d) = running_then_hung();
    let hung_at = Instant::now();

    // Stall detection runs without the tracker: the silent agent is cancelled.
    d.wait_state("the stalled session cancelled", PROMPTLY, |s| {
        s["running"].as_array().is_some_and(Vec::is_empty)
            && s["retrying"][0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("stall timeout"))
    });
    assert!(hung_at.elapsed() < PROMPTLY);

    // Ten refreshes at once are all answered, and so are the probes and the state.
    let port = d.port;
    let answers: Vec<Option<u16>> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..10)
            .map(|_| scope.spawn(move || quick(port, "POST", "/api/v1/refresh")))
            .collect();
        asks.into_iter().map(|a| a.join().ok().flatten()).collect()
    });
    assert!(
        answers.iter().all(|a| *a == Some(202)),
        "refreshes while the tracker hangs: {answers:?}"
    );
    assert_eq!(quick(port, "GET", "/livez"), Some(200));
    assert_eq!(quick(port, "GET", "/api/v1/state"), Some(200));

    // The poll that is out shows in the health, and the ticks that find it out are skipped.
    let state = d.wait_state("a skipped tick", WAIT, |s| {
        s["health"]["poll"]["ticks_skipped"].as_u64().unwrap_or(0) >= 1
    });
    assert!(
        state["health"]["poll"]["in_flight_since"].is_string(),
        "{}",
        state["health"]["poll"]
    );
    let polls_before = candidate_reads(&fake);

    // SIGTERM: the drain ends within its budget although every tracker call hangs.
    let stop = Instant::now();
    let status = d.terminate_status();
    let took = stop.elapsed();
    assert!(
        status.is_some(),
        "sortie did not exit; log:\n{}",
        d.log_text()
    );
    assert!(
        took < Duration::from_secs(4 + 2 + 3),
        "shutdown took {took:?}; log:\n{}",
        d.log_text()
    );
    // Skipped ticks did not queue reads behind the hung one.
    assert!(
        candidate_reads(&fake) <= polls_before + 1,
        "reads queued behind the hung poll"
    );
    let log = d.log_text();
    assert!(log.contains("shutting down"), "{log}");
    let runs = common::store::raw(&setup.path().join(".sortie.db"))
        .query_row(
            "SELECT COUNT(*) FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap_or(0);
    assert_eq!(runs, 1, "the stalled run is recorded");
    fake.hang(false);
}
