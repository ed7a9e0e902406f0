//! sortie patch: answers whose header lines are rendered once and reused. A document served
//! many times from memory (sortie's cached state document) has the same headers on every
//! answer; building them as `Header`s and printing them again for each request cost more
//! than the rest of its handling. `PreparedFields` holds them rendered; the server adds only
//! the status line, `Server`, `Date` (formatted once a second per thread) and
//! `Content-Length`, and writes head and body in one vectored write.

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use httpdate::HttpDate;

use crate::common::{HTTPVersion, Header, StatusCode};

/// Header lines rendered once: `Name: value\r\n` each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedFields(Vec<u8>);

/// Fields the server writes itself for a prepared answer (the framing, the date and its
/// name); given ones are left out.
const OWN: [&str; 5] = [
    "Date",
    "Server",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
];

impl PreparedFields {
    /// Renders `headers` (already checked by `Header`'s parsing), leaving out the ones the
    /// server writes itself.
    pub fn new(headers: &[Header]) -> PreparedFields {
        let mut out = Vec::with_capacity(headers.len() * 40);
        for h in headers {
            if OWN.iter().any(|own| h.field.equiv(own)) {
                continue;
            }
            out.extend_from_slice(h.field.as_str().as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value.as_str().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        PreparedFields(out)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

thread_local! {
    /// The `Date` value of the second it was formatted for.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Appends the status line, `Server` and `Date`: what a prepared answer's head starts with,
/// in the order `Response::raw_print` writes them.
pub(crate) fn write_opening(out: &mut Vec<u8>, version: &HTTPVersion, status: StatusCode) {
    let _ = write!(
        out,
        "HTTP/{}.{} {} {}\r\nServer: tiny-http (Rust)\r\nDate: ",
        version.0,
        version.1,
        status.0,
        status.default_reason_phrase()
    );
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            *date = (second, HttpDate::from(now).to_string());
        }
        out.extend_from_slice(date.1.as_bytes());
    });
    out.extend_from_slice(b"\r\n");
}

/// Appends `Content-Length` and the blank line that ends the head.
pub(crate) fn write_closing(out: &mut Vec<u8>, length: usize) {
    let _ = write!(out, "Content-Length: {length}\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, value: &str) -> Header {
        match Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            Ok(h) => h,
            Err(()) => panic!("bad header {name}"),
        }
    }

    #[test]
    fn fields_render_in_order_without_the_servers_own() {
        let f = PreparedFields::new(&[
            header("ETag", "\"abc\""),
            header("content-length", "12"),
            header("Vary", "Accept-Encoding"),
            header("Date", "yesterday"),
        ]);
        assert_eq!(f.as_bytes(), b"ETag: \"abc\"\r\nVary: Accept-Encoding\r\n");
    }

    #[test]
    fn the_opening_has_status_server_and_a_current_date() {
        let mut out = Vec::new();
        write_opening(&mut out, &HTTPVersion(1, 1), StatusCode(304));
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(text.starts_with("HTTP/1.1 304 Not Modified\r\nServer: tiny-http (Rust)\r\nDate: "));
        assert!(text.ends_with(" GMT\r\n"));
        let date = &text[text.find("Date: ").map_or(0, |i| i + 6)..text.len() - 2];
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        let mut closing = Vec::new();
        write_closing(&mut closing, 17);
        assert_eq!(closing, b"Content-Length: 17\r\n\r\n");
    }
}
