//! The host side of `network: allowlist`: a filtering HTTP proxy on a Unix socket that is
//! bound into one sandboxed process's mount namespace, its only way out. `CONNECT host:port`
//! (HTTPS and any other TLS) and absolute-URI requests (`GET http://host/…`, plain HTTP) reach
//! the host when an `allow_hosts` entry matches it; anything else is answered `403` and
//! logged and counted. The name the client asks for is the name checked and then resolved here,
//! so one connection reaches one allowed host whatever it sends afterwards.
//!
//! Threads, not the orchestrator: one accept thread per proxy and one per connection (plus
//! one per copy direction), at most [`MAX_CONNECTIONS`] connections at once; the request head
//! is capped at [`MAX_HEAD`] bytes, read within [`HEAD_TIMEOUT`]; an upstream connect has
//! [`CONNECT_TIMEOUT`] per address and a tunnel with no traffic for [`IDLE_TIMEOUT`] is
//! closed. The proxy lives as long as the sandbox's forwarder holds its `HOLD` connection
//! (the forwarder dies with the sandbox); a forwarder that never arrives ends it after
//! [`START_DEADLINE`]. The socket's private directory is removed at the end.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::allow::{HostPattern, allowed};
use super::error::{RequestError, SandboxError};

/// Connections served at once per proxy (the forwarder's `HOLD` included).
pub const MAX_CONNECTIONS: usize = 64;
/// The longest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 16 << 10;
/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one upstream address may take to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A tunnel with no bytes in either direction for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the proxy waits for its forwarder's `HOLD` before it ends.
pub const START_DEADLINE: Duration = Duration::from_secs(120);
/// The request line a forwarder sends to hold the proxy open for its life.
pub const HOLD: &str = "SORTIE-HOLD";
/// How often the accept loop looks at its end condition.
const POLL: Duration = Duration::from_millis(50);
/// How often a copy checks the tunnel's idle deadline.
const IDLE_CHECK: Duration = Duration::from_secs(5);
/// Addresses of one host tried in turn.
const MAX_ADDRS: usize = 8;

/// Who a proxy's log lines and counts are about.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    pub issue_id: String,
    pub issue_identifier: String,
    pub session_id: String,
    pub attempt: Option<u32>,
}

struct Shared {
    allow: Vec<HostPattern>,
    labels: Labels,
    denied: Arc<AtomicU64>,
    active: AtomicUsize,
    holds: AtomicUsize,
    held: AtomicBool,
}

/// Starts a proxy for one sandboxed process; returns its socket's path.
pub fn start(allow: Vec<HostPattern>, labels: Labels) -> Result<PathBuf, SandboxError> {
    let dir = super::temp_dir::private_temp_dir("sortie-proxy")?;
    let path = dir.join("proxy.sock");
    let listener = UnixListener::bind(&path)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| SandboxError::io(&path, e))?;
    let shared = Arc::new(Shared {
        denied: super::denials::counter_for(&labels.issue_id, labels.attempt),
        allow,
        labels,
        active: AtomicUsize::new(0),
        holds: AtomicUsize::new(0),
        held: AtomicBool::new(false),
    });
    let cleanup = dir.clone();
    std::thread::Builder::new()
        .name("sandbox-proxy".into())
        .spawn(move || {
            accept_loop(&listener, &shared);
            let _ = std::fs::remove_dir_all(&cleanup);
        })
        .map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            SandboxError::setup("proxy thread", e)
        })?;
    Ok(path)
}

/// A fresh owner-only directory under the temporary directory.
fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    let started = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => admit(stream, shared),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let done = if shared.held.load(Ordering::SeqCst) {
                    shared.holds.load(Ordering::SeqCst) == 0
                } else {
                    started.elapsed() >= START_DEADLINE
                };
                if done {
                    return;
                }
                std::thread::sleep(POLL);
            }
            Err(e) => {
                log::warn!(issue_id:% = shared.labels.issue_id, error:% = e; "sandbox proxy accept failed");
                std::thread::sleep(POLL);
            }
        }
    }
}

