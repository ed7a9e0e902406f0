//! The running daemon's view of one issue, asked over its HTTP API
//! (`GET /api/v1/{identifier}` at `SORTIE_API_URL`): the live part of figures that the
//! database holds only once a session has finished.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::clock::Clock;
use crate::http_client::{ClientOptions, ErrorClass, HttpClient, HttpError, Request, RetryPolicy};

/// How long one question to the daemon may take; an agent's tool call should not hang on it.
const TIMEOUT: Duration = Duration::from_secs(3);

/// What the daemon said about the issue.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveIssue {
    /// The issue detail; its `running` member is the session now running, or `null`.
    Known(Value),
    /// The daemon answers but knows no such issue.
    Unknown,
}

/// Why the daemon could not be asked.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveError {
    /// `SORTIE_API_URL` names no daemon.
    NotConfigured,
    /// The request failed or the answer was not JSON.
    Http(HttpError),
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::NotConfigured => f.write_str("SORTIE_API_URL is not set"),
            LiveError::Http(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// A client of the daemon's API.
pub struct DaemonApi {
    client: HttpClient,
    /// `?workflow=NAME` when the daemon serves several workflows, else empty.
    query: String,
}

impl DaemonApi {
    /// `workflow`: the name the API knows this session's workflow by when the daemon serves
    /// several (`?workflow=`).
    pub fn new(base_url: &str, workflow: Option<&str>, clock: Arc<dyn Clock>) -> DaemonApi {
        let mut opts = ClientOptions::new(base_url);
        opts.timeout = TIMEOUT;
        opts.retry = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        opts.headers
            .push(("Accept".into(), "application/json".into()));
        DaemonApi {
            client: HttpClient::new(opts, clock, Arc::new(crate::http_client::ThreadSleeper)),
            query: workflow
                .map(|w| format!("?workflow={}", crate::http_client::encode(w)))
                .unwrap_or_default(),
        }
    }

    /// The issue's detail; `Err` with the reason when the daemon cannot be asked.
    pub fn issue(&self, identifier: &str) -> Result<LiveIssue, LiveError> {
        let path = format!(
            "/api/v1/{}{}",
            crate::http_client::encode(identifier),
            self.query
        );
        match self.client.send(Request::get(path)) {
            Ok(resp) => resp.json().map(LiveIssue::Known).map_err(LiveError::Http),
            Err(e) if e.class == ErrorClass::NotFound => Ok(LiveIssue::Unknown),
            Err(e) => Err(LiveError::Http(e)),
        }
    }
}
