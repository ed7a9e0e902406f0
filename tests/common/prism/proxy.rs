//! A one-request-per-connection HTTP/1.1 relay between sortie and Prism.
//!
//! Why it exists: GitHub documents `Accept: application/vnd.github+json`, but its OpenAPI
//! description declares `application/json` responses, and Prism's content negotiation answers
//! 406 for a vendor media type the document does not list. The relay rewrites only that header
//! (the description declares no `Accept` parameter, so validation loses nothing) and passes
//! everything else through byte for byte. It can also answer from the hand-written fake while
//! Prism still sees (and validates) every request, so a daemon run reaches the write paths that
//! Prism's synthetic responses would never lead to.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest request head the relay accepts.
const MAX_HEAD: usize = 64 * 1024;
/// Socket read/write timeout on both sides.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Who answers sortie's requests.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Prism's mock response (its synthetic `Link` headers are dropped: they point at
    /// api.github.com).
    Prism,
    /// The server at this base URL (`http://127.0.0.1:<port>`); Prism gets a copy of each
    /// request and its answer is discarded. Absolute `Link` URLs are pointed back at the relay.
    Fake(String),
}

/// A running relay; problems it met (which the test reports as failures) are kept in `errors`.
pub struct Relay {
    pub url: String,
    pub errors: Arc<Mutex<Vec<String>>>,
}

/// Starts the relay on 127.0.0.1:0 in front of Prism at `prism` (`host:port`).
pub fn start(prism: String, answer: Answer) -> Relay {
    let listener =
        TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind the relay: {e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("relay address: {e}"))
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let errors = Arc::new(Mutex::new(Vec::new()));
    let ctx = Arc::new(Ctx {
        prism,
        answer,
        url: url.clone(),
        errors: errors.clone(),
    });
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                if let Err(e) = serve(&ctx, conn) {
                    ctx.note(e);
                }
            });
        }
    });
    Relay { url, errors }
}

struct Ctx {
    prism: String,
    answer: Answer,
    url: String,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Ctx {
    fn note(&self, e: String) {
        if let Ok(mut errs) = self.errors.lock() {
            errs.push(e);
        }
    }
}

/// One request in, one response out, then the connection closes (the response says so).
fn serve(ctx: &Ctx, mut client: TcpStream) -> Result<(), String> {
    client.set_read_timeout(Some(IO_TIMEOUT)).ok();
    let Some((head, body)) = read_request(&mut client)? else {
        return Ok(());
    };
    let upstream_head = for_upstream(&head);
    let reply = match &ctx.answer {
        Answer::Prism => strip_header(&exchange(&ctx.prism, &upstream_head, &body)?, "link"),
        Answer::Fake(base) => {
            exchange(&ctx.prism, &upstream_head, &body)?;
            let addr = base.trim_start_matches("http://");
            let reply = exchange(addr, &upstream_head, &body)?;
            replace_in_header(&reply, "link", base, &ctx.url)
        }
    };
    let reply = set_connection_close(&reply);
    client
        .write_all(&reply)
        .map_err(|e| format!("relay: write to sortie: {e}"))
}

/// A request's head lines (without their CRLF) and body.
type RawRequest = (Vec<String>, Vec<u8>);

/// One request; `None` when the client closed without sending one.
fn read_request(client: &mut TcpStream) -> Result<Option<RawRequest>, String> {
    let mut reader = BufReader::new(client);
    let mut head = Vec::new();
    let mut size = 0;
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| format!("relay: read request head: {e}"))?;
        if n == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err("relay: request head cut short".into())
            };
        }
        size += n;
        if size > MAX_HEAD {
            return Err("relay: request head too long".into());
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    if header(&head, "transfer-encoding").is_some() {
        return Err(format!(
            "relay: chunked request body not supported: {}",
            head[0]
        ));
    }
    let len: usize = match header(&head, "content-length") {
        Some(v) => v
            .parse()
            .map_err(|_| format!("relay: bad Content-Length {v:?}"))?,
        None => 0,
    };
    let mut body = vec![0; len];
    reader
        .read_exact(&mut body)
        .map_err(|e| format!("relay: read request body: {e}"))?;
    Ok(Some((head, body)))
}

fn header<'a>(head: &'a [String], name: &str) -> Option<&'a str> {
    head.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The head as sent upstream: GitHub's vendor JSON type as plain JSON, one request per
/// connection.
fn for_upstream(head: &[String]) -> Vec<String> {
    let mut out: Vec<String> = head
        .iter()
        .enumerate()
        .filter(|(i, l)| *i == 0 || !is_header(l, "connection"))
        .map(|(_, l)| {
            if is_header(l, "accept") {
                l.replace("application/vnd.github+json", "application/json")
            } else {
                l.clone()
            }
        })
        .collect();
    out.push("Connection: close".into());
    out
}

fn is_header(line: &str, name: &str) -> bool {
    line.split_once(':')
        .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(name))
}

/// Sends one request to `addr` and reads the whole response (the upstream closes after it).
fn exchange(addr: &str, head: &[String], body: &[u8]) -> Result<Vec<u8>, String> {
    let mut up = TcpStream::connect(addr).map_err(|e| format!("relay: connect {addr}: {e}"))?;
    up.set_read_timeout(Some(IO_TIMEOUT)).ok();
    up.set_write_timeout(Some(IO_TIMEOUT)).ok();
    let mut req = head.join("\r\n").into_bytes();
    req.extend_from_slice(b"\r\n\r\n");
    req.extend_from_slice(body);
    up.write_all(&req)
        .map_err(|e| format!("relay: send to {addr}: {e}"))?;
    let mut reply = Vec::new();
    up.read_to_end(&mut reply)
        .map_err(|e| format!("relay: read from {addr}: {e}"))?;
    if reply.is_empty() {
        return Err(format!(
            "relay: {addr} closed without answering {}",
            head[0]
        ));
    }
    Ok(reply)
}

/// Splits a response into its head lines and the rest (body bytes).
fn split_reply(reply: &[u8]) -> (Vec<String>, &[u8]) {
    let end = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(reply.len());
    let head = String::from_utf8_lossy(&reply[..end])
        .split("\r\n")
        .map(String::from)
        .collect();
    let body = reply.get(end + 4..).unwrap_or_default();
    (head, body)
}

fn join_reply(head: &[String], body: &[u8]) -> Vec<u8> {
    let mut out = head.join("\r\n").into_bytes();
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out
}

fn strip_header(reply: &[u8], name: &str) -> Vec<u8> {
    let (head, body) = split_reply(reply);
    let head: Vec<String> = head.into_iter().filter(|l| !is_header(l, name)).collect();
    join_reply(&head, body)
}

fn replace_in_header(reply: &[u8], name: &str, from: &str, to: &str) -> Vec<u8> {
    let (head, body) = split_reply(reply);
    let head: Vec<String> = head
        .into_iter()
        .map(|l| {
            if is_header(&l, name) {
                l.replace(from, to)
            } else {
                l
            }
        })
        .collect();
    join_reply(&head, body)
}

fn set_connection_close(reply: &[u8]) -> Vec<u8> {
    let (head, body) = split_reply(reply);
    let mut head: Vec<String> = head
        .into_iter()
        .filter(|l| !is_header(l, "connection") && !is_header(l, "keep-alive"))
        .collect();
    head.push("Connection: close".into());
    join_reply(&head, body)
}
