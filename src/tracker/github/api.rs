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

    /// `GET R/issues/{n}`: an object naming issue `number` (a pull request too), or a payload
    /// error quoting what came instead.
    pub fn get_issue(&self, number: &str) -> Result<Value, HttpError> {
        self.get_checked(number, "", |v| {
            super::normalize::number(v).as_deref() == Some(number)
        })
    }

    /// `GET R/issues/{n}/parent`: the parent issue, or a payload error for an answer that is
    /// not an issue.
    pub fn get_parent(&self, number: &str) -> Result<Value, HttpError> {
        self.get_checked(number, "/parent", |v| super::normalize::number(v).is_some())
    }

    /// [`Self::get_issue_part`] whose answer must pass `ok`.
    fn get_checked(
        &self,
        number: &str,
        rest: &str,
        ok: impl Fn(&Value) -> bool,
    ) -> Result<Value, HttpError> {
        let (v, resp) = self.get_issue_part(number, rest)?;
        if ok(&v) {
            return Ok(v);
        }
        let what = format!("an answer that is not issue {number}{rest}");
        Err(match resp {
            Some(r) => r.unreadable(what),
            None => HttpError::new(
                crate::http_client::ErrorClass::Payload,
                "GET",
                &self.issue_path(number, rest),
                format!("{what} (cached)"),
            ),
        })
    }

    /// `GET R/issues/{n}{rest}`, conditional on the cached ETag; with the response, unless the
    /// body came from the cache.
    fn get_issue_part(
        &self,
        number: &str,
        rest: &str,
    ) -> Result<(Value, Option<crate::http_client::Response>), HttpError> {
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
            return Ok((body, None));
        }
        let body: Value = resp.json()?;
        if let Some(tag) = resp.header("etag")
            && body.is_object()
        {
            etags.store(&path, tag, &body, resp.body.len());
        }
        Ok((body, Some(resp)))
    }

    /// Every page of `R/issues/{n}{rest}` (comments, blockers), each item carrying `need`,
    /// turned into what `keep` makes of it.
    pub fn list_issue_part<T>(
        &self,
        number: &str,
        rest: &str,
        what: &str,
        need: &str,
        keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let req = Request::get(self.issue_path(number, rest)).query("per_page", PER_PAGE);
        self.list(req, what, need, keep)
    }

    /// Open issues (and pull requests) of the repository, oldest first, as `keep` makes them.
    pub fn open_issues<T>(
        &self,
        keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let req = Request::get(format!("{}/issues", self.repo_path))
            .query("state", "open")
            .query("sort", "created")
            .query("direction", "asc")
            .query("per_page", PER_PAGE);
        self.list(req, "issues", "number", keep)
    }

    /// `GET /search/issues` for this repository's issues matching `terms`, oldest first, as
    /// `keep` makes them.
    pub fn search<T>(
        &self,
        terms: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let q = format!("repo:{} type:issue {terms}", self.full_name);
        let req = Request::get("/search/issues")
            .query("q", q.trim())
            .query("sort", "created")
            .query("order", "asc")
            .query("per_page", PER_PAGE);
        collect_link_pages(&self.client, req, self.page_cap, "search", |r| {
            let mut body = r.json_object()?;
            if body["incomplete_results"] == Value::Bool(true) {
                log::warn!(repo:% = self.full_name, query:% = q; "search results incomplete");
            }
            match body.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => Ok(r
                    .checked_items(items, "search", "number")?
                    .into_iter()
                    .filter_map(&mut keep)
                    .collect()),
                _ => Err(r.unreadable("a search answer without an items array")),
            }
        })
    }

    /// Every page of a list whose items each carry the field `need`, each page's JSON turned
    /// into what `keep` makes of it before the next page is read (a page's parsed tree is
    /// never held beyond its own page).
    fn list<T>(
        &self,
        req: Request,
        what: &str,
        need: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        collect_link_pages(&self.client, req, self.page_cap, what, |r| {
            Ok(r.json_items(what, need)?
                .into_iter()
                .filter_map(&mut keep)
                .collect())
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
