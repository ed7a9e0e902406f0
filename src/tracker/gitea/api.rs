//! Requests shaped as Gitea's REST API documents them (`/api/v1`, `Authorization: token …`,
//! `page`/`limit` paging answered with a `Link` header and `X-Total-Count`), over the shared
//! HTTP client. Label writes name labels by id, which every Gitea version accepts (newer ones
//! also take names); the repository's label ids are read once and kept.
//!
//! Reference: the Gitea API documentation at <https://docs.gitea.com/api/1.22/> (the same
//! swagger every instance serves at `/api/swagger`), operations `issueListIssues`,
//! `issueGetIssue`, `issueEditIssue`, `issueGetComments`, `issueCreateComment`,
//! `issueAddLabel`, `issueRemoveLabel`, `issueListLabels` and `issueListIssueDependencies`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::settings::GiteaConfig;
use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, ErrorClass, HttpClient, HttpError, Method, RateLimitStatus, Request,
    ThreadSleeper, absent_is_ok, collect_link_pages, encode,
};

/// Items asked for per page (Gitea's default `MAX_RESPONSE_ITEMS` is 50).
pub const PAGE_LIMIT: &str = "50";

/// One repository's API.
pub struct GiteaApi {
    client: HttpClient,
    /// `/repos/{owner}/{repo}`.
    repo_path: String,
    /// `owner/repo`, for display identifiers.
    pub full_name: String,
    page_cap: usize,
    /// Lowercased label name → id, read on first need and re-read on a miss.
    label_ids: Mutex<Option<HashMap<String, u64>>>,
}

impl GiteaApi {
    pub fn new(c: &GiteaConfig, clock: Arc<dyn Clock>) -> Self {
        let mut opts = ClientOptions::tuned(&c.api_base, &c.tuning);
        opts.auth = Some(("Authorization".into(), format!("token {}", c.token)));
        opts.headers = vec![("Accept".into(), "application/json".into())];
        GiteaApi {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            repo_path: format!("/repos/{}/{}", encode(&c.owner), encode(&c.repo)),
            full_name: format!("{}/{}", c.owner, c.repo),
            page_cap: c.tuning.page_cap,
            label_ids: Mutex::new(None),
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
        let resp = self
            .client
            .send(Request::get(self.issue_path(number, "")))?;
        let v = resp.json_object()?;
        if super::normalize::number(&v).as_deref() != Some(number) {
            return Err(resp.unreadable(format!("an answer that is not issue {number}")));
        }
        Ok(v)
    }

    /// Every comment of an issue (the endpoint is not paged; a `Link` would still be followed).
    pub fn comments(&self, number: &str) -> Result<Vec<Value>, HttpError> {
        self.list(
            Request::get(self.issue_path(number, "/comments")),
            "comments",
            "id",
            Some,
        )
    }

    /// The issues this one depends on, every page.
    pub fn dependencies(&self, number: &str) -> Result<Vec<Value>, HttpError> {
        let req = Request::get(self.issue_path(number, "/dependencies")).query("limit", PAGE_LIMIT);
        self.list(req, "dependencies", "number", Some)
    }

    /// Issues (never pull requests: `type=issues`) in `state` (`open`/`closed`), optionally
    /// only those carrying `label`, with extra list parameters (the configured filter), in
    /// Gitea's order (newest first), as `keep` makes them.
    pub fn issues<T>(
        &self,
        state: &str,
        label: Option<&str>,
        extra: &[(String, String)],
        keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let mut req = Request::get(format!("{}/issues", self.repo_path))
            .query("state", state)
            .query("type", "issues");
        if let Some(l) = label {
            req = req.query("labels", l);
        }
        for (k, v) in extra {
            req = req.query(k, v.clone());
        }
        let req = req.query("page", "1").query("limit", PAGE_LIMIT);
        self.list(req, "issues", "number", keep)
    }

    /// Every page of a list whose items each carry `need`, each page's JSON turned into what
    /// `keep` makes of it before the next page is read.
    fn list<T>(
        &self,
        req: Request,
        what: &str,
        need: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let mut total: Option<String> = None;
        let items = collect_link_pages(&self.client, req, self.page_cap, what, |r| {
            if total.is_none() {
                total = r.header("x-total-count").map(String::from);
            }
            Ok(r.json_items(what, need)?
                .into_iter()
                .filter_map(&mut keep)
                .collect())
        })?;
        if let Some(t) = total {
            log::debug!(
                list:% = what,
                repo:% = self.full_name,
                items:% = items.len(),
                total_count:% = t;
                "list read"
            );
        }
        Ok(items)
    }

    pub fn post_comment(&self, number: &str, body: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(number, "/comments"))
            .json(&json!({ "body": body }));
        self.client.send(req).map(drop)
    }

    /// The id of a repository label (case-insensitive name); the list is re-read once when the
    /// name is not in the kept one, so a label created after start-up is found.
    pub fn label_id(&self, name: &str) -> Result<Option<u64>, HttpError> {
        let key = name.trim().to_lowercase();
        let mut kept = self.label_ids.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = kept.as_ref().and_then(|m| m.get(&key)) {
            return Ok(Some(*id));
        }
        let req = Request::get(format!("{}/labels", self.repo_path)).query("limit", PAGE_LIMIT);
        let labels = self.list(req, "labels", "id", Some)?;
        let map: HashMap<String, u64> = labels
            .iter()
            .filter_map(|l| {
                let name = l.get("name").and_then(Value::as_str)?;
                Some((name.to_lowercase(), l.get("id").and_then(Value::as_u64)?))
            })
            .collect();
        let found = map.get(&key).copied();
        *kept = Some(map);
        Ok(found)
    }

    /// Adds a repository label by id; a label the repository lacks is a payload error.
    pub fn add_label(&self, number: &str, label: &str) -> Result<(), HttpError> {
        let path = self.issue_path(number, "/labels");
        let Some(id) = self.label_id(label)? else {
            return Err(HttpError::new(
                ErrorClass::Payload,
                "POST",
                &path,
                format!(
                    "label {label:?} does not exist in repository {}",
                    self.full_name
                ),
            ));
        };
        let req = Request::new(Method::Post, path).json(&json!({ "labels": [id] }));
        self.client.send(req).map(drop)
    }

    /// Removes a label by id; a 404 (issue label already gone) is success.
    pub fn remove_label_id(&self, number: &str, id: u64) -> Result<(), HttpError> {
        let path = self.issue_path(number, &format!("/labels/{id}"));
        absent_is_ok(self.client.send(Request::new(Method::Delete, path)))
    }

    /// Closes or reopens an issue.
    pub fn set_open(&self, number: &str, open: bool) -> Result<(), HttpError> {
        let state = if open { "open" } else { "closed" };
        let req = Request::new(Method::Patch, self.issue_path(number, ""))
            .json(&json!({ "state": state }));
        self.client.send(req).map(drop)
    }
}
