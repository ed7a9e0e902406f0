//! Writing responses: JSON bodies with the common headers, the API's error envelope, and the
//! masking every served string passes through.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tiny_http::{Header, PreparedFields, Request, Response, StatusCode};

use crate::mask::mask_with_cow;

use super::views::reply::ErrorBody;
use super::views::to_value;

/// Sent when a body cannot be serialized: the error envelope written out, since serializing
/// it could fail the same way (a test holds it to [`ErrorBody`]).
const SERIALIZATION_FAILED: &str =
    r#"{"error":{"code":"internal_error","message":"response serialization failed"}}"#;

/// At most this many characters of a client's own text (a path, an identifier, a parameter
/// name) are quoted back in an error message.
pub const ECHO_CHARS: usize = 64;

/// A client's text as an error message quotes it: its first [`ECHO_CHARS`] characters, and
/// `…` when it is longer, so an answer never grows with what the client sent.
pub fn echo(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
    }
}

/// An API error: status, the API's code, a message, and extra headers (`Allow`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            allow: None,
        }
    }

    pub fn invalid_parameter(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_parameter", message)
    }

    pub fn history_unavailable(e: impl std::fmt::Display) -> Self {
        Self::new(
            503,
            "history_unavailable",
            format!("run history could not be read: {e}"),
        )
    }

    /// A path no route serves. The reference's error codes have no code of their own for
    /// it; its one 404 for a name nothing holds is `issue_not_found`, which is also what
    /// every unmatched `/api/v1/<segment>` answers.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "issue_not_found",
            format!("no route for \"{}\"", echo(path)),
        )
    }

    pub fn method_not_allowed(method: &str, allow: &'static str) -> Self {
        ApiError {
            status: 405,
            code: "method_not_allowed",
            message: format!("method {} is not allowed on this endpoint", echo(method)),
            allow: Some(allow),
        }
    }

    /// The envelope: `{"error": {"code": …, "message": …}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody::new(self.code, &self.message)
    }
}

/// A JSON answer ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonReply {
    pub status: u16,
    pub body: Value,
}

impl JsonReply {
    pub fn ok(body: Value) -> Self {
        JsonReply { status: 200, body }
    }
    pub fn with_status(status: u16, body: Value) -> Self {
        JsonReply { status, body }
    }
}

/// Replaces every registered secret in every string of `v` (keys included). Masking the
/// values, not the serialized text, also catches secrets that JSON escaping would change.
/// With no secret registered it returns at once; otherwise only strings that hold a secret
/// are copied.
pub fn mask_value(v: &mut Value) {
    let secrets = crate::mask::secrets();
    if !secrets.is_empty() {
        mask_value_with(v, &secrets);
    }
}

fn mask_value_with(v: &mut Value, secrets: &[Arc<str>]) {
    match v {
        Value::String(s) => {
            if let Cow::Owned(masked) = mask_with_cow(s, secrets) {
                *s = masked;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| mask_value_with(i, secrets)),
        Value::Object(map) => {
            let needs_key_mask = map
                .keys()
                .any(|k| matches!(mask_with_cow(k, secrets), Cow::Owned(_)));
            if needs_key_mask {
                let old = std::mem::take(map);
                for (k, mut val) in old {
                    mask_value_with(&mut val, secrets);
                    map.insert(mask_with_cow(&k, secrets).into_owned(), val);
                }
            } else {
                map.values_mut().for_each(|i| mask_value_with(i, secrets));
            }
        }
        _ => {}
    }
}

/// A view serialized and masked. Serializing the typed view straight to text skips the
/// `Value` tree; the tree (and [`mask_value`]) is built only when some registered secret
/// occurs in that text in its JSON-escaped form, which any string holding it would produce.
pub fn masked_json<T: Serialize>(view: &T) -> Vec<u8> {
    let Ok(text) = serde_json::to_string(view) else {
        return SERIALIZATION_FAILED.as_bytes().to_vec();
    };
    let secrets = crate::mask::secrets();
    if !secrets.iter().any(|s| text.contains(&escaped(s))) {
        return text.into_bytes();
    }
    let mut value = to_value(view);
    mask_value_with(&mut value, &secrets);
    serde_json::to_vec(&value).unwrap_or_else(|_| SERIALIZATION_FAILED.as_bytes().to_vec())
}

/// A string as it appears inside a JSON string literal (without the quotes).
fn escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(&quoted)
        .to_string()
}

pub fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

/// Sends a JSON body (masked) with the common headers. An answer to HEAD (a 405) keeps its
/// headers, `Content-Length` included, and tiny_http leaves the body out itself.
pub fn send_json(req: Request, reply: JsonReply, allow: Option<&str>) {
    let mut body = reply.body;
    mask_value(&mut body);
    let text = serde_json::to_string(&body).unwrap_or_else(|_| SERIALIZATION_FAILED.to_string());
    send_text(req, reply.status, text, allow);
}

