//! Which [`ErrorClass`] an unaccepted status falls into. The rules are the tracker contract's:
//! a 403 is a rate limit (worth retrying later) when the budget is spent or the body says so,
//! otherwise a refusal of the credentials.

use super::error::ErrorClass;
use super::rate_limit::rate_header;

/// Whether a 403 or 429 answer is a rate limit rather than a refusal.
pub fn is_rate_limited(status: u16, headers: &[(String, String)], body: &[u8]) -> bool {
    match status {
        429 => true,
        403 => {
            rate_header(headers, "remaining").is_some_and(|v| v.trim() == "0")
                || String::from_utf8_lossy(body)
                    .to_ascii_lowercase()
                    .contains("rate limit")
        }
        _ => false,
    }
}

/// Names the limit a rate-limited answer hit: `primary` when the request budget is spent
/// (`X-RateLimit-Remaining: 0`), `secondary` for a burst or concurrency limit said in the
/// body or by a 429; `None` when the answer is not rate-limited.
pub fn rate_limit_name(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> Option<&'static str> {
    if !is_rate_limited(status, headers, body) {
        return None;
    }
    let spent = rate_header(headers, "remaining").is_some_and(|v| v.trim() == "0");
    Some(if spent {
        "primary rate limit"
    } else {
        "secondary rate limit"
    })
}

/// The class of a status the client does not accept (anything but 2xx and 304).
pub fn classify(status: u16, headers: &[(String, String)], body: &[u8]) -> ErrorClass {
    match status {
        401 => ErrorClass::Auth,
        403 if is_rate_limited(status, headers, body) => ErrorClass::Api,
        403 => ErrorClass::Auth,
        404 => ErrorClass::NotFound,
        400 | 422 => ErrorClass::Payload,
        s if s >= 500 => ErrorClass::Transport,
        _ => ErrorClass::Api,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_error_table() {
        let none = h(&[]);
        assert_eq!(classify(401, &none, b""), ErrorClass::Auth);
        assert_eq!(
            classify(403, &none, b"{\"message\":\"Forbidden\"}"),
            ErrorClass::Auth
        );
        let spent = h(&[("x-ratelimit-remaining", "0")]);
        assert_eq!(classify(403, &spent, b""), ErrorClass::Api);
        let secondary = b"{\"message\":\"You have exceeded a secondary rate limit\"}";
        assert_eq!(classify(403, &none, secondary), ErrorClass::Api);
        assert_eq!(classify(404, &none, b""), ErrorClass::NotFound);
        assert_eq!(classify(400, &none, b""), ErrorClass::Payload);
        assert_eq!(classify(422, &none, b""), ErrorClass::Payload);
        assert_eq!(classify(410, &none, b""), ErrorClass::Api);
        assert_eq!(classify(429, &none, b""), ErrorClass::Api);
        assert_eq!(classify(500, &none, b""), ErrorClass::Transport);
        assert_eq!(classify(502, &none, b""), ErrorClass::Transport);
        assert_eq!(classify(302, &none, b""), ErrorClass::Api);
        assert_eq!(
            rate_limit_name(403, &spent, b""),
            Some("primary rate limit")
        );
        assert_eq!(
            rate_limit_name(403, &none, secondary),
            Some("secondary rate limit")
        );
        assert_eq!(rate_limit_name(403, &none, b""), None);
    }
}
