//! Bad input and hostile clients against the real binary (issue 12): stalled uploads and
//! hundreds of idle keep-alive connections must not stop `/livez`; oversized bodies are 413,
//! connections beyond `server.max_connections` 503 (except probes, which keep a reserve), a
//! foreign `Host` (DNS rebinding) 403 and a raw non-ASCII path 400, every one with the error
//! envelope. One client address cannot hold more than its share of the connections (issue
//! 33): the tests play several clients from 127.0.0.2, 127.0.0.3… (all of 127.0.0.0/8 is
//! loopback).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Project, Resp, connect_from, raw_exchange, read_response, request, wait_for};

/// Every probe must answer within this (the issue's acceptance figure is 1 s; the bound is
/// generous so a loaded CI machine does not fail it, and the measured latency is printed).
const PROBE_BOUND: Duration = Duration::from_secs(5);

fn project(server_yaml: &str) -> Project {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", server_yaml);
    p
}

fn connect(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect: {e}"))
}

/// A connection from another client address (`127.0.0.<n>`).
fn connect_as(n: u8, port: u16) -> TcpStream {
    connect_from([127, 0, 0, n], port).unwrap_or_else(|e| panic!("connect from 127.0.0.{n}: {e}"))
}

fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).unwrap_or_else(|e| panic!("send: {e}"));
}

fn assert_envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], code, "{}", r.body);
    assert!(r.json()["error"]["message"].is_string(), "{}", r.body);
}

/// `/livez` on a new connection; its latency, or a panic past the bound.
fn probe(port: u16) -> Duration {
    let started = Instant::now();
    let r = raw_exchange(
        port,
        format!("GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
        PROBE_BOUND,
    );
    let took = started.elapsed();
    match r {
        Some(r) if r.status == 200 && took < PROBE_BOUND => took,
        Some(r) => panic!("/livez answered {} after {took:?}: {}", r.status, r.body),
        None => panic!("/livez did not answer within {PROBE_BOUND:?}"),
    }
}

fn probes(port: u16, what: &str, n: usize) {
    let mut worst = Duration::ZERO;
    for _ in 0..n {
        worst = worst.max(probe(port));
    }
    println!("{what}: {n} /livez probes, slowest {worst:?}");
}

#[test]
fn stalled_uploads_and_idle_keep_alive_connections_do_not_stop_probes() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let head = |len: usize| {
        format!(
            "POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len}\r\n\r\nab"
        )
    };
    // The issue's case: a body announced far beyond the cap, two bytes sent.
    let mut huge: Vec<TcpStream> = (0..10).map(|_| connect_as(2, port)).collect();
    for s in &mut huge {
        send(s, head(1_000_000).as_bytes());
    }
    // Bodies under the cap that stall, and heads that stall half-way.
    let mut stalled: Vec<TcpStream> = (0..10).map(|_| connect_as(2, port)).collect();
    for s in &mut stalled {
        send(s, head(60_000).as_bytes());
    }
    let mut half_heads: Vec<TcpStream> = (0..10).map(|_| connect_as(2, port)).collect();
    for s in &mut half_heads {
        send(s, b"GET /livez HTTP/1.1\r\nHo");
    }
    probes(port, "stalled uploads", 10);
    for s in &mut huge {
        let r = read_response(s, PROBE_BOUND).unwrap_or_else(|| panic!("no 413"));
        assert_envelope(&r, 413, "payload_too_large");
    }
    // 300 keep-alive connections from two more clients, each served once and then left idle.
    let mut idle: Vec<TcpStream> = Vec::new();
    for i in 0..300 {
        let mut s = connect_as(3 + (i % 2) as u8, port);
        send(
            &mut s,
            format!("GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
        );
        idle.push(s);
    }
    for s in &mut idle {
        let r = read_response(s, Duration::from_secs(30)).unwrap_or_else(|| panic!("no answer"));
        assert_eq!(r.status, 200);
    }
    probes(port, "300 idle keep-alive connections", 10);
    // And a few more probes while all of them stay open.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        probe(port);
    }
    drop((huge, stalled, half_heads, idle));
}

#[test]
fn stalled_requests_are_answered_408_and_idle_connections_closed() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let mut body = connect(port);
    send(
        &mut body,
        format!("POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\nab")
            .as_bytes(),
    );
    let mut head = connect(port);
    send(&mut head, b"GET /livez HTTP/1.1\r\nHost: 127");
    let mut idle = connect(port);
    send(
        &mut idle,
        format!("GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
    );
    let first = read_response(&mut idle, PROBE_BOUND).unwrap_or_else(|| panic!("no answer"));
    assert_eq!(first.status, 200);
    // The deadlines are 10 s; allow 10 s more.
    let bound = Duration::from_secs(20);
    let started = Instant::now();
    let r = read_response(&mut body, bound).unwrap_or_else(|| panic!("stalled body: no 408"));
    assert_envelope(&r, 408, "request_timeout");
    assert_eq!(r.header("connection"), Some("close"));
    let r = read_response(&mut head, bound).unwrap_or_else(|| panic!("stalled head: no 408"));
    assert_envelope(&r, 408, "request_timeout");
    // The idle connection is closed without an answer.
    assert!(read_response(&mut idle, bound).is_none());
    assert!(started.elapsed() < bound, "took {:?}", started.elapsed());
}

