//! `POST /api/v1/notifications`: a message from a running session's agent to the operator
//! (the `notify_operator` tool of `sortie mcp-server` posts it here). The issue must be running;
//! each issue may send a few messages per window (`notify::operator`); the message goes to
//! every destination subscribed to `operator_message`.

use std::io::Read;

use serde_json::{Value, json};
use tiny_http::Request;

use super::AppState;
use super::respond::{ApiError, JsonReply, header, send_error, send_json};
use crate::config::notifications::NotifyEvent;
use crate::notify::{Notice, Notifier, operator};

pub fn serve(state: &AppState, mut req: Request) {
    let mut body = Vec::new();
    let read = req
        .as_reader()
        .take(super::limits::MAX_BODY as u64 + 1)
        .read_to_end(&mut body);
    let result = match read {
        Ok(_) => accept(state, &body),
        Err(e) => Err(invalid(&format!("the body could not be read: {e}"))),
    };
    match result {
        Ok(reply) => send_json(req, reply, None),
        Err((e, Some(wait_ms))) => {
            let secs = (wait_ms + 999) / 1000;
            let mut resp = tiny_http::Response::from_data(
                serde_json::to_vec(&super::views::to_value(&e.body())).unwrap_or_default(),
            )
            .with_status_code(e.status);
            for h in [
                header("Content-Type", "application/json"),
                header("Retry-After", &secs.to_string()),
            ]
            .into_iter()
            .flatten()
            {
                resp.add_header(h);
            }
            let _ = req.respond(resp);
        }
        Err((e, None)) => send_error(req, e),
    }
}

type Refusal = (ApiError, Option<i64>);

fn invalid(message: &str) -> Refusal {
    (ApiError::new(400, "invalid_payload", message), None)
}

fn accept(state: &AppState, body: &[u8]) -> Result<JsonReply, Refusal> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| invalid("the body must be a JSON object with issue_identifier and message"))?;
    // Blank means ASCII white space only, the set the OpenAPI document's pattern names, so a
    // value the document allows is never refused as missing.
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r');
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(|s| s.trim_matches(blank))
    };
    let identifier = text("issue_identifier")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("issue_identifier is required (a string)"))?;
    let message = text("message")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("message is required (a non-empty string)"))?;
    if message.chars().count() > operator::MAX_MESSAGE_CHARS {
        return Err(invalid(&format!(
            "message is longer than {} characters",
            operator::MAX_MESSAGE_CHARS
        )));
    }
    let snap = state.orch.snapshot();
    let Some(row) = snap
        .running
        .iter()
        .find(|r| r.issue.identifier == identifier)
    else {
        return Err((
            ApiError::new(
                404,
                "issue_not_running",
                format!(
                    "no session of issue \"{}\" is running; only a running session's agent may message the operator",
                    super::respond::echo(identifier)
                ),
            ),
            None,
        ));
    };
    let now = state.clock.now_ms();
    operator::take(identifier, now).map_err(|wait| {
        (
            ApiError::new(
                429,
                "rate_limited",
                format!(
                    "issue \"{}\" sent {} operator messages within {} minutes; nothing was sent",
                    super::respond::echo(identifier),
                    operator::PER_WINDOW,
                    operator::WINDOW_MS / 60_000
                ),
            ),
            Some(wait),
        )
    })?;
    let notice = Notice::new(NotifyEvent::OperatorMessage, message, now)
        .issue(&row.issue.id, &row.issue.identifier);
    let taken = Notifier::global().send(&notice);
    log::info!(
        issue_id:% = row.issue.id,
        issue_identifier:% = row.issue.identifier,
        destinations:% = taken;
        "operator message queued"
    );
    let outcome = if taken == 0 {
        "No notification destination takes operator messages; nothing was sent.".to_string()
    } else {
        format!("Queued for {taken} notification destination(s).")
    };
    Ok(JsonReply::with_status(
        202,
        json!({
            "queued": taken > 0,
            "destinations": taken,
            "issue_identifier": row.issue.identifier,
            "requested_at": crate::clock::rfc3339_ms(now),
            "outcome_text": outcome,
        }),
    ))
}
