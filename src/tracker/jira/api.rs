//! Requests shaped as Jira's REST API documents them over the shared HTTP client: Jira Cloud's
//! v3 (Basic `email:token`, JQL search by `nextPageToken` at `search/jql`, ADF bodies) or Jira
//! Server / Data Center's v2 (Bearer personal access token or Basic `user:password`, JQL search
//! by `startAt` offset at `search`, wiki-markup bodies); both page comments by `startAt`, and
//! take transitions and label edits alike. `Accept: application/json` and, when configured,
//! `tracker.user_agent` go with every request.

use std::sync::Arc;

use serde_json::{Value, json};

use super::settings::{ApiVersion, JiraAuth, JiraConfig};
use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, CursorPage, HttpClient, HttpError, Method, RateLimitStatus, Request,
    ThreadSleeper, collect_cursor_pages, encode,
};

/// The fields every issue read asks for.
pub const FIELDS: &str = "summary,status,priority,labels,assignee,issuetype,parent,issuelinks,created,updated,description";
/// The fields of a single issue read: [`FIELDS`] and the project it belongs to.
const ONE_ISSUE_FIELDS: &str = "summary,status,priority,labels,assignee,issuetype,parent,issuelinks,created,updated,description,project";

/// What an issue answer must carry to be read: its id, its key and its status.
fn issue_gap(v: &Value) -> Option<&'static str> {
    if !v.is_object() {
        Some("an object")
    } else if super::normalize::id_of(v.get("id")).is_none() {
        Some("an id")
    } else if super::normalize::key(v).is_empty() {
        Some("a key")
    } else if super::normalize::state(v).is_empty() {
        Some("fields.status.name")
    } else {
        None
    }
}
const PAGE: usize = 50;

/// One Jira site's API.
pub struct JiraApi {
    client: HttpClient,
    page_cap: usize,
    version: ApiVersion,
    /// `/rest/api/3` or `/rest/api/2`.
    base: &'static str,
}

impl JiraApi {
    pub fn new(c: &JiraConfig, clock: Arc<dyn Clock>) -> Self {
        let mut opts = ClientOptions::tuned(&c.endpoint, &c.tuning);
        let auth = match &c.auth {
            JiraAuth::Basic { user, secret } => {
                let basic = data_encoding::BASE64.encode(format!("{user}:{secret}").as_bytes());
                // The encoded pair is as secret as the token it carries.
                crate::mask::register_secret(&basic);
                format!("Basic {basic}")
            }
            JiraAuth::Bearer(token) => format!("Bearer {token}"),
        };
        opts.auth = Some(("Authorization".into(), auth));
        opts.headers = vec![("Accept".into(), "application/json".into())];
        if let Some(ua) = &c.user_agent {
            opts.headers.push(("User-Agent".into(), ua.clone()));
        }
        JiraApi {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            page_cap: c.tuning.page_cap,
            version: c.api_version,
            base: match c.api_version {
                ApiVersion::V2 => "/rest/api/2",
                ApiVersion::V3 => "/rest/api/3",
            },
        }
    }

    pub fn version(&self) -> ApiVersion {
        self.version
    }

