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

/// A body excerpt safe for messages: secrets masked, then cut to at most
/// [`MAX_SNIPPET_BYTES`] on a character boundary, whitespace runs folded to one space.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let masked = crate::mask::mask(&folded);
    if masked.len() <= MAX_SNIPPET_BYTES {
        return masked;
    }
    let mut end = MAX_SNIPPET_BYTES;
    while !masked.is_char_boundary(end) {
        end -= 1;
    }
    masked[..end].to_string()
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
