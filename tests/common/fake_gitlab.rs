//! A fake GitLab REST API v4 on the fake-server framework, behaving like the real one where the
//! adapter relies on it (shapes from <https://docs.gitlab.com/ee/api/issues.html>,
//! <https://docs.gitlab.com/ee/api/notes.html>, <https://docs.gitlab.com/ee/api/issue_links.html>):
//! one project addressed by its URL-encoded path (`/api/v4/projects/group%2Fproject`) or its
//! numeric id; issues kept as GitLab JSON (labels as strings, `opened`/`closed`); `PUT` edits
//! with `add_labels`, `remove_labels` (comma-separated) and `state_event` (`close`/`reopen`,
//! anything else 400); notes, system notes among them (a label or state edit adds one, as
//! GitLab does); issue links with `link_type`; `page`/`per_page` paging with `X-Page`,
//! `X-Per-Page`, `X-Total` and `X-Next-Page` (empty on the last page); `PRIVATE-TOKEN` or
//! `Authorization: Bearer` checked (401 otherwise); `RateLimit-*` headers on every answer; any
//! path can be made to answer 500 through `failing`. Every exchange is checked against GitLab's
//! generated description (`tests/common/vendor_check.rs`); issue relations and reviewers are not
//! paged there, so the fake answers them whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use super::fake_server::{FakeServer, Recorded, Reply};
use super::vendor_check::Vendor;

mod merge_requests;

#[allow(unused_imports)]
pub use merge_requests::{MrState, job_json, pipeline_json};

pub const PROJECT: &str = "group/sub/project";
pub const PROJECT_ID: u64 = 278964;
pub const TOKEN: &str = "glpat-fake-token-0123456789";

/// The fake's data, edited by tests between polls through [`FakeServer::with_state`].
#[derive(Debug, Default)]
pub struct GitlabState {
    /// Issue JSON by iid.
    pub issues: BTreeMap<u64, Value>,
    /// Notes by iid, oldest first.
    pub notes: BTreeMap<u64, Vec<Value>>,
    /// `(linked iid, link_type)` by iid.
    pub links: BTreeMap<u64, Vec<(u64, String)>>,
    /// Paths (no query) that answer 500 to every request while listed.
    pub failing: BTreeSet<String>,
    /// The merge-request side (`merge_requests`).
    pub mr: MrState,
    next_note_id: u64,
}

impl GitlabState {
    /// Adds an issue with `labels` (opened unless `closed`).
    pub fn add_issue(&mut self, iid: u64, title: &str, labels: &[&str], closed: bool) {
        self.issues
            .insert(iid, issue_json(iid, title, labels, closed));
    }

