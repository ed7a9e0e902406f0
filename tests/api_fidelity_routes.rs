//! Status codes and routes as the API reference specifies them: the actions during shutdown,
//! a failed history read, HEAD and other methods on the event stream, unknown routes, request
//! size limits and hostile request lines, the `Sec-Fetch-Site` table, and the OpenAPI
//! document's own path.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::fake_github::{self, TOKEN};
use common::fake_server::Fault;
use common::{Project, Resp, Setup, issues, mock_workflow, parse_response, wait_for};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn sigterm(d: &common::Daemon) {
    if let Some(pid) = rustix::process::Pid::from_raw(d.child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

/// Once shutdown has begun, the orchestrator's loop ends as soon as nothing runs, while the
/// process still finishes its tracker writes and the HTTP server keeps answering. The actions
/// asked in that window are refused by the shutdown (409, nothing queued), not reported as
/// the orchestrator being unavailable (503). A dispatch comment the fake GitHub holds for a
/// few seconds keeps the window open.
#[test]
fn actions_during_shutdown_answer_409_nothing_queued() {
    let fake = fake_github::start(&["backlog", "in-progress", "review", "done"]);
    fake.with_state(|s| s.add_issue(1, "One", &["backlog"], false));
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/comments",
        Fault::Delay(Duration::from_secs(8)),
    );
    let workflow = format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true}}\ngithub:\n  timeout_ms: 20000\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n  model_name: mock-model\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    );
    let s = Setup::new(&workflow, "[]");
    let mut d = s.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("the dispatch comment held by the fake", WAIT, || {
        !fake
            .requests("POST", "/repos/owner/repo/issues/1/comments")
            .is_empty()
    });
    d.wait_until("the run handed off", WAIT, || {
        fake.with_state(|g| g.labels(1)) == ["review"]
            && d.try_state()
                .is_some_and(|s| s["running"].as_array().is_some_and(|r| r.is_empty()))
    });
    sigterm(&d);
    d.wait_until("draining", WAIT, || {
        d.try_get("/livez").is_some_and(|r| r.status == 503)
    });
    let r = d.post("/api/v1/refresh");
    assert_eq!(r.status, 409, "{}", r.body);
    let body = r.json();
    assert_eq!(body["queued"], false);
    assert_eq!(body["coalesced"], false);
    assert_eq!(body["operations"], serde_json::json!([]));
    assert_eq!(
        body["outcome_text"],
        "Nothing queued: Sortie is shutting down."
    );
    assert!(body["requested_at"].is_string());
    let r = d.post("/api/v1/retries/owner%2Frepo%231/run");
    assert_eq!(r.status, 409, "{}", r.body);
    let body = r.json();
    assert_eq!(body["queued"], false);
    assert_eq!(
        body["outcome_text"],
        "Nothing queued: Sortie is shutting down."
    );
    let r = d.post("/api/v1/attention/0123456789abcdef/acknowledge");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        r.json()["outcome_text"],
        "Nothing acknowledged: Sortie is shutting down."
    );
    let status = wait_for("the daemon's exit", WAIT, || {
        d.child.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(0));
}

fn idle_daemon() -> (Setup, common::Daemon) {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    (s, d)
}

fn assert_envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], code, "{}", r.body);
    assert!(r.json()["error"]["message"].is_string(), "{}", r.body);
}

/// Sends `raw` from a thread of its own (the server may answer and close before it has read
/// everything) and reads what comes back until the server closes or `timeout` passes: one
/// response (with the body its `Content-Length` announces, or none after HEAD) and whether
/// the server closed. The client's sending side is closed after `raw` unless `keep_open` (a
/// client that waits, as an HTTP/2 client does after its preface).
fn exchange_with(
    port: u16,
    raw: Vec<u8>,
    timeout: Duration,
    keep_open: bool,
) -> (Option<Resp>, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    let mut w = s.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&raw);
        if !keep_open {
            let _ = w.shutdown(std::net::Shutdown::Write);
        }
    });
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut closed = false;
    while let Some(left) = deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
    {
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let _ = writer.join();
    (parse_response(&got).or_else(|| head_only(&got)), closed)
}

