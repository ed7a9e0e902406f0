//! Requests shaped as GitHub's REST API documents them (`Accept: application/vnd.github+json`,
//! `X-GitHub-Api-Version`, Bearer token), over the shared HTTP client: conditional single
//! reads through the ETag cache, paged lists and searches, and the writes.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::settings::GithubConfig;
use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, EtagCache, HttpClient, HttpError, Method, RateLimitStatus, Request,
    ThreadSleeper, absent_is_ok, collect_link_pages, encode,
};

const API_VERSION: &str = "2022-11-28";
const PER_PAGE: &str = "50";

/// One repository's API.
pub struct GithubApi {
    client: HttpClient,
    /// `/repos/{owner}/{repo}`.
    repo_path: String,
    /// `owner/repo`, for search qualifiers.
    pub full_name: String,
    page_cap: usize,
    etags: Mutex<EtagCache>,
}

impl GithubApi {
    pub fn new(c: &GithubConfig, clock: Arc<dyn Clock>) -> Self {
        let mut opts = ClientOptions::tuned(&c.endpoint, &c.tuning);
        opts.auth = Some(("Authorization".into(), format!("Bearer {}", c.token)));
        opts.headers = vec![
            ("Accept".into(), "application/vnd.github+json".into()),
            ("X-GitHub-Api-Version".into(), API_VERSION.into()),
        ];
        GithubApi {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            repo_path: format!("/repos/{}/{}", encode(&c.owner), encode(&c.repo)),
            full_name: format!("{}/{}", c.owner, c.repo),
            page_cap: c.tuning.page_cap,
            etags: Mutex::new(EtagCache::new(c.etag_cache_size)),
        }
    }

    pub fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.client.rate_limit()
    }

    /// `R/issues/{n}{rest}`.
    pub fn issue_path(&self, number: &str, rest: &str) -> String {
        format!("{}/issues/{}{rest}", self.repo_path, encode(number))
    }

    /// `GET R/issues/{n}{rest}`, conditional on the cached ETag.
    pub fn get_issue_part(&self, number: &str, rest: &str) -> Result<Value, HttpError> {
        let path = self.issue_path(number, rest);
        let mut req = Request::get(path.clone());
        let cached = self
            .etags
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .etag(&path);
        if let Some(tag) = &cached {
            req = req.header("If-None-Match", tag.clone());
        }
        let resp = self.client.send(req)?;
        let mut etags = self.etags.lock().unwrap_or_else(|p| p.into_inner());
        if resp.status == 304
            && let Some(body) = etags.hit(&path)
        {
            return Ok(body);
        }
        let body: Value = resp.json()?;
        if let Some(tag) = resp.header("etag") {
            etags.store(&path, tag, &body);
        }
        Ok(body)
    }

    /// Every page of `R/issues/{n}{rest}` (comments, blockers).
    pub fn list_issue_part(
        &self,
        number: &str,
        rest: &str,
        what: &str,
    ) -> Result<Vec<Value>, HttpError> {
        let req = Request::get(self.issue_path(number, rest)).query("per_page", PER_PAGE);
        self.list(req, what)
    }

    /// Open issues (and pull requests) of the repository, oldest first.
    pub fn open_issues(&self) -> Result<Vec<Value>, HttpError> {
        let req = Request::get(format!("{}/issues", self.repo_path))
            .query("state", "open")
            .query("sort", "created")
            .query("direction", "asc")
            .query("per_page", PER_PAGE);
        self.list(req, "issues")
    }

    /// `GET /search/issues` for this repository's issues matching `terms`, oldest first.
    pub fn search(&self, terms: &str) -> Result<Vec<Value>, HttpError> {
        let q = format!("repo:{} type:issue {terms}", self.full_name);
        let req = Request::get("/search/issues")
            .query("q", q.trim())
            .query("sort", "created")
            .query("order", "asc")
            .query("per_page", PER_PAGE);
        collect_link_pages(&self.client, req, self.page_cap, "search", |r| {
            let body: Value = r.json()?;
            if body["incomplete_results"] == Value::Bool(true) {
                log::warn!(
                    "search results incomplete repo={} query={q:?}",
                    self.full_name
                );
            }
            Ok(body["items"].as_array().cloned().unwrap_or_default())
        })
    }

    fn list(&self, req: Request, what: &str) -> Result<Vec<Value>, HttpError> {
        collect_link_pages(&self.client, req, self.page_cap, what, |r| {
            let body: Value = r.json()?;
            match body {
                Value::Array(items) => Ok(items),
                other => Err(HttpError::new(
                    crate::http_client::ErrorClass::Payload,
                    r.method,
                    &r.path,
                    format!("expected a JSON array, got {}", kind_of(&other)),
                )),
            }
        })
    }

    pub fn post_comment(&self, number: &str, body: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(number, "/comments"))
            .json(&json!({ "body": body }));
        self.client.send(req).map(drop)
    }

    pub fn add_label(&self, number: &str, label: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(number, "/labels"))
            .json(&json!({ "labels": [label] }));
        self.client.send(req).map(drop)
    }

    /// Removes a label; a 404 (label already gone) is success.
    pub fn remove_label(&self, number: &str, label: &str) -> Result<(), HttpError> {
        let path = self.issue_path(number, &format!("/labels/{}", encode(label)));
        absent_is_ok(self.client.send(Request::new(Method::Delete, path)))
    }

    /// Closes (as completed) or reopens an issue.
    pub fn set_open(&self, number: &str, open: bool) -> Result<(), HttpError> {
        let body = if open {
            json!({ "state": "open" })
        } else {
            json!({ "state": "closed", "state_reason": "completed" })
        };
        let req = Request::new(Method::Patch, self.issue_path(number, "")).json(&body);
        self.client.send(req).map(drop)
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
