//! One agent per adapter: sends [`Request`]s, accepts 2xx and 304, classifies everything
//! else, tracks rate limits, and retries failed reads by [`RetryPolicy`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::classify::{classify, is_rate_limited, rate_limit_name};
use super::error::{ErrorClass, HttpError, snippet};
use super::rate_limit::{RateLimitStatus, retry_after};
use super::request::{Request, Response};
use super::retry::{RetryPolicy, jitter_unit};
use crate::clock::Clock;

/// Largest answer read outside a read budget (a page of issues is far smaller).
pub const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;
/// Most of a refusal's body read: only its first bytes reach the error.
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;
/// How many times its size an answer's parsed JSON tree may take.
const TREE_FACTOR: u64 = 4;

/// Waits between retries; tests inject one that records instead of sleeping.
pub trait Sleeper: Send + Sync {
    fn sleep(&self, d: Duration);
}

/// The real sleeper.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// How a client is set up by its adapter.
#[derive(Clone)]
pub struct ClientOptions {
    /// Joined in front of request paths; trailing `/` ignored.
    pub base_url: String,
    /// The auth header (name, value); the value is never logged.
    pub auth: Option<(String, String)>,
    /// Headers sent on every request (`Accept`, API version, …).
    pub headers: Vec<(String, String)>,
    /// Whole-call timeout: connect, send and read.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Bytes one answer may take when no read budget is open
    /// ([`super::budget::with_read_budget`]); default [`MAX_ANSWER_BYTES`].
    pub max_answer_bytes: u64,
}

impl ClientOptions {
    /// 30 s timeout, default retries, no auth.
    pub fn new(base_url: &str) -> Self {
        ClientOptions {
            base_url: base_url.trim_end_matches('/').to_string(),
            auth: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            max_answer_bytes: MAX_ANSWER_BYTES,
        }
    }

    /// [`ClientOptions::new`] with an adapter block's timeout and first backoff.
    pub fn tuned(base_url: &str, tuning: &super::tuning::HttpTuning) -> Self {
        let mut opts = ClientOptions::new(base_url);
        opts.timeout = tuning.timeout;
        opts.retry.base = tuning.retry_base;
        opts
    }
}

/// The shared HTTP client.
pub struct HttpClient {
    agent: ureq::Agent,
    opts: ClientOptions,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    rate: Mutex<RateLimitStatus>,
}