/// A response head without its body (the answer to HEAD).
fn head_only(raw: &[u8]) -> Option<Resp> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let mut with_body = raw[..split + 4].to_vec();
    let text = String::from_utf8_lossy(&with_body).to_lowercase();
    if let Some(at) = text.find("content-length:") {
        // Parse the head as though no body were announced.
        with_body.splice(
            at..at + "content-length".len(),
            b"x-announced-len".iter().copied(),
        );
    }
    parse_response(&with_body)
}

fn exchange(port: u16, raw: Vec<u8>, timeout: Duration) -> (Option<Resp>, bool) {
    exchange_with(port, raw, timeout, false)
}

#[test]
fn unknown_routes_answer_the_reference_code() {
    let (_s, d) = idle_daemon();
    for p in [
        "/nope",
        "/api/v2/state",
        "/api/v1/runs/ABC/events/more",
        "/api/v1/retries/X-1",
    ] {
        let r = d.get(p);
        assert_envelope(&r, 404, "issue_not_found");
    }
    let r = d.post("/nope");
    assert_envelope(&r, 404, "issue_not_found");
}

#[test]
fn head_is_405_without_a_body_except_on_the_dashboard() {
    let (_s, d) = idle_daemon();
    // The event stream: HEAD and every other method but GET are 405, and no stream opens.
    for m in ["HEAD", "POST", "DELETE", "PUT"] {
        let raw = format!(
            "{m} /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            d.port
        );
        let (r, closed) = exchange_with(d.port, raw.into_bytes(), Duration::from_secs(5), true);
        let r = r.unwrap_or_else(|| panic!("{m}: no answer"));
        assert!(closed, "{m}: the connection was held open");
        assert_eq!(r.status, 405, "{m}: {}", r.body);
        assert_eq!(r.header("Allow"), Some("GET"), "{m}");
        if m == "HEAD" {
            assert!(r.body.is_empty(), "HEAD got a body: {}", r.body);
        } else {
            assert_envelope(&r, 405, "method_not_allowed");
        }
    }
    for p in [
        "/api/v1/state",
        "/api/v1/runs",
        "/api/v1/runs/issues",
        "/api/v1/X-1",
        "/livez",
        "/readyz",
        "/metrics",
        "/",
        "/favicon.ico",
    ] {
        let r = d
            .request("HEAD", p, &[])
            .unwrap_or_else(|| panic!("HEAD {p}: no answer"));
        assert_eq!(r.status, 405, "HEAD {p}");
        assert_eq!(r.header("Allow"), Some("GET"), "HEAD {p}");
        assert!(r.body.is_empty(), "HEAD {p} got a body: {}", r.body);
    }
    // The dashboard accepts HEAD: the GET answer's headers, no body.
    for p in ["/ui/", "/ui/issues/X-1"] {
        let get = d.get(p);
        let head = d
            .request("HEAD", p, &[])
            .unwrap_or_else(|| panic!("HEAD {p}: no answer"));
        assert_eq!(head.status, 200, "HEAD {p}");
        assert!(head.body.is_empty(), "HEAD {p} got a body");
        assert_eq!(head.header("ETag"), get.header("ETag"), "HEAD {p}");
        assert_eq!(
            head.header("Content-Length"),
            Some(get.body.len().to_string().as_str()),
            "HEAD {p}"
        );
    }
}

#[test]
fn sec_fetch_site_follows_the_six_rows_literally() {
    let (_s, d) = idle_daemon();
    let host = format!("127.0.0.1:{}", d.port);
    let same = format!("http://{host}");
    let post = |headers: &[(&str, &str)]| {
        d.request("POST", "/api/v1/refresh", headers)
            .unwrap_or_else(|| panic!("no answer"))
    };
    // Row 2: the exact tokens.
    for v in ["same-origin", "none"] {
        assert_eq!(post(&[("Sec-Fetch-Site", v)]).status, 202, "{v}");
    }
    // Row 3: any other value, spelled differently included.
    for v in [
        "SAME-ORIGIN",
        "Same-Origin",
        "NONE",
        "same-site",
        "cross-site",
    ] {
        let r = post(&[("Sec-Fetch-Site", v), ("Origin", same.as_str())]);
        assert_envelope(&r, 403, "cross_origin_request_rejected");
    }
    // An empty Sec-Fetch-Site is no header: rows 4 to 6 decide.
    assert_eq!(post(&[("Sec-Fetch-Site", "")]).status, 202);
    assert_eq!(
        post(&[("Sec-Fetch-Site", ""), ("Origin", same.as_str())]).status,
        202
    );
    let r = post(&[("Sec-Fetch-Site", ""), ("Origin", "http://evil.example")]);
    assert_envelope(&r, 403, "cross_origin_request_rejected");
}