/// Sends JSON text as it is (no masking: for a route whose body is unmasked by design), head
/// and body in one write.
pub fn send_text(req: Request, status: u16, text: String, allow: Option<&str>) {
    let mut resp = Response::from_string(text).with_status_code(status);
    for h in [
        header("Content-Type", "application/json; charset=utf-8"),
        header("Cache-Control", "no-store"),
        header("X-Content-Type-Options", "nosniff"),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    if let Some(a) = allow.and_then(|a| header("Allow", a)) {
        resp.add_header(a);
    }
    if let Err(e) = req.respond_buffered(resp) {
        log::debug!(error:% = e; "http response not delivered");
    }
}

/// The header lines of one stored encoding of a shared document (already masked JSON),
/// rendered once with it: for a full answer and for `304 Not Modified`. `no-cache` lets a
/// client keep the body and revalidate it with the strong `etag`; `Vary` because the
/// encoding follows `Accept-Encoding`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedHead {
    full: PreparedFields,
    not_modified: PreparedFields,
}

impl TaggedHead {
    /// `etag`: the encoding's quoted strong tag.
    pub fn new(etag: &str, gzip: bool) -> TaggedHead {
        let common = [
            header("Cache-Control", "no-cache"),
            header("ETag", etag),
            header("Vary", "Accept-Encoding"),
            header("X-Content-Type-Options", "nosniff"),
        ];
        let content = [
            header("Content-Type", "application/json; charset=utf-8"),
            gzip.then(|| header("Content-Encoding", "gzip")).flatten(),
        ];
        let full: Vec<Header> = common.iter().chain(&content).flatten().cloned().collect();
        let not_modified: Vec<Header> = common.into_iter().flatten().collect();
        TaggedHead {
            full: PreparedFields::new(&full),
            not_modified: PreparedFields::new(&not_modified),
        }
    }
}

/// Sends a shared document's `body` under its `head`, or `304 Not Modified` without a body
/// when the client's copy is `fresh` (its `If-None-Match` named a tag of this document). The
/// bytes go out with a `Content-Length` (no chunking), head and body in one vectored write, the
/// body never copied and no header built per answer (`respond_prepared`: tiny_http's plain
/// `respond` makes a system call for the head and one per 8 KiB of body, each waking the
/// client). tiny_http leaves the body out of an answer to HEAD itself.
pub fn send_tagged(req: Request, head: &TaggedHead, body: &[u8], fresh: bool) {
    let sent = if fresh {
        req.respond_prepared(StatusCode(304), &head.not_modified, &[])
    } else {
        req.respond_prepared(StatusCode(200), &head.full, body)
    };
    if let Err(e) = sent {
        log::debug!(error:% = e; "http response not delivered");
    }
}

/// The request's `If-None-Match` header, if any.
pub fn if_none_match(req: &Request) -> Option<&str> {
    req.headers()
        .iter()
        .find(|h| h.field.equiv("If-None-Match"))
        .map(|h| h.value.as_str())
}

/// Whether the request's `Accept-Encoding` admits gzip (`gzip`, `x-gzip` or `*`, not `q=0`).
pub fn accepts_gzip(req: &Request) -> bool {
    req.headers()
        .iter()
        .filter(|h| h.field.equiv("Accept-Encoding"))
        .any(|h| admits_gzip(h.value.as_str()))
}

fn admits_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !refused
            && ["gzip", "x-gzip", "*"]
                .iter()
                .any(|n| name.eq_ignore_ascii_case(n))
    })
}

/// Sends the error envelope.
pub fn send_error(req: Request, err: ApiError) {
    let allow = err.allow;
    send_json(
        req,
        JsonReply::with_status(err.status, to_value(&err.body())),
        allow,
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn gzip_is_admitted_unless_refused() {
        assert!(admits_gzip("gzip, deflate, br"));
        assert!(admits_gzip("br;q=1.0, GZIP;q=0.5"));
        assert!(admits_gzip("*"));
        assert!(!admits_gzip("gzip;q=0"));
        assert!(!admits_gzip("identity"));
        assert!(!admits_gzip(""));
    }

    #[test]
    fn echoes_are_short_prefixes() {
        assert_eq!(echo("MT-1"), "MT-1");
        let long = "é".repeat(1000);
        let e = echo(&long);
        assert_eq!(e.chars().count(), ECHO_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(echo(&"x".repeat(ECHO_CHARS)), "x".repeat(ECHO_CHARS));
    }

    #[test]
    fn envelope_has_code_and_message() {
        let e = ApiError::method_not_allowed("DELETE", "GET");
        assert_eq!(
            to_value(&e.body()),
            json!({"error": {"code": "method_not_allowed", "message": "method DELETE is not allowed on this endpoint"}})
        );
        assert_eq!(
            serde_json::to_string(&e.body()).ok().as_deref(),
            Some(
                r#"{"error":{"code":"method_not_allowed","message":"method DELETE is not allowed on this endpoint"}}"#
            )
        );
        assert_eq!(e.allow, Some("GET"));
        assert_eq!(e.status, 405);
    }

    #[test]
    fn the_fallback_body_is_the_envelope() {
        let fallback = ErrorBody::new("internal_error", "response serialization failed");
        assert_eq!(
            serde_json::to_string(&fallback).ok().as_deref(),
            Some(SERIALIZATION_FAILED)
        );
    }

    #[test]
    fn masking_reaches_nested_strings() {
        crate::mask::register_secret("sekrit-value-123");
        let mut v = json!({"a": ["x sekrit-value-123 y", {"b": "sekrit-value-123"}], "n": 1});
        mask_value(&mut v);
        assert_eq!(
            v,
            json!({"a": ["x [redacted] y", {"b": "[redacted]"}], "n": 1})
        );
    }
}
