//! Notification receivers on 127.0.0.1 (on the fake-server framework): a Slack incoming
//! webhook that answers as Slack does (`400 invalid_payload` / `no_text` for a body that is
//! not its payload shape, `200 ok` otherwise), and a generic webhook that checks the
//! `X-Sortie-Signature` HMAC-SHA256 of every delivery (`401` when it does not match) and can be
//! taken down (`503`) and brought back.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::fake_server::{FakeServer, Recorded, Reply};

/// The path both receivers serve (any path is answered; this one is what workflows name).
pub const PATH: &str = "/hook";

/// Whether `body` is an incoming-webhook payload Slack accepts: a JSON object with a
/// non-empty `text` string, and `blocks`, when present, a list of objects each with a `type`.
pub fn slack_shape_ok(body: &str) -> Result<(), &'static str> {
    let v: Value = serde_json::from_str(body).map_err(|_| "invalid_payload")?;
    let text = v.get("text").and_then(Value::as_str).unwrap_or("");
    if text.trim().is_empty() {
        return Err("no_text");
    }
    match v.get("blocks") {
        None => Ok(()),
        Some(Value::Array(blocks))
            if blocks
                .iter()
                .all(|b| b.get("type").and_then(Value::as_str).is_some()) =>
        {
            Ok(())
        }
        Some(_) => Err("invalid_blocks"),
    }
}

pub fn slack() -> FakeServer<()> {
    FakeServer::start((), |_, r: &Recorded| match slack_shape_ok(&r.body) {
        Ok(()) => Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"ok".to_vec(),
        },
        Err(why) => Reply {
            status: 400,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: why.as_bytes().to_vec(),
        },
    })
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`, computed here independently of sortie.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|e| panic!("hmac key: {e}"));
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Whether the delivery carries a signature that matches its body under `secret`.
pub fn signed_by(r: &Recorded, secret: &str) -> bool {
    r.header("x-sortie-signature") == Some(signature(secret, r.body.as_bytes()).as_str())
}

/// The webhook receiver's state: whether it answers (`up`) and its secret.
pub struct Hook {
    pub up: bool,
    pub secret: String,
}

pub fn webhook(secret: &str) -> FakeServer<Hook> {
    let hook = Hook {
        up: true,
        secret: secret.to_string(),
    };
    FakeServer::start(hook, |h: &mut Hook, r: &Recorded| {
        if !h.up {
            return Reply::empty(503);
        }
        if !signed_by(r, &h.secret) {
            return Reply::json(401, &serde_json::json!({"error": "bad signature"}));
        }
        Reply::empty(204)
    })
}
