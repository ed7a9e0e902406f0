//! The shared HTTP client against the fake-server framework: every fault of the queue ends
//! in the right error class, reads are retried within their bounds, writes never, and a
//! 429's `Retry-After` is honoured.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fake_server::{FakeServer, Fault, Reply};
use sortie::clock::SystemClock;
use sortie::http_client::{
    ClientOptions, ErrorClass, HttpClient, Method, Request, RetryPolicy, Sleeper, ThreadSleeper,
};

/// Records waits instead of sleeping.
#[derive(Default)]
struct Recorder(Mutex<Vec<Duration>>);

impl Sleeper for Recorder {
    fn sleep(&self, d: Duration) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(d);
    }
}

fn fake() -> FakeServer<u32> {
    FakeServer::start(0u32, |hits, req| {
        *hits += 1;
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/items") => Reply::json(200, &serde_json::json!([{"n": *hits}])),
            ("POST", "/items") => Reply::json(201, &serde_json::json!({"ok": true})),
            _ => Reply::json(404, &serde_json::json!({"message": "Not Found"})),
        }
    })
}

fn client(url: &str, timeout: Duration, sleeper: Arc<dyn Sleeper>) -> HttpClient {
    let mut opts = ClientOptions::new(url);
    opts.timeout = timeout;
    opts.auth = Some(("Authorization".into(), "Bearer test-token-abc".into()));
    opts.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    HttpClient::new(opts, Arc::new(SystemClock), sleeper)
}

fn class_of(c: &HttpClient, req: Request) -> Option<ErrorClass> {
    c.send(req).err().map(|e| e.class)
}

#[test]
fn each_fault_maps_to_its_error_class_and_the_next_call_recovers() {
    let server = fake();
    let c = client(
        &server.url,
        Duration::from_millis(500),
        Arc::new(Recorder::default()),
    );
    let cases = [
        (Fault::too_many_requests(1), ErrorClass::Api),
        (Fault::rate_limited(), ErrorClass::Api),
        (Fault::secondary_rate_limited(1), ErrorClass::Api),
        (Fault::server_error(500), ErrorClass::Transport),
        (Fault::server_error(502), ErrorClass::Transport),
        (Fault::unauthorized(), ErrorClass::Auth),
        (Fault::Truncated, ErrorClass::Transport),
        (
            Fault::Delay(Duration::from_millis(1500)),
            ErrorClass::Transport,
        ),
        (Fault::Dropped, ErrorClass::Transport),
    ];
    for (fault, class) in cases {
        let label = format!("{fault:?}");
        server.push_fault("GET", "/items", fault);
        assert_eq!(class_of(&c, Request::get("/items")), Some(class), "{label}");
        let ok = c.send(Request::get("/items")).map(|r| r.status).ok();
        assert_eq!(ok, Some(200), "recovery after {label}");
    }
    server.push_fault("GET", "/items", Fault::BadJson);
    let parsed = c.send(Request::get("/items")).and_then(|r| r.json());
    assert_eq!(parsed.err().map(|e| e.class), Some(ErrorClass::Payload));
}

#[test]
fn requests_carry_auth_user_agent_and_encoded_queries() {
    let server = fake();
    let c = client(
        &server.url,
        Duration::from_secs(5),
        Arc::new(Recorder::default()),
    );
    let r = c.send(Request::get("/items").query("q", "repo:o/r label:\"to do\""));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    let seen = server.requests("GET", "/items");
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer test-token-abc")
    );
    let ua = seen[0].header("user-agent").unwrap_or("");
    assert_eq!(ua, format!("sortie/{}", sortie::build_info::VERSION));
    assert_eq!(
        seen[0].param("q").as_deref(),
        Some("repo:o/r label:\"to do\"")
    );
}

#[test]
fn a_write_is_sent_once_even_when_it_fails() {
    let server = fake();
    let mut opts = ClientOptions::new(&server.url);
    opts.timeout = Duration::from_secs(5);
    let c = HttpClient::new(opts, Arc::new(SystemClock), Arc::new(Recorder::default()));
    server.push_fault("POST", "/items", Fault::server_error(503));
    let e = c.send(Request::new(Method::Post, "/items").json(&serde_json::json!({"body": "x"})));
    assert_eq!(e.err().map(|e| e.class), Some(ErrorClass::Transport));
    assert_eq!(server.requests("POST", "/items").len(), 1);
    assert_eq!(server.requests("POST", "/items")[0].json()["body"], "x");
}

#[test]
fn a_429_with_retry_after_2_is_not_retried_before_2_seconds() {
    let server = fake();
    let mut opts = ClientOptions::new(&server.url);
    opts.timeout = Duration::from_secs(5);
    let c = HttpClient::new(opts, Arc::new(SystemClock), Arc::new(ThreadSleeper));
    server.push_fault("GET", "/items", Fault::too_many_requests(2));
    assert_eq!(
        c.send(Request::get("/items")).map(|r| r.status).ok(),
        Some(200)
    );
    let seen = server.requests("GET", "/items");
    assert_eq!(seen.len(), 2);
    assert!(seen[1].at.duration_since(seen[0].at) >= Duration::from_secs(2));
    let rate = c.rate_limit().unwrap_or_default();
    assert_eq!(rate.last_limited_status, Some(429));
}
