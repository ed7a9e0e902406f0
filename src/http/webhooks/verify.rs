//! The forges' delivery signature schemes, pure: headers, body and secret in, a verdict out.
//! Every comparison is constant-time (HMAC tags through `hmac`'s `verify_slice`, tokens
//! through digests compared by `hmac` as well).
//!
//! Sources:
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)>`, delivery id in
//!   `X-GitHub-Delivery` (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>,
//!   whose example is the unit test `github_documented_vector`).
//! - Gitea: `X-Gitea-Signature: <hex HMAC-SHA256(body)>`, delivery id in `X-Gitea-Delivery`
//!   (<https://docs.gitea.com/usage/webhooks>).
//! - GitLab: `X-Gitlab-Token: <secret>` as configured, delivery id in `X-Gitlab-Event-UUID`
//!   (<https://docs.gitlab.com/user/project/integrations/webhooks/>).
//! - Jira Cloud: webhooks registered with a secret carry `X-Hub-Signature: sha256=<hex
//!   HMAC-SHA256(body)>` (the WebSub `method=signature` form), delivery id in
//!   `X-Atlassian-Webhook-Identifier`
//!   (<https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks>).
//! - Linear: `Linear-Signature: <hex HMAC-SHA256(body)>`, delivery id in `Linear-Delivery`,
//!   and `webhookTimestamp` (Unix milliseconds) in the body, to be within a minute of now
//!   (<https://linear.app/developers/webhooks>).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The forges whose deliveries are accepted; the path segment of the route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Github,
    Gitlab,
    Gitea,
    Jira,
    Linear,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Github,
        Kind::Gitlab,
        Kind::Gitea,
        Kind::Jira,
        Kind::Linear,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Github => "github",
            Kind::Gitlab => "gitlab",
            Kind::Gitea => "gitea",
            Kind::Jira => "jira",
            Kind::Linear => "linear",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The environment variable holding this kind's secret.
    pub fn secret_var(self) -> String {
        format!(
            "SORTIE_WEBHOOK_SECRET_{}",
            self.as_str().to_ascii_uppercase()
        )
    }

    /// The header carrying the signature (or GitLab's token); a delivery without it is
    /// refused before its body is read.
    pub fn signature_header(self) -> &'static str {
        match self {
            Kind::Github => "X-Hub-Signature-256",
            Kind::Jira => "X-Hub-Signature",
            Kind::Gitea => "X-Gitea-Signature",
            Kind::Linear => "Linear-Signature",
            Kind::Gitlab => "X-Gitlab-Token",
        }
    }

    /// The header naming the delivery, for replay protection.
    pub fn delivery_header(self) -> &'static str {
        match self {
            Kind::Github => "X-GitHub-Delivery",
            Kind::Gitlab => "X-Gitlab-Event-UUID",
            Kind::Gitea => "X-Gitea-Delivery",
            Kind::Jira => "X-Atlassian-Webhook-Identifier",
            Kind::Linear => "Linear-Delivery",
        }
    }

    /// The header naming the event, for the log only.
    pub fn event_header(self) -> &'static str {
        match self {
            Kind::Github => "X-GitHub-Event",
            Kind::Gitlab => "X-Gitlab-Event",
            Kind::Gitea => "X-Gitea-Event",
            Kind::Jira => "X-Atlassian-Webhook-Flow",
            Kind::Linear => "Linear-Event",
        }
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

/// How far a signed timestamp may be from now (Linear's documented bound).
pub const TIMESTAMP_TOLERANCE_MS: i64 = 60_000;

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
    match kind {
        Kind::Github | Kind::Jira => hmac_header(secret, value, Some("sha256="), body),
        Kind::Gitea | Kind::Linear => hmac_header(secret, value, None, body),
        Kind::Gitlab => {
            let token = value.ok_or(Refusal::MissingSignature)?;
            if tokens_equal(secret, token.trim()) {
                Ok(())
            } else {
                Err(Refusal::BadSignature)
            }
        }
    }
}

/// A signed `webhookTimestamp` (Unix milliseconds) must be within
/// [`TIMESTAMP_TOLERANCE_MS`] of `now_ms`; kinds without one pass.
pub fn check_timestamp(kind: Kind, body: &serde_json::Value, now_ms: i64) -> Result<(), Refusal> {
    if kind != Kind::Linear {
        return Ok(());
    }
    let ts = body
        .get("webhookTimestamp")
        .and_then(serde_json::Value::as_i64)
        .ok_or(Refusal::StaleTimestamp)?;
    if (now_ms.saturating_sub(ts)).abs() <= TIMESTAMP_TOLERANCE_MS {
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
        assert_eq!(verify(Kind::Github, secret, &h, body), Ok(()));
        assert_eq!(
            verify(Kind::Github, secret, &h, b"Hello, World?"),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            verify(Kind::Github, "other", &h, body),
            Err(Refusal::BadSignature)
        );
        let bare = headers(&[("X-Hub-Signature-256", sig)]);
        assert_eq!(
            verify(Kind::Github, secret, &bare, body),
            Err(Refusal::MalformedSignature)
        );
        assert_eq!(
            verify(Kind::Github, secret, &headers(&[]), body),
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
            (Kind::Gitea, "X-Gitea-Signature"),
            (Kind::Linear, "Linear-Signature"),
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
        assert_eq!(verify(Kind::Jira, "Jefe", &jira, body), Ok(()));
        let wrong_header = headers(&[("X-Hub-Signature-256", &format!("sha256={sig}"))]);
        assert_eq!(
            verify(Kind::Jira, "Jefe", &wrong_header, body),
            Err(Refusal::MissingSignature)
        );
    }

    #[test]
    fn gitlab_token_compares_whole() {
        let ok = headers(&[("X-Gitlab-Token", "s3cret-token")]);
        assert_eq!(verify(Kind::Gitlab, "s3cret-token", &ok, b"{}"), Ok(()));
        for bad in ["s3cret-toke", "s3cret-token2", "", "S3CRET-TOKEN"] {
            let h = headers(&[("X-Gitlab-Token", bad)]);
            assert_eq!(
                verify(Kind::Gitlab, "s3cret-token", &h, b"{}"),
                Err(Refusal::BadSignature),
                "{bad}"
            );
        }
        assert_eq!(
            verify(Kind::Gitlab, "s3cret-token", &headers(&[]), b"{}"),
            Err(Refusal::MissingSignature)
        );
    }

    #[test]
    fn linear_timestamps_within_a_minute() {
        let now = 1_700_000_000_000;
        let at = |ts: i64| serde_json::json!({"webhookTimestamp": ts});
        assert_eq!(
            check_timestamp(Kind::Linear, &at(now - 59_000), now),
            Ok(())
        );
        assert_eq!(
            check_timestamp(Kind::Linear, &at(now + 30_000), now),
            Ok(())
        );
        assert_eq!(
            check_timestamp(Kind::Linear, &at(now - 61_000), now),
            Err(Refusal::StaleTimestamp)
        );
        assert_eq!(
            check_timestamp(Kind::Linear, &serde_json::json!({}), now),
            Err(Refusal::StaleTimestamp)
        );
        assert_eq!(
            check_timestamp(Kind::Github, &serde_json::json!({}), now),
            Ok(())
        );
    }

    #[test]
    fn kinds_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
        assert_eq!(Kind::parse("bitbucket"), None);
        assert_eq!(Kind::Github.secret_var(), "SORTIE_WEBHOOK_SECRET_GITHUB");
    }
}
