//! A fake Gitea REST API (`/api/v1`) on the fake-server framework, behaving like the real one
//! where the adapter relies on it: issues (pull requests among them, dropped by
//! `type=issues`) kept as Gitea JSON with label objects, open/closed state and comments; the
//! repository's labels with ids (adding an unknown id answers 422, removing one 422, as Gitea
//! does); the list's `state`, `type` and `labels` filters; `page`/`limit` paging (limit
//! clamped to 50) with an absolute `Link` (`rel="next"`, `rel="last"`) and `X-Total-Count`;
//! issue dependencies (switchable to 404, as with dependencies turned off); any path can be
//! made to answer 500 through `failing`; `Authorization: token …` checked (401 otherwise).
//! The pull-request side is in `pulls`.

pub mod pulls;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use super::fake_server::{FakeServer, Recorded, Reply};
use super::vendor_check::Vendor;

use pulls::PullState;

pub const OWNER: &str = "owner";
pub const REPO: &str = "repo";
pub const TOKEN: &str = "gitea-fake-token-0123456789abcdef";
/// The most items Gitea answers per page (`MAX_RESPONSE_ITEMS`).
const MAX_LIMIT: usize = 50;

/// The fake's data, edited by tests between polls through [`FakeServer::with_state`].
#[derive(Debug, Default)]
pub struct GiteaState {
    /// The server's own URL, for absolute `Link` targets.
    pub base: String,
    /// `owner/repo` of the one repository served.
    pub full_name: String,
    /// Issue and pull-request JSON by number.
    pub issues: BTreeMap<u64, Value>,
    pub comments: BTreeMap<u64, Vec<Value>>,
    /// The issues each issue depends on.
    pub depends_on: BTreeMap<u64, Vec<u64>>,
    /// Label JSON of the repository, by id.
    pub repo_labels: BTreeMap<u64, Value>,
    /// When set, the dependencies API answers 404 (dependencies turned off).
    pub dependencies_off: bool,
    /// Paths (no query) that answer 500 to every request while listed.
    pub failing: BTreeSet<String>,
    /// Pull requests, commit statuses, reviews, timelines and branches.
    pub pr: PullState,
    next_comment_id: u64,
}

