//! Requests shaped as GitLab's REST API v4 documents them (<https://docs.gitlab.com/ee/api/rest/>):
//! the token in `PRIVATE-TOKEN` or `Authorization: Bearer`, the project addressed by its
//! URL-encoded full path, lists paged by `page` following `X-Next-Page` (empty on the last
//! page). Writes are never retried (the client retries only reads).

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, CursorPage, HttpClient, HttpError, HttpTuning, Request, Response, ThreadSleeper,
    collect_cursor_pages, encode,
};
use crate::scm::PullRequestRef;

/// GitLab's largest page.
pub const PER_PAGE: &str = "100";

/// The REST API of one GitLab instance.
pub struct Api {
    client: HttpClient,
    page_cap: usize,
}

impl Api {
    pub fn new(
        base: &str,
        token: &str,
        bearer: bool,
        tuning: &HttpTuning,
        clock: Arc<dyn Clock>,
    ) -> Api {
        let mut opts = ClientOptions::tuned(base, tuning);
        opts.auth = Some(if bearer {
            ("Authorization".into(), format!("Bearer {token}"))
        } else {
            ("PRIVATE-TOKEN".into(), token.to_string())
        });
        opts.headers = vec![("Accept".into(), "application/json".into())];
        Api {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            page_cap: tuning.page_cap,
        }
    }

    /// `/projects/{owner/repo, encoded}`.
    pub fn project_path(pr: &PullRequestRef) -> String {
        format!("/projects/{}", encode(&pr.repository()))
    }

    /// `/projects/P/merge_requests/{iid}`.
    pub fn mr_path(pr: &PullRequestRef) -> String {
        format!("{}/merge_requests/{}", Api::project_path(pr), pr.number)
    }

    pub fn send(&self, req: Request) -> Result<Response, HttpError> {
        self.client.send(req)
    }

    /// `GET` one JSON object.
    pub fn get_object(&self, req: Request) -> Result<Value, HttpError> {
        self.client.send(req)?.json_object()
    }

    /// Every page of `first`, at most `min(page_cap, cap)` pages.
    pub fn list(&self, first: Request, cap: usize, what: &str) -> Result<Vec<Value>, HttpError> {
        let first = first.query("per_page", PER_PAGE);
        collect_cursor_pages(cap.min(self.page_cap), what, |page| {
            let req = first.clone().query("page", page.unwrap_or("1"));
            let resp = self.client.send(req)?;
            let items = resp.json_array()?;
            let next = resp
                .header("x-next-page")
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from);
            Ok(CursorPage {
                items,
                has_more: next.is_some(),
                next,
            })
        })
    }
}

pub use crate::clock::epoch_ms_of as epoch_ms;
