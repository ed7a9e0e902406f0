//! The HTTP client every tracker and forge adapter talks through: one ureq agent with rustls,
//! a bounded timeout, `User-Agent: sortie/<version>`, the caller's auth header (sent only to the
//! configured endpoint's origin), error classification with masked body snippets, Link and
//! cursor paginators with page caps, rate-limit aware retries of idempotent reads, an ETag
//! cache for conditional reads, the client tuning keys adapters read from their block, and
//! size caps on what a read may take: per answer (checked against `Content-Length` before a
//! byte is read), per read over all its answers ([`ReadBudget`]), and on an answer's parsed
//! JSON tree.
//!
//! It sits in its own layer just above `mask`, `clock` and `build_info` (which it uses) and
//! below `tracker` and `scm`, so it cannot name their types: failures carry an [`ErrorClass`]
//! that each maps onto its own error kinds.

mod api_root;
mod budget;
mod classify;
mod client;
mod error;
mod etag;
mod json_tree;
mod paginate;
mod rate_limit;
mod request;
mod retry;
mod tuning;

pub use api_root::with_api_root;
pub use budget::{ReadBudget, size_text, with_read_budget};
pub use classify::{classify, is_rate_limited, rate_limit_name};
pub use client::{ClientOptions, HttpClient, MAX_ANSWER_BYTES, Sleeper, ThreadSleeper, encode};
pub use error::{ErrorClass, HttpError, MAX_SNIPPET_BYTES, absent_is_ok, snippet};
pub use etag::EtagCache;
pub use json_tree::parse_bounded;
pub use paginate::{CursorPage, collect_cursor_pages, collect_link_pages, next_link};
pub use rate_limit::{RateLimitStatus, retry_after};
pub use request::{Method, Request, Response, kind_of};
pub use retry::RetryPolicy;
pub use tuning::{HttpTuning, TUNING_KEYS, block_number};
