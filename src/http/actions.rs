//! The operator actions: `POST /api/v1/refresh`, `POST /api/v1/retries/{identifier}/run` and
//! `POST /api/v1/attention/{id}/acknowledge`. Each goes through the orchestrator thread, which
//! answers once it has taken (and, for an acknowledgement, saved) the request.

use std::time::Duration;

use serde_json::json;

use crate::clock::rfc3339_ms;
use crate::orchestrator::{AckError, OrchMsg, RefreshOutcome, RetryNowOutcome};

use super::AppState;
use super::attention;
use super::respond::{ApiError, JsonReply};
use super::wording;

/// How long a request waits for the orchestrator to take it. The API sets no bound; a wait
/// this long means the orchestrator is stuck, and the caller gets a 503 saying nothing changed.
const TAKE_TIMEOUT: Duration = Duration::from_secs(30);

pub fn refresh(state: &AppState) -> Result<JsonReply, ApiError> {
    let requested_at = rfc3339_ms(state.clock.now_ms());
    match state.orch.refresh(TAKE_TIMEOUT) {
        Some(o @ (RefreshOutcome::Queued | RefreshOutcome::Coalesced)) => {
            let coalesced = o == RefreshOutcome::Coalesced;
            Ok(JsonReply::with_status(
                202,
                json!({
                    "queued": true,
                    "coalesced": coalesced,
                    "requested_at": requested_at,
                    "operations": ["poll", "reconcile"],
                    "outcome_text": if coalesced {
                        wording::REFRESH_COALESCED
                    } else {
                        wording::REFRESH_QUEUED
                    },
                }),
            ))
        }
        Some(RefreshOutcome::Draining) => Ok(JsonReply::with_status(
            409,
            json!({
                "queued": false,
                "coalesced": false,
                "requested_at": requested_at,
                "operations": [],
                "outcome_text": wording::NOTHING_QUEUED_DRAINING,
            }),
        )),
        None => Err(ApiError::new(
            503,
            "snapshot_unavailable",
            "the orchestrator did not take the request; nothing changed",
        )),
    }
}

pub fn retry_now(state: &AppState, identifier: &str) -> Result<JsonReply, ApiError> {
    let requested_at = rfc3339_ms(state.clock.now_ms());
    // The row as the client saw it; the orchestrator decides whether it still exists.
    let snap = state.orch.snapshot();
    let row = snap
        .retrying
        .iter()
        .find(|r| r.issue.identifier == identifier)
        .cloned();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let unavailable = || {
        ApiError::new(
            503,
            "retry_now_unavailable",
            "the retry request was not taken; nothing changed",
        )
    };
    state
        .orch
        .tx
        .send(OrchMsg::RetryNow {
            identifier: identifier.to_string(),
            reply: tx,
        })
        .map_err(|_| unavailable())?;
    let outcome = rx.recv_timeout(TAKE_TIMEOUT).map_err(|_| unavailable())?;
    match outcome {
        RetryNowOutcome::Draining => Ok(JsonReply::with_status(
            409,
            json!({
                "queued": false,
                "requested_at": requested_at,
                "outcome_text": wording::NOTHING_QUEUED_DRAINING,
            }),
        )),
        RetryNowOutcome::NotFound => Err(ApiError::new(
            404,
            "retry_not_found",
            format!("no retry is scheduled for issue \"{identifier}\""),
        )),
        RetryNowOutcome::Started { .. } | RetryNowOutcome::StillWaiting { .. } => {
            let (issue_id, display, attempt) = row
                .map(|r| (r.issue.id, r.issue.display_identifier, r.attempt))
                .unwrap_or_default();
            let key = if display.is_empty() {
                identifier.to_string()
            } else {
                display.clone()
            };
            let mut body = json!({
                "queued": true,
                "requested_at": requested_at,
                "issue_id": issue_id,
                "issue_identifier": identifier,
                "attempt": attempt,
                "outcome_text": wording::retry_due_now(attempt, &key),
            });
            if !display.is_empty()
                && let Some(m) = body.as_object_mut()
            {
                m.insert("display_identifier".into(), display.into());
            }
            Ok(JsonReply::with_status(202, body))
        }
    }
}

pub fn acknowledge(state: &AppState, id: &str) -> Result<JsonReply, ApiError> {
    let now = state.clock.now_ms();
    let requested_at = rfc3339_ms(now);
    let snap = state.orch.snapshot();
    let draining = || {
        JsonReply::with_status(
            409,
            json!({
                "acknowledged": false,
                "already_acknowledged": false,
                "requested_at": requested_at,
                "outcome_text": wording::NOTHING_ACKNOWLEDGED_DRAINING,
            }),
        )
    };
    if snap.draining {
        return Ok(draining());
    }
    let items = attention::items(&snap);
    let Some(item) = items.into_iter().find(|i| i.id == id) else {
        return Err(ApiError::new(
            404,
            "attention_item_not_found",
            format!("no current attention item has ID \"{id}\""),
        ));
    };
    let (stored, already) = match snap.acks.get(id) {
        Some(a) => (a.clone(), true),
        None => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let unavailable = || {
                ApiError::new(
                    503,
                    "acknowledge_unavailable",
                    "the acknowledgement was not taken; nothing changed",
                )
            };
            state
                .orch
                .tx
                .send(OrchMsg::Acknowledge {
                    ack: crate::store::AttentionAck {
                        item_id: id.to_string(),
                        kind: item.kind.to_string(),
                        acknowledged_at_ms: now,
                    },
                    reply: tx,
                })
                .map_err(|_| unavailable())?;
            match rx.recv_timeout(TAKE_TIMEOUT).map_err(|_| unavailable())? {
                Ok(a) => {
                    let already = a.acknowledged_at_ms != now;
                    (a, already)
                }
                Err(AckError::Draining) => return Ok(draining()),
                Err(AckError::NotSaved(e)) => {
                    return Err(ApiError::new(
                        500,
                        "acknowledgement_not_saved",
                        format!("the acknowledgement could not be saved: {e}"),
                    ));
                }
            }
        }
    };
    let mut body = serde_json::Map::new();
    body.insert("acknowledged".into(), true.into());
    body.insert("already_acknowledged".into(), already.into());
    body.insert("requested_at".into(), requested_at.into());
    body.insert("id".into(), id.into());
    body.insert("kind".into(), item.kind.into());
    for k in ["issue_id", "issue_identifier", "display_identifier"] {
        if let Some(v) = item.json.get(k) {
            body.insert(k.into(), v.clone());
        }
    }
    body.insert(
        "acknowledged_at".into(),
        rfc3339_ms(stored.acknowledged_at_ms).into(),
    );
    body.insert(
        "outcome_text".into(),
        wording::acknowledged(already, item.issue_key.as_deref(), &item.reason_text).into(),
    );
    Ok(JsonReply::ok(serde_json::Value::Object(body)))
}
