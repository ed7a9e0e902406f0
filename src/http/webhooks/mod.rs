//! `POST /api/v1/webhooks/{kind}`: signed deliveries from GitHub, GitLab, Gitea, Jira and
//! Linear. A delivery is never trusted for content: once verified it only asks the
//! orchestrator for an immediate coalesced poll, the same request as `POST /api/v1/refresh`,
//! and the poll reads the tracker as always. The payload is read only to name the issue in
//! the log.
//!
//! Checks made from the head alone, on the connection's thread, before any body byte is read
//! ([`admit`]; a refusal closes the connection with the body unread):
//! 1. the kind must be known and have a secret in `SORTIE_WEBHOOK_SECRET_<KIND>` (else 404:
//!    an unconfigured kind is indistinguishable from an unknown one, and never accepts
//!    unsigned deliveries);
//! 2. the kind's signature header must be there ([`verify::Kind::signature_header`]; else
//!    401 `missing_signature`);
//! 3. the announced body at most [`MAX_BODY`] (else 413), and room for it in the body budget
//!    ([`budget`]; else 503 `webhook_busy` with `Retry-After`).
//!
//! Then, on a request thread, with the body in memory ([`serve`]):
//! 4. the signature ([`verify`]; else 401, and no orchestrator message at all);
//! 5. the body must be a JSON object (else 400), with a fresh signed timestamp where the
//!    scheme has one (else 401);
//! 6. neither the delivery id nor the body's digest (which the signature covers) may have
//!    been seen within [`guard::REPLAY_WINDOW_MS`] (else 409);
//! 7. the kind's bucket of verified deliveries ([`guard::RATE_PER_SEC`], burst
//!    [`guard::BURST`]; else 429 with `Retry-After`).
//!
//! Every refusal but 3's budget and 7's bucket is charged to the sender's own bucket
//! ([`guard::SENDER_BURST`], [`guard::SENDER_RATE_PER_SEC`]): past it, that sender's
//! refusals are answered 429 with `Retry-After`; nothing it sends without the secret touches
//! a kind's bucket. Refusals are logged at WARN with kind, reason and remote address, at most
//! once a second per reason with the count of those not logged ([`super::refusals`]).
//!
//! Secrets are read once, when the server starts ([`Ingress::from_env`]), and registered with
//! [`crate::mask`].

pub mod budget;
pub mod guard;
mod refused;
pub mod verify;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tiny_http::{Admission, Head, Request, Response};

use crate::clock::rfc3339_ms;
use crate::orchestrator::{RefreshOutcome, Unanswered};

use super::AppState;
use super::respond::{ApiError, JsonReply, echo, header, send_error, send_json};
use super::views::reply::{ErrorBody, RefreshReply};
use super::views::to_value;
use budget::BodyBudget;
use refused::{Origin, Refused, settle};
use verify::Kind;

/// The largest delivery read: the connection layer's body cap for this route.
pub const MAX_BODY: usize = super::limits::MAX_WEBHOOK_BODY;
/// How long a delivery waits for the orchestrator to take its poll request.
const TAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The secrets, buckets, delivery memory and body budget of one server: part of its
/// [`AppState`], so two servers in one process (tests) share none of them.
#[derive(Default)]
pub struct Ingress {
    secrets: HashMap<Kind, String>,
    memory: Mutex<Memory>,
    budget: Arc<BodyBudget>,
}

#[derive(Default)]
struct Memory {
    kinds: HashMap<Kind, guard::Bucket>,
    senders: guard::Senders,
    seen: guard::Seen,
}

impl Ingress {
    /// Reads the secrets from `SORTIE_WEBHOOK_SECRET_<KIND>` (registering each with
    /// [`crate::mask`]) and logs which kinds are served.
    pub fn from_env() -> Ingress {
        let mut secrets = HashMap::new();
        for k in Kind::all() {
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
            log::info!(kinds:% = kinds.join(","); "webhook ingress enabled");
        }
        Ingress {
            secrets,
            ..Ingress::default()
        }
    }

