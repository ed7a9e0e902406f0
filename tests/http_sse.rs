//! The event stream driven through the real binary: the opening change, coalescing, heartbeats,
//! agent events of a running fake agent, reconnection, slow clients, 400 rules, shutdown.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const T: Duration = Duration::from_secs(30);
const HB: (&str, &str) = ("SORTIE_SSE_HEARTBEAT_MS", "300");

#[test]
fn opens_with_change_then_heartbeats() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[HB]);
    let mut st = open_stream(d.port, "/api/v1/events", &[]);
    assert_eq!(st.status, 200);
    assert!(
        st.headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("Content-Type: text/event-stream"))
    );
    assert!(
        st.headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("Cache-Control: no-cache"))
    );
    assert!(
        st.headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("X-Accel-Buffering: no"))
    );
    let first = st
        .next_frame(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no frame"));
    assert_eq!(first.event, "change");
    assert_eq!(first.data, serde_json::json!({}));
    assert!(first.id.parse::<u64>().is_ok(), "id {}", first.id);
    let frames = st.until(Duration::from_secs(5), |f| f.event == "heartbeat");
    let hb = frames.last().unwrap_or_else(|| panic!("no heartbeat"));
    assert_eq!(hb.event, "heartbeat");
    // A heartbeat carries the revision of the last change the stream sent.
    let last_change = frames
        .iter()
        .rev()
        .find(|f| f.event == "change")
        .unwrap_or(&first);
    assert_eq!(hb.id, last_change.id);

    // Reconnecting with the current revision gets no opening change.
    let rev = hb.id.clone();
    let mut again = open_stream(d.port, "/api/v1/events", &[("Last-Event-ID", rev.as_str())]);
    let f = again
        .next_frame(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no frame"));
    if f.id == rev {
        assert_eq!(
            f.event, "heartbeat",
            "a client holding the revision got {f:?}"
        );
    } else {
        // Something changed meanwhile (a poll tick): then a change is right.
        assert_eq!(f.event, "change");
    }
    // A stale revision gets the change at once.
    let mut stale = open_stream(d.port, "/api/v1/events", &[("Last-Event-ID", "1;ABC:3")]);
    let f = stale
        .next_frame(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no frame"));
    assert_eq!(f.event, "change");
}

#[test]
fn a_change_burst_yields_at_most_one_change_per_second() {
    // Every agent event publishes a change; a long chatty turn makes a steady burst.
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n",
            "  events_per_turn: 5\n  turn_delay_ms: 600000\n",
        ),
        &issues(&[("1", "B-1", "To Do")]),
    );
    let d = s.start(&[("SORTIE_SSE_HEARTBEAT_MS", "60000")]);
    let mut st = open_stream(d.port, "/api/v1/events", &[]);
    // Drive changes for 3.5 s: refreshes publish on every tick.
    let port = d.port;
    let stop_at = Instant::now() + Duration::from_millis(3500);
    let driver = std::thread::spawn(move || {
        let mut n = 0;
        while Instant::now() < stop_at {
            if request(port, "POST", "/api/v1/refresh", &[]).is_some() {
                n += 1;
            }
        }
        n
    });
    let frames = st.until(Duration::from_millis(4500), |_| false);
    let refreshes = driver.join().unwrap_or(0);
    assert!(refreshes > 10, "the driver made only {refreshes} requests");
    let changes: Vec<&Frame> = frames.iter().filter(|f| f.event == "change").collect();
    assert!(changes.len() >= 3, "too few changes: {}", changes.len());
    // At most two changes within any one second (one each side of a coalescing boundary;
    // the client's own scheduling can bunch two reads, never three).
    for (i, c) in changes.iter().enumerate() {
        let within = changes[i..]
            .iter()
            .take_while(|d| d.at.duration_since(c.at) < Duration::from_secs(1))
            .count();
        assert!(within <= 2, "{within} changes within one second");
    }
    // Over the burst the stream coalesced: far fewer changes than publishes.
    assert!(changes.len() <= 7, "{} changes in 4.5 s", changes.len());
    // Revisions rise with every change.
    let revs: Vec<u64> = changes.iter().filter_map(|f| f.id.parse().ok()).collect();
    assert!(revs.windows(2).all(|w| w[0] < w[1]), "{revs:?}");
}

