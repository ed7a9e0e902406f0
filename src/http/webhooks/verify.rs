//! The delivery signature schemes, pure: headers, body and secret in, a verdict out. Which
//! kinds accept deliveries and how each signs them is the adapters' declaration
//! ([`crate::tracker::webhook::WebhookScheme`], listed by [`crate::registry::WEBHOOKS`]); this
//! module applies it. Every comparison is constant-time (HMAC tags through `hmac`'s
//! `verify_slice`, tokens through digests compared by `hmac` as well).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::registry::{self, Webhook};
use crate::tracker::webhook::Signature;

type HmacSha256 = Hmac<Sha256>;

/// A kind whose deliveries are accepted; the path segment of the route. Equal when the names
/// are.
#[derive(Debug, Clone, Copy)]
pub struct Kind(&'static Webhook);

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        self.0.kind == other.0.kind
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.kind.hash(state);
    }
}

impl Kind {
    /// Every kind, in the registry's order.
    pub fn all() -> impl Iterator<Item = Kind> {
        registry::WEBHOOKS.iter().map(Kind)
    }

    pub fn as_str(self) -> &'static str {
        self.0.kind
    }

    pub fn parse(s: &str) -> Option<Kind> {
        registry::webhook(s).map(Kind)
    }

    /// The environment variable holding this kind's secret.
    pub fn secret_var(self) -> String {
        format!(
            "SORTIE_WEBHOOK_SECRET_{}",
            self.as_str().to_ascii_uppercase()
        )
    }

    /// The header carrying the signature (or token); a delivery without it is refused before
    /// its body is read.
    pub fn signature_header(self) -> &'static str {
        self.0.scheme.signature_header
    }

    /// The header naming the delivery, for replay protection.
    pub fn delivery_header(self) -> &'static str {
        self.0.scheme.delivery_header
    }

    /// The header naming the event, for the log only.
    pub fn event_header(self) -> &'static str {
        self.0.scheme.event_header
    }

    /// The issue a payload is about, for the log only (never acted on).
    pub fn issue_named(self, payload: &serde_json::Value) -> Option<String> {
        (self.0.scheme.issue)(payload)
    }
}

/// Why a delivery was not verified (logged; the answer is 401 either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The signature or token header is absent.
    MissingSignature,
    /// The header is not of the scheme's form (prefix, hex).
    MalformedSignature,
    /// The signature or token does not match the secret.
    BadSignature,
    /// The signed timestamp is absent, unreadable or too far from now.
    StaleTimestamp,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::MissingSignature => "missing_signature",
            Refusal::MalformedSignature => "malformed_signature",
            Refusal::BadSignature => "bad_signature",
            Refusal::StaleTimestamp => "stale_timestamp",
        }
    }
}