impl GiteaState {
    /// The repository label JSON named `name` (case-insensitive).
    pub fn label(&self, name: &str) -> Option<Value> {
        self.repo_labels
            .values()
            .find(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
            .cloned()
    }

    /// Creates a repository label; answers its id.
    pub fn add_repo_label(&mut self, name: &str) -> u64 {
        let id = self.repo_labels.keys().max().map_or(1, |m| m + 1);
        let url = format!("{}/api/v1/repos/{}/labels/{id}", self.base, self.full_name);
        self.repo_labels.insert(
            id,
            json!({"id": id, "name": name, "exclusive": false, "is_archived": false,
                "color": "c0c0c0", "description": "", "url": url}),
        );
        id
    }

    fn label_objects(&self, names: &[&str]) -> Vec<Value> {
        names
            .iter()
            .map(|n| {
                self.label(n)
                    .unwrap_or_else(|| panic!("label {n:?} is not a repository label"))
            })
            .collect()
    }

    /// Adds an issue with `labels` (repository labels; open unless `closed`).
    pub fn add_issue(&mut self, number: u64, title: &str, labels: &[&str], closed: bool) {
        let mut v = issue_json(&self.base, number, title, closed);
        v["labels"] = Value::Array(self.label_objects(labels));
        self.issues.insert(number, v);
    }

    /// An issue's label names, as Gitea spells them.
    pub fn labels(&self, number: u64) -> Vec<String> {
        self.issues
            .get(&number)
            .and_then(|i| i["labels"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l["name"].as_str().map(String::from))
            .collect()
    }

    pub fn is_open(&self, number: u64) -> bool {
        self.issues
            .get(&number)
            .is_some_and(|i| i["state"] == "open")
    }

    /// Replaces an issue's labels (as a person would in the web UI).
    pub fn set_labels(&mut self, number: u64, labels: &[&str]) {
        let objects = self.label_objects(labels);
        if let Some(i) = self.issues.get_mut(&number) {
            i["labels"] = Value::Array(objects);
        }
    }

    pub fn set_open(&mut self, number: u64, open: bool) {
        if let Some(i) = self.issues.get_mut(&number) {
            i["state"] = json!(if open { "open" } else { "closed" });
            i["closed_at"] = if open {
                Value::Null
            } else {
                json!("2026-01-06T00:00:00Z")
            };
        }
    }
}

/// Issue JSON in Gitea's shape (no labels).
pub fn issue_json(base: &str, number: u64, title: &str, closed: bool) -> Value {
    json!({
        "id": 1000 + number, "number": number,
        "url": format!("{base}/api/v1/repos/{OWNER}/{REPO}/issues/{number}"),
        "html_url": format!("{base}/{OWNER}/{REPO}/issues/{number}"),
        "user": {"id": 1, "login": "alice"},
        "original_author": "", "original_author_id": 0,
        "title": title, "body": format!("Body of {number}"), "ref": "", "assets": [],
        "labels": [], "milestone": null, "assignee": null, "assignees": null,
        "state": if closed { "closed" } else { "open" }, "is_locked": false, "comments": 0,
        "created_at": format!("2026-01-01T00:00:{:02}Z", number % 60),
        "updated_at": "2026-01-01T00:00:00Z",
        "closed_at": if closed { json!("2026-01-02T00:00:00Z") } else { Value::Null },
        "due_date": null, "pull_request": null,
        "repository": {"id": 7, "name": REPO, "owner": OWNER, "full_name": format!("{OWNER}/{REPO}")},
        "pin_order": 0,
    })
}

/// A fixture of `tests/fixtures/gitea/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gitea")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub type FakeGitea = FakeServer<GiteaState>;

/// Starts a fake serving `owner/repo` with repository `labels` (ids from 1, in order).
pub fn start(labels: &[&str]) -> FakeGitea {
    start_repo(&format!("{OWNER}/{REPO}"), labels)
}

/// Starts a fake serving repository `full_name` (`owner/repo`) with `labels` (ids from 1).
pub fn start_repo(full_name: &str, labels: &[&str]) -> FakeGitea {
    let state = GiteaState {
        full_name: full_name.to_string(),
        next_comment_id: 700,
        ..GiteaState::default()
    };
    let server = FakeServer::start(state, route);
    server.check_against(Vendor::Gitea);
    let url = server.url.clone();
    server.with_state(|s| {
        s.base = url;
        for l in labels {
            s.add_repo_label(l);
        }
    });
    server
}

fn message(status: u16, text: &str) -> Reply {
    Reply::json(status, &json!({"message": text, "url": "/api/swagger"}))
}

fn not_found() -> Reply {
    Reply::json(
        404,
        &json!({"errors": null, "message": "not found", "url": "/api/swagger"}),
    )
}

fn route(s: &mut GiteaState, req: &Recorded) -> Reply {
    if req.header("authorization") != Some(&format!("token {TOKEN}")) {
        return message(401, "token is required");
    }
    if s.failing.contains(&req.path) {
        return message(500, "Internal Server Error");
    }
    let repo = format!("/api/v1/repos/{}", s.full_name);
    let Some(rest) = req.path.strip_prefix(&repo) else {
        return not_found();
    };
    if let Some(reply) = pulls::route(s, req, rest) {
        return reply;
    }
    match (req.method.as_str(), rest) {
        ("GET", "/issues") => list_issues(s, req),
        ("GET", "/labels") => {
            let items = s.repo_labels.values().cloned().collect();
            paged(s, req, items)
        }
        (_, r) => match r.strip_prefix("/issues/") {
            Some(tail) => issue_route(s, req, tail),
            None => not_found(),
        },
    }
}

fn issue_route(s: &mut GiteaState, req: &Recorded, rest: &str) -> Reply {
    let mut parts = rest.splitn(2, '/');
    let Some(n) = parts.next().and_then(|n| n.parse::<u64>().ok()) else {
        return not_found();
    };
    if !s.issues.contains_key(&n) {
        return not_found();
    }
    let tail = parts.next().unwrap_or("");
    match (req.method.as_str(), tail) {
        ("GET", "") => Reply::json(200, &s.issues[&n]),
        ("PATCH", "") => patch_issue(s, n, req),
        ("GET", "comments") => {
            // Not paged by Gitea: every comment in one answer.
            Reply::json(
                200,
                &Value::Array(s.comments.get(&n).cloned().unwrap_or_default()),
            )
        }
        ("POST", "comments") => post_comment(s, n, req),
        ("POST", "labels") => add_labels(s, n, req),
        ("GET", "timeline") => pulls::timeline(s, req, n),
        ("GET", "dependencies") if !s.dependencies_off => {
            let list: Vec<Value> = s
                .depends_on
                .get(&n)
                .into_iter()
                .flatten()
                .filter_map(|b| s.issues.get(b).cloned())
                .collect();
            paged(s, req, list)
        }
        ("DELETE", t) if t.starts_with("labels/") => remove_label(s, n, &t["labels/".len()..]),
        _ => not_found(),
    }
}

fn patch_issue(s: &mut GiteaState, n: u64, req: &Recorded) -> Reply {
    match req.json()["state"].as_str() {
        Some(st @ ("open" | "closed")) => s.set_open(n, st == "open"),
        Some(_) => return message(422, "invalid state"),
        None => {}
    }
    Reply::json(201, &s.issues[&n])
}

fn post_comment(s: &mut GiteaState, n: u64, req: &Recorded) -> Reply {
    let Some(body) = req.json()["body"].as_str().map(String::from) else {
        return message(422, "[Body]: Required");
    };
    s.next_comment_id += 1;
    let id = s.next_comment_id;
    let c = json!({"id": id, "html_url": format!("{}/{}/issues/{n}#issuecomment-{id}", s.base, s.full_name),
        "pull_request_url": "", "issue_url": format!("{}/{}/issues/{n}", s.base, s.full_name),
        "user": {"id": 9, "login": "sortie-bot"},
        "original_author": "", "original_author_id": 0, "body": body, "assets": [],
        "created_at": "2026-01-05T00:00:00Z", "updated_at": "2026-01-05T00:00:00Z"});
    s.comments.entry(n).or_default().push(c.clone());
    Reply::json(201, &c)
}

/// `{"labels": [...]}` of ids (every version) or names (newer versions).
fn add_labels(s: &mut GiteaState, n: u64, req: &Recorded) -> Reply {
    let wanted = req.json()["labels"].as_array().cloned().unwrap_or_default();
    let mut found = Vec::new();
    for w in &wanted {
        let label = match w {
            Value::Number(id) => id.as_u64().and_then(|id| s.repo_labels.get(&id).cloned()),
            Value::String(name) => s.label(name),
            _ => None,
        };
        match label {
            Some(l) => found.push(l),
            None => return message(422, "label does not exist"),
        }
    }
    let issue = s.issues.get_mut(&n).unwrap_or_else(|| panic!("issue {n}"));
    let mut labels = issue["labels"].as_array().cloned().unwrap_or_default();
    for l in found {
        if !labels.iter().any(|x| x["id"] == l["id"]) {
            labels.push(l);
        }
    }
    issue["labels"] = Value::Array(labels.clone());
    Reply::json(200, &Value::Array(labels))
}

/// Gitea answers 422 for an id that is no repository label and 204 otherwise, on the issue
/// or not.
fn remove_label(s: &mut GiteaState, n: u64, id: &str) -> Reply {
    let Some(id) = id
        .parse::<u64>()
        .ok()
        .filter(|id| s.repo_labels.contains_key(id))
    else {
        return message(422, "label does not exist");
    };
    let issue = s.issues.get_mut(&n).unwrap_or_else(|| panic!("issue {n}"));
    let labels = issue["labels"].as_array().cloned().unwrap_or_default();
    let (removed, kept): (Vec<Value>, Vec<Value>) = labels.into_iter().partition(|l| l["id"] == id);
    issue["labels"] = Value::Array(kept);
    for l in removed {
        let name = l["name"].as_str().unwrap_or("").to_string();
        s.add_label_event(n, &name, "sortie-bot", false);
    }
    Reply::empty(204)
}

/// The list's filters: `state` (default open), `type` (`issues`/`pulls`), `labels` (any of
/// the comma-separated names), newest first.
fn list_issues(s: &GiteaState, req: &Recorded) -> Reply {
    let state = req.param("state").unwrap_or_else(|| "open".into());
    let kind = req.param("type");
    let wanted: Vec<String> = req
        .param("labels")
        .map(|l| l.split(',').map(|x| x.trim().to_lowercase()).collect())
        .unwrap_or_default();
    let items: Vec<Value> = s
        .issues
        .values()
        .rev()
        .filter(|i| state == "all" || i["state"] == state.as_str())
        .filter(|i| match kind.as_deref() {
            Some("issues") => i["pull_request"].is_null(),
            Some("pulls") => !i["pull_request"].is_null(),
            _ => true,
        })
        .filter(|i| {
            wanted.is_empty()
                || i["labels"].as_array().is_some_and(|ls| {
                    ls.iter().any(|l| {
                        l["name"]
                            .as_str()
                            .is_some_and(|n| wanted.contains(&n.to_lowercase()))
                    })
                })
        })
        .cloned()
        .collect();
    paged(s, req, items)
}

/// `page` of `items` by `limit` (default 30, at most 50), with `X-Total-Count` and an
/// absolute `Link` to the next and last pages while more follow.
fn paged(s: &GiteaState, req: &Recorded, items: Vec<Value>) -> Reply {
    let page = req
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let limit = req
        .param("limit")
        .and_then(|p| p.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, MAX_LIMIT);
    let body: Vec<Value> = items
        .iter()
        .skip((page - 1) * limit)
        .take(limit)
        .cloned()
        .collect();
    let total = items.len();
    let reply = Reply::json(200, &Value::Array(body)).header("X-Total-Count", total.to_string());
    if page * limit >= total {
        return reply;
    }
    let link = |p: usize| {
        let mut params: Vec<(String, String)> = req
            .params()
            .into_iter()
            .filter(|(k, _)| k != "page")
            .collect();
        params.push(("page".into(), p.to_string()));
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        format!("{}{}?{}", s.base, req.path, query.join("&"))
    };
    let last = total.div_ceil(limit);
    reply.header(
        "Link",
        format!(
            "<{}>; rel=\"next\",<{}>; rel=\"last\"",
            link(page + 1),
            link(last)
        ),
    )
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