fn fake_agent_setup(steps: usize, sleep_ms: u64) -> Setup {
    let mut scenario = String::from("{\"init\": {}}\n");
    for i in 1..=steps {
        scenario.push_str(&format!(
            "{{\"assistant\": {{\"text\": \"step {i}\", \"input_tokens\": 10, \"output_tokens\": 5}}}}\n{{\"sleep_ms\": {sleep_ms}}}\n"
        ));
    }
    scenario.push_str("{\"result\": {\"subtype\": \"success\", \"text\": \"done\", \"input_tokens\": 10, \"output_tokens\": 5}}\n");
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {}\n  env: [FAKE_AGENT_*]\n  max_turns: 1\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        FAKE_AGENT
    );
    let s = Setup::new(&wf, &issues(&[("1", "F-1", "To Do")]));
    std::fs::write(s.path().join("scenario.jsonl"), scenario).unwrap_or_else(|e| panic!("{e}"));
    s
}

fn run_of(d: &Daemon) -> String {
    let st = d.wait_state("a running fake agent", T, |s| {
        s["running"][0]["dispatch_id"].is_string()
    });
    st["running"][0]["dispatch_id"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn agent_events_stream_in_seq_order_and_end_with_run_ended() {
    let s = fake_agent_setup(6, 250);
    let scenario = s.path().join("scenario.jsonl").display().to_string();
    let d = s.start(&[HB, ("FAKE_AGENT_SCENARIO", scenario.as_str())]);
    let run = run_of(&d);
    let mut st = open_stream(d.port, &format!("/api/v1/events?run={run}"), &[]);
    let frames = st.until(T, |f| f.event == "run_ended");
    let last = frames.last().unwrap_or_else(|| panic!("no frames"));
    assert_eq!(
        last.event,
        "run_ended",
        "frames: {frames:?}\nlog:\n{}",
        d.log_text()
    );
    let events: Vec<&Frame> = frames.iter().filter(|f| f.event == "agent_event").collect();
    assert!(events.len() >= 3, "{frames:?}");
    let seqs: Vec<i64> = events
        .iter()
        .filter_map(|f| f.data["seq"].as_i64())
        .collect();
    let expected: Vec<i64> = (seqs[0]..seqs[0] + seqs.len() as i64).collect();
    assert_eq!(seqs, expected, "seq order");
    assert_eq!(seqs[0], 1);
    assert!(events.iter().all(|f| f.data["dispatch_id"] == run.as_str()));
    assert!(events.iter().all(|f| f.data["text"].is_string()));
    assert_eq!(last.data["dispatch_id"], run.as_str());
    assert_eq!(last.data["last_seq"].as_i64(), seqs.last().copied());
    // Every frame's id names the run with its cursor.
    let e = events[1];
    assert!(
        e.id.ends_with(&format!(";{run}:{}", seqs[1])),
        "id {}",
        e.id
    );

    // Reconnecting with the last id replays nothing and ends with run_ended again.
    let mut again = open_stream(
        d.port,
        &format!("/api/v1/events?run={run}"),
        &[("Last-Event-ID", last.id.as_str())],
    );
    let frames = again.until(Duration::from_secs(10), |f| f.event == "run_ended");
    assert_eq!(frames.last().map(|f| f.event.as_str()), Some("run_ended"));
    assert!(
        frames.iter().all(|f| f.event != "agent_event"),
        "{frames:?}"
    );

    // A reconnect from the middle replays only what follows the cursor.
    let mid = events[2];
    let mut resumed = open_stream(
        d.port,
        &format!("/api/v1/events?run={run}"),
        &[("Last-Event-ID", mid.id.as_str())],
    );
    let frames = resumed.until(Duration::from_secs(10), |f| f.event == "run_ended");
    let replayed: Vec<i64> = frames
        .iter()
        .filter(|f| f.event == "agent_event")
        .filter_map(|f| f.data["seq"].as_i64())
        .collect();
    let mut all: Vec<i64> = seqs[..3].to_vec();
    all.extend(&replayed);
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "an event arrived twice: {all:?}");
    assert_eq!(all, seqs, "resume lost events");

    // A cursor in the query works the same way; an unknown run is not retained.
    let mut q = open_stream(
        d.port,
        &format!("/api/v1/events?run={run}:{}&run=AAAA", seqs[3]),
        &[],
    );
    // Runs are served in the order of the run parameters: the finished run, then the reset.
    let frames = q.until(Duration::from_secs(10), |f| f.event == "reset");
    assert!(frames.iter().any(|f| f.event == "run_ended"), "{frames:?}");
    let reset = frames.iter().find(|f| f.event == "reset").cloned();
    let reset = reset.unwrap_or_else(|| panic!("no reset: {frames:?}"));
    assert_eq!(reset.data["reason"], "not_retained");
    assert_eq!(reset.data["dispatch_id"], "AAAA");
    let after: Vec<i64> = frames
        .iter()
        .filter(|f| f.event == "agent_event")
        .filter_map(|f| f.data["seq"].as_i64())
        .collect();
    assert_eq!(after, seqs[4..].to_vec());
}

#[test]
fn stream_parameter_errors_answer_400_and_wrong_method_405() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    for q in ["run=", "run=abc", "run=AB:x", "run=AB&run=AB:2"] {
        let r = d.get(&format!("/api/v1/events?{q}"));
        assert_eq!(r.status, 400, "{q}");
        assert_eq!(r.json()["error"]["code"], "invalid_parameter");
    }
    let many: Vec<String> = (0..17)
        .map(|i| format!("run=A{}", (b'A' + i as u8) as char))
        .collect();
    let r = d.get(&format!("/api/v1/events?{}", many.join("&")));
    assert_eq!(r.status, 400);
    let r = d.post("/api/v1/events");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("Allow"), Some("GET"));
    // Other parameters are ignored.
    let mut st = open_stream(d.port, "/api/v1/events?foo=bar", &[]);
    assert_eq!(st.status, 200);
    assert_eq!(
        st.next_frame(Duration::from_secs(5)).map(|f| f.event),
        Some("change".into())
    );
}

