//! `GET /api/v1/state` built once per published snapshot: the cached body is shared until the
//! next publish, a new secret registration rebuilds it masked, and through the real binary
//! the body carries a strong `ETag` that `If-None-Match` answers with 304 until the state
//! changes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::app::{app_state, publish};
use common::{Setup, issues, mock_workflow};
use serde_json::Value;
use sortie::domain::{Issue, RetryTrigger};
use sortie::orchestrator::snapshot::{RetryRow, Snapshot};

const T: Duration = Duration::from_secs(30);

fn snapshot(revision: u64, error: &str) -> Snapshot {
    let mut snap = Snapshot {
        revision,
        generated_at_ms: 1_000_000 + revision as i64,
        ..Default::default()
    };
    std::sync::Arc::make_mut(&mut snap.retrying).push(RetryRow {
        issue: Issue {
            id: "7".into(),
            identifier: "C-7".into(),
            title: "Cached".into(),
            ..Default::default()
        },
        attempt: 2,
        due_at_ms: 2_000_000,
        error: Some(error.into()),
        trigger: RetryTrigger::Error,
        dispatched_at_ms: 500,
        reaction: None,
        route: Default::default(),
    });
    snap
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("state body is not JSON: {e}"))
}

#[test]
fn the_body_is_shared_until_the_next_publish() {
    let (_dir, state) = app_state(snapshot(1, "first failure"));
    let a = state.state_cache.current(&state);
    let b = state.state_cache.current(&state);
    assert!(Arc::ptr_eq(&a, &b), "the same snapshot must reuse its body");
    assert_eq!(json(&a.json)["retrying"][0]["error"], "first failure");

    publish(&state, snapshot(2, "second failure"));
    let c = state.state_cache.current(&state);
    assert!(!Arc::ptr_eq(&a, &c));
    assert_ne!(a.etag, c.etag);
    assert_eq!(json(&c.json)["retrying"][0]["error"], "second failure");
    assert_eq!(json(&c.json)["generated_at"], "1970-01-01T00:16:40.002Z");

    // The tag names the bytes: an identical document published again keeps it.
    publish(&state, snapshot(2, "second failure"));
    let d = state.state_cache.current(&state);
    assert!(!Arc::ptr_eq(&c, &d));
    assert_eq!(c.etag, d.etag);
    assert!(
        d.etag.starts_with('"') && d.etag.ends_with('"'),
        "{}",
        d.etag
    );
}

#[test]
fn the_gzip_encoding_holds_the_same_bytes_under_its_own_tag() {
    use std::io::Read;
    let (_dir, state) = app_state(snapshot(1, "compressible failure"));
    let body = state.state_cache.current(&state);
    let gz = body.gzip();
    assert!(!gz.is_empty() && gz.len() < body.json.len());
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("gunzip: {e}"));
    assert_eq!(out, body.json);
    assert_ne!(body.gzip_etag, body.etag);
    assert!(body.matches(&body.gzip_etag) && body.matches(&body.etag));
    assert!(!body.matches("\"something-else\""));
}

#[test]
fn a_secret_registered_after_caching_is_masked_at_once() {
    let secret = "late-secret-value-5150";
    let (_dir, state) = app_state(snapshot(1, &format!("token {secret} rejected")));
    let before = state.state_cache.current(&state);
    assert!(String::from_utf8_lossy(&before.json).contains(secret));

    sortie::mask::register_secret(secret);
    let after = state.state_cache.current(&state);
    let text = String::from_utf8_lossy(&after.json).into_owned();
    assert!(!text.contains(secret), "{text}");
    assert_eq!(
        json(&after.json)["retrying"][0]["error"],
        "token [redacted] rejected"
    );
    assert_ne!(before.etag, after.etag);
}

#[test]
fn a_secret_that_json_escapes_is_still_masked() {
    let secret = "quote\"d-secret\\value";
    sortie::mask::register_secret(secret);
    let (_dir, state) = app_state(snapshot(1, &format!("saw {secret}")));
    let body = state.state_cache.current(&state);
    assert_eq!(json(&body.json)["retrying"][0]["error"], "saw [redacted]");
}