#[test]
fn a_history_read_that_fails_is_503_not_404() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "H-1", "title": "First", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    wait_for("H-1 handed off", WAIT, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let r = d.get("/api/v1/H-1");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "history");
    assert_eq!(d.terminate(), Some(0));

    corrupt_run_history(&p);
    let d = p.start();
    let r = d.get("/api/v1/H-1");
    assert_envelope(&r, 503, "history_unavailable");
}

/// Overwrites the root page of `run_history` with garbage (the daemon is stopped), so every
/// read of it fails as malformed.
fn corrupt_run_history(p: &Project) {
    let (page_size, root): (i64, i64) = {
        let c = rusqlite::Connection::open(p.db()).unwrap_or_else(|e| panic!("open db: {e}"));
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap_or_else(|e| panic!("checkpoint: {e}"));
        let page_size = c
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("page size: {e}"));
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'run_history'",
                [],
                |r| r.get(0),
            )
            .unwrap_or_else(|e| panic!("root page: {e}"));
        (page_size, root)
    };
    let mut bytes = std::fs::read(p.db()).unwrap_or_else(|e| panic!("read db: {e}"));
    let start = (page_size * (root - 1)) as usize;
    for b in &mut bytes[start..start + page_size as usize] {
        *b = 0xA5;
    }
    std::fs::write(p.db(), bytes).unwrap_or_else(|e| panic!("write db: {e}"));
}

#[test]
fn request_heads_are_bounded_and_hostile_lines_answered() {
    let (_s, d) = idle_daemon();
    let port = d.port;
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let bound = Duration::from_secs(5);

    // A 1 MB identifier: 414, the line unread beyond the limit, nothing echoed.
    let mut raw = b"GET /api/v1/".to_vec();
    raw.extend(std::iter::repeat_n(b'A', 1 << 20));
    raw.extend_from_slice(format!(" HTTP/1.1\r\n{host}\r\n").as_bytes());
    let (r, closed) = exchange(port, raw, bound);
    let r = r.unwrap_or_else(|| panic!("no answer to a 1 MB request line"));
    assert_envelope(&r, 414, "uri_too_long");
    assert!(r.body.len() < 200, "{}", r.body);
    assert!(closed, "the connection stayed open after 414");

    // A long identifier within the limit: only a short prefix of it is quoted back.
    let long = "B".repeat(6000);
    let r = d.get(&format!("/api/v1/{long}"));
    assert_envelope(&r, 404, "issue_not_found");
    assert!(r.body.len() < 300, "{} bytes echoed", r.body.len());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("BBBB…"))
    );

    // Many header lines, each within its own limit, past the head's limit: 431.
    let mut raw = format!("GET /livez HTTP/1.1\r\n{host}").into_bytes();
    for i in 0..12 {
        raw.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "c".repeat(8000)).as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    let (r, _) = exchange(port, raw, bound);
    let r = r.unwrap_or_else(|| panic!("no answer to a large head"));
    assert_envelope(&r, 431, "request_header_too_large");

    // Raw non-ASCII bytes and control bytes in the path: 400, also with bare LF line ends.
    for raw in [
        format!("GET /api/v1/\u{e9} HTTP/1.1\r\n{host}\r\n").into_bytes(),
        format!("GET /api/v1/\u{e9} HTTP/1.1\n{}\n", host.trim_end()).into_bytes(),
        format!("GET /api/v1/a\u{0}b HTTP/1.1\r\n{host}\r\n").into_bytes(),
        [
            &b"GET /api/v1/\xff HTTP/1.1\r\n"[..],
            host.as_bytes(),
            b"\r\n",
        ]
        .concat(),
    ] {
        let (r, closed) = exchange(port, raw.clone(), bound);
        let r = r.unwrap_or_else(|| panic!("no answer to {:?}", String::from_utf8_lossy(&raw)));
        assert_envelope(&r, 400, "invalid_request");
        assert!(closed, "{:?} left open", String::from_utf8_lossy(&raw));
    }
    // A bare LF request otherwise well formed is served.
    let (r, _) = exchange(
        port,
        format!(
            "GET /livez HTTP/1.1\n{}\nConnection: close\n\n",
            host.trim_end()
        )
        .into_bytes(),
        bound,
    );
    assert_eq!(r.map(|r| r.status), Some(200));

    // An HTTP/2 prior-knowledge preface (and a SETTINGS frame): answered and closed at once.
    let mut raw = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    raw.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let started = Instant::now();
    let (r, closed) = exchange_with(port, raw, bound, true);
    assert!(closed, "an HTTP/2 preface left the connection open");
    assert!(started.elapsed() < bound);
    assert_envelope(
        &r.unwrap_or_else(|| panic!("no answer to an HTTP/2 preface")),
        505,
        "http_version_not_supported",
    );
    // The server still answers.
    assert_eq!(d.get("/livez").status, 200);
}