    /// An issue's labels, as GitLab spells them.
    pub fn labels(&self, iid: u64) -> Vec<String> {
        self.issues
            .get(&iid)
            .and_then(|i| i["labels"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l.as_str().map(String::from))
            .collect()
    }

    pub fn is_open(&self, iid: u64) -> bool {
        self.issues
            .get(&iid)
            .is_some_and(|i| i["state"] == "opened")
    }

    /// Replaces an issue's labels (as a person would in the web UI).
    pub fn set_labels(&mut self, iid: u64, labels: &[&str]) {
        if let Some(i) = self.issues.get_mut(&iid) {
            i["labels"] = json!(labels);
        }
    }

    pub fn set_open(&mut self, iid: u64, open: bool) {
        if let Some(i) = self.issues.get_mut(&iid) {
            i["state"] = json!(if open { "opened" } else { "closed" });
        }
    }

    /// `blocked` is blocked by `blocker` (both sides of the link, as GitLab keeps them).
    pub fn block(&mut self, blocked: u64, blocker: u64) {
        self.links
            .entry(blocked)
            .or_default()
            .push((blocker, "is_blocked_by".into()));
        self.links
            .entry(blocker)
            .or_default()
            .push((blocked, "blocks".into()));
    }

    /// Adds a note; `system` marks it as GitLab's own.
    pub fn add_note(&mut self, iid: u64, author: &str, body: &str, system: bool) -> u64 {
        self.next_note_id += 1;
        let id = self.next_note_id;
        self.notes.entry(iid).or_default().push(json!({
            "id": id, "type": null, "body": body, "attachment": null,
            "author": {"id": 1, "username": author, "name": author, "state": "active"},
            "created_at": format!("2026-01-05T00:00:{:02}.000Z", id % 60),
            "updated_at": "2026-01-05T00:00:00.000Z",
            "system": system, "noteable_id": 1000 + iid, "noteable_type": "Issue",
            "project_id": PROJECT_ID, "noteable_iid": iid, "resolvable": false,
            "confidential": false, "internal": false
        }));
        id
    }

    /// The notes people (not GitLab) wrote on an issue.
    pub fn user_notes(&self, iid: u64) -> Vec<String> {
        self.notes
            .get(&iid)
            .into_iter()
            .flatten()
            .filter(|n| n["system"] != true)
            .filter_map(|n| n["body"].as_str().map(String::from))
            .collect()
    }
}

/// Issue JSON in GitLab's shape.
pub fn issue_json(iid: u64, title: &str, labels: &[&str], closed: bool) -> Value {
    json!({
        "id": 1000 + iid, "iid": iid, "project_id": PROJECT_ID, "title": title,
        "description": format!("Body of {iid}"),
        "state": if closed { "closed" } else { "opened" },
        "created_at": format!("2026-01-01T00:00:{:02}.000Z", iid % 60),
        "updated_at": "2026-01-01T00:00:00.000Z", "closed_at": null, "closed_by": null,
        "labels": labels, "milestone": null, "assignees": [], "assignee": null,
        "author": {"id": 1, "username": "root", "name": "Administrator", "state": "active"},
        "type": "ISSUE", "issue_type": "issue", "due_date": null,
        "confidential": false, "discussion_locked": null,
        "web_url": format!("https://gitlab.example.com/{PROJECT}/-/issues/{iid}"),
        "references": {"short": format!("#{iid}"), "relative": format!("#{iid}"),
            "full": format!("{PROJECT}#{iid}")}
    })
}

/// A fixture of `tests/fixtures/gitlab/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gitlab")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub type FakeGitlab = FakeServer<GitlabState>;

/// The project's path prefix as the client sends it (URL-encoded namespace path).
pub fn project_path() -> String {
    format!("/api/v4/projects/{}", PROJECT.replace('/', "%2F"))
}

/// `GET`/`PUT` path of one issue.
pub fn issue_path(iid: u64) -> String {
    format!("{}/issues/{iid}", project_path())
}

pub fn start() -> FakeGitlab {
    let server = FakeServer::start(
        GitlabState {
            next_note_id: 300,
            ..GitlabState::default()
        },
        route,
    );
    server.check_against(Vendor::Gitlab);
    server
}

fn rate_headers(reply: Reply) -> Reply {
    reply
        .header("RateLimit-Limit", "2000")
        .header("RateLimit-Observed", "1")
        .header("RateLimit-Remaining", "1999")
        .header("RateLimit-Reset", "4102444800")
}

fn not_found() -> Reply {
    Reply::json(404, &json!({"message": "404 Not found"}))
}

fn route(s: &mut GitlabState, req: &Recorded) -> Reply {
    let authorized = req.header("private-token") == Some(TOKEN)
        || req.header("authorization") == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        return Reply::json(401, &json!({"message": "401 Unauthorized"}));
    }
    if s.failing.contains(&req.path) {
        return rate_headers(Reply::json(
            500,
            &json!({"message": "500 Internal Server Error"}),
        ));
    }
    let by_id = format!("/api/v4/projects/{PROJECT_ID}");
    let rest = req
        .path
        .strip_prefix(&project_path())
        .or_else(|| req.path.strip_prefix(&by_id));
    if let Some(reply) = rest.and_then(|r| merge_requests::route(s, req, r)) {
        return rate_headers(reply);
    }
    let reply = match rest {
        Some("/issues") if req.method == "GET" => list_issues(s, req),
        Some(r) => match r.strip_prefix("/issues/") {
            Some(tail) => issue_route(s, req, tail),
            None => not_found(),
        },
        None => not_found(),
    };
    rate_headers(reply)
}