/// A socket with a tiny receive buffer that sends one request and never reads.
fn stalled_client(port: u16, path: &str) -> std::net::TcpStream {
    use rustix::net::{AddressFamily, SocketType, connect, socket, sockopt};
    let fd =
        socket(AddressFamily::INET, SocketType::STREAM, None).unwrap_or_else(|e| panic!("{e}"));
    sockopt::set_socket_recv_buffer_size(&fd, 2048).unwrap_or_else(|e| panic!("{e}"));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    connect(&fd, &addr).unwrap_or_else(|e| panic!("connect: {e}"));
    let mut s = std::net::TcpStream::from(fd);
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    s
}

#[test]
fn a_client_that_stops_reading_is_dropped_and_others_keep_receiving() {
    // One finished run with about 1,000 kept events: far more than the socket buffers hold.
    let s = Setup::new(
        &mock_workflow("  max_turns: 1\n", "  events_per_turn: 990\n"),
        &issues(&[("1", "S-1", "To Do")]),
    );
    let d = s.start(&[("SORTIE_SSE_HEARTBEAT_MS", "200")]);
    let runs = d.wait_until_runs();
    let dispatch = runs[0]["dispatch_id"].as_str().unwrap_or("").to_string();
    assert!(!dispatch.is_empty());

    let mut good = open_stream(d.port, "/api/v1/events", &[]);
    let mut stalled = stalled_client(d.port, &format!("/api/v1/events?run={dispatch}"));
    let opened = Instant::now();
    // The good client keeps getting heartbeats, never more than a second apart, for 4 s.
    let mut last = Instant::now();
    let mut beats = 0;
    while opened.elapsed() < Duration::from_secs(4) {
        let f = good
            .next_frame(Duration::from_secs(2))
            .unwrap_or_else(|| panic!("the good client stopped receiving"));
        if f.event == "heartbeat" {
            beats += 1;
            let gap = f.at.duration_since(last);
            assert!(gap < Duration::from_millis(1500), "heartbeat gap {gap:?}");
            last = f.at;
        }
    }
    assert!(beats >= 10, "only {beats} heartbeats");
    // By now the server has dropped the stalled client's stream. Reading drains what the
    // socket buffers held; after that nothing more comes (a live stream would carry a
    // heartbeat every 200 ms), and the run's final frame never arrives. tiny_http keeps the
    // connection itself open for keep-alive until the client goes away, so end of file is
    // accepted but not required.
    stalled
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match stalled.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read: {e}"),
        }
    }
    assert!(
        Instant::now() < deadline,
        "the stalled client kept receiving"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("event: agent_event"));
    assert!(
        !text.contains("event: run_ended"),
        "the stalled client got everything"
    );
}

#[test]
fn shutdown_ends_open_streams_and_exits_zero() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[("SORTIE_SSE_HEARTBEAT_MS", "60000")]);
    let mut st = open_stream(d.port, "/api/v1/events", &[]);
    assert_eq!(
        st.next_frame(Duration::from_secs(5)).map(|f| f.event),
        Some("change".into())
    );
    let stopped_at = Instant::now();
    assert_eq!(d.stop(), Some(0));
    let rest = st.until(Duration::from_secs(10), |_| false);
    assert!(rest.iter().all(|f| f.event != "heartbeat"));
    assert!(stopped_at.elapsed() < Duration::from_secs(8));
    // The stream ended (EOF) rather than timing out.
    assert!(st.next_frame(Duration::from_millis(100)).is_none());
}

trait Runs {
    fn wait_until_runs(&self) -> Vec<Value>;
}

impl Runs for Daemon {
    fn wait_until_runs(&self) -> Vec<Value> {
        let mut runs = Vec::new();
        self.wait_until("a recorded run", T, || {
            runs = self.get("/api/v1/runs").json()["runs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            !runs.is_empty()
        });
        runs
    }
}
