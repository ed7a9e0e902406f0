//! This adapter's errors: the shared HTTP classes (`scm::http_error`) under the `github:` prefix.

use crate::http_client::HttpError;
use crate::scm::{ScmError, ScmErrorKind};

pub fn scm_error(e: &HttpError) -> ScmError {
    crate::scm::http_error::scm_error(super::KIND, e)
}

/// An error this adapter raises itself.
pub fn own(kind: ScmErrorKind, message: impl Into<String>) -> ScmError {
    crate::scm::http_error::own(super::KIND, kind, message)
}