/// The OpenAPI document lives outside `/api/v1/`, so an issue whose identifier is
/// `openapi.json` is served as an issue; its parameter schemas reject what the server
/// rejects, and the event stream's schema describes frames.
#[test]
fn the_openapi_document_shadows_no_identifier_and_matches_the_server() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "openapi.json", "title": "Named like a file", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    wait_for("openapi.json handed off", WAIT, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let r = d.get("/api/v1/openapi.json");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["issue_identifier"], "openapi.json");
    assert_eq!(r.json()["status"], "history");

    let doc = d.get("/openapi.json").json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/openapi.json"]["get"].is_object());
    assert!(doc["paths"].get("/api/v1/openapi.json").is_none());
    let param = |path: &str, name: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .map(|p| p["schema"].clone())
            .unwrap_or_else(|| panic!("{path} has no parameter {name}"))
    };
    let run = param("/api/v1/events", "run");
    assert_eq!(run["minLength"], 1);
    assert!(run["pattern"].is_string());
    assert!(param("/api/v1/runs", "cursor")["pattern"].is_string());
    for t in ["since", "until", "ended_since", "ended_until"] {
        let s = param("/api/v1/runs", t).to_string();
        assert!(s.contains("\"format\":\"date-time\""), "{t}: {s}");
    }
    // The server rejects what those schemas now exclude.
    for q in [
        "/api/v1/events?run=",
        "/api/v1/runs?cursor=abc",
        "/api/v1/runs?since=yesterday",
        "/api/v1/runs?until=2026-13-01",
    ] {
        assert_envelope(&d.get(q), 400, "invalid_parameter");
    }
    // Statuses the server answers are documented on their operations.
    for (path, method, status) in [
        ("/api/v1/state", "get", "304"),
        ("/api/v1/refresh", "post", "503"),
        ("/api/v1/events", "get", "503"),
        ("/api/v1/refresh", "post", "409"),
        ("/api/v1/retries/{identifier}/run", "post", "409"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"][status].is_object(),
            "{method} {path} does not document {status}"
        );
    }
    let sse = &doc["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
        ["schema"];
    // One event per item, as OpenAPI 3.1 tools read an event stream's schema: each kind of
    // event, its data a line of JSON.
    let frames = sse["oneOf"].as_array().unwrap_or_else(|| panic!("{sse}"));
    for e in ["change", "heartbeat", "agent_event", "run_ended", "reset"] {
        let f = frames
            .iter()
            .find(|f| f["properties"]["event"]["const"] == e)
            .unwrap_or_else(|| panic!("{e}: {sse}"));
        assert_eq!(f["properties"]["data"]["type"], "string", "{f}");
        assert_eq!(
            f["properties"]["data"]["contentMediaType"], "application/json",
            "{f}"
        );
    }
}
