//! Requests shaped as GitLab's REST API v4 documents them, over the shared HTTP client: the
//! token in `PRIVATE-TOKEN` (or `Authorization: Bearer`), the project addressed by its
//! URL-encoded path or numeric id, lists paged by `page` following `X-Next-Page` (empty on
//! the last page), and edits through one `PUT` per change.
//!
//! Docs relied on: <https://docs.gitlab.com/ee/api/rest/> (authentication, URL-encoded paths,
//! pagination headers), <https://docs.gitlab.com/ee/api/issues.html> (list, single, edit with
//! `add_labels` / `remove_labels` / `state_event`), <https://docs.gitlab.com/ee/api/notes.html>
//! (issue notes, `sort`), <https://docs.gitlab.com/ee/api/issue_links.html> (links with
//! `link_type`), <https://docs.gitlab.com/ee/user/gitlab_com/#gitlabcom-specific-rate-limits>
//! (`RateLimit-*` headers, 429 with `Retry-After`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::settings::{Auth, GitlabConfig};
use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, CursorPage, HttpClient, HttpError, Method, RateLimitStatus, Request,
    ThreadSleeper, collect_cursor_pages, encode,
};

/// GitLab's largest page.
pub const PER_PAGE: &str = "100";

/// One project's API.
pub struct GitlabApi {
    client: HttpClient,
    /// `/projects/{id or encoded path}`.
    project_path: String,
    /// `tracker.project` as written, for display identifiers.
    pub project: String,
    page_cap: usize,
}

/// What an issue edit changes; empty parts are left out of the request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Edit {
    pub add_labels: Vec<String>,
    pub remove_labels: Vec<String>,
    /// `close` or `reopen`.
    pub state_event: Option<&'static str>,
}

impl Edit {
    pub fn is_empty(&self) -> bool {
        self.add_labels.is_empty() && self.remove_labels.is_empty() && self.state_event.is_none()
    }

    fn body(&self) -> Value {
        let mut body = serde_json::Map::new();
        if !self.add_labels.is_empty() {
            body.insert("add_labels".into(), json!(self.add_labels.join(",")));
        }
        if !self.remove_labels.is_empty() {
            body.insert("remove_labels".into(), json!(self.remove_labels.join(",")));
        }
        if let Some(e) = self.state_event {
            body.insert("state_event".into(), json!(e));
        }
        Value::Object(body)
    }
}

impl GitlabApi {
    pub fn new(c: &GitlabConfig, clock: Arc<dyn Clock>) -> Self {
        let mut opts = ClientOptions::tuned(&c.api_base, &c.tuning);
        opts.auth = Some(match c.auth {
            Auth::PrivateToken => ("PRIVATE-TOKEN".into(), c.token.clone()),
            Auth::Bearer => ("Authorization".into(), format!("Bearer {}", c.token)),
        });
        opts.headers = vec![("Accept".into(), "application/json".into())];
        GitlabApi {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            project_path: format!("/projects/{}", encode(&c.project)),
            project: c.project.clone(),
            page_cap: c.tuning.page_cap,
        }
    }

    pub fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.client.rate_limit()
    }

    /// `P/issues/{iid}{rest}`.
    pub fn issue_path(&self, iid: &str, rest: &str) -> String {
        format!("{}/issues/{}{rest}", self.project_path, encode(iid))
    }

    /// `GET P/issues/{iid}`: one issue object.
    /// `GET P/issues/{iid}`: an object naming issue `iid`, or a payload error quoting what
    /// came instead.
    pub fn get_issue(&self, iid: &str) -> Result<Value, HttpError> {
        let resp = self.client.send(Request::get(self.issue_path(iid, "")))?;
        let v = resp.json_object()?;
        if super::normalize::iid(&v).as_deref() != Some(iid) {
            return Err(resp.unreadable(format!("an answer that is not issue {iid}")));
        }
        Ok(v)
    }

    /// Issues of the project in `state` (`opened` / `closed`), oldest first, with extra list
    /// parameters (`labels`, the configured filter).
    /// Each item is turned into what `keep` makes of it as its page is read.
    pub fn issues<T>(
        &self,
        state: &str,
        extra: &[(String, String)],
        keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let mut req = Request::get(format!("{}/issues", self.project_path))
            .query("state", state)
            .query("order_by", "created_at")
            .query("sort", "asc");
        for (k, v) in extra {
            req = req.query(k, v.clone());
        }
        self.list(req, "issues", "iid", keep)
    }

    /// Every note of an issue, oldest first (system notes included; the caller drops them).
    pub fn notes(&self, iid: &str) -> Result<Vec<Value>, HttpError> {
        let req = Request::get(self.issue_path(iid, "/notes"))
            .query("sort", "asc")
            .query("order_by", "created_at");
        self.list(req, "notes", "id", Some)
    }

    /// The issues linked to one issue, each with its `link_type`: one request, since "List issue
    /// relations" is not paged (GitLab's description declares no `page` or `per_page` for it,
    /// and the server answers every relation at once).
    pub fn links(&self, iid: &str) -> Result<Vec<Value>, HttpError> {
        self.client
            .send(Request::get(self.issue_path(iid, "/links")))?
            .json_items("links", "iid")
    }

    pub fn post_note(&self, iid: &str, body: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(iid, "/notes"))
            .json(&json!({ "body": body }));
        self.client.send(req).map(drop)
    }

    /// `PUT P/issues/{iid}` with the edit; GitLab applies labels and state in one change.
    pub fn edit(&self, iid: &str, edit: &Edit) -> Result<(), HttpError> {
        let req = Request::new(Method::Put, self.issue_path(iid, "")).json(&edit.body());
        self.client.send(req).map(drop)
    }

    /// Every page of `first` (`per_page=100`, `page=N`), following `X-Next-Page` until it is
    /// empty or the page cap is reached; every item must carry `need`, and each page's JSON
    /// is turned into what `keep` makes of it before the next page is read.
    fn list<T>(
        &self,
        first: Request,
        what: &str,
        need: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let first = first.query("per_page", PER_PAGE);
        collect_cursor_pages(self.page_cap, what, |page| {
            let req = first.clone().query("page", page.unwrap_or("1"));
            let resp = self.client.send(req)?;
            let items = resp
                .json_items(what, need)?
                .into_iter()
                .filter_map(&mut keep)
                .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_sends_only_what_changes() {
        let e = Edit {
            add_labels: vec!["done".into()],
            remove_labels: vec!["backlog".into(), "review".into()],
            state_event: Some("close"),
        };
        assert_eq!(
            e.body(),
            json!({"add_labels": "done", "remove_labels": "backlog,review", "state_event": "close"})
        );
        assert!(Edit::default().is_empty());
        assert_eq!(Edit::default().body(), json!({}));
    }
}
