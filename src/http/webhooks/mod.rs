//! `POST /api/v1/webhooks/{kind}`: signed deliveries from GitHub, GitLab, Gitea, Jira and
//! Linear. A delivery is never trusted for content: once verified it only asks the
//! orchestrator for an immediate coalesced poll, the same request as `POST /api/v1/refresh`,
//! and the poll reads the tracker as always. The payload is read only to name the issue in
//! the log.
//!
//! Order of checks (each answer says nothing changed unless it is 202):
//! 1. the kind must be known and have a secret in `SORTIE_WEBHOOK_SECRET_<KIND>` (else 404:
//!    an unconfigured kind is indistinguishable from an unknown one, and never accepts
//!    unsigned deliveries);
//! 2. a token bucket per kind ([`guard::RATE_PER_SEC`], burst [`guard::BURST`]; else 429 with
//!    `Retry-After`), before any hashing, so a flood costs little;
//! 3. the body at most [`MAX_BODY`] (else 413; the connection layer already refuses larger
//!    bodies unread);
//! 4. the signature ([`verify`]; else 401, logged at WARN with kind, reason and remote
//!    address, and no orchestrator message at all);
//! 5. the body must be a JSON object (else 400), with a fresh signed timestamp where the
//!    scheme has one (else 401);
//! 6. the delivery id (or, without one, the signature) must not have been seen within
//!    [`guard::REPLAY_WINDOW_MS`] (else 409).
//!
//! Secrets are read once, when the server starts ([`Ingress::from_env`]), and registered with
//! [`crate::mask`].

pub mod guard;
pub mod verify;

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tiny_http::{Request, Response};

use crate::clock::rfc3339_ms;
use crate::orchestrator::{RefreshOutcome, Unanswered};

use super::AppState;
use super::respond::{ApiError, JsonReply, echo, header, send_error, send_json};
use super::views::reply::{ErrorBody, RefreshReply};
use super::views::to_value;
use verify::Kind;

/// The largest delivery read: the connection layer's body cap for this route.
pub const MAX_BODY: usize = super::limits::MAX_WEBHOOK_BODY;
/// How long a delivery waits for the orchestrator to take its poll request.
const TAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The secrets, buckets and delivery memory of one server: part of its [`AppState`], so two
/// servers in one process (tests) never share replay memory or rate buckets.
#[derive(Default)]
pub struct Ingress {
    secrets: HashMap<Kind, String>,
    buckets: Mutex<HashMap<Kind, guard::Bucket>>,
    seen: Mutex<guard::Seen>,
}

impl Ingress {
    /// Reads the secrets from `SORTIE_WEBHOOK_SECRET_<KIND>` (registering each with
    /// [`crate::mask`]) and logs which kinds are served.
    pub fn from_env() -> Ingress {
        let mut secrets = HashMap::new();
        for k in Kind::ALL {
            if let Ok(v) = std::env::var(k.secret_var()) {
                let v = v.trim().to_string();
                if !v.is_empty() {
                    crate::mask::register_secret(&v);
                    secrets.insert(k, v);
                }
            }
        }
        let mut kinds: Vec<&str> = secrets.keys().map(|k| k.as_str()).collect();
        kinds.sort_unstable();
        if !kinds.is_empty() {
            log::info!("webhook ingress enabled kinds={}", kinds.join(","));
        }
        Ingress {
            secrets,
            ..Ingress::default()
        }
    }
}