    /// The kind named by a path segment, with its secret, when it is configured.
    fn configured(&self, segment: &str) -> Option<(Kind, &str)> {
        Kind::parse(segment).and_then(|k| self.secrets.get(&k).map(|s| (k, s.as_str())))
    }

    /// Bytes webhook bodies hold now (their budget in use).
    pub fn body_bytes(&self) -> usize {
        self.budget.in_use()
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Charges one refusal to `sender`'s bucket: `Err(seconds)` when it is empty.
    fn charge_sender(&self, sender: Option<IpAddr>, now_ms: i64) -> Result<(), u64> {
        self.memory().senders.charge(sender, now_ms)
    }
}

fn header_of(req: &Request, name: &str) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

/// Decides, from a delivery's head alone and before any byte of its body is read, whether
/// the body is read (checks 1 to 3 of the module's list). Runs on the connection's thread.
pub fn admit(state: &AppState, head: &Head<'_>, segment: &str) -> Admission {
    let remote = head.remote.map(|a| a.to_string()).unwrap_or_default();
    let from = Origin {
        kind: segment,
        sender: head.remote.map(|a| tiny_http::client_key(a.ip())),
        remote: &remote,
        delivery: None,
    };
    let refuse = |r: Refused| Admission::Refuse(settle(state, &from, r).tiny());
    let Some((kind, _)) = state.webhooks.configured(segment) else {
        return refuse(Refused::not_configured(segment));
    };
    if head.header(kind.signature_header()).is_none() {
        return refuse(Refused::unverified(verify::Refusal::MissingSignature));
    }
    let bytes = match (head.content_length, head.chunked) {
        (_, true) => MAX_BODY,
        (Some(n), false) => n,
        (None, false) => 0,
    };
    let read = |hold: Option<Box<dyn std::any::Any + Send>>| Admission::Read {
        max_body: MAX_BODY,
        hold,
    };
    if bytes > MAX_BODY {
        // The connection layer answers 413 without reading it.
        settle(state, &from, Refused::too_large(MAX_BODY));
        return read(None);
    }
    if bytes == 0 {
        return read(None);
    }
    match state.webhooks.budget.reserve(from.sender, bytes) {
        Some(hold) => read(Some(Box::new(hold))),
        None => refuse(Refused::busy()),
    }
}

/// What the log line of an accepted delivery names.
struct Accepted {
    kind: Kind,
    delivery: Option<String>,
    event: String,
    issue: String,
}

/// Checks 4 to 7 of the module's list, over the body the connection read.
fn check(state: &AppState, req: &Request, segment: &str, now: i64) -> Result<Accepted, Refused> {
    let ing = &state.webhooks;
    let (kind, secret) = ing
        .configured(segment)
        .ok_or_else(|| Refused::not_configured(segment))?;
    let body = req.body().unwrap_or_default();
    if body.len() > MAX_BODY {
        return Err(Refused::too_large(MAX_BODY));
    }
    let lookup = |name: &str| header_of(req, name);
    verify::verify(kind, secret, &lookup, body).map_err(Refused::unverified)?;
    let payload: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) | Err(_) => return Err(Refused::bad_payload()),
    };
    verify::check_timestamp(kind, &payload, now).map_err(Refused::unverified)?;
    let delivery = lookup(kind.delivery_header()).filter(|d| !d.trim().is_empty());
    let k = kind.as_str().as_bytes();
    let mut keys = vec![guard::key(&[k, b"body", body])];
    if let Some(d) = &delivery {
        keys.push(guard::key(&[k, b"delivery", d.trim().as_bytes()]));
    }
    {
        let mut m = ing.memory();
        if m.seen.any_seen(&keys, now) {
            return Err(Refused::replayed());
        }
        m.kinds
            .entry(kind)
            .or_insert_with(|| guard::Bucket::full(now))
            .take(now)
            .map_err(Refused::kind_rate_limited)?;
        m.seen.remember(&keys, now);
    }
    Ok(Accepted {
        kind,
        delivery,
        event: lookup(kind.event_header()).unwrap_or_default(),
        issue: issue_named(kind, &payload).unwrap_or_default(),
    })
}