impl HttpClient {
    pub fn new(opts: ClientOptions, clock: Arc<dyn Clock>, sleeper: Arc<dyn Sleeper>) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(opts.timeout))
            .max_redirects(0)
            .user_agent(format!("sortie/{}", crate::build_info::VERSION))
            .build();
        HttpClient {
            agent: ureq::Agent::new_with_config(config),
            opts,
            clock,
            sleeper,
            rate: Mutex::new(RateLimitStatus::default()),
        }
    }

    /// The latest rate-limit figures; `None` before any response carried them.
    pub fn rate_limit(&self) -> Option<RateLimitStatus> {
        let s = self.rate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (s != RateLimitStatus::default()).then_some(s)
    }

    /// Sends `req`; a failed read worth retrying is sent again per the retry policy.
    pub fn send(&self, req: Request) -> Result<Response, HttpError> {
        let mut attempt = 0;
        loop {
            let err = match self.send_once(&req) {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            let retryable = matches!(err.class, ErrorClass::Transport | ErrorClass::Api);
            if !(req.method.auto_retry() || req.retry_safe) || !retryable {
                return Err(err);
            }
            let Some(wait) = self
                .opts
                .retry
                .delay(attempt, err.retry_after, jitter_unit())
            else {
                return Err(err);
            };
            log::info!(
                method:% = err.method,
                path:% = err.path,
                attempt:% = attempt + 1,
                wait_ms:% = wait.as_millis(),
                error:% = err.detail;
                "retrying a failed read"
            );
            self.sleeper.sleep(wait);
            attempt += 1;
        }
    }

    fn send_once(&self, req: &Request) -> Result<Response, HttpError> {
        let method = req.method.as_str();
        let url = self.url_of(req);
        let path = path_of(&url);
        let fail = |class, detail: String| HttpError::new(class, method, &path, detail);
        let builder = self.build(req, &url);
        let result = match &req.body {
            Some(body) => builder.body(body.clone()).map(|r| self.agent.run(r)),
            None => builder.body(()).map(|r| self.agent.run(r)),
        };
        let response = match result {
            Err(e) => return Err(fail(ErrorClass::Payload, format!("invalid request: {e}"))),
            Ok(Err(e)) => {
                return Err(fail(
                    ErrorClass::Transport,
                    transport_detail(&e, self.opts.timeout),
                ));
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let redirect = req.accept_redirect && (300..400).contains(&status);
        let wanted = (200..300).contains(&status) || status == 304 || redirect;
        let cap = AnswerCap::now(self.opts.max_answer_bytes);
        let body = read_body(response.into_body(), wanted, &cap)
            .map_err(|(class, detail)| fail(class, format!("a {status} answer: {detail}")))?;
        crate::http_client::budget::charge(body.len() as u64);
        let mut resp = self.accept(status, redirect, headers, body, method, path)?;
        resp.tree_limit =
            usize::try_from(cap.per_answer.saturating_mul(TREE_FACTOR)).unwrap_or(usize::MAX);
        Ok(resp)
    }

    fn accept(
        &self,
        status: u16,
        redirect: bool,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        method: &'static str,
        path: String,
    ) -> Result<Response, HttpError> {
        let now = self.clock.now_ms();
        {
            let mut rate = self.rate.lock().unwrap_or_else(|p| p.into_inner());
            rate.observe(&headers);
            if is_rate_limited(status, &headers, &body) {
                rate.limited(status, now);
            }
        }
        if (200..300).contains(&status) || status == 304 || redirect {
            return Ok(Response {
                status,
                headers,
                body,
                method,
                path,
                tree_limit: 0,
            });
        }
        let class = classify(status, &headers, &body);
        let wait = retry_after(&headers, now);
        let mut detail = format!("status {status}");
        let limit = rate_limit_name(status, &headers, &body);
        match (limit, wait) {
            (Some(l), Some(w)) => {
                detail.push_str(&format!(" ({l}, retry after {} s)", w.as_secs()))
            }
            (Some(l), None) => detail.push_str(&format!(" ({l})")),
            (None, Some(w)) => detail.push_str(&format!(" (retry after {} s)", w.as_secs())),
            (None, None) => {}
        }
        let snip = snippet(&body);
        if !snip.is_empty() {
            detail.push_str(": ");
            detail.push_str(&snip);
        }
        let mut err = HttpError::new(class, method, &path, detail);
        err.status = Some(status);
        err.retry_after = wait;
        err.headers = headers;
        Err(err)
    }

    fn build(&self, req: &Request, url: &str) -> ureq::http::request::Builder {
        let mut b = ureq::http::Request::builder()
            .method(req.method.as_str())
            .uri(url);
        for (k, v) in &self.opts.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        // The credential goes only to the configured endpoint: an absolute URL elsewhere (a
        // redirect to a download host) is sent without it.
        if let Some((k, v)) = &self.opts.auth
            && (!is_absolute(&req.url) || same_origin(url, &self.opts.base_url))
        {
            b = b.header(k.as_str(), v.as_str());
        }
        for (k, v) in &req.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        if req.body.is_some() {
            b = b.header("content-type", "application/json");
        }
        b
    }

    /// The full URL: absolute URLs verbatim, paths joined to the base; query appended encoded.
    /// The base URL requests' paths are joined to.
    pub fn base_url(&self) -> &str {
        &self.opts.base_url
    }

    fn url_of(&self, req: &Request) -> String {
        let mut url = if is_absolute(&req.url) {
            req.url.clone()
        } else {
            format!("{}/{}", self.opts.base_url, req.url.trim_start_matches('/'))
        };
        for (i, (k, v)) in req.query.iter().enumerate() {
            let sep = if i == 0 && !url.contains('?') {
                '?'
            } else {
                '&'
            };
            url.push(sep);
            url.push_str(&encode(k));
            url.push('=');
            url.push_str(&encode(v));
        }
        url
    }
}

/// What the next answer may take: the open read budget's room, or the client's own cap.
struct AnswerCap {
    /// Bytes this answer may take.
    limit: u64,
    /// Bytes any one answer may take (the budget's per-answer cap, or the client's).
    per_answer: u64,
    room: Option<crate::http_client::budget::Room>,
}

impl AnswerCap {
    fn now(client_cap: u64) -> AnswerCap {
        match crate::http_client::budget::room() {
            Some(room) => AnswerCap {
                limit: room.limit,
                per_answer: room.budget.per_answer,
                room: Some(room),
            },
            None => AnswerCap {
                limit: client_cap,
                per_answer: client_cap,
                room: None,
            },
        }
    }

    /// Why an answer of `size` (`None`: more than the limit, length not announced) cannot be
    /// read, naming the cap it met.
    fn refusal(&self, size: Option<u64>) -> String {
        use crate::http_client::budget::size_text;
        let size = match size {
            Some(n) => size_text(n),
            None => format!("more than {}", size_text(self.limit)),
        };
        match &self.room {
            Some(r) if self.limit < r.budget.per_answer => format!(
                "the answers of this read would pass their cap of {} ({}): {} read before an answer of {size}",
                size_text(r.budget.total),
                r.budget.name,
                size_text(r.used)
            ),
            Some(r) => format!(
                "an answer of {size} is over the {} one answer may take (an eighth of {}, {})",
                size_text(self.limit),
                r.budget.name,
                size_text(r.budget.total)
            ),
            None => format!(
                "an answer of {size} is over the {} one answer may take",
                size_text(self.limit)
            ),
        }
    }
}

/// Reads a body within its cap: an announced length over the cap is refused before any byte
/// is read, and reading stops one byte past the cap. A refusal's body (`wanted` false) is
/// read only up to its first bytes, cut silently.
fn read_body(
    body: ureq::Body,
    wanted: bool,
    cap: &AnswerCap,
) -> Result<Vec<u8>, (ErrorClass, String)> {
    use std::io::Read;
    let limit = if wanted {
        cap.limit
    } else {
        MAX_ERROR_BODY_BYTES
    };
    let announced = body.content_length();
    if wanted && announced.is_some_and(|n| n > limit) {
        return Err((ErrorClass::TooLarge, cap.refusal(announced)));
    }
    let reserve = announced.unwrap_or(0).min(limit).min(MAX_ANSWER_BYTES);
    let mut out = Vec::with_capacity(usize::try_from(reserve).unwrap_or(0));
    let reader = body.into_with_config().reader();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| {
            (
                ErrorClass::Transport,
                format!("reading the body failed: {e}"),
            )
        })?;
    if out.len() as u64 > limit {
        if !wanted {
            out.truncate(usize::try_from(limit).unwrap_or(out.len()));
            return Ok(out);
        }
        return Err((ErrorClass::TooLarge, cap.refusal(None)));
    }
    Ok(out)
}

fn transport_detail(e: &ureq::Error, timeout: Duration) -> String {
    match e {
        ureq::Error::Timeout(_) => format!("timed out after {} ms", timeout.as_millis()),
        other => other.to_string(),
    }
}

fn is_absolute(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// `scheme://host[:port]` of an absolute URL, lowercased; `None` for anything else.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Userinfo never names the host.
    let host = authority.rsplit('@').next().unwrap_or(authority);
    (!host.is_empty()).then(|| format!("{scheme}://{host}").to_ascii_lowercase())
}

/// Whether two absolute URLs share scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin_of(a), origin_of(b)), (Some(x), Some(y)) if x == y)
}

