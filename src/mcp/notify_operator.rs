//! `notify_operator`: the agent asks for a person. The message goes to the running daemon
//! (`POST /api/v1/notifications` at `SORTIE_API_URL`), which sends it to every notification
//! destination subscribed to `operator_message`. The daemon limits each issue to a few
//! messages per window and answers 429 beyond it; the tool reports that as a failed call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::tool::{Tool, ToolError};
use crate::clock::Clock;
use crate::http_client::{ClientOptions, HttpClient, Method, Request, RetryPolicy};
use crate::notify::operator::MAX_MESSAGE_CHARS;

/// How long the daemon may take to answer; an agent's tool call should not hang on it.
const TIMEOUT: Duration = Duration::from_secs(5);

pub struct NotifyOperatorTool {
    pub issue_identifier: String,
    client: HttpClient,
    /// The route, with `?workflow=NAME` when the daemon serves several workflows.
    path: String,
}

impl NotifyOperatorTool {
    pub fn new(
        api_url: &str,
        issue_identifier: &str,
        workflow: Option<&str>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let mut opts = ClientOptions::new(api_url);
        opts.timeout = TIMEOUT;
        opts.retry = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        NotifyOperatorTool {
            issue_identifier: issue_identifier.to_string(),
            client: HttpClient::new(opts, clock, Arc::new(crate::http_client::ThreadSleeper)),
            path: match workflow {
                Some(w) => format!(
                    "/api/v1/notifications?workflow={}",
                    crate::http_client::encode(w)
                ),
                None => "/api/v1/notifications".to_string(),
            },
        }
    }
}

impl Tool for NotifyOperatorTool {
    fn name(&self) -> &'static str {
        "notify_operator"
    }

    fn description(&self) -> &'static str {
        "Send a short message to the people operating sortie (their Slack channel or webhook), for something that needs a person: a decision, a credential, access, or a blocker you cannot work around. Not for progress reports. At most 5 messages per issue within 10 minutes."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_MESSAGE_CHARS,
                    "description": "What the operator should know or do, in plain words.",
                }
            },
            "required": ["message"],
            "additionalProperties": false,
        })
    }

    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        if let Some(k) = arguments.keys().find(|k| *k != "message") {
            return Err(ToolError::InvalidArguments(format!(
                "unknown argument {k:?}: this tool takes only \"message\""
            )));
        }
        let message = match arguments.get("message") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim(),
            _ => {
                return Err(ToolError::InvalidArguments(
                    "message is required (a non-empty string)".into(),
                ));
            }
        };
        if message.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "message is longer than {MAX_MESSAGE_CHARS} characters"
            )));
        }
        let body = json!({"issue_identifier": self.issue_identifier, "message": message});
        let req = Request::new(Method::Post, self.path.clone()).json(&body);
        match self.client.send(req) {
            Ok(resp) => {
                let v = resp.json().unwrap_or(Value::Null);
                Ok(json!({
                    "sent": v["queued"].as_bool().unwrap_or(false),
                    "destinations": v["destinations"],
                    "outcome_text": v["outcome_text"],
                }))
            }
            Err(e) if e.status == Some(429) => {
                let wait = e.retry_after.map_or(0, |d| d.as_secs());
                Err(ToolError::message(format!(
                    "rate limited: this issue has sent its share of operator messages; the next is taken in {wait} s"
                )))
            }
            Err(e) => Err(ToolError::message(format!("the message was not sent: {e}"))),
        }
    }
}
