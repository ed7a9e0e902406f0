//! The bounds every client connection obeys. They are enforced by the vendored tiny_http
//! (`vendor/tiny_http/PATCHED.md`) on each connection's own thread, before a request reaches
//! the eight request threads:
//!
//! - the request head must arrive within [`HEAD_TIMEOUT`] of its first byte being awaited;
//!   this is also the keep-alive idle timeout (a connection that sends no next request within
//!   it is closed quietly; a request cut short is answered 408);
//! - what becomes of a body is decided from the head alone ([`super::admission::admit`]),
//!   before any byte of it is read: most requests may carry [`MAX_BODY`] (larger is answered
//!   413 unread and the connection closed): the API's POST bodies are empty or tiny, and no
//!   handler ever reads from a socket. A webhook delivery ([`WEBHOOK_PATH_PREFIX`]) may carry
//!   up to [`MAX_WEBHOOK_BODY`] (a forge's push or issue payload is often larger than 64 KiB;
//!   GitHub caps its deliveries at 25 MB), but only for a configured kind, with its
//!   signature header, and within the webhook body budget
//!   ([`super::webhooks::budget`]); any other delivery is answered from its head and the
//!   connection closed with the body unread. The body is read whole within [`BODY_TIMEOUT`],
//!   into a buffer filled as bytes arrive and freed with the request;
//! - at most `server.max_connections` ([`DEFAULT_MAX_CONNECTIONS`]) connections are open at
//!   once, event streams included for their whole life; one beyond is answered 503 with
//!   `Connection: close` without a thread of its own; the cap is lowered to what the
//!   open-file limit leaves room for ([`connections_within_open_files`]), so `accept()` never
//!   fails with EMFILE (the open-file limit itself is raised to its hard limit at start);
//! - [`probe_reserve`] of those connections are kept for `GET /livez`, `/readyz` and
//!   `/metrics` ([`super::admission::is_probe`]): once all the others are taken, a new
//!   connection still gets one of these (at most `PROBE_SLOTS_PER_CLIENT` per client), its
//!   head within [`PROBE_HEAD_TIMEOUT`], serves that one probe and is closed; any other request
//!   on it is answered 503;
//! - one client (an IPv4 address, or an IPv6 /64) may hold at most
//!   `server.max_connections_per_client` of the other connections (default
//!   [`default_per_client`]: half of them), so idle sockets and slow heads from one address
//!   cannot take the server from others; one beyond is answered 503;
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
//! Every answer the server writes itself carries the API's error envelope; the connections it
//! refuses are counted (`sortie_http_connections_refused_total`) and logged within the bounds
//! of [`super::refusals`].

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
/// Client connections open at once, event streams and probe connections included.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// A probe connection must send its request head within this.
pub const PROBE_HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The most connections kept for probes.
const MAX_PROBE_RESERVE: usize = 16;

/// Connections of `max_connections` kept for probes: a sixteenth, at least 2 and at most 16
/// (16 of the default 512), and never more than half.
pub fn probe_reserve(max_connections: usize) -> usize {
    (max_connections / 16)
        .clamp(2, MAX_PROBE_RESERVE)
        .min(max_connections / 2)
}

/// The default of `server.max_connections_per_client`: half of `max_connections` (at least
/// one), so it takes at least two clients to fill the server.
pub fn default_per_client(max_connections: usize) -> usize {
    (max_connections / 2).max(1)
}

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

pub(super) fn envelope(_status: u16, code: &str, message: &str) -> String {
    serde_json::to_string(&ErrorBody::new(code, message)).unwrap_or_else(|_| {
        r#"{"error":{"code":"internal_error","message":"response serialization failed"}}"#
            .to_string()
    })
}

/// The connection caps: `server.max_connections` (or the default) lowered to what the
/// open-file limit `nofile` leaves room for, and `server.max_connections_per_client` (or the
/// default) at most that. Warns when the open-file limit lowers the cap.
pub fn connection_caps(
    max_connections: Option<usize>,
    per_client: Option<usize>,
    nofile: Option<u64>,
) -> (usize, usize) {
    let wanted = max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1);
    let fits = connections_within_open_files(nofile);
    let max = if wanted > fits {
        log::warn!(
            max_connections:% = wanted,
            lowered_to:% = fits;
            "open file limit too low for the connection cap; lowering it"
        );
        fits
    } else {
        wanted
    };
    let per_client = per_client
        .unwrap_or_else(|| default_per_client(max))
        .clamp(1, max);
    (max, per_client)
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
    }

    #[test]
    fn caps_default_fit_the_open_files_and_keep_a_client_to_its_share() {
        assert_eq!(connection_caps(None, None, None), (512, 256));
        assert_eq!(connection_caps(Some(3), None, None), (3, 1));
        assert_eq!(connection_caps(Some(64), Some(64), None), (64, 64));
        assert_eq!(connection_caps(Some(64), Some(1000), None), (64, 64));
        assert_eq!(connection_caps(None, None, Some(1024)), (256, 128));
        assert_eq!(connection_caps(None, Some(300), Some(1024)), (256, 256));
    }

    #[test]
    fn probes_keep_a_sixteenth_at_least_two_at_most_sixteen() {
        assert_eq!(probe_reserve(DEFAULT_MAX_CONNECTIONS), 16);
        assert_eq!(probe_reserve(16), 2);
        assert_eq!(probe_reserve(64), 4);
        assert_eq!(probe_reserve(100_000), 16);
        assert_eq!(probe_reserve(3), 1);
        assert_eq!(probe_reserve(1), 0);
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
