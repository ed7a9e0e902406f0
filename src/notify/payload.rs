//! What a delivery sends. Every text passes the secret masker before the body is serialized,
//! and a webhook body is signed after that, so the signature covers exactly the bytes sent.
//!
//! - Slack (incoming webhook): `{"text": "<summary>", "blocks": [section, context]}`.
//! - Webhook: `{"event", "issue_id", "issue_identifier", "text", "time", "destination",
//!   "delivery_id", "failures", "attention_id", "attention_kind"}` (absent facts are `null`),
//!   with `X-Sortie-Event: <event>`, `X-Sortie-Delivery: <delivery_id>` and, when the
//!   destination has a `secret`, `X-Sortie-Signature: sha256=<lowercase hex HMAC-SHA256 of the
//!   body under the secret>`.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::Notice;
use crate::config::notifications::{Destination, DestinationKind};
use crate::mask::mask;

/// The signature header of a webhook delivery.
pub const SIGNATURE_HEADER: &str = "X-Sortie-Signature";
pub const EVENT_HEADER: &str = "X-Sortie-Event";
pub const DELIVERY_HEADER: &str = "X-Sortie-Delivery";

/// A ready request: body bytes and the headers beside `Content-Type: application/json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// `[A-1] text` (the identifier when there is one).
fn summary(n: &Notice) -> String {
    match &n.issue_identifier {
        Some(id) => mask(&format!("[{id}] {}", n.text)),
        None => mask(&n.text),
    }
}

pub fn build(dest: &Destination, n: &Notice, delivery_id: &str) -> Payload {
    match dest.kind {
        DestinationKind::Slack => slack(n),
        DestinationKind::Webhook => webhook(dest, n, delivery_id),
    }
}

fn slack(n: &Notice) -> Payload {
    let text = format!("sortie {}: {}", n.event.as_str(), summary(n));
    let body = json!({
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": slack_escape(&text)}},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": format!("event `{}` at {}", n.event.as_str(), time(n.at_ms))}
            ]}
        ]
    });
    Payload {
        body: body.to_string().into_bytes(),
        headers: Vec::new(),
    }
}

/// Slack's mrkdwn control characters.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn opt(s: &Option<String>) -> Value {
    s.as_deref().map_or(Value::Null, |v| Value::String(mask(v)))
}

fn webhook(dest: &Destination, n: &Notice, delivery_id: &str) -> Payload {
    let body = json!({
        "event": n.event.as_str(),
        "issue_id": opt(&n.issue_id),
        "issue_identifier": opt(&n.issue_identifier),
        "text": mask(&n.text),
        "time": time(n.at_ms),
        "destination": dest.name,
        "delivery_id": delivery_id,
        "failures": n.failures,
        "attention_id": n.attention_id,
        "attention_kind": n.attention_kind,
    })
    .to_string()
    .into_bytes();
    let mut headers = vec![
        (EVENT_HEADER, n.event.as_str().to_string()),
        (DELIVERY_HEADER, delivery_id.to_string()),
    ];
    if let Some(secret) = &dest.secret {
        headers.push((SIGNATURE_HEADER, signature(secret, &body)));
    }
    Payload { body, headers }
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    format!(
        "sha256={}",
        data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::notifications::NotifyEvent;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_body_in_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn bodies_carry_the_event_issue_and_text() {
        let dest = Destination {
            name: "ops".into(),
            kind: DestinationKind::Webhook,
            url: "http://127.0.0.1:1/x".into(),
            secret: Some("k3y-value".into()),
            events: NotifyEvent::ALL.into_iter().collect(),
            failures_threshold: 1,
            rate_limit_per_minute: 1,
            disabled: None,
        };
        let n = Notice::new(
            NotifyEvent::Handoff,
            "handed off <to> Review",
            1_774_533_600_000,
        )
        .issue("7", "A-7");
        let p = build(&dest, &n, "d-1");
        let v: Value = serde_json::from_slice(&p.body).unwrap_or_default();
        assert_eq!(v["event"], "handoff");
        assert_eq!(v["issue_identifier"], "A-7");
        assert_eq!(v["time"], "2026-03-26T14:00:00Z");
        let sig = p.headers.iter().find(|(k, _)| *k == SIGNATURE_HEADER);
        assert_eq!(
            sig.map(|(_, v)| v.clone()),
            Some(signature("k3y-value", &p.body))
        );
        let slack = build(
            &Destination {
                kind: DestinationKind::Slack,
                secret: None,
                ..dest
            },
            &n,
            "d-2",
        );
        let v: Value = serde_json::from_slice(&slack.body).unwrap_or_default();
        assert_eq!(v["text"], "sortie handoff: [A-7] handed off <to> Review");
        assert_eq!(
            v["blocks"][0]["text"]["text"],
            "sortie handoff: [A-7] handed off &lt;to&gt; Review"
        );
    }
}