fn admit(stream: UnixStream, shared: &Arc<Shared>) {
    let _ = stream.set_nonblocking(false);
    if shared.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let mut s = stream;
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        reply(
            &mut s,
            503,
            "too many connections through the sandbox proxy",
        );
        return;
    }
    let s = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("sandbox-proxy-conn".into())
        .spawn(move || {
            serve(stream, &s);
            s.active.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Hold,
    /// `CONNECT host:port`.
    Tunnel {
        host: String,
        port: u16,
    },
    /// An absolute-URI request, rewritten to origin form for the upstream.
    Plain {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

fn serve(mut client: UnixStream, s: &Shared) {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = client.set_write_timeout(Some(IDLE_TIMEOUT));
    let (head, rest) = match read_head(&mut client) {
        Ok(x) => x,
        Err(e) => return reply(&mut client, 400, &e.to_string()),
    };
    let req = match parse(&head) {
        Ok(r) => r,
        Err(e) => return reply(&mut client, 400, &e.to_string()),
    };
    let (host, port, first) = match req {
        Request::Hold => return hold(client, s),
        Request::Tunnel { host, port } => (host, port, None),
        Request::Plain { host, port, head } => (host, port, Some(head)),
    };
    if !allowed(&s.allow, &host, port) {
        deny(&mut client, s, &host, port);
        return;
    }
    let mut upstream = match dial(&host, port) {
        Ok(u) => u,
        Err(e) => {
            return reply(
                &mut client,
                502,
                &format!("cannot reach {host}:{port}: {e}"),
            );
        }
    };
    let _ = upstream.set_write_timeout(Some(IDLE_TIMEOUT));
    let sent = match first {
        None => client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .and_then(|()| upstream.write_all(&rest)),
        Some(h) => upstream
            .write_all(&h)
            .and_then(|()| upstream.write_all(&rest)),
    };
    if sent.is_ok() {
        splice(client, upstream);
    }
}

fn deny(client: &mut UnixStream, s: &Shared, host: &str, port: u16) {
    super::denials::record(&s.denied);
    let l = &s.labels;
    let session_id = if l.session_id.is_empty() {
        super::denials::session_of(&l.issue_id)
    } else {
        l.session_id.clone()
    };
    log::warn!(
        issue_id:% = l.issue_id,
        issue_identifier:% = l.issue_identifier,
        session_id:% = session_id,
        host:% = host,
        port:% = port;
        "sandbox denied a connection (not in worker.sandbox.allow_hosts)"
    );
    reply(
        client,
        403,
        &format!("{host}:{port} is not in worker.sandbox.allow_hosts"),
    );
}

/// The forwarder's connection: held open, its bytes discarded, until it closes.
fn hold(mut client: UnixStream, s: &Shared) {
    s.holds.fetch_add(1, Ordering::SeqCst);
    s.held.store(true, Ordering::SeqCst);
    let _ = client.set_read_timeout(None);
    let mut buf = [0u8; 256];
    loop {
        match client.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    s.holds.fetch_sub(1, Ordering::SeqCst);
}

fn reply(client: &mut UnixStream, status: u16, message: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let body = format!("sortie sandbox: {message}\n");
    let _ = write!(
        client,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The request head (through the blank line) and whatever followed it in the same reads; at
/// most [`MAX_HEAD`] bytes are read.
fn read_head(r: &mut impl Read) -> Result<(Vec<u8>, Vec<u8>), RequestError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        let room = MAX_HEAD - buf.len();
        if room == 0 {
            return Err(RequestError::HeadTooLarge(MAX_HEAD));
        }
        let want = room.min(chunk.len());
        match r.read(&mut chunk[..want]) {
            Ok(0) => return Err(RequestError::Truncated),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(RequestError::Read(e.to_string())),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse(head: &[u8]) -> Result<Request, RequestError> {
    let text = std::str::from_utf8(head).map_err(|_| RequestError::NotUtf8)?;
    let (line, headers) = text.split_once("\r\n").unwrap_or((text, ""));
    let mut words = line.split(' ');
    let (method, target, version) = match (words.next(), words.next(), words.next()) {
        (Some(m), _, _) if m == HOLD => return Ok(Request::Hold),
        (Some(m), Some(t), Some(v)) if words.next().is_none() => (m, t, v),
        _ => return Err(RequestError::MalformedLine(line.to_string())),
    };
    if !version.starts_with("HTTP/1.") {
        return Err(RequestError::UnsupportedVersion(version.to_string()));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(target, None)?;
        return Ok(Request::Tunnel { host, port });
    }
    let Some(rest) = strip_prefix_ci(target, "http://") else {
        return Err(RequestError::NotProxyTarget(target.to_string()));
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(split);
    let (host, port) = authority(auth, Some(80))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for h in headers.split("\r\n").filter(|h| !h.is_empty()) {
        let name = h.split(':').next().unwrap_or("").trim();
        let hop = [
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
        ];
        if !hop.iter().any(|x| name.eq_ignore_ascii_case(x)) {
            out.push_str(h);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request::Plain {
        host,
        port,
        head: out.into_bytes(),
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host:port`, `[v6]:port` (or without the port when `default` is given); no userinfo.
fn authority(s: &str, default: Option<u16>) -> Result<(String, u16), RequestError> {
    let bad = || RequestError::BadAuthority(s.to_string());
    if s.contains('@') || s.is_empty() {
        return Err(bad());
    }
    let (host, port) = match s.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6.split_once(']').ok_or_else(bad)?;
            (h, after.strip_prefix(':'))
        }
        None => match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        },
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

fn dial(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(ErrorKind::NotFound, "no address");
    for addr in (host, port).to_socket_addrs()?.take(MAX_ADDRS) {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Copies both ways until both sides are done or the tunnel idles out.
fn splice(client: UnixStream, upstream: TcpStream) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let _ = client.set_read_timeout(Some(IDLE_CHECK));
    let _ = upstream.set_read_timeout(Some(IDLE_CHECK));
    let last = Arc::new(Mutex::new(Instant::now()));
    let (c3, u3) = (client.try_clone().ok(), upstream.try_clone().ok());
    let end = Arc::new(move || {
        if let Some(c) = &c3 {
            let _ = c.shutdown(Shutdown::Both);
        }
        if let Some(u) = &u3 {
            let _ = u.shutdown(Shutdown::Both);
        }
    });
    let (l2, end2) = (last.clone(), end.clone());
    let up = std::thread::Builder::new()
        .name("sandbox-proxy-up".into())
        .spawn(move || {
            pump(c2, u2, &l2, &*end2, |u: &TcpStream| {
                let _ = u.shutdown(Shutdown::Write);
            })
        });
    if up.is_err() {
        end();
        return;
    }
    pump(upstream, client, &last, &*end, |c: &UnixStream| {
        let _ = c.shutdown(Shutdown::Write);
    });
    if let Ok(h) = up {
        let _ = h.join();
    }
}

fn pump<R: Read, W: Write>(
    mut from: R,
    mut to: W,
    last: &Mutex<Instant>,
    end: &dyn Fn(),
    half: impl Fn(&W),
) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return half(&to),
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return end();
                }
                if let Ok(mut t) = last.lock() {
                    *t = Instant::now();
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let idle = last.lock().map(|t| t.elapsed()).unwrap_or(IDLE_TIMEOUT);
                if idle >= IDLE_TIMEOUT {
                    return end();
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return end(),
        }
    }
}

/// The path the proxy's socket has inside the sandbox.
pub fn inside_socket() -> &'static Path {
    Path::new("/run/sortie/proxy.sock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_uris_are_understood() {
        assert_eq!(
            parse(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Request::Tunnel {
                host: "api.example.com".into(),
                port: 443
            })
        );
        assert_eq!(
            parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(Request::Tunnel {
                host: "::1".into(),
                port: 8443
            })
        );
        let Ok(Request::Plain { host, port, head }) = parse(
            b"GET http://Example.org:8080/a?b HTTP/1.1\r\nHost: example.org\r\nProxy-Connection: keep-alive\r\n\r\n",
        ) else {
            panic!("not a plain request");
        };
        assert_eq!((host.as_str(), port), ("Example.org", 8080));
        assert_eq!(
            String::from_utf8_lossy(&head),
            "GET /a?b HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n"
        );
        assert!(matches!(
            parse(b"GET http://example.org HTTP/1.0\r\n\r\n"),
            Ok(Request::Plain { port: 80, .. })
        ));
        assert_eq!(parse(b"SORTIE-HOLD\r\n\r\n"), Ok(Request::Hold));
    }

    #[test]
    fn what_the_proxy_does_not_take_is_refused() {
        for bad in [
            &b"GET /relative HTTP/1.1\r\n\r\n"[..],
            b"GET https://x.org/ HTTP/1.1\r\n\r\n",
            b"CONNECT x.org HTTP/1.1\r\n\r\n",
            b"CONNECT user@x.org:443 HTTP/1.1\r\n\r\n",
            b"GET http://x.org/ SPDY/3\r\n\r\n",
            b"nonsense\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_head_is_capped_before_it_is_read() {
        let long = vec![b'a'; MAX_HEAD * 4];
        let mut r = &long[..];
        assert!(read_head(&mut r).is_err());
        // No more than the cap was consumed.
        assert_eq!(r.len(), MAX_HEAD * 3);
        let mut ok = &b"CONNECT a:1 HTTP/1.1\r\n\r\nhello"[..];
        let (head, rest) = read_head(&mut ok).unwrap_or_default();
        assert!(head.ends_with(b"\r\n\r\n"));
        assert_eq!(rest, b"hello");
    }
}
