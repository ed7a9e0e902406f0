//! The operator actions: `POST /api/v1/refresh`, `POST /api/v1/retries/{identifier}/run`,
//! `POST /api/v1/reactions/{identifier}/{kind}/check` and
//! `POST /api/v1/attention/{id}/acknowledge`. Each goes through the orchestrator thread, which
//! answers once it has taken (and, for an acknowledgement, saved) the request.

use std::time::Duration;

use crate::clock::rfc3339_ms;
use crate::domain::ReactionKind;
use crate::orchestrator::{
    AckError, CheckNowOutcome, OrchMsg, RefreshOutcome, RetryNowOutcome, Unanswered,
};

use super::AppState;
use super::attention;
use super::respond::{ApiError, JsonReply, echo};
use super::views::reply::{AcknowledgeReply, DueCheck, DueRetry, QueueReply, RefreshReply};
use super::views::to_value;

/// How long a request waits for the orchestrator to take it. The API sets no bound; a wait
/// this long means the orchestrator is stuck, and the caller gets a 503 saying nothing changed.
const TAKE_TIMEOUT: Duration = Duration::from_secs(30);

pub fn refresh(state: &AppState) -> Result<JsonReply, ApiError> {
    let requested_at = rfc3339_ms(state.clock.now_ms());
    let draining = || {
        Ok(JsonReply::with_status(
            409,
            to_value(&RefreshReply::draining(requested_at.clone())),
        ))
    };
    match state.orch.refresh(TAKE_TIMEOUT) {
        Ok(o @ (RefreshOutcome::Queued | RefreshOutcome::Coalesced)) => {
            let coalesced = o == RefreshOutcome::Coalesced;
            Ok(JsonReply::with_status(
                202,
                to_value(&RefreshReply::queued(requested_at.clone(), coalesced)),
            ))
        }
        Ok(RefreshOutcome::Draining) | Err(Unanswered::ShuttingDown) => draining(),
        Err(Unanswered::NotTaken) => Err(ApiError::new(
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
    let outcome = state.orch.ask(TAKE_TIMEOUT, |reply| OrchMsg::RetryNow {
        identifier: identifier.to_string(),
        reply,
    });
    match outcome {
        Ok(RetryNowOutcome::Draining) | Err(Unanswered::ShuttingDown) => Ok(
            JsonReply::with_status(409, to_value(&QueueReply::draining(requested_at))),
        ),
        Err(Unanswered::NotTaken) => Err(ApiError::new(
            503,
            "retry_now_unavailable",
            "the retry request was not taken; nothing changed",
        )),
        Ok(RetryNowOutcome::NotFound) => Err(ApiError::new(
            404,
            "retry_not_found",
            format!("no retry is scheduled for issue \"{}\"", echo(identifier)),
        )),
        Ok(RetryNowOutcome::Started { .. } | RetryNowOutcome::StillWaiting { .. }) => {
            // A row gone from the snapshot meanwhile leaves its id and attempt unknown; a
            // failure-held issue has no retry row, only its hold (its next run is a poll
            // tick's dispatch, attempt 0).
            let held = row.is_none().then(|| {
                snap.failure_held
                    .iter()
                    .find(|h| h.issue.identifier == identifier)
            });
            let (issue_id, display_identifier, attempt) = match (row, held.flatten()) {
                (Some(r), _) => (r.issue.id, r.issue.display_identifier, r.attempt),
                (None, Some(h)) => (h.issue.id.clone(), h.issue.display_identifier.clone(), 0),
                (None, None) => Default::default(),
            };
            let released = held.flatten().is_some();
            let due = DueRetry {
                issue_id,
                issue_identifier: identifier.to_string(),
                display_identifier,
                attempt,
            };
            let mut reply = QueueReply::retry_due(requested_at, due);
            if released {
                let key = reply
                    .display_identifier
                    .clone()
                    .unwrap_or_else(|| identifier.to_string());
                reply.outcome_text = super::wording::failure_hold_released(&key);
            }
            Ok(JsonReply::with_status(202, to_value(&reply)))
        }
    }
}

/// Makes a pending reaction's next check due now. An unknown kind is a reaction that is not
/// pending, so it answers 404 like an unknown issue.
pub fn reaction_check(
    state: &AppState,
    identifier: &str,
    kind: &str,
) -> Result<JsonReply, ApiError> {
    let requested_at = rfc3339_ms(state.clock.now_ms());
    let not_found = || {
        ApiError::new(
            404,
            "reaction_not_found",
            format!(
                "no pending \"{}\" reaction for issue \"{}\"",
                echo(kind),
                echo(identifier)
            ),
        )
    };
    let draining = || {
        Ok(JsonReply::with_status(
            409,
            to_value(&QueueReply::draining(requested_at.clone())),
        ))
    };
    let Ok(parsed) = kind.parse::<ReactionKind>() else {
        // Shutdown refuses every action alike, whatever the path names.
        if state.orch.snapshot().draining {
            return draining();
        }
        return Err(not_found());
    };
    let outcome = state
        .orch
        .ask(TAKE_TIMEOUT, |reply| OrchMsg::ReactionCheck {
            identifier: identifier.to_string(),
            kind: parsed,
            reply,
        });
    match outcome {
        Ok(CheckNowOutcome::Draining) | Err(Unanswered::ShuttingDown) => draining(),
        Err(Unanswered::NotTaken) => Err(ApiError::new(
            503,
            "check_now_unavailable",
            "the check request was not taken; nothing changed",
        )),
        Ok(CheckNowOutcome::NotFound) => Err(not_found()),
        Ok(CheckNowOutcome::Due(d)) => {
            let due = DueCheck {
                issue_id: d.issue_id,
                issue_identifier: d.issue_identifier,
                display_identifier: d.display_identifier,
                kind: d.kind,
                pr: d.pr,
            };
            Ok(JsonReply::with_status(
                202,
                to_value(&QueueReply::check_due(requested_at.clone(), due)),
            ))
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
            to_value(&AcknowledgeReply::draining(requested_at.clone())),
        )
    };
    if snap.draining {
        return Ok(draining());
    }
    let items = attention::items(&snap);
    let Some(item) = items.into_iter().find(|i| i.view.id == id) else {
        return Err(ApiError::new(
            404,
            "attention_item_not_found",
            format!("no current attention item has ID \"{}\"", echo(id)),
        ));
    };
    let (stored, already) = match snap.acks.get(id) {
        Some(a) => (a.clone(), true),
        None => {
            let release_issue = (item.view.kind
                == super::views::attention::AttentionKind::FailureHeld)
                .then(|| item.view.issue.issue_id.clone())
                .flatten();
            let asked = state.orch.ask(TAKE_TIMEOUT, |reply| OrchMsg::Acknowledge {
                ack: crate::store::AttentionAck {
                    item_id: id.to_string(),
                    kind: item.view.kind.as_str().to_string(),
                    acknowledged_at_ms: now,
                },
                release_issue,
                reply,
            });
            match asked {
                Ok(Ok(a)) => {
                    let already = a.acknowledged_at_ms != now;
                    (a, already)
                }
                Ok(Err(AckError::Draining)) | Err(Unanswered::ShuttingDown) => {
                    return Ok(draining());
                }
                Err(Unanswered::NotTaken) => {
                    return Err(ApiError::new(
                        503,
                        "acknowledge_unavailable",
                        "the acknowledgement was not taken; nothing changed",
                    ));
                }
                Ok(Err(AckError::NotSaved(e))) => {
                    return Err(ApiError::new(
                        500,
                        "acknowledgement_not_saved",
                        format!("the acknowledgement could not be saved: {e}"),
                    ));
                }
            }
        }
    };
    let reply = AcknowledgeReply::acknowledged(
        requested_at,
        &item.view,
        item.issue_key.as_deref(),
        already,
        rfc3339_ms(stored.acknowledged_at_ms),
    );
    Ok(JsonReply::ok(to_value(&reply)))
}
