//! A fake HTTP API for tracker tests: a tiny_http server on 127.0.0.1:0 in its own thread,
//! test-owned state behind a mutex, one route handler closure, a per-route fault queue
//! consumed before the handler, and a journal of every request for exactly-once, header and
//! query assertions. Generic: the per-vendor fakes (`fake_github`, …) are built on it.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::vendor_check::{self, Vendor};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query string (no `?`), `""` when none.
    pub query: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When it arrived.
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Decoded query parameters, in order.
    pub fn params(&self) -> Vec<(String, String)> {
        self.query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect()
    }

    pub fn param(&self, name: &str) -> Option<String> {
        self.params()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// A normal answer of a route handler.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(status: u16, body: &serde_json::Value) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// A misbehaviour served instead of the handler's answer, once per queued entry.
#[derive(Debug, Clone)]
pub enum Fault {
    /// A canned status answer (429, 403, 5xx, 401, 422, …).
    Status(Reply),
    /// 200 with a body that is not JSON.
    BadJson,
    /// 200 announcing more bytes than it sends, then the connection closes.
    Truncated,
    /// The handler's answer, sent only after this long (past the client timeout).
    Delay(Duration),
    /// The connection is closed without an answer.
    Dropped,
}

impl Fault {
    pub fn too_many_requests(retry_after_s: u64) -> Fault {
        Fault::Status(
            Reply::json(429, &serde_json::json!({"message": "Too Many Requests"}))
                .header("Retry-After", retry_after_s.to_string()),
        )
    }

    /// A primary rate-limit 403: the budget is spent until an hour from now.
    pub fn rate_limited() -> Fault {
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() + 3600)
            .unwrap_or(0);
        Fault::Status(
            Reply::json(
                403,
                &serde_json::json!({"message": "API rate limit exceeded"}),
            )
            .header("X-RateLimit-Remaining", "0")
            .header("X-RateLimit-Reset", reset.to_string()),
        )
    }

    /// A secondary rate-limit 403: said in the body, with `Retry-After`.
    pub fn secondary_rate_limited(retry_after_s: u64) -> Fault {
        Fault::Status(
            Reply::json(
                403,
                &serde_json::json!({"message": "You have exceeded a secondary rate limit."}),
            )
            .header("Retry-After", retry_after_s.to_string()),
        )
    }

    pub fn server_error(status: u16) -> Fault {
        Fault::Status(Reply::json(
            status,
            &serde_json::json!({"message": "Server Error"}),
        ))
    }

    pub fn unauthorized() -> Fault {
        Fault::Status(Reply::json(
            401,
            &serde_json::json!({"message": "Bad credentials"}),
        ))
    }
}

type Handler<S> = dyn Fn(&mut S, &Recorded) -> Reply + Send + Sync;

struct Shared<S> {
    /// While set, every request is held unanswered (a tracker that accepts and never
    /// answers); cleared, the held requests are answered as usual.
    hang: std::sync::atomic::AtomicBool,
    state: Mutex<S>,
    faults: Mutex<HashMap<(String, String), VecDeque<Fault>>>,
    journal: Mutex<Vec<Recorded>>,
    handler: Box<Handler<S>>,
    conformance: Mutex<Conformance>,
}

/// The check of every exchange against a vendor's API description (`vendor_check`).
#[derive(Default)]
struct Conformance {
    /// The vendor and the checker's address, once enabled.
    vendor: Option<(Vendor, String)>,
    /// Exchanges whose check has not finished.
    in_flight: usize,
    /// One message per distinct violation (the first exchange that showed it), by key.
    violations: Vec<(String, String)>,
}

