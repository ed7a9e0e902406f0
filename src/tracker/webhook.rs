//! How a tracker kind signs the webhook deliveries it sends: data an adapter declares in its
//! descriptor and the HTTP route applies (`http::webhooks::verify`), so the route names no
//! vendor and a new kind's scheme lives in its own folder.

use serde_json::Value;

/// A kind's delivery signing scheme and the headers around it.
#[derive(Debug, Clone, Copy)]
pub struct WebhookScheme {
    /// The header carrying the signature or token; a delivery without it is refused before
    /// its body is read.
    pub signature_header: &'static str,
    pub signature: Signature,
    /// The header naming the delivery, for replay protection.
    pub delivery_header: &'static str,
    /// The header naming the event, for the log only.
    pub event_header: &'static str,
    /// A signed timestamp the body must carry, close to now; `None` when the scheme has none.
    pub timestamp: Option<SignedTimestamp>,
    /// The issue a payload is about, for the log only (never acted on).
    pub issue: fn(&Value) -> Option<String>,
}

/// What the signature header holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    /// Hex HMAC-SHA256 of the raw body under the secret, after `prefix` when there is one.
    HmacSha256Hex { prefix: Option<&'static str> },
    /// The secret itself, compared whole.
    Token,
}

/// A Unix-milliseconds timestamp inside the signed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedTimestamp {
    /// The top-level body field holding it.
    pub field: &'static str,
    /// How far from now it may be.
    pub tolerance_ms: i64,
}

/// A string or number at `pointer` in `payload`, as text.
pub fn text_at(payload: &Value, pointer: &str) -> Option<String> {
    match payload.pointer(pointer)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `<repository>#<number>` for payloads naming an issue by number inside a repository; the
/// number is required, the repository may be missing.
pub fn repo_number(payload: &Value, number: &str, repository: &str) -> Option<String> {
    let n = text_at(payload, number)?;
    let repo = text_at(payload, repository).unwrap_or_default();
    Some(format!("{repo}#{n}"))
}