fn list_issues(s: &GitlabState, req: &Recorded) -> Reply {
    let state = req.param("state").unwrap_or_else(|| "all".into());
    let wanted: Vec<String> = req
        .param("labels")
        .map(|l| l.split(',').map(|x| x.trim().to_lowercase()).collect())
        .unwrap_or_default();
    let list: Vec<Value> = s
        .issues
        .values()
        .filter(|i| state == "all" || i["state"] == state.as_str())
        .filter(|i| {
            let have: Vec<String> = i["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str().map(str::to_lowercase))
                .collect();
            wanted.iter().all(|w| have.contains(w))
        })
        .cloned()
        .collect();
    paged(req, list)
}

/// One page of `items` by `page` / `per_page` (default 20, at most 100), with GitLab's headers.
fn paged(req: &Recorded, items: Vec<Value>) -> Reply {
    let per_page = req
        .param("per_page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(20)
        .clamp(1, 100);
    let page = req
        .param("page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let total = items.len();
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let next = if page * per_page < total {
        (page + 1).to_string()
    } else {
        String::new()
    };
    Reply::json(200, &Value::Array(slice))
        .header("X-Page", page.to_string())
        .header("X-Per-Page", per_page.to_string())
        .header("X-Total", total.to_string())
        .header("X-Next-Page", next)
}

fn issue_route(s: &mut GitlabState, req: &Recorded, tail: &str) -> Reply {
    let mut parts = tail.splitn(2, '/');
    let Some(iid) = parts.next().and_then(|n| n.parse::<u64>().ok()) else {
        return not_found();
    };
    if !s.issues.contains_key(&iid) {
        return not_found();
    }
    match (req.method.as_str(), parts.next().unwrap_or("")) {
        ("GET", "") => Reply::json(200, &s.issues[&iid]),
        ("PUT", "") => edit_issue(s, iid, req),
        // Notes are not in GitLab's generated description (it is partial): their shape follows
        // https://docs.gitlab.com/api/notes/, and `tools/vendor-specs/allowlist.yaml` says so.
        ("GET", "notes") => {
            let mut notes = s.notes.get(&iid).cloned().unwrap_or_default();
            // GitLab lists notes newest first unless asked otherwise.
            if req.param("sort").as_deref() != Some("asc") {
                notes.reverse();
            }
            paged(req, notes)
        }
        ("POST", "notes") => match req.json()["body"].as_str().map(String::from) {
            Some(body) if !body.trim().is_empty() => {
                let id = s.add_note(iid, "sortie-bot", &body, false);
                let note = s.notes[&iid].iter().find(|n| n["id"] == id).cloned();
                Reply::json(201, &note.unwrap_or(Value::Null))
            }
            _ => Reply::json(
                400,
                &json!({"message": "400 Bad request - body is missing"}),
            ),
        },
        ("GET", "links") => {
            let list: Vec<Value> = s
                .links
                .get(&iid)
                .into_iter()
                .flatten()
                .filter_map(|(other, kind)| {
                    let mut v = s.issues.get(other)?.clone();
                    v["link_type"] = json!(kind);
                    v["link_created_at"] = json!("2026-01-02T00:00:00.000Z");
                    v["link_updated_at"] = json!("2026-01-02T00:00:00.000Z");
                    Some(v)
                })
                .collect();
            // Not paged: GitLab answers every relation at once.
            Reply::json(200, &Value::Array(list))
        }
        _ => not_found(),
    }
}

fn split_labels(v: &Value) -> Vec<String> {
    v.as_str()
        .map(|s| {
            s.split(',')
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn edit_issue(s: &mut GitlabState, iid: u64, req: &Recorded) -> Reply {
    let body = req.json();
    let open = match body["state_event"].as_str() {
        Some("close") => Some(false),
        Some("reopen") => Some(true),
        Some(_) => {
            return Reply::json(
                400,
                &json!({"error": "state_event does not have a valid value"}),
            );
        }
        None => None,
    };
    let mut labels = s.labels(iid);
    let before = labels.clone();
    for l in split_labels(&body["remove_labels"]) {
        labels.retain(|x| !x.eq_ignore_ascii_case(&l));
    }
    for l in split_labels(&body["add_labels"]) {
        if !labels.iter().any(|x| x.eq_ignore_ascii_case(&l)) {
            labels.push(l);
        }
    }
    if labels != before {
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        s.set_labels(iid, &refs);
        s.add_note(iid, "sortie-bot", "changed labels", true);
    }
    if let Some(o) = open
        && o != s.is_open(iid)
    {
        s.set_open(iid, o);
        s.add_note(
            iid,
            "sortie-bot",
            if o { "reopened" } else { "closed" },
            true,
        );
    }
    Reply::json(200, &s.issues[&iid])
}