/// The path of a URL: no scheme, host or query.
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("/");
    path.split('?').next().unwrap_or("/").to_string()
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert!(same_origin(
            "https://api.github.com/repos/o/r?page=2",
            "https://API.github.com"
        ));
        assert!(!same_origin(
            "https://api.github.com/x",
            "http://api.github.com"
        ));
        assert!(!same_origin("http://127.0.0.1:1/x", "http://127.0.0.1:2"));
        assert!(!same_origin(
            "https://logs.example/x",
            "https://api.github.com"
        ));
        assert!(!same_origin(
            "https://api.github.com@evil.example/x",
            "https://api.github.com"
        ));
        assert!(!same_origin("/relative", "https://api.github.com"));
    }

    #[test]
    fn paths_and_encoding() {
        assert_eq!(path_of("https://h:1/a/b?x=1"), "/a/b");
        assert_eq!(path_of("http://h"), "/");
        assert_eq!(encode("repo:o/r is:open"), "repo%3Ao%2Fr%20is%3Aopen");
        assert_eq!(encode("héllo"), "h%C3%A9llo");
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::http_client::Method;

    /// Records waits instead of sleeping.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Duration>>);

    impl Sleeper for Recorder {
        fn sleep(&self, d: Duration) {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(d);
        }
    }

    /// One scripted answer: status, headers, body.
    type Scripted = (u16, Vec<(&'static str, &'static str)>, &'static str);

    /// A server answering each request with the next scripted (status, headers, body) and
    /// counting requests; the last answer repeats.
    fn serve(script: Vec<Scripted>) -> (String, Arc<Mutex<usize>>) {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let url = format!("http://{}", server.server_addr());
        let count = Arc::new(Mutex::new(0usize));
        let seen = Arc::clone(&count);
        std::thread::spawn(move || {
            for req in server.incoming_requests() {
                let n = {
                    let mut c = seen.lock().unwrap_or_else(|p| p.into_inner());
                    *c += 1;
                    *c
                };
                let (status, headers, body) = &script[(n - 1).min(script.len() - 1)];
                let mut resp = tiny_http::Response::from_string(*body).with_status_code(*status);
                for (k, v) in headers {
                    if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                        resp.add_header(h);
                    }
                }
                let _ = req.respond(resp);
            }
        });
        (url, count)
    }

    fn client(url: &str) -> (HttpClient, Arc<Recorder>) {
        let rec = Arc::new(Recorder::default());
        let c = HttpClient::new(
            ClientOptions::new(url),
            Arc::new(ManualClock::new(0)),
            rec.clone(),
        );
        (c, rec)
    }

    #[test]
    fn a_429_read_waits_at_least_retry_after_then_succeeds() {
        let (url, count) = serve(vec![
            (429, vec![("Retry-After", "2")], "slow down"),
            (200, vec![("X-RateLimit-Remaining", "41")], "[]"),
        ]);
        let (c, rec) = client(&url);
        let r = c.send(Request::get("/things"));
        assert_eq!(r.map(|r| r.status).ok(), Some(200));
        let waits = rec.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(waits.len(), 1);
        assert!(waits[0] >= Duration::from_secs(2));
        assert_eq!(*count.lock().unwrap_or_else(|p| p.into_inner()), 2);
        let rate = c.rate_limit().unwrap_or_default();
        assert_eq!(
            (rate.remaining, rate.last_limited_status),
            (Some(41), Some(429))
        );
    }

    #[test]
    fn reads_are_retried_twice_at_most_and_writes_never() {
        let (url, count) = serve(vec![(502, vec![], "bad gateway")]);
        let (c, rec) = client(&url);
        let e = c.send(Request::get("/x")).err();
        assert_eq!(e.as_ref().map(|e| e.class), Some(ErrorClass::Transport));
        assert_eq!(*count.lock().unwrap_or_else(|p| p.into_inner()), 3);
        assert_eq!(rec.0.lock().unwrap_or_else(|p| p.into_inner()).len(), 2);
        let e = c
            .send(Request::new(Method::Post, "/x").json(&serde_json::json!({})))
            .err();
        assert_eq!(
            e.map(|e| e.to_string()),
            Some("POST /x: status 502: bad gateway".to_string())
        );
        assert_eq!(*count.lock().unwrap_or_else(|p| p.into_inner()), 4);
    }

    #[test]
    fn auth_and_payload_failures_are_not_retried() {
        let (url, count) = serve(vec![(401, vec![], "{\"message\":\"Bad credentials\"}")]);
        let (c, _) = client(&url);
        let e = c.send(Request::get("/x")).err();
        assert_eq!(e.map(|e| e.class), Some(ErrorClass::Auth));
        assert_eq!(*count.lock().unwrap_or_else(|p| p.into_inner()), 1);
    }

    #[test]
    fn a_refused_connection_is_a_transport_error() {
        let (c, _) = client("http://127.0.0.1:9");
        let e = c.send(Request::new(Method::Delete, "/x")).err();
        assert_eq!(e.map(|e| e.class), Some(ErrorClass::Transport));
    }
}
