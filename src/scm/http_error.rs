//! A failed HTTP call as a forge error, shared by the forge adapters, by the same classes the trackers use: a rate-limited
//! answer (429, or a 403 that says so) is told apart from other API answers.

use crate::http_client::{ErrorClass, HttpError};
use crate::scm::{ScmError, ScmErrorKind};

/// The forge kind of an HTTP failure.
pub fn kind_of(e: &HttpError) -> ScmErrorKind {
    match e.class {
        ErrorClass::Transport => ScmErrorKind::Transport,
        ErrorClass::Auth => ScmErrorKind::Auth,
        ErrorClass::NotFound => ScmErrorKind::NotFound,
        ErrorClass::Payload | ErrorClass::MissingEndCursor => ScmErrorKind::Payload,
        ErrorClass::Api if matches!(e.status, Some(429 | 403)) => ScmErrorKind::RateLimited,
        ErrorClass::Api | ErrorClass::TooLarge => ScmErrorKind::Api,
    }
}

/// `<forge>: <METHOD> <path>: <detail>`; the detail is masked by the client already.
pub fn scm_error(forge: &str, e: &HttpError) -> ScmError {
    ScmError {
        kind: kind_of(e),
        message: format!("{forge}: {e}"),
    }
}

/// An error a forge adapter raises itself: `<forge>: <message>`, masked.
pub fn own(forge: &str, kind: ScmErrorKind, message: impl Into<String>) -> ScmError {
    ScmError {
        kind,
        message: format!("{forge}: {}", crate::mask::mask(&message.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(class: ErrorClass, status: Option<u16>) -> HttpError {
        let mut e = HttpError::new(class, "GET", "/x", "status".into());
        e.status = status;
        e
    }

    #[test]
    fn classes_map_to_kinds() {
        let cases = [
            (ErrorClass::Transport, None, ScmErrorKind::Transport),
            (ErrorClass::Transport, Some(502), ScmErrorKind::Transport),
            (ErrorClass::Auth, Some(401), ScmErrorKind::Auth),
            (ErrorClass::Auth, Some(403), ScmErrorKind::Auth),
            (ErrorClass::NotFound, Some(404), ScmErrorKind::NotFound),
            (ErrorClass::Payload, Some(422), ScmErrorKind::Payload),
            (ErrorClass::Payload, Some(200), ScmErrorKind::Payload),
            (ErrorClass::Api, Some(429), ScmErrorKind::RateLimited),
            (ErrorClass::Api, Some(403), ScmErrorKind::RateLimited),
            (ErrorClass::Api, Some(410), ScmErrorKind::Api),
        ];
        for (class, status, want) in cases {
            assert_eq!(kind_of(&http(class, status)), want, "{class:?} {status:?}");
        }
        assert_eq!(
            scm_error("github", &http(ErrorClass::Api, Some(410))).message,
            "github: GET /x: status"
        );
    }
}
