//! sortie patch: bounds on every connection (see PATCHED.md).

use std::any::Any;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::{Header, Method};

/// Decides from a request's head alone whether its body is read (and with which cap).
pub type AdmitFn = dyn Fn(&Head<'_>) -> Admission + Send + Sync;
/// Told about every connection or request the server refuses by itself.
pub type RefusedFn = dyn Fn(ConnRefusal, Option<SocketAddr>) + Send + Sync;

/// Bounds applied by a server built with `Server::from_listener_with_limits`.
#[derive(Clone)]
pub struct Limits {
    /// From the first socket read of a request head to its end. Also the keep-alive idle
    /// timeout: a connection that sends no next request within it is closed quietly.
    pub head_timeout: Duration,
    /// From the first socket read of a body to its end. Bodies are read whole by the
    /// connection's own thread before the request reaches `recv()`.
    pub body_timeout: Duration,
    /// Called once a request's head is read, before any byte of its body: either the body is
    /// read (at most `max_body` bytes; a larger one is answered 413 and the connection
    /// closed), or the request is refused with the given answer and the connection closed,
    /// its body unread. A function of the whole head so that a route taking large bodies
    /// does not raise the cap for every other route, and a request that can never be
    /// accepted costs no buffer.
    pub admit: Arc<AdmitFn>,
    /// Largest request line (method, target and version); a longer one is answered 414.
    pub max_request_line: usize,
    /// Largest header line; a longer one is answered 431.
    pub max_head_line: usize,
    /// Largest request head (request line and every header line); a larger one is answered 431.
    pub max_head: usize,
    /// Connections served at once, probe connections included; a connection beyond is
    /// answered 503 and closed.
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, or an IPv6 /64: [`client_key`]) may hold at
    /// once, probe connections aside; one beyond is answered 503 and closed.
    pub max_connections_per_client: usize,
    /// Connections of `max_connections` kept for probe requests (`is_probe`): once the
    /// others are all taken, a connection still gets one of these, at most
    /// [`PROBE_SLOTS_PER_CLIENT`] per client, serves one probe request (its head within
    /// `probe_head_timeout`) and is closed; any other request on it is answered 503.
    pub probe_reserve: usize,
    pub probe_head_timeout: Duration,
    pub is_probe: fn(&Method, &str) -> bool,
    /// Told about every refusal the server makes by itself (the caller logs and counts).
    pub on_refused: Arc<RefusedFn>,
    /// The body of responses the server writes itself (400, 408, 413, 414, 431, 503, 505):
    /// `(status, code, message) -> body`, sent with `error_content_type`.
    pub error_body: fn(u16, &str, &str) -> String,
    pub error_content_type: &'static str,
    /// Serves a request on its connection's own thread instead of queueing it for `recv()`:
    /// given each request once its body is read, it answers it (`None`) or hands it back to
    /// be queued (`Some`). For answers that never wait long (probes, a cached document):
    /// they skip two thread wake-ups per request, which on a small host cost more than
    /// writing half a megabyte.
    pub inline: Option<Arc<InlineFn>>,
}

/// See [`Limits::inline`].
pub type InlineFn = dyn Fn(crate::Request) -> Option<crate::Request> + Send + Sync;

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("head_timeout", &self.head_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_client", &self.max_connections_per_client)
            .field("probe_reserve", &self.probe_reserve)
            .finish_non_exhaustive()
    }
}

/// Probe connections one client may hold at once.
pub const PROBE_SLOTS_PER_CLIENT: usize = 2;

/// A request head, as [`Limits::admit`] sees it.
pub struct Head<'a> {
    pub method: &'a Method,
    /// The request target (path and query).
    pub target: &'a str,
    pub headers: &'a [Header],
    pub remote: Option<SocketAddr>,
    /// The announced body length (`None` without `Content-Length`, or when chunked).
    pub content_length: Option<usize>,
    /// The body is chunked (its length is known only once read).
    pub chunked: bool,
}

impl Head<'_> {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }
}

/// What [`Limits::admit`] decided.
pub enum Admission {
    /// Read the body, at most `max_body` bytes. `hold` lives as long as the request's body
    /// (until the `Request` is dropped): a reservation the caller made for it.
    Read {
        max_body: usize,
        hold: Option<Box<dyn Any + Send>>,
    },
    /// Answer without reading the body, and close the connection.
    Refuse(Refusal),
}

/// An answer the server writes from a request's head alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

/// Why the server refused a connection (or a request on a probe connection) by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnRefusal {
    /// Every connection is taken.
    TooManyConnections,
    /// The client holds its share of the connections.
    TooManyClientConnections,
    /// A request other than a probe on a connection kept for probes.
    NotAProbe,
    /// No thread could be started for the connection.
    NoThread,
}

impl ConnRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnRefusal::TooManyConnections => "too_many_connections",
            ConnRefusal::TooManyClientConnections => "too_many_client_connections",
            ConnRefusal::NotAProbe => "not_a_probe",
            ConnRefusal::NoThread => "no_thread",
        }
    }

    fn message(self) -> &'static str {
        match self {
            ConnRefusal::TooManyConnections | ConnRefusal::NotAProbe => {
                "the server has too many open connections; retry later"
            }
            ConnRefusal::TooManyClientConnections => {
                "this client has too many open connections; close some or retry later"
            }
            ConnRefusal::NoThread => "the server cannot serve another connection now; retry later",
        }
    }

    /// The 503 the server answers for this refusal.
    pub(crate) fn refusal(self) -> Refusal {
        Refusal {
            status: 503,
            code: "too_many_connections",
            message: self.message().to_string(),
            retry_after: Some(1),
        }
    }
}

/// The key a client's connections are counted under: its IPv4 address (an IPv4-mapped IPv6
/// address as IPv4), or the /64 network of an IPv6 address (one host usually holds a whole
/// /64).
pub fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A complete `Connection: close` response, with `Retry-After` when given.
pub(crate) fn error_response(
    limits: &Limits,
    status: u16,
    code: &str,
    message: &str,
    retry_after: Option<u64>,
) -> Vec<u8> {
    let body = (limits.error_body)(status, code, message);
    let retry = retry_after
        .map(|s| format!("Retry-After: {s}\r\n"))
        .unwrap_or_default();
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n{retry}Connection: close\r\n\r\n{body}",
        reason(status),
        limits.error_content_type,
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_addresses_and_ipv6_networks() {
        let v4: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(client_key(v4), v4);
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(client_key(mapped), v4);
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(other));
    }
}