/// A running fake; stopped on drop.
pub struct FakeServer<S: Send + 'static> {
    pub url: String,
    shared: Arc<Shared<S>>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S: Send + 'static> FakeServer<S> {
    /// Starts serving: every request is journaled, then answered by the next queued fault of
    /// its route or by `handler` with the state locked.
    pub fn start(
        state: S,
        handler: impl Fn(&mut S, &Recorded) -> Reply + Send + Sync + 'static,
    ) -> FakeServer<S> {
        let server = tiny_http::Server::http("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("fake server bind: {e}"));
        let server = Arc::new(server);
        let url = format!("http://{}", server.server_addr());
        let shared = Arc::new(Shared {
            hang: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(state),
            faults: Mutex::new(HashMap::new()),
            journal: Mutex::new(Vec::new()),
            handler: Box::new(handler),
            conformance: Mutex::new(Conformance::default()),
        });
        let (srv, sh) = (Arc::clone(&server), Arc::clone(&shared));
        let thread = std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                let sh = Arc::clone(&sh);
                // One thread per request, so a delayed answer does not hold up the others.
                std::thread::spawn(move || serve(&sh, req));
            }
        });
        FakeServer {
            url,
            shared,
            server,
            thread: Some(thread),
        }
    }

    /// Runs `f` on the state (to read it or edit it between polls).
    pub fn with_state<T>(&self, f: impl FnOnce(&mut S) -> T) -> T {
        f(&mut lock(&self.shared.state))
    }

    /// Holds every request from now on unanswered (`true`), or answers them again (`false`).
    pub fn hang(&self, on: bool) {
        self.shared
            .hang
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Queues a fault for the next request of `method path` (path exact, no query).
    pub fn push_fault(&self, method: &str, path: &str, fault: Fault) {
        lock(&self.shared.faults)
            .entry((method.to_string(), path.to_string()))
            .or_default()
            .push_back(fault);
    }

    /// Faults still queued for `method path`.
    pub fn pending_faults(&self, method: &str, path: &str) -> usize {
        lock(&self.shared.faults)
            .get(&(method.to_string(), path.to_string()))
            .map_or(0, VecDeque::len)
    }

    /// For each `(fault, kind)`: with the fault queued enough times to outlast a read's
    /// retries, `call` (a read of `GET path`) fails with that kind; once the queue drains,
    /// it succeeds again.
    pub fn assert_read_faults<K: PartialEq + std::fmt::Debug>(
        &self,
        path: &str,
        cases: Vec<(Fault, K)>,
        call: impl Fn() -> Result<(), K>,
    ) {
        for (fault, want) in cases {
            for _ in 0..4 {
                self.push_fault("GET", path, fault.clone());
            }
            let what = format!("{want:?}");
            assert_eq!(call().err(), Some(want));
            while self.pending_faults("GET", path) > 0 {
                let _ = call();
            }
            assert_eq!(call(), Ok(()), "recovers after {what}");
        }
    }

    /// Every request so far, in arrival order.
    pub fn journal(&self) -> Vec<Recorded> {
        lock(&self.shared.journal).clone()
    }

    /// Requests of `method path` so far.
    pub fn requests(&self, method: &str, path: &str) -> Vec<Recorded> {
        self.journal()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }

    /// Checks every exchange from now on against `vendor`'s API description; the violations
    /// no allowlist entry excuses fail the test when the server is dropped (see
    /// [`FakeServer::vendor_violations`]). Without the checker installed this does nothing
    /// (outside CI).
    pub fn check_against(&self, vendor: Vendor) {
        if let Some(addr) = vendor_check::checker() {
            lock(&self.shared.conformance).vendor = Some((vendor, addr));
        }
    }

    /// Whether exchanges are being checked against a vendor description.
    pub fn is_checked(&self) -> bool {
        lock(&self.shared.conformance).vendor.is_some()
    }

    /// The violations found so far, once every check under way has finished; they are taken,
    /// so they no longer fail the test on drop.
    pub fn vendor_violations(&self) -> Vec<String> {
        let deadline = Instant::now() + vendor_check::CHECK;
        loop {
            let mut c = lock(&self.shared.conformance);
            if c.in_flight == 0 || Instant::now() >= deadline {
                return std::mem::take(&mut c.violations)
                    .into_iter()
                    .map(|(_, m)| m)
                    .collect();
            }
            drop(c);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Forgets the journal (e.g. after setup).
    pub fn clear_journal(&self) {
        lock(&self.shared.journal).clear();
    }
}

impl<S: Send + 'static> Drop for FakeServer<S> {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if std::thread::panicking() || !self.is_checked() {
            return;
        }
        let found = self.vendor_violations();
        assert!(
            found.is_empty(),
            "{} exchange(s) with the fake violate the vendor's API description \
             (tools/vendor-specs; excuse one only with an allowlist entry citing the vendor's docs):\n{}",
            found.len(),
            found.join("\n")
        );
    }
}

fn serve<S>(shared: &Shared<S>, mut req: tiny_http::Request) {
    let mut body = String::new();
    let _ = req.as_reader().read_to_string(&mut body);
    let (path, query) = match req.url().split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (req.url().to_string(), String::new()),
    };
    let recorded = Recorded {
        method: req.method().as_str().to_string(),
        path,
        query,
        headers: req
            .headers()
            .iter()
            .map(|h| {
                (
                    h.field.as_str().as_str().to_ascii_lowercase(),
                    h.value.to_string(),
                )
            })
            .collect(),
        body,
        at: Instant::now(),
    };
    lock(&shared.journal).push(recorded.clone());
    while shared.hang.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let checked = {
        let mut c = lock(&shared.conformance);
        c.in_flight += usize::from(c.vendor.is_some());
        c.vendor.clone()
    };
    let fault = lock(&shared.faults)
        .get_mut(&(recorded.method.clone(), recorded.path.clone()))
        .and_then(VecDeque::pop_front);
    let answered = answer(shared, req, &recorded, fault);
    if let Some((vendor, addr)) = checked {
        let verdict = vendor_check::check(&addr, vendor, &recorded, answered.as_ref());
        let found = vendor_check::unexcused(vendor, &recorded, &verdict);
        let mut c = lock(&shared.conformance);
        for (key, message) in found {
            if !c.violations.iter().any(|(k, _)| *k == key) {
                c.violations.push((key, message));
            }
        }
        c.in_flight -= 1;
    }
}

/// Serves the fault or the handler's answer; the handler's answer is returned for the check.
fn answer<S>(
    shared: &Shared<S>,
    req: tiny_http::Request,
    recorded: &Recorded,
    fault: Option<Fault>,
) -> Option<Reply> {
    let reply = match fault {
        Some(Fault::Status(reply)) => {
            respond(req, reply);
            return None;
        }
        Some(Fault::BadJson) => {
            respond(
                req,
                Reply::json(200, &serde_json::json!(null)).with_body(b"{\"not json"),
            );
            return None;
        }
        Some(Fault::Truncated) => {
            let mut w = req.into_writer();
            let _ = w.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\nConnection: close\r\n\r\n[{\"number\": 1, \"ti",
            );
            let _ = w.flush();
            return None;
        }
        Some(Fault::Dropped) => {
            drop(req.into_writer());
            return None;
        }
        Some(Fault::Delay(d)) => {
            std::thread::sleep(d);
            (shared.handler)(&mut lock(&shared.state), recorded)
        }
        None => (shared.handler)(&mut lock(&shared.state), recorded),
    };
    respond(req, reply.clone());
    Some(reply)
}

impl Reply {
    fn with_body(mut self, body: &[u8]) -> Reply {
        self.body = body.to_vec();
        self
    }
}

fn respond(req: tiny_http::Request, reply: Reply) {
    let mut resp = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    for (k, v) in &reply.headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}

/// Percent-decoding of a query component (`+` is a space).
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