fn header_of(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

fn count(state: &AppState, kind: Kind, outcome: &str) {
    state.orch.metrics.webhook_delivery(kind.as_str(), outcome);
}

/// Serves one delivery.
pub fn serve(state: &AppState, mut req: Request, kind_segment: &str) {
    let ing = &state.webhooks;
    let Some((kind, secret)) =
        Kind::parse(kind_segment).and_then(|k| ing.secrets.get(&k).map(|s| (k, s.as_str())))
    else {
        return send_error(
            req,
            ApiError::new(
                404,
                "webhook_not_configured",
                format!(
                    "no webhook kind \"{}\" is configured (github, gitlab, gitea, jira or linear, each with its SORTIE_WEBHOOK_SECRET_<KIND>)",
                    echo(kind_segment)
                ),
            ),
        );
    };
    let remote = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
    let now = state.clock.now_ms();

    let limited = {
        let mut b = ing.buckets.lock().unwrap_or_else(|p| p.into_inner());
        b.entry(kind)
            .or_insert_with(|| guard::Bucket::full(now))
            .take(now)
    };
    if let Err(retry_after) = limited {
        count(state, kind, "rate_limited");
        log::warn!(
            "webhook delivery refused kind={} reason=rate_limited remote={remote}",
            kind.as_str()
        );
        return send_with_retry_after(req, retry_after);
    }

    let mut body = Vec::new();
    let read = req
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body);
    if let Err(e) = read {
        count(state, kind, "bad_payload");
        return send_error(
            req,
            ApiError::new(
                400,
                "invalid_request",
                format!("the request body could not be read: {e}"),
            ),
        );
    }
    if body.len() > MAX_BODY {
        count(state, kind, "too_large");
        return send_error(
            req,
            ApiError::new(
                413,
                "payload_too_large",
                format!("the request body is larger than {MAX_BODY} bytes"),
            ),
        );
    }

    let lookup = |name: &str| header_of(&req, name);
    let unverified = |req: Request, reason: verify::Refusal| {
        count(state, kind, "unverified");
        log::warn!(
            "webhook delivery unverified kind={} reason={} remote={remote}",
            kind.as_str(),
            reason.as_str()
        );
        send_error(
            req,
            ApiError::new(
                401,
                "webhook_unverified",
                format!(
                    "the delivery is not verified ({}); nothing changed",
                    reason.as_str()
                ),
            ),
        );
    };
    if let Err(reason) = verify::verify(kind, secret, &lookup, &body) {
        return unverified(req, reason);
    }
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => {
            count(state, kind, "bad_payload");
            log::warn!(
                "webhook delivery refused kind={} reason=bad_payload remote={remote}",
                kind.as_str()
            );
            return send_error(
                req,
                ApiError::new(
                    400,
                    "invalid_payload",
                    "the delivery's body is not a JSON object; nothing changed",
                ),
            );
        }
    };
    if let Err(reason) = verify::check_timestamp(kind, &payload, now) {
        return unverified(req, reason);
    }
    let delivery = lookup(kind.delivery_header()).filter(|d| !d.trim().is_empty());
    let replay_key = match &delivery {
        Some(d) => format!("{}:{}", kind.as_str(), d.trim()),
        // Without a delivery id, the same signed body is the same delivery.
        None => format!(
            "{}:body:{}",
            kind.as_str(),
            data_encoding::HEXLOWER.encode(&sha2_digest(&body))
        ),
    };
    let fresh = {
        let mut seen = ing.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.first_time(&replay_key, now)
    };
    let delivery_log = delivery
        .as_deref()
        .map(|d| echo(d).into_owned())
        .unwrap_or_default();
    if !fresh {
        count(state, kind, "replayed");
        log::warn!(
            "webhook delivery refused kind={} reason=replayed delivery={delivery_log} remote={remote}",
            kind.as_str()
        );
        return send_error(
            req,
            ApiError::new(
                409,
                "webhook_replayed",
                "this delivery was already received; nothing changed",
            ),
        );
    }

    let event = lookup(kind.event_header()).unwrap_or_default();
    let issue = issue_named(kind, &payload).unwrap_or_default();
    count(state, kind, "accepted");
    let requested_at = rfc3339_ms(now);
    match state.orch.refresh(TAKE_TIMEOUT) {
        Ok(o @ (RefreshOutcome::Queued | RefreshOutcome::Coalesced)) => {
            let coalesced = o == RefreshOutcome::Coalesced;
            log::info!(
                "webhook delivery accepted kind={} delivery={delivery_log} event={} issue={} poll={} remote={remote}",
                kind.as_str(),
                echo(&event),
                echo(&issue),
                if coalesced { "coalesced" } else { "queued" }
            );
            send_json(
                req,
                JsonReply::with_status(
                    202,
                    to_value(&RefreshReply::queued(requested_at, coalesced)),
                ),
                None,
            );
        }
        Ok(RefreshOutcome::Draining) | Err(Unanswered::ShuttingDown) => send_error(
            req,
            ApiError::new(
                503,
                "webhook_unavailable",
                "sortie is shutting down; nothing changed",
            ),
        ),
        Err(Unanswered::NotTaken) => send_error(
            req,
            ApiError::new(
                503,
                "webhook_unavailable",
                "the orchestrator did not take the poll request; nothing changed",
            ),
        ),
    }
}

fn sha2_digest(body: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(body).to_vec()
}

/// The issue a payload is about, for the log only (never acted on).
fn issue_named(kind: Kind, p: &Value) -> Option<String> {
    let s = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match kind {
        Kind::Github | Kind::Gitea => {
            let n = s(p.pointer("/issue/number")?)?;
            let repo = p
                .pointer("/repository/full_name")
                .and_then(s)
                .unwrap_or_default();
            Some(format!("{repo}#{n}"))
        }
        Kind::Gitlab => {
            let n = s(p.pointer("/object_attributes/iid")?)?;
            let repo = p
                .pointer("/project/path_with_namespace")
                .and_then(s)
                .unwrap_or_default();
            Some(format!("{repo}#{n}"))
        }
        Kind::Jira => s(p.pointer("/issue/key")?),
        Kind::Linear => s(p.pointer("/data/identifier")?),
    }
}

fn send_with_retry_after(req: Request, seconds: u64) {
    let body = serde_json::to_string(&ErrorBody::new(
        "rate_limited",
        "too many deliveries for this kind; nothing changed",
    ))
    .unwrap_or_default();
    let mut resp = Response::from_string(body).with_status_code(429);
    for h in [
        header("Content-Type", "application/json; charset=utf-8"),
        header("Cache-Control", "no-store"),
        header("X-Content-Type-Options", "nosniff"),
        header("Retry-After", &seconds.to_string()),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    if let Err(e) = req.respond(resp) {
        log::debug!("http response not delivered error=\"{e}\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_named_in_each_payload() {
        let gh = serde_json::json!({"issue": {"number": 7}, "repository": {"full_name": "o/r"}});
        assert_eq!(issue_named(Kind::Github, &gh).as_deref(), Some("o/r#7"));
        let gl = serde_json::json!({"object_attributes": {"iid": 3}, "project": {"path_with_namespace": "g/p"}});
        assert_eq!(issue_named(Kind::Gitlab, &gl).as_deref(), Some("g/p#3"));
        let jira = serde_json::json!({"issue": {"key": "PROJ-9"}});
        assert_eq!(issue_named(Kind::Jira, &jira).as_deref(), Some("PROJ-9"));
        let lin = serde_json::json!({"data": {"identifier": "ENG-1"}});
        assert_eq!(issue_named(Kind::Linear, &lin).as_deref(), Some("ENG-1"));
        assert_eq!(issue_named(Kind::Github, &serde_json::json!({})), None);
    }
}