/// Verifies a delivery's signature over the raw `body`; `header` looks a request header up
/// case-insensitively. The timestamp rule ([`check_timestamp`]) needs the parsed body and is
/// applied after this.
pub fn verify(
    kind: Kind,
    secret: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> Result<(), Refusal> {
    let value = header(kind.signature_header());
    match kind.0.scheme.signature {
        Signature::HmacSha256Hex { prefix } => hmac_header(secret, value, prefix, body),
        Signature::Token => {
            let token = value.ok_or(Refusal::MissingSignature)?;
            if tokens_equal(secret, token.trim()) {
                Ok(())
            } else {
                Err(Refusal::BadSignature)
            }
        }
    }
}

/// A signed timestamp (Unix milliseconds) must be within the scheme's tolerance of `now_ms`;
/// kinds without one pass.
pub fn check_timestamp(kind: Kind, body: &serde_json::Value, now_ms: i64) -> Result<(), Refusal> {
    let Some(rule) = kind.0.scheme.timestamp else {
        return Ok(());
    };
    let ts = body
        .get(rule.field)
        .and_then(serde_json::Value::as_i64)
        .ok_or(Refusal::StaleTimestamp)?;
    if (now_ms.saturating_sub(ts)).abs() <= rule.tolerance_ms {
        Ok(())
    } else {
        Err(Refusal::StaleTimestamp)
    }
}

fn hmac_header(
    secret: &str,
    value: Option<String>,
    prefix: Option<&str>,
    body: &[u8],
) -> Result<(), Refusal> {
    let value = value.ok_or(Refusal::MissingSignature)?;
    let value = value.trim();
    let hex = match prefix {
        Some(p) => value.strip_prefix(p).ok_or(Refusal::MalformedSignature)?,
        None => value,
    };
    let tag = data_encoding::HEXLOWER_PERMISSIVE
        .decode(hex.as_bytes())
        .map_err(|_| Refusal::MalformedSignature)?;
    let mut mac = mac_for(secret).ok_or(Refusal::BadSignature)?;
    mac.update(body);
    mac.verify_slice(&tag).map_err(|_| Refusal::BadSignature)
}

/// HMAC takes a key of any length, so this is `None` never in practice; a refusal, not a
/// panic, if it were.
fn mac_for(secret: &str) -> Option<HmacSha256> {
    <HmacSha256 as Mac>::new_from_slice(secret.as_bytes()).ok()
}

/// Constant-time equality of two tokens of possibly different lengths: both are keyed
/// through HMAC and the tags compared in constant time.
fn tokens_equal(secret: &str, given: &str) -> bool {
    let (Some(mut a), Some(mut b)) = (mac_for(secret), mac_for(secret)) else {
        return false;
    };
    a.update(secret.as_bytes());
    b.update(given.as_bytes());
    b.verify(&a.finalize().into_bytes()).is_ok()
}

/// `hex(HMAC-SHA256(secret, body))`, as the forges sign (tests and documentation examples).
pub fn sign_hex(secret: &str, body: &[u8]) -> String {
    let Some(mut mac) = mac_for(secret) else {
        return String::new();
    };
    mac.update(body);
    data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Kind {
        Kind::parse(name).unwrap_or_else(|| panic!("{name} is not a webhook kind"))
    }

    fn headers(list: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let owned: Vec<(String, String)> = list
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name: &str| {
            owned
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        }
    }

    /// The example of GitHub's "Validating webhook deliveries" page.
    #[test]
    fn github_documented_vector() {
        let secret = "It's a Secret to Everybody";
        let body = b"Hello, World!";
        let sig = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign_hex(secret, body), sig);
        let h = headers(&[("x-hub-signature-256", &format!("sha256={sig}"))]);
        assert_eq!(verify(kind("github"), secret, &h, body), Ok(()));
        assert_eq!(
            verify(kind("github"), secret, &h, b"Hello, World?"),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            verify(kind("github"), "other", &h, body),
            Err(Refusal::BadSignature)
        );
        let bare = headers(&[("X-Hub-Signature-256", sig)]);
        assert_eq!(
            verify(kind("github"), secret, &bare, body),
            Err(Refusal::MalformedSignature)
        );
        assert_eq!(
            verify(kind("github"), secret, &headers(&[]), body),
            Err(Refusal::MissingSignature)
        );
    }

    /// RFC 4231 test case 2 (key "Jefe").
    #[test]
    fn rfc4231_vector_for_the_bare_hex_schemes() {
        let body = b"what do ya want for nothing?";
        let sig = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(sign_hex("Jefe", body), sig);
        for (kind, name) in [
            (kind("gitea"), "X-Gitea-Signature"),
            (kind("linear"), "Linear-Signature"),
        ] {
            assert_eq!(verify(kind, "Jefe", &headers(&[(name, sig)]), body), Ok(()));
            let upper = sig.to_ascii_uppercase();
            assert_eq!(
                verify(kind, "Jefe", &headers(&[(name, &upper)]), body),
                Ok(())
            );
            assert_eq!(
                verify(kind, "Jefe", &headers(&[(name, "zz")]), body),
                Err(Refusal::MalformedSignature)
            );
            assert_eq!(
                verify(kind, "jefe", &headers(&[(name, sig)]), body),
                Err(Refusal::BadSignature)
            );
        }
        let jira = headers(&[("X-Hub-Signature", &format!("sha256={sig}"))]);
        assert_eq!(verify(kind("jira"), "Jefe", &jira, body), Ok(()));
        let wrong_header = headers(&[("X-Hub-Signature-256", &format!("sha256={sig}"))]);
        assert_eq!(
            verify(kind("jira"), "Jefe", &wrong_header, body),
            Err(Refusal::MissingSignature)
        );
    }

    #[test]
    fn gitlab_token_compares_whole() {
        let ok = headers(&[("X-Gitlab-Token", "s3cret-token")]);
        assert_eq!(verify(kind("gitlab"), "s3cret-token", &ok, b"{}"), Ok(()));
        for bad in ["s3cret-toke", "s3cret-token2", "", "S3CRET-TOKEN"] {
            let h = headers(&[("X-Gitlab-Token", bad)]);
            assert_eq!(
                verify(kind("gitlab"), "s3cret-token", &h, b"{}"),
                Err(Refusal::BadSignature),
                "{bad}"
            );
        }
        assert_eq!(
            verify(kind("gitlab"), "s3cret-token", &headers(&[]), b"{}"),
            Err(Refusal::MissingSignature)
        );
    }

    #[test]
    fn linear_timestamps_within_a_minute() {
        let now = 1_700_000_000_000;
        let at = |ts: i64| serde_json::json!({"webhookTimestamp": ts});
        assert_eq!(
            check_timestamp(kind("linear"), &at(now - 59_000), now),
            Ok(())
        );
        assert_eq!(
            check_timestamp(kind("linear"), &at(now + 30_000), now),
            Ok(())
        );
        assert_eq!(
            check_timestamp(kind("linear"), &at(now - 61_000), now),
            Err(Refusal::StaleTimestamp)
        );
        assert_eq!(
            check_timestamp(kind("linear"), &serde_json::json!({}), now),
            Err(Refusal::StaleTimestamp)
        );
        assert_eq!(
            check_timestamp(kind("github"), &serde_json::json!({}), now),
            Ok(())
        );
    }

    #[test]
    fn kinds_round_trip() {
        for k in Kind::all() {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
        assert_eq!(Kind::parse("bitbucket"), None);
        assert_eq!(kind("github").secret_var(), "SORTIE_WEBHOOK_SECRET_GITHUB");
    }
}
