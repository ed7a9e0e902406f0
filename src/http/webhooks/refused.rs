//! A refused delivery: its answer, what the metric counts, what the log says, and whether the
//! sender's bucket pays for it. One path for every refusal, whether made from the head on the
//! connection's thread ([`super::admit`]) or after the body on a request thread
//! ([`super::serve`]): the sender's bucket may turn the answer into 429, the metric counts
//! it, and the log line is bounded by [`crate::http::refusals::Refusals`].

use std::net::IpAddr;
use std::time::Instant;

use super::super::AppState;
use super::super::respond::{ApiError, echo};
use super::verify::{Kind, Refusal};

/// Why a delivery is refused, and what it is answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// `sortie_webhook_deliveries_total`'s outcome.
    pub outcome: &'static str,
    /// The log's `reason`: what failed (also when the answer became 429).
    pub reason: &'static str,
    /// The sender caused it (it did not hold the secret, or sent the same thing twice): its
    /// bucket pays.
    pub sender_pays: bool,
    pub retry_after: Option<u64>,
    /// The log line's message.
    pub line: &'static str,
}

const UNVERIFIED: &str = "webhook delivery unverified";
const REFUSED: &str = "webhook delivery refused";

impl Refused {
    pub fn not_configured(segment: &str) -> Refused {
        Refused {
            status: 404,
            code: "webhook_not_configured",
            message: format!(
                "no webhook kind \"{}\" is configured ({}, each with its SORTIE_WEBHOOK_SECRET_<KIND>)",
                echo(segment),
                crate::registry::webhook_kinds_text()
            ),
            outcome: "not_configured",
            reason: "not_configured",
            sender_pays: true,
            retry_after: None,
            line: REFUSED,
        }
    }

    pub fn unverified(why: Refusal) -> Refused {
        Refused {
            status: 401,
            code: "webhook_unverified",
            message: format!(
                "the delivery is not verified ({}); nothing changed",
                why.as_str()
            ),
            outcome: "unverified",
            reason: why.as_str(),
            sender_pays: true,
            retry_after: None,
            line: UNVERIFIED,
        }
    }

    pub fn bad_payload() -> Refused {
        Refused {
            status: 400,
            code: "invalid_payload",
            message: "the delivery's body is not a JSON object; nothing changed".into(),
            outcome: "bad_payload",
            reason: "bad_payload",
            sender_pays: true,
            retry_after: None,
            line: REFUSED,
        }
    }

    pub fn replayed() -> Refused {
        Refused {
            status: 409,
            code: "webhook_replayed",
            message: "this delivery was already received; nothing changed".into(),
            outcome: "replayed",
            reason: "replayed",
            sender_pays: true,
            retry_after: None,
            line: REFUSED,
        }
    }

    pub fn too_large(max: usize) -> Refused {
        Refused {
            status: 413,
            code: "payload_too_large",
            message: format!("the request body is larger than {max} bytes"),
            outcome: "too_large",
            reason: "too_large",
            sender_pays: true,
            retry_after: None,
            line: REFUSED,
        }
    }

    /// The kind's bucket of verified deliveries is empty.
    pub fn kind_rate_limited(seconds: u64) -> Refused {
        Refused {
            status: 429,
            code: "rate_limited",
            message: "too many deliveries for this kind; nothing changed".into(),
            outcome: "rate_limited",
            reason: "rate_limited",
            sender_pays: false,
            retry_after: Some(seconds),
            line: REFUSED,
        }
    }

    /// The body budget has no room for this delivery now.
    pub fn busy() -> Refused {
        Refused {
            status: 503,
            code: "webhook_busy",
            message: "too many webhook bodies are being read now; retry later; nothing changed"
                .into(),
            outcome: "busy",
            reason: "busy",
            sender_pays: false,
            retry_after: Some(1),
            line: REFUSED,
        }
    }

    /// The answer when the sender's bucket is empty: 429, the reason kept for the log.
    fn sender_rate_limited(self, seconds: u64) -> Refused {
        Refused {
            status: 429,
            code: "rate_limited",
            message: "too many refused deliveries from this client; nothing changed".into(),
            outcome: "rate_limited",
            retry_after: Some(seconds),
            ..self
        }
    }

    pub fn api_error(&self) -> ApiError {
        ApiError::new(self.status, self.code, self.message.clone())
    }

    pub fn tiny(&self) -> tiny_http::Refusal {
        tiny_http::Refusal {
            status: self.status,
            code: self.code,
            message: self.message.clone(),
            retry_after: self.retry_after,
        }
    }
}

/// Where a refused delivery came from, for the sender's bucket and the log.
pub struct Origin<'a> {
    /// The kind as named in the path (known or not).
    pub kind: &'a str,
    pub sender: Option<IpAddr>,
    pub remote: &'a str,
    pub delivery: Option<&'a str>,
}

/// Charges the sender when it pays (an empty bucket turns the answer into 429), counts the
/// outcome, logs the refusal within the bounds of the refusal log, and returns the answer.
pub fn settle(state: &AppState, from: &Origin<'_>, r: Refused) -> Refused {
    let r = if r.sender_pays {
        let now = state.clock.now_ms();
        let charged = state.webhooks.charge_sender(from.sender, now);
        match charged {
            Ok(()) => r,
            Err(seconds) => r.sender_rate_limited(seconds),
        }
    } else {
        r
    };
    let label = Kind::parse(from.kind).map_or(crate::metrics::catalogue::OTHER, Kind::as_str);
    state.orch.metrics.webhook_delivery(label, r.outcome);
    if let Some(suppressed) = state.refusals.note((label, r.reason), Instant::now()) {
        let kind = echo(from.kind);
        let delivery = from.delivery.map(echo).unwrap_or_default();
        log::warn!(
            kind = kind.as_ref(),
            reason = r.reason,
            remote = from.remote,
            delivery = delivery.as_ref(),
            suppressed = suppressed;
            "{}", r.line
        );
    }
    r
}
