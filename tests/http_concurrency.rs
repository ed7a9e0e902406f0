//! Many clients opening keep-alive connections at the same moment must all be served while
//! earlier keep-alive connections stay open and idle. (The connection-pool race fixed in
//! vendor/tiny_http needs a browser's timing to show; tests/browser_dashboard.rs catches it.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Project;

#[test]
fn simultaneous_keep_alive_connections_are_all_served() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "");
    let _d = p.start();
    for round in 0..5 {
        // Open the connections first, then send on all of them at once, keeping them open.
        let port = p.port();
        let handles: Vec<_> = (0..24)
            .map(|_| std::thread::spawn(move || TcpStream::connect(("127.0.0.1", port))))
            .collect();
        let mut conns: Vec<TcpStream> = handles
            .into_iter()
            .map(|h| h.join().expect("join").expect("connect"))
            .collect();
        for c in &mut conns {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
        }
        let started = Instant::now();
        for (i, c) in conns.iter_mut().enumerate() {
            let mut buf = [0u8; 512];
            let n = c
                .read(&mut buf)
                .unwrap_or_else(|e| panic!("round {round} connection {i} not served: {e}"));
            assert!(
                String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
                "round {round} connection {i}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        // Keep them open (idle keep-alive) while the next round connects.
        std::mem::forget(conns);
    }
}

/// The names of the daemon's threads (`/proc/<pid>/task/*/comm`).
fn thread_names(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// The daemon's threads whose name starts with `prefix`.
fn count_threads(pid: u32, prefix: &str) -> usize {
    thread_names(pid)
        .iter()
        .filter(|n| n.starts_with(prefix))
        .count()
}

/// Opens `n` event streams at the same moment; each with the revision of its opening change.
fn open_streams_at_once(port: u16, n: usize) -> Vec<(common::Stream, u64)> {
    let barrier = std::sync::Barrier::new(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let mut st = common::open_stream(port, "/api/v1/events", &[]);
                    assert_eq!(st.status, 200);
                    let first = st
                        .next_frame(Duration::from_secs(30))
                        .unwrap_or_else(|| panic!("a stream got no opening frame"));
                    assert_eq!(first.event, "change");
                    let rev = first.id.parse::<u64>().unwrap_or_else(|e| panic!("{e}"));
                    (st, rev)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("a stream failed")))
            .collect()
    })
}

/// Reads every stream (in parallel) until it has a change newer than its own revision.
fn every_stream_gets_a_newer_change(streams: Vec<(common::Stream, u64)>) {
    std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .into_iter()
            .map(|(mut st, rev)| {
                scope.spawn(move || {
                    let frames = st.until(Duration::from_secs(30), |f| {
                        f.event == "change" && f.id.parse::<u64>().is_ok_and(|r| r > rev)
                    });
                    frames.last().is_some_and(|f| {
                        f.event == "change" && f.id.parse::<u64>().is_ok_and(|r| r > rev)
                    })
                })
            })
            .collect();
        let missed = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .filter(|got| !got)
            .count();
        assert_eq!(missed, 0, "{missed} streams never got the change");
    });
}

/// Fifty event streams opened in one burst are all served, each on one thread of its own
/// (the connection thread ends once the stream takes the socket), ordinary requests are
/// served meanwhile, and every stream receives the next change.
#[test]
fn a_burst_of_event_streams_all_get_the_next_change() {
    const STREAMS: usize = 50;
    let s = common::Setup::new(&common::mock_workflow("", ""), &common::issues(&[]));
    let d = s.start(&[("SORTIE_SSE_HEARTBEAT_MS", "60000")]);
    let pid = d.child.id();
    let before = thread_names(pid).len();
    let streams = open_streams_at_once(d.port, STREAMS);

    // A connection thread left waiting for a next request would stay for the 10 s head
    // timeout; the deadline is shorter.
    let settled = common::wait::poll(Duration::from_secs(8), common::wait::POLL, || {
        (count_threads(pid, "sse-") == STREAMS && thread_names(pid).len() <= before + STREAMS)
            .then_some(())
    });
    if settled.is_none() {
        let mut names = thread_names(pid);
        names.sort();
        panic!(
            "timed out waiting for one thread per open stream: {} threads (before the streams: \
             {before}): {names:?}",
            names.len()
        );
    }
    assert_eq!(d.get("/livez").status, 200);
    assert_eq!(d.get("/api/v1/state").status, 200);

    // The change: a new issue and a refresh, so the tick dispatches it.
    std::fs::write(
        s.path().join("issues.json"),
        common::issues(&[("1", "B-1", "To Do")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.post("/api/v1/refresh").status, 202);
    every_stream_gets_a_newer_change(streams);
}

/// Event streams count as connections and take at most half of `server.max_connections`:
/// with 16, the ninth stream is refused while ordinary requests are still served. (One
/// client may hold all of them here, so the cap met is the streams', not the client's.)
#[test]
fn streams_leave_half_of_the_connections_to_ordinary_requests() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow(
        "",
        "  max_connections: 16\n  max_connections_per_client: 16\n",
    );
    let _d = p.start();
    let port = p.port();
    let _streams = open_streams_at_once(port, 8);
    let refused = common::request(port, "GET", "/api/v1/events", &[])
        .unwrap_or_else(|| panic!("the ninth stream got no answer"));
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"]["code"], "too_many_streams");
    for _ in 0..20 {
        let r = common::request(port, "GET", "/livez", &[])
            .unwrap_or_else(|| panic!("/livez not served beside the streams"));
        assert_eq!(r.status, 200);
    }
}
