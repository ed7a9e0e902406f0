//! Requests shaped as Gitea's REST API documents them (<https://docs.gitea.com/api/1.22/>, the
//! swagger every instance serves at `/api/swagger`): `Authorization: token …`, the repository
//! addressed as `/repos/{owner}/{repo}`, lists paged by `page`/`limit` and followed through
//! `Link` (`rel="next"`). Writes are never retried (the client retries only reads).

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, HttpClient, HttpError, HttpTuning, Request, Response, ThreadSleeper,
    collect_link_pages, encode,
};
use crate::scm::{PullRequestRef, ScmError, ScmErrorKind};

/// Items asked for per page (Gitea's default `MAX_RESPONSE_ITEMS` is 50).
pub const PAGE_LIMIT: &str = "50";

/// The REST API of one Gitea instance.
pub struct Api {
    client: HttpClient,
    page_cap: usize,
}

impl Api {
    pub fn new(base: &str, token: &str, tuning: &HttpTuning, clock: Arc<dyn Clock>) -> Api {
        let mut opts = ClientOptions::tuned(base, tuning);
        opts.auth = Some(("Authorization".into(), format!("token {token}")));
        opts.headers = vec![("Accept".into(), "application/json".into())];
        Api {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            page_cap: tuning.page_cap,
        }
    }

    /// `/repos/{owner}/{repo}`.
    pub fn repo_path(pr: &PullRequestRef) -> String {
        format!("/repos/{}/{}", encode(&pr.owner), encode(&pr.repo))
    }

    /// `/repos/R/pulls/{index}`.
    pub fn pull_path(pr: &PullRequestRef) -> String {
        format!("{}/pulls/{}", Api::repo_path(pr), pr.number)
    }

    /// `/repos/R/issues/{index}` (a pull request is an issue for labels and its timeline).
    pub fn issue_path(pr: &PullRequestRef) -> String {
        format!("{}/issues/{}", Api::repo_path(pr), pr.number)
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
        let first = first.query("page", "1").query("limit", PAGE_LIMIT);
        collect_link_pages(&self.client, first, cap.min(self.page_cap), what, |r| {
            r.json_array()
        })
    }
}

pub use crate::clock::epoch_ms_of as epoch_ms;

/// A failed call as this forge's error.
pub fn scm_error(e: &HttpError) -> ScmError {
    crate::scm::http_error::scm_error(super::KIND, e)
}

/// An error this adapter raises itself.
pub fn own(kind: ScmErrorKind, message: impl Into<String>) -> ScmError {
    crate::scm::http_error::own(super::KIND, kind, message)
}
