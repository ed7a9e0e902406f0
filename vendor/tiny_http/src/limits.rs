//! sortie patch: bounds on every connection (see PATCHED.md).

use std::time::Duration;

/// Bounds applied by a server built with `Server::from_listener_with_limits`.
#[derive(Debug, Clone)]
pub struct Limits {
    /// From the first socket read of a request head to its end. Also the keep-alive idle
    /// timeout: a connection that sends no next request within it is closed quietly.
    pub head_timeout: Duration,
    /// From the first socket read of a body to its end. Bodies are read whole by the
    /// connection's own thread before the request reaches `recv()`.
    pub body_timeout: Duration,
    /// Largest request body for a request target (the path with its query); a larger one is
    /// answered 413 and the connection closed. A function so that a route taking large
    /// bodies does not raise the cap for every other route.
    pub max_body: fn(&str) -> usize,
    /// Largest request line (method, target and version); a longer one is answered 414.
    pub max_request_line: usize,
    /// Largest header line; a longer one is answered 431.
    pub max_head_line: usize,
    /// Largest request head (request line and every header line); a larger one is answered 431.
    pub max_head: usize,
    /// Connections served at once; a connection beyond is answered 503 and closed.
    pub max_connections: usize,
    /// The body of responses the server writes itself (400, 408, 413, 414, 431, 503, 505):
    /// `(status, code, message) -> body`, sent with `error_content_type`.
    pub error_body: fn(u16, &str, &str) -> String,
    pub error_content_type: &'static str,
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A complete `Connection: close` response.
pub(crate) fn error_response(limits: &Limits, status: u16, code: &str, message: &str) -> Vec<u8> {
    let body = (limits.error_body)(status, code, message);
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n{body}",
        reason(status),
        limits.error_content_type,
        body.len()
    )
    .into_bytes()
}