#[test]
fn the_real_binary_answers_a_matching_if_none_match_with_304() {
    let s = Setup::new(
        &mock_workflow("  max_turns: 1\n", "  turn_delay_ms: 600000\n"),
        &issues(&[("1", "E-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state("one running session", T, |st| st["counts"]["running"] == 1);

    let first = d.get("/api/v1/state");
    let etag = first
        .header("ETag")
        .unwrap_or_else(|| panic!("no ETag on /api/v1/state"))
        .to_string();
    assert_eq!(first.header("Cache-Control"), Some("no-cache"));
    assert_eq!(
        first.header("Content-Type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(first.header("Vary"), Some("Accept-Encoding"));
    assert_eq!(first.header("Content-Encoding"), None);
    assert_eq!(first.json()["counts"]["running"], 1);
    let gz = d
        .request("GET", "/api/v1/state", &[("Accept-Encoding", "gzip, br")])
        .unwrap_or_else(|| panic!("no answer to GET"));
    assert_eq!(gz.header("Content-Encoding"), Some("gzip"));
    assert!(gz.header("ETag").is_some_and(|t| t.ends_with("-gzip\"")));

    // The route allows GET only (the reference's method enforcement): HEAD is 405, bodiless.
    let head = d
        .request("HEAD", "/api/v1/state", &[])
        .unwrap_or_else(|| panic!("no answer to HEAD"));
    assert_eq!(head.status, 405);
    assert_eq!(head.header("Allow"), Some("GET"));
    assert!(head.body.is_empty());

    // Unchanged state: revalidation answers 304 with the same tag and no body (the tag may
    // only move if the orchestrator published in between, so retry until two reads agree).
    let (tag, not_modified) = common::wait_for("a 304 for an unchanged state", T, || {
        let tag = d.get("/api/v1/state").header("ETag")?.to_string();
        let r = d.request("GET", "/api/v1/state", &[("If-None-Match", tag.as_str())])?;
        (r.status == 304).then_some((tag, r))
    });
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("ETag"), Some(tag.as_str()));
    // A list of tags with a weak form of the current one matches too.
    common::wait_for("a 304 for a listed weak tag", T, || {
        let tag = d.get("/api/v1/state").header("ETag")?.to_string();
        let listed = format!("\"other\", W/{tag}");
        let r = d.request(
            "GET",
            "/api/v1/state",
            &[("If-None-Match", listed.as_str())],
        )?;
        (r.status == 304).then_some(())
    });

    // A change in the backlog publishes a new snapshot: the old tag no longer matches. The
    // daemon's own write (E-1 to In Progress) goes first, so the test's write is the later one.
    let issues_file = s.path().join("issues.json");
    common::wait_for("E-1 moved to In Progress in the file", T, || {
        let text = std::fs::read_to_string(&issues_file).ok()?;
        let items: Value = serde_json::from_str(&text).ok()?;
        (items[0]["state"] == "In Progress").then_some(())
    });
    std::fs::write(
        s.path().join("issues.json"),
        issues(&[("1", "E-1", "To Do"), ("2", "E-2", "To Do")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let refresh = d.post("/api/v1/refresh");
    assert!(refresh.status < 300, "refresh answered {}", refresh.status);
    d.wait_state("two running sessions", T, |st| st["counts"]["running"] == 2);
    let changed = d
        .request("GET", "/api/v1/state", &[("If-None-Match", etag.as_str())])
        .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(changed.status, 200);
    assert_eq!(changed.json()["counts"]["running"], 2);
    assert_ne!(changed.header("ETag"), Some(etag.as_str()));
}

/// A document larger than the head-and-body single write (64 KiB) goes out as the head and then
/// the body straight from the cached bytes: two answers on one keep-alive connection, each
/// framed by its `Content-Length`, carry the whole document, and the gzip encoding too.
#[test]
fn a_large_document_is_framed_whole_on_a_keep_alive_connection() {
    use std::io::{BufReader, Read, Write};
    let s = four_running_with_titles_of(3_000);
    let d = s.start(&[]);
    d.wait_state("four running sessions", T, |st| {
        st["counts"]["running"] == 4
    });

    let stream = std::net::TcpStream::connect(("127.0.0.1", d.port))
        .unwrap_or_else(|e| panic!("connect: {e}"));
    stream
        .set_read_timeout(Some(T))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let mut reader = BufReader::new(stream);
    let mut read_answer = |extra: &str| -> (Vec<(String, String)>, Vec<u8>) {
        write!(
            out,
            "GET /api/v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n"
        )
        .unwrap_or_else(|e| panic!("write: {e}"));
        read_http_answer(&mut reader)
    };
    for _ in 0..2 {
        let (_, body) = read_answer("");
        assert!(body.len() > 64 * 1024, "document of {} bytes", body.len());
        assert_eq!(json(&body)["counts"]["running"], 4);
    }
    let (headers, gz) = read_answer("Accept-Encoding: gzip\r\n");
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-encoding" && v == "gzip")
    );
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut unzipped)
        .unwrap_or_else(|e| panic!("gunzip: {e}"));
    assert_eq!(json(&unzipped)["counts"]["running"], 4);
    let (_, again) = read_answer("");
    assert_eq!(json(&again)["counts"]["running"], 4);
}

/// One answer's head fields (lower-case names) and its `Content-Length` body.
fn read_http_answer(reader: &mut impl std::io::BufRead) -> (Vec<(String, String)>, Vec<u8>) {
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("read head: {e}"));
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(": ") {
            headers.push((k.to_ascii_lowercase(), v.to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {headers:?}"));
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .unwrap_or_else(|e| panic!("read body of {len} bytes: {e}"));
    (headers, body)
}

/// A backlog of four issues whose titles repeat "long title " `repeat` times, each worked on by
/// a session that does not end.
fn four_running_with_titles_of(repeat: usize) -> Setup {
    let titled: Vec<Value> = (1..=4)
        .map(|n| {
            serde_json::json!({
                "id": n.to_string(), "identifier": format!("L-{n}"),
                "title": format!("{n}{}", "long title ".repeat(repeat)),
                "state": "To Do", "priority": 1, "labels": [], "issue_type": "Bug",
                "url": format!("https://tracker.example/L-{n}"),
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            })
        })
        .collect();
    Setup::new(
        &mock_workflow("  max_turns: 1\n", "  turn_delay_ms: 600000\n"),
        &serde_json::to_string(&titled).unwrap_or_default(),
    )
}

/// The kernel's send buffer (`tb`, bytes) of the daemon's end of the connection from
/// `client_port`, as `ss` reports it; `None` while there is no such connection.
fn server_send_buffer(port: u16, client_port: u16) -> Option<usize> {
    let out = std::process::Command::new("ss")
        .args(["-tmnH", "state", "established"])
        .arg(format!("( sport = :{port} and dport = :{client_port} )"))
        .output()
        .unwrap_or_else(|e| panic!("ss (iproute2) is needed: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find(",tb")? + 3;
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A document larger than the sockets' fixed send buffer raises its socket's buffer while it is
/// written (one write wakes the server once rather than once per buffer's worth), and the
/// buffer is put back once it is written, so an event stream later on the same connection
/// still has the small one its stall detection rests on.
#[test]
fn a_large_document_raises_its_socket_s_send_buffer_while_it_is_written() {
    use std::io::{BufReader, Write};
    // Four titles of 1.4 MB: a document larger than the most one answer raises the buffer to
    // (4 MiB), so the write waits, with the buffer raised, for the client to read.
    let s = four_running_with_titles_of(130_000);
    let d = s.start(&[]);
    d.wait_state("four running sessions", T, |st| {
        st["counts"]["running"] == 4
    });
    let stream = std::net::TcpStream::connect(("127.0.0.1", d.port))
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let client_port = stream.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
    stream
        .set_read_timeout(Some(T))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let mut reader = BufReader::new(stream);
    let mut ask = |path: &str| {
        write!(out, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap_or_else(|e| panic!("write: {e}"));
    };
    let mut read_answer = || read_http_answer(&mut reader).1;
    ask("/livez");
    read_answer();
    let fixed = server_send_buffer(d.port, client_port)
        .unwrap_or_else(|| panic!("ss shows no connection from port {client_port}"));

    ask("/api/v1/state");
    let deadline = std::time::Instant::now() + T;
    let raised = loop {
        match server_send_buffer(d.port, client_port) {
            Some(b) if b > fixed => break b,
            _ if std::time::Instant::now() > deadline => panic!("the send buffer stayed {fixed}"),
            _ => std::thread::yield_now(),
        }
    };
    assert!(raised >= 4 * 1024 * 1024, "raised to {raised} only");
    let body = read_answer();
    assert!(body.len() > 5_000_000, "document of {} bytes", body.len());
    assert_eq!(json(&body)["counts"]["running"], 4);
    // Written: the buffer is back to its fixed size (the next answer on the connection shows
    // the restore has happened, as it is made before the writer is let go).
    ask("/livez");
    read_answer();
    assert_eq!(server_send_buffer(d.port, client_port), Some(fixed));
}
