//! The HTTP client every tracker adapter (and later the forge side) talks through: one ureq
//! agent with rustls, a bounded timeout, `User-Agent: sortie/<version>`, the caller's auth
//! header, error classification with masked body snippets, Link and cursor paginators with
//! page caps, and rate-limit aware retries of idempotent reads.
//!
//! It sits in its own layer just above `mask`, `clock` and `build_info` (which it uses) and
//! below `tracker`, so it cannot name tracker types: failures carry an [`ErrorClass`] that
//! `tracker` maps onto its own error kinds.

mod classify;
mod client;
mod error;
mod paginate;
mod rate_limit;
mod request;
mod retry;

pub use classify::{classify, is_rate_limited, rate_limit_name};
pub use client::{ClientOptions, HttpClient, Sleeper, ThreadSleeper, encode};
pub use error::{ErrorClass, HttpError, MAX_SNIPPET_BYTES, snippet};
pub use paginate::{CursorPage, collect_cursor_pages, collect_link_pages, next_link};
pub use rate_limit::{RateLimitStatus, retry_after};
pub use request::{Method, Request, Response};
pub use retry::RetryPolicy;