    pub fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.client.rate_limit()
    }

    fn issue_path(&self, id: &str, rest: &str) -> String {
        format!("{}/issue/{}{rest}", self.base, encode(id.trim()))
    }

    /// Every issue matching `jql`, page by page up to the page cap, each turned into what
    /// `keep` makes of it as its page is read.
    pub fn search<T>(
        &self,
        jql: &str,
        fields: &str,
        keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        match self.version {
            ApiVersion::V3 => self.search_jql(jql, fields, keep),
            ApiVersion::V2 => self.search_offset(jql, fields, keep),
        }
    }

    /// Jira Server / Data Center's `GET /rest/api/2/search`, paged by `startAt` until a page
    /// reaches `total` or comes back empty.
    fn search_offset<T>(
        &self,
        jql: &str,
        fields: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        let mut out = Vec::new();
        let mut read = 0usize;
        for _ in 0..self.page_cap {
            let req = Request::get("/rest/api/2/search")
                .query("jql", jql)
                .query("fields", fields)
                .query("maxResults", PAGE.to_string())
                .query("startAt", read.to_string());
            let resp = self.client.send(req)?;
            let mut body: Value = resp.json()?;
            let page = match body.get_mut("issues").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => return Err(resp.unreadable("answer has no issues array")),
            };
            let start = body.get("startAt").and_then(Value::as_u64).unwrap_or(0) as usize;
            let total = body.get("total").and_then(Value::as_u64).unwrap_or(0) as usize;
            let len = page.len();
            read += len;
            out.extend(page.into_iter().filter_map(&mut keep));
            if len == 0 || start + len >= total {
                return Ok(out);
            }
        }
        log::warn!(
            list:% = "search",
            page_cap:% = self.page_cap,
            items_read:% = read;
            "page cap reached, result is partial"
        );
        Ok(out)
    }

    /// Jira Cloud's `GET /rest/api/3/search/jql`, paged by `nextPageToken`.
    fn search_jql<T>(
        &self,
        jql: &str,
        fields: &str,
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        collect_cursor_pages(self.page_cap, "/rest/api/3/search/jql", |cursor| {
            let mut req = Request::get("/rest/api/3/search/jql")
                .query("jql", jql)
                .query("fields", fields)
                .query("maxResults", PAGE.to_string());
            if let Some(c) = cursor {
                req = req.query("nextPageToken", c);
            }
            let resp = self.client.send(req)?;
            let mut body: Value = resp.json()?;
            let items = match body.get_mut("issues").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => return Err(resp.unreadable("answer has no issues array")),
            };
            let wanted_status = fields.split(',').any(|f| f == "status");
            if let Some((i, gap)) = items.iter().enumerate().find_map(|(i, v)| {
                issue_gap(v)
                    .filter(|g| wanted_status || *g != "fields.status.name")
                    .map(|g| (i, g))
            }) {
                return Err(resp.unreadable(format!("issue {i} of the answer has no {gap}")));
            }
            let next = body
                .get("nextPageToken")
                .and_then(Value::as_str)
                .map(String::from);
            // Jira also says `isLast`; a page that is not last must carry a cursor.
            let has_more = match body.get("isLast").and_then(Value::as_bool) {
                Some(last) => !last,
                None => next.is_some(),
            };
            Ok(CursorPage {
                items: items.into_iter().filter_map(&mut keep).collect(),
                next,
                has_more,
            })
        })
    }

    /// One issue with the standard fields and its project: an issue with an id, a key and a
    /// status (the one asked for, when asked by id), or a payload error quoting the answer.
    pub fn issue(&self, id: &str) -> Result<Value, HttpError> {
        let req = Request::get(self.issue_path(id, "")).query("fields", ONE_ISSUE_FIELDS);
        let resp = self.client.send(req)?;
        let v = resp.json()?;
        if let Some(gap) = issue_gap(&v) {
            return Err(resp.unreadable(format!("the issue answer has no {gap}")));
        }
        let by_number = id.trim().bytes().all(|b| b.is_ascii_digit());
        if by_number && super::normalize::id_of(v.get("id")).as_deref() != Some(id.trim()) {
            return Err(resp.unreadable(format!("an answer that is not issue {id}")));
        }
        Ok(v)
    }

    /// Every comment of an issue, oldest first, by `startAt` offsets.
    pub fn comments(&self, id: &str) -> Result<Vec<Value>, HttpError> {
        let mut out = Vec::new();
        for _ in 0..self.page_cap {
            let req = Request::get(self.issue_path(id, "/comment"))
                .query("orderBy", "created")
                .query("maxResults", PAGE.to_string())
                .query("startAt", out.len().to_string());
            let resp = self.client.send(req)?;
            let body: Value = resp.json()?;
            let Some(page) = body.get("comments").and_then(Value::as_array) else {
                return Err(resp.unreadable("answer has no comments array"));
            };
            if let Some(i) = page
                .iter()
                .position(|c| super::normalize::id_of(c.get("id")).is_none())
            {
                return Err(resp.unreadable(format!("comment {i} of the answer has no id")));
            }
            let start = body.get("startAt").and_then(Value::as_u64).unwrap_or(0) as usize;
            let total = body.get("total").and_then(Value::as_u64).unwrap_or(0) as usize;
            out.extend(page.iter().cloned());
            if page.is_empty() || start + page.len() >= total {
                return Ok(out);
            }
        }
        log::warn!(
            list:% = "comments",
            issue:% = id,
            page_cap:% = self.page_cap,
            items_read:% = out.len();
            "page cap reached, result is partial"
        );
        Ok(out)
    }

    /// The transitions available from the issue's current status.
    pub fn transitions(&self, id: &str) -> Result<Value, HttpError> {
        let resp = self
            .client
            .send(Request::get(self.issue_path(id, "/transitions")))?;
        let v = resp.json()?;
        if !v.get("transitions").is_some_and(Value::is_array) {
            return Err(resp.unreadable("answer has no transitions array"));
        }
        Ok(v)
    }

    pub fn do_transition(&self, id: &str, transition_id: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(id, "/transitions"))
            .json(&json!({"transition": {"id": transition_id}}));
        self.client.send(req).map(drop)
    }

    /// Posts `body` as a new comment: an ADF document on v3, wiki-markup text on v2.
    pub fn post_comment(&self, id: &str, body: Value) -> Result<(), HttpError> {
        let req = Request::new(Method::Post, self.issue_path(id, "/comment"))
            .json(&json!({ "body": body }));
        self.client.send(req).map(drop)
    }

    /// `op` is `add` or `remove`; Jira treats either as a no-op when already so.
    pub fn edit_label(&self, id: &str, op: &str, label: &str) -> Result<(), HttpError> {
        let req = Request::new(Method::Put, self.issue_path(id, ""))
            .json(&json!({"update": {"labels": [{ op: label }]}}));
        self.client.send(req).map(drop)
    }
}
