//! The bounds every client connection obeys. They are enforced by the vendored tiny_http
//! (`vendor/tiny_http/PATCHED.md`) on each connection's own thread, before a request reaches
//! the eight request threads:
//!
//! - the request head must arrive within [`HEAD_TIMEOUT`] of its first byte being awaited;
//!   this is also the keep-alive idle timeout (a connection that sends no next request within
//!   it is closed quietly; a request cut short is answered 408);
//! - the body is read whole, within [`BODY_TIMEOUT`], and at most [`MAX_BODY`] bytes (larger
//!   is answered 413 unread and the connection closed): the API's POST bodies are empty or
//!   tiny, and no handler ever reads from a socket. Webhook deliveries
//!   ([`WEBHOOK_PATH_PREFIX`]) may carry up to [`MAX_WEBHOOK_BODY`]: a forge's push or
//!   issue payload is often larger than 64 KiB (GitHub caps its deliveries at 25 MB; the
//!   cap here bounds what unauthenticated senders can make the daemon hold, since the
//!   signature can only be checked once the body is read);
//! - at most `server.max_connections` ([`DEFAULT_MAX_CONNECTIONS`]) connections are open at
//!   once, event streams included for their whole life; one beyond is answered 503 with
//!   `Connection: close` without a thread of its own; the cap is lowered to what the
//!   open-file limit leaves room for ([`connections_within_open_files`]), so `accept()` never
//!   fails with EMFILE;
//! - event streams may take at most half of the connections ([`max_streams`], and at most
//!   `MAX_STREAMS`), so ordinary requests always find room; the default admits 256 streams;
//! - a request line or header with bytes outside ASCII (a raw UTF-8 path), or a request line
//!   with control bytes, is answered 400; a request line longer than [`MAX_REQUEST_LINE`]
//!   414, a header line longer than [`MAX_HEAD_LINE`] or a head larger than [`MAX_HEAD`] 431;
//!   a request line naming HTTP/2 or later (an HTTP/2 prior-knowledge preface) 505, before
//!   any header is read; a bare `LF` ends a line like `CRLF`. Each of these closes the
//!   connection.
//!
//! Deadlines are per-socket `SO_RCVTIMEO` values set by the connection thread before each read
//! (the remaining time to the deadline) and only while it reads a request; the listener never
//! carries `SO_RCVTIMEO` (ARCHITECTURE.md, "Known traps"). An event stream only writes: once
//! it takes the socket's write half, its connection thread reads no further request and ends,
//! shutting down the read half only, which leaves the stream's writes untouched.
//!
//! Every answer the server writes itself carries the API's error envelope.

use std::time::Duration;

use super::views::reply::ErrorBody;

pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_BODY: usize = 64 * 1024;
/// The body cap of webhook deliveries. A larger delivery is refused (413); the change it
/// announced is still seen by the next poll.
pub const MAX_WEBHOOK_BODY: usize = 8 * 1024 * 1024;
/// Where webhook deliveries arrive (`POST /api/v1/webhooks/{kind}`).
pub const WEBHOOK_PATH_PREFIX: &str = "/api/v1/webhooks/";
pub const MAX_REQUEST_LINE: usize = 8 * 1024;
pub const MAX_HEAD_LINE: usize = 16 * 1024;
pub const MAX_HEAD: usize = 64 * 1024;
/// Client connections open at once, event streams included.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Open files kept free of client connections: the database, agent pipes, log files, the
/// refuser's lingering sockets, with headroom of one file per possible event stream.
const RESERVED_FILES: u64 = super::MAX_STREAMS as u64 + 256;

/// The most connections the open-file limit `nofile` leaves room for (each takes two files
/// while served: tiny_http duplicates the socket); an `accept()` failing with EMFILE would end
/// the accept loop for good (ARCHITECTURE.md, "Known traps"). At least 8.
pub fn connections_within_open_files(nofile: Option<u64>) -> usize {
    match nofile {
        None => usize::MAX,
        Some(n) => usize::try_from(n.saturating_sub(RESERVED_FILES) / 2)
            .unwrap_or(usize::MAX)
            .max(8),
    }
}

/// Event streams open at once for a connection cap: half of it (at least one), at most
/// `MAX_STREAMS`. Streams are long-lived; the other half stays for ordinary requests.
pub fn max_streams(max_connections: usize) -> usize {
    (max_connections / 2).clamp(1, super::MAX_STREAMS)
}

fn envelope(_status: u16, code: &str, message: &str) -> String {
    serde_json::to_string(&ErrorBody::new(code, message)).unwrap_or_else(|_| {
        r#"{"error":{"code":"internal_error","message":"response serialization failed"}}"#
            .to_string()
    })
}

/// The body cap for a request target: [`MAX_WEBHOOK_BODY`] on the webhook route, else
/// [`MAX_BODY`].
pub fn max_body_for(target: &str) -> usize {
    if target.starts_with(WEBHOOK_PATH_PREFIX) {
        MAX_WEBHOOK_BODY
    } else {
        MAX_BODY
    }
}

/// The limits for tiny_http; `max_connections` is `server.max_connections`.
pub fn limits(max_connections: Option<usize>) -> tiny_http::Limits {
    tiny_http::Limits {
        head_timeout: HEAD_TIMEOUT,
        body_timeout: BODY_TIMEOUT,
        max_body: max_body_for,
        max_request_line: MAX_REQUEST_LINE,
        max_head_line: MAX_HEAD_LINE,
        max_head: MAX_HEAD,
        max_connections: max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1),
        error_body: envelope,
        error_content_type: "application/json; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_written_errors_carry_the_envelope() {
        assert_eq!(
            envelope(413, "payload_too_large", "too big"),
            r#"{"error":{"code":"payload_too_large","message":"too big"}}"#
        );
        assert_eq!(limits(None).max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(limits(Some(3)).max_connections, 3);
    }

    #[test]
    fn only_the_webhook_route_takes_large_bodies() {
        assert_eq!(max_body_for("/api/v1/webhooks/github"), MAX_WEBHOOK_BODY);
        assert_eq!(
            max_body_for("/api/v1/webhooks/gitlab?x=1"),
            MAX_WEBHOOK_BODY
        );
        assert_eq!(max_body_for("/api/v1/refresh"), MAX_BODY);
        assert_eq!(max_body_for("/api/v1/webhooks"), MAX_BODY);
        assert_eq!(max_body_for("/"), MAX_BODY);
    }

    #[test]
    fn streams_take_at_most_half_of_the_connections() {
        assert_eq!(max_streams(DEFAULT_MAX_CONNECTIONS), 256);
        assert_eq!(max_streams(10_000), super::super::MAX_STREAMS);
        assert_eq!(max_streams(16), 8);
        assert_eq!(max_streams(1), 1);
    }

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        assert_eq!(connections_within_open_files(None), usize::MAX);
        assert_eq!(connections_within_open_files(Some(1024)), 256);
        assert_eq!(connections_within_open_files(Some(100)), 8);
        assert!(connections_within_open_files(Some(20_000)) > DEFAULT_MAX_CONNECTIONS);
    }
}
