//! Jira's own explanations of a refusal. After repeated failed logins Jira Cloud answers every
//! Basic-auth call with 401/403 and `X-Seraph-LoginReason: AUTHENTICATION_DENIED` until a person
//! passes a CAPTCHA in the browser; no token change helps, so the error says so.

use super::KIND;
use crate::http_client::HttpError;
use crate::tracker::{TrackerError, TrackerErrorKind};

fn header<'a>(e: &'a HttpError, name: &str) -> Option<&'a str> {
    e.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Whether Jira refused the login itself (the CAPTCHA lock), not the token's permissions.
pub fn login_denied(e: &HttpError) -> bool {
    let seraph = header(e, "x-seraph-loginreason")
        .is_some_and(|v| v.to_ascii_uppercase().contains("AUTHENTICATION_DENIED"));
    seraph || header(e, "x-authentication-denied-reason").is_some()
}

/// The tracker error of a failed call, with the CAPTCHA case explained.
pub fn from_http(e: &HttpError) -> TrackerError {
    let mut err = TrackerError::from_http(KIND, e);
    if login_denied(e) {
        err.kind = TrackerErrorKind::Auth;
        err.message.push_str(
            " (Jira denied the login and requires a CAPTCHA: sign in to the site once in a browser as this account, then sortie's token works again)",
        );
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_client::ErrorClass;

    fn refused(status: u16, headers: &[(&str, &str)]) -> HttpError {
        let mut e = HttpError::new(
            ErrorClass::Auth,
            "GET",
            "/rest/api/3/search/jql",
            format!("status {status}"),
        );
        e.status = Some(status);
        e.headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        e
    }

    #[test]
    fn the_captcha_lock_is_explained_and_other_refusals_are_not() {
        let e = from_http(&refused(
            403,
            &[("x-seraph-loginreason", "AUTHENTICATION_DENIED")],
        ));
        assert_eq!(e.kind, TrackerErrorKind::Auth);
        assert!(e.to_string().contains("CAPTCHA"), "{e}");
        let e = from_http(&refused(
            401,
            &[(
                "x-authentication-denied-reason",
                "CAPTCHA_CHALLENGE; login-url=https://x",
            )],
        ));
        assert!(e.message.contains("CAPTCHA"));
        let e = from_http(&refused(401, &[]));
        assert_eq!(e.kind, TrackerErrorKind::Auth);
        assert!(!e.message.contains("CAPTCHA"));
        assert!(e.to_string().starts_with(
            "tracker: jira: tracker_auth_error: GET /rest/api/3/search/jql: status 401"
        ));
    }
}
