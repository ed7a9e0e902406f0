//! Failure classes and the error every HTTP call returns.

use std::fmt;
use std::time::Duration;

/// Longest response-body excerpt an error message carries.
pub const MAX_SNIPPET_BYTES: usize = 512;

/// What kind of failure a call met; callers map it onto their own error kinds (trackers onto
/// the tracker error kinds), which decide whether the call is worth retrying later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Connect, DNS, TLS, timeout, a cut-off body, or a status ≥ 500.
    Transport,
    /// 401, or a 403 that is not a rate limit.
    Auth,
    /// 429, a rate-limit 403, 410, or any other unexpected status.
    Api,
    /// 404.
    NotFound,
    /// 400, 422, or a 2xx body that does not parse.
    Payload,
    /// A paginator was told there is more but given no cursor.
    MissingEndCursor,
    /// An answer, or the answers of one read together, passed a size cap (the detail names
    /// it); not retried by the client, since the same read would meet the same cap.
    TooLarge,
}

/// One failed call: `<METHOD> <path>: <detail>`, where `detail` holds the status and a masked
/// body snippet of at most [`MAX_SNIPPET_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub class: ErrorClass,
    pub method: &'static str,
    /// The URL path (no host, no query).
    pub path: String,
    pub detail: String,
    /// The response status, when there was a response.
    pub status: Option<u16>,
    /// The wait the server asked for (`Retry-After` or a rate-limit reset), if any.
    pub retry_after: Option<Duration>,
    /// The response headers (names lowercased), so an adapter can read vendor-specific
    /// explanations of a refusal; empty when there was no response.
    pub headers: Vec<(String, String)>,
}

impl HttpError {
    pub fn new(class: ErrorClass, method: &'static str, path: &str, detail: String) -> Self {
        HttpError {
            class,
            method,
            path: path.to_string(),
            detail: crate::mask::mask(&detail),
            status: None,
            retry_after: None,
            headers: Vec::new(),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.method, self.path, self.detail)
    }
}

impl std::error::Error for HttpError {}

/// A body excerpt safe for messages: whitespace runs folded to one space, control and
/// direction-changing characters escaped (`\u{1b}`), so a body cannot colour or forge a log
/// line; secrets masked, then cut to at most [`MAX_SNIPPET_BYTES`] on a character boundary.
pub fn snippet(body: &[u8]) -> String {
    // Only the head can be shown; whitespace folding shrinks it, so a generous head is read.
    let head = &body[..body.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let masked = crate::mask::mask(&escape_controls(&folded));
    if masked.len() <= MAX_SNIPPET_BYTES {
        return masked;
    }
    let mut end = MAX_SNIPPET_BYTES;
    while !masked.is_char_boundary(end) {
        end -= 1;
    }
    masked[..end].to_string()
}

fn escape_controls(text: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(hidden) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A removal's answer where a resource already gone (404) is the end state that was wanted:
/// deleting a branch or taking off a label twice is not an error.
pub fn absent_is_ok<T>(result: Result<T, HttpError>) -> Result<(), HttpError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.class == ErrorClass::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_absent_resource_counts_as_removed() {
        let e = |class| Err::<(), _>(HttpError::new(class, "DELETE", "/b", "x".into()));
        assert_eq!(absent_is_ok(Ok::<u8, HttpError>(1)), Ok(()));
        assert_eq!(absent_is_ok(e(ErrorClass::NotFound)), Ok(()));
        for class in [ErrorClass::Auth, ErrorClass::Transport, ErrorClass::Api] {
            assert_eq!(absent_is_ok(e(class)).map_err(|e| e.class), Err(class));
        }
    }

    #[test]
    fn snippets_are_bounded_on_a_char_boundary() {
        let body = "é".repeat(400);
        let s = snippet(body.as_bytes());
        assert!(s.len() <= MAX_SNIPPET_BYTES);
        assert!(s.len() >= MAX_SNIPPET_BYTES - 1);
        assert_eq!(snippet(b"  short \n body "), "short body");
        assert_eq!(
            snippet("a\u{1b}[31mred\u{0}\u{202e}\"q\"".as_bytes()),
            "a\\u{1b}[31mred\\u{0}\\u{202e}\"q\""
        );
        assert!(snippet(&vec![b'x'; 10 << 20]).len() == MAX_SNIPPET_BYTES);
    }

    #[test]
    fn snippets_and_details_mask_secrets() {
        crate::mask::register_secret("hc-secret-token-123");
        assert_eq!(
            snippet(b"{\"token\":\"hc-secret-token-123\"}"),
            "{\"token\":\"[redacted]\"}"
        );
        let e = HttpError::new(
            ErrorClass::Auth,
            "GET",
            "/x",
            "bad hc-secret-token-123".into(),
        );
        assert_eq!(e.to_string(), "GET /x: bad [redacted]");
    }
}