#[test]
fn oversized_bodies_are_413_with_the_envelope() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let r = raw_exchange(
        port,
        format!("POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 1000000\r\n\r\nab")
            .as_bytes(),
        PROBE_BOUND,
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_envelope(&r, 413, "payload_too_large");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    // A chunked body past the cap (64 KiB) as well.
    let mut chunked = format!(
        "POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..20 {
        chunked.extend_from_slice(b"1000\r\n");
        chunked.extend_from_slice(&[b'x'; 0x1000]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let r = raw_exchange(port, &chunked, PROBE_BOUND).unwrap_or_else(|| panic!("no answer"));
    assert_envelope(&r, 413, "payload_too_large");
    // A small body is still fine.
    let r = raw_exchange(
        port,
        format!("POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}")
            .as_bytes(),
        PROBE_BOUND,
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(r.status, 202, "{}", r.body);
}

/// With `server.max_connections: 16`, 2 connections (a sixteenth, at least 2) are kept for
/// `/livez`, `/readyz` and `/metrics`: once 14 are held, any other request is answered 503
/// while the probes are still answered.
#[test]
fn connections_beyond_the_cap_are_503_but_probes_keep_a_reserve() {
    let p = project("  max_connections: 16\n  max_connections_per_client: 16\n");
    let _d = p.start();
    let port = p.port();
    // Served once and left idle (keep-alive), so each is known to hold a connection.
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..14 {
        let mut s = connect_as(2, port);
        send(
            &mut s,
            format!("GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
        );
        let r = read_response(&mut s, PROBE_BOUND).unwrap_or_else(|| panic!("not served"));
        assert_eq!(r.status, 200);
        held.push(s);
    }
    let r = raw_exchange(
        port,
        format!("GET /api/v1/state HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
        PROBE_BOUND,
    )
    .unwrap_or_else(|| panic!("no answer beyond the cap"));
    assert_envelope(&r, 503, "too_many_connections");
    assert_eq!(r.header("connection"), Some("close"));
    for path in ["/livez", "/readyz", "/metrics", "/livez", "/livez"] {
        let r = request(port, "GET", path, &[])
            .unwrap_or_else(|| panic!("{path} got no answer beyond the cap"));
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    drop(held);
    // Once they are closed, everything is served again.
    wait_for("the state served again", Duration::from_secs(10), || {
        request(port, "GET", "/api/v1/state", &[]).filter(|r| r.status == 200)
    });
}

/// Raises this process's open-file limit to its hard limit (the test holds over a thousand
/// sockets).
fn raise_nofile() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        },
    );
}

/// Keeps `n` sockets from `127.0.0.<client>` open and idle, re-opening every one the server
/// closes, until `stop`; counts the 503 `too_many_connections` answers it reads.
fn hog(
    client: u8,
    port: u16,
    n: usize,
    opened: &AtomicUsize,
    refused: &AtomicUsize,
    stop: &AtomicBool,
) {
    let open = || {
        let s = connect_as(client, port);
        s.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        s
    };
    let mut socks: Vec<TcpStream> = (0..n).map(|_| open()).collect();
    opened.store(n, Ordering::SeqCst);
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        for s in socks.iter_mut() {
            match s.read(&mut buf) {
                Ok(0) => *s = open(),
                Ok(n) => {
                    if String::from_utf8_lossy(&buf[..n]).contains("too_many_connections") {
                        refused.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => *s = open(),
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sends request heads one byte every 200 ms on `n` connections from `127.0.0.<client>`,
/// re-opening those the server closes, until `stop` (a slowloris).
fn trickle(client: u8, port: u16, n: usize, stop: &AtomicBool) {
    let head = format!("GET /livez HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ");
    let mut socks: Vec<(TcpStream, usize)> =
        (0..n).map(|_| (connect_as(client, port), 0)).collect();
    while !stop.load(Ordering::SeqCst) {
        for (s, at) in socks.iter_mut() {
            let byte = head.as_bytes().get(*at).copied().unwrap_or(b'x');
            if s.write_all(&[byte]).is_err() {
                *s = connect_as(client, port);
                *at = 0;
            } else {
                *at += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The issue's figure: one address holds 1,000 idle sockets (re-opening those the server
/// closes) and trickles request heads on 300 more; `/livez` from another address answers 200
/// in 25 of 25 probes, and ordinary requests are served too.
#[test]
fn one_address_holding_a_thousand_sockets_does_not_stop_probes_from_another() {
    raise_nofile();
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let hog_thread = {
        let (stop, opened, refused) = (stop.clone(), opened.clone(), refused.clone());
        std::thread::spawn(move || hog(2, port, 1000, &opened, &refused, &stop))
    };
    let slow_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || trickle(2, port, 300, &stop))
    };
    wait_for("the hog's sockets open", Duration::from_secs(30), || {
        (opened.load(Ordering::SeqCst) == 1000).then_some(())
    });
    let mut worst = Duration::ZERO;
    for _ in 0..25 {
        worst = worst.max(probe(port));
    }
    println!(
        "1,000 idle sockets from 127.0.0.2, 300 slow heads from 127.0.0.3: 25 /livez probes, slowest {worst:?}"
    );
    for path in ["/readyz", "/metrics", "/api/v1/state"] {
        let r = request(port, "GET", path, &[]).unwrap_or_else(|| panic!("{path}: no answer"));
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    // The hog reads its sockets every 200 ms: a refusal the server already sent may not have
    // been read yet, so wait for it rather than read the count once.
    wait_for(
        "the server to refuse the hog",
        Duration::from_secs(30),
        || (refused.load(Ordering::SeqCst) > 0).then_some(()),
    );
    stop.store(true, Ordering::SeqCst);
    hog_thread.join().unwrap_or_else(|_| panic!("hog panicked"));
    slow_thread
        .join()
        .unwrap_or_else(|_| panic!("trickle panicked"));
    let refused = refused.load(Ordering::SeqCst);
    assert!(refused > 0, "the server never refused the hog's sockets");
}

#[test]
fn foreign_host_names_are_refused_403_against_dns_rebinding() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let evil = format!("evil.example:{port}");
    let origin = format!("http://evil.example:{port}");
    let r = request(
        port,
        "POST",
        "/api/v1/refresh",
        &[("Host", &evil), ("Origin", &origin)],
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_envelope(&r, 403, "host_not_allowed");
    let r = request(port, "GET", "/api/v1/state", &[("Host", &evil)])
        .unwrap_or_else(|| panic!("no answer"));
    assert_envelope(&r, 403, "host_not_allowed");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
    ] {
        let r = request(port, "GET", "/api/v1/state", &[("Host", &host)])
            .unwrap_or_else(|| panic!("no answer"));
        assert_eq!(r.status, 200, "{host}: {}", r.body);
    }
    // HTTP/1.0 may omit Host; HTTP/1.1 may not.
    let r = raw_exchange(port, b"GET /livez HTTP/1.0\r\n\r\n", PROBE_BOUND)
        .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = raw_exchange(
        port,
        b"GET /livez HTTP/1.1\r\nConnection: close\r\n\r\n",
        PROBE_BOUND,
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_envelope(&r, 400, "missing_host");
}

#[test]
fn raw_non_ascii_paths_are_400_with_the_envelope() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    for path in [&b"/api/v1/\xff\xfe"[..], "/api/v1/ü".as_bytes()] {
        let mut raw = b"GET ".to_vec();
        raw.extend_from_slice(path);
        raw.extend_from_slice(format!(" HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes());
        let r = raw_exchange(port, &raw, PROBE_BOUND).unwrap_or_else(|| panic!("no answer"));
        assert_envelope(&r, 400, "invalid_request");
    }
    // Percent-encoded, the same bytes are an ordinary path.
    let r = request(port, "GET", "/api/v1/%C3%BC", &[]).unwrap_or_else(|| panic!("no answer"));
    assert_eq!(r.status, 404, "{}", r.body);
}

/// The idle timeout closes a connection's read side when no next request comes; an event
/// stream never sends one, and must keep receiving frames well past it.
#[test]
fn event_streams_outlive_the_idle_timeout() {
    let s = common::Setup::new(&common::mock_workflow("", ""), &common::issues(&[]));
    let d = s.start(&[("SORTIE_SSE_HEARTBEAT_MS", "500")]);
    let mut st = common::open_stream(d.port, "/api/v1/events", &[]);
    assert_eq!(st.status, 200);
    // The head and idle deadlines are 10 s.
    let until = Instant::now() + Duration::from_secs(13);
    let mut last = None;
    while Instant::now() < until {
        last = Some(
            st.next_frame(Duration::from_secs(5))
                .unwrap_or_else(|| panic!("the stream stopped")),
        );
    }
    assert!(last.is_some());
    probe(d.port);
}

/// A client that pipelines thousands of requests and never reads an answer holds at most one
/// request in flight: the request threads are not all stuck writing to it.
#[test]
fn a_pipelining_client_that_never_reads_does_not_stop_probes() {
    let p = project("");
    let _d = p.start();
    let port = p.port();
    let mut flood = connect(port);
    let one = format!("GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let burst = one.repeat(2000);
    flood
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap_or_else(|e| panic!("{e}"));
    // The server stops reading once its answers back up; what was written is enough.
    let _ = flood.write_all(burst.as_bytes());
    probes(port, "a pipelining client that never reads", 10);
    drop(flood);
}