/// Serves one delivery whose head [`admit`] let through.
pub fn serve(state: &AppState, req: Request, kind_segment: &str) {
    let now = state.clock.now_ms();
    let remote = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
    match check(state, &req, kind_segment, now) {
        Ok(accepted) => accept(state, req, accepted, &remote, now),
        Err(r) => {
            let delivery =
                Kind::parse(kind_segment).and_then(|k| header_of(&req, k.delivery_header()));
            let from = Origin {
                kind: kind_segment,
                sender: req.remote_addr().map(|a| tiny_http::client_key(a.ip())),
                remote: &remote,
                delivery: delivery.as_deref(),
            };
            let r = settle(state, &from, r);
            match r.retry_after {
                Some(seconds) => send_with_retry_after(req, &r, seconds),
                None => send_error(req, r.api_error()),
            }
        }
    }
}

/// Asks the orchestrator for the poll and answers 202 (or 503 when it cannot take it).
fn accept(state: &AppState, req: Request, a: Accepted, remote: &str, now: i64) {
    let delivery_log = a
        .delivery
        .as_deref()
        .map(|d| echo(d).into_owned())
        .unwrap_or_default();
    state
        .orch
        .metrics
        .webhook_delivery(a.kind.as_str(), "accepted");
    let requested_at = rfc3339_ms(now);
    match state.orch.refresh(TAKE_TIMEOUT) {
        Ok(o @ (RefreshOutcome::Queued | RefreshOutcome::Coalesced)) => {
            let coalesced = o == RefreshOutcome::Coalesced;
            log::info!(
                kind:% = a.kind.as_str(),
                delivery:% = delivery_log,
                event:% = echo(&a.event),
                issue:% = echo(&a.issue),
                poll:% = if coalesced { "coalesced" } else { "queued" },
                remote:% = remote;
                "webhook delivery accepted"
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

/// The answer's message for a kind that is unknown or has no secret (the OpenAPI example).
pub fn not_configured_message(segment: &str) -> String {
    Refused::not_configured(segment).message
}

/// The issue a payload is about, for the log only (never acted on).
fn issue_named(kind: Kind, p: &Value) -> Option<String> {
    kind.issue_named(p)
}

fn send_with_retry_after(req: Request, r: &Refused, seconds: u64) {
    let body = serde_json::to_string(&ErrorBody::new(r.code, &r.message)).unwrap_or_default();
    let mut resp = Response::from_string(body).with_status_code(r.status);
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
        log::debug!(error:% = e; "http response not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Kind {
        Kind::parse(name).unwrap_or_else(|| panic!("{name} is not a webhook kind"))
    }

    #[test]
    fn the_issue_named_in_each_payload() {
        let gh = serde_json::json!({"issue": {"number": 7}, "repository": {"full_name": "o/r"}});
        assert_eq!(issue_named(kind("github"), &gh).as_deref(), Some("o/r#7"));
        let gl = serde_json::json!({"object_attributes": {"iid": 3}, "project": {"path_with_namespace": "g/p"}});
        assert_eq!(issue_named(kind("gitlab"), &gl).as_deref(), Some("g/p#3"));
        let jira = serde_json::json!({"issue": {"key": "PROJ-9"}});
        assert_eq!(issue_named(kind("jira"), &jira).as_deref(), Some("PROJ-9"));
        let lin = serde_json::json!({"data": {"identifier": "ENG-1"}});
        assert_eq!(issue_named(kind("linear"), &lin).as_deref(), Some("ENG-1"));
        assert_eq!(issue_named(kind("github"), &serde_json::json!({})), None);
    }
}
