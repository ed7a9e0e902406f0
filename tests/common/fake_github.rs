//! A fake GitHub REST API on the fake-server framework, behaving like the real one where the
//! adapter relies on it: issues (with pull requests among them) kept as GitHub JSON with
//! mutable labels, open/closed state and comments; the repository's label set (POSTing an
//! unknown label answers 422); absolute `Link` URLs for paging; ETags with 304; issue
//! dependencies and parents (the dependencies API can be switched to 404; any path can be made
//! to answer 500 through `failing`); the search API's
//! `repo:`, `type:`, `state:` and `label:` qualifiers; `Bearer` and `X-GitHub-Api-Version`
//! checked (401 otherwise); `X-RateLimit-*` headers on every answer.
//!
//! The pull-request side (`pulls`) serves what the forge adapter reads and writes, editable
//! between polls through [`FakeServer::with_state`] and these [`GithubState`] methods:
//!
//! - `add_pull(number, head_ref, head_sha)`: an open PR (its issue carries labels and events;
//!   numbers are shared with issues, as on GitHub, so it replaces an issue of that number),
//!   head branch existing, `mergeable: null`; `pr(number) -> Value` is the PR as served;
//! - `set_head(number, sha)`, `set_mergeable(number, Option<bool>, mergeable_state)`,
//!   `set_merged(number, Option<&str> merge_commit_sha)`, `set_pull_open(number, bool)`;
//! - `set_check_runs(git_ref, Vec<Value>)` (see `check_run_json(id, name, status,
//!   Option<conclusion>)`), `set_statuses(git_ref, Vec<Value>)` (see `status_json(context,
//!   state)`);
//! - `set_job_log(job_id, text)`: served as a 302 to a second host (`LogHost`), which answers
//!   400 to a request carrying `Authorization`; `log_downloads() -> Vec<Recorded>` journals it;
//! - `add_review(pr, Value)` (see `review_json(id, state, body, login, bot)`),
//!   `add_review_comment(pr, review_id, Value)` (see `review_comment_json(id, path,
//!   start_line, line, position, body, login, bot)`);
//! - `set_review_decision(pr, Option<&str>)` for `POST /graphql`;
//! - `add_label_event(number, label, actor, added)` (a person's label change; label writes
//!   through the API record events by `sortie-bot` too), `record_label_event(…)` (event only),
//!   `add_event(number, Value)`;
//! - `branch_exists(name)`; the merge honours the `sha` guard (409), answers 405 unless the PR
//!   is open and `mergeable: true`, and 422 for an unknown `merge_method`; deleting a missing
//!   branch answers 422.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::Path;

use serde_json::{Value, json};

use super::fake_server::{FakeServer, Recorded, Reply};

mod pulls;

#[allow(unused_imports)]
pub use pulls::{LogHost, check_run_json, review_comment_json, review_json, status_json};

pub const OWNER: &str = "owner";
pub const REPO: &str = "repo";
pub const TOKEN: &str = "ghp-fake-token-0123456789";

/// The fake's data, edited by tests between polls through [`FakeServer::with_state`].
#[derive(Debug, Default)]
pub struct GithubState {
    /// The server's own URL, for absolute `Link` targets.
    pub base: String,
    /// `owner/repo` of the one repository served.
    pub full_name: String,
    /// Issue and pull-request JSON by number.
    pub issues: BTreeMap<u64, Value>,
    pub comments: BTreeMap<u64, Vec<Value>>,
    /// Blocking issue numbers by blocked issue.
    pub blocked_by: BTreeMap<u64, Vec<u64>>,
    pub parents: BTreeMap<u64, u64>,
    /// Labels that exist in the repository.
    pub repo_labels: BTreeSet<String>,
    /// When set, the dependencies API answers 404 (not enabled for the repository).
    pub dependencies_off: bool,
    /// Paths (no query) that answer 500 to every request while listed.
    pub failing: BTreeSet<String>,
    next_comment_id: u64,
    /// Pull requests by number (labels live on the issue of the same number).
    pub pulls: BTreeMap<u64, Value>,
    /// Check runs by ref (a sha or a branch).
    pub check_runs: BTreeMap<String, Vec<Value>>,
    /// Commit-status contexts by ref.
    pub statuses: BTreeMap<String, Vec<Value>>,
    pub reviews: BTreeMap<u64, Vec<Value>>,
    /// Inline comments by (pull request, review id).
    pub review_comments: BTreeMap<(u64, u64), Vec<Value>>,
    /// Issue events by number, oldest first.
    pub events: BTreeMap<u64, Vec<Value>>,
    /// GraphQL `reviewDecision` by pull request (absent = null).
    pub review_decisions: BTreeMap<u64, String>,
    /// Branches that exist.
    pub branches: BTreeSet<String>,
    /// Where job logs are downloaded from.
    pub log_host: Option<LogHost>,
    event_seq: u64,
    merge_seq: u64,
}

impl GithubState {
    /// Adds an issue with `labels` (open unless `closed`).
    pub fn add_issue(&mut self, number: u64, title: &str, labels: &[&str], closed: bool) {
        self.issues
            .insert(number, issue_json(number, title, labels, closed));
    }

    /// An issue's label names, as GitHub spells them.
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
        if let Some(i) = self.issues.get_mut(&number) {
            i["labels"] = labels.iter().map(|l| json!({"name": l})).collect();
        }
    }

    pub fn set_open(&mut self, number: u64, open: bool) {
        if let Some(i) = self.issues.get_mut(&number) {
            i["state"] = json!(if open { "open" } else { "closed" });
        }
    }
}

/// Issue JSON in GitHub's shape.
pub fn issue_json(number: u64, title: &str, labels: &[&str], closed: bool) -> Value {
    json!({
        "id": 1000 + number, "number": number, "title": title, "body": format!("Body of {number}"),
        "state": if closed { "closed" } else { "open" },
        "html_url": format!("https://github.com/{OWNER}/{REPO}/issues/{number}"),
        "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "assignees": [], "type": null, "pull_request": null,
        "created_at": format!("2026-01-01T00:00:{:02}Z", number % 60),
        "updated_at": "2026-01-01T00:00:00Z",
    })
}

/// A fixture of `tests/fixtures/github/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/github")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub type FakeGithub = FakeServer<GithubState>;

/// Starts a fake serving `owner/repo` with `labels`.
pub fn start(labels: &[&str]) -> FakeGithub {
    start_repo(&format!("{OWNER}/{REPO}"), labels)
}

/// Starts a fake serving repository `full_name` (`owner/repo`) with `labels`.
pub fn start_repo(full_name: &str, labels: &[&str]) -> FakeGithub {
    let state = GithubState {
        full_name: full_name.to_string(),
        repo_labels: labels.iter().map(|l| l.to_lowercase()).collect(),
        next_comment_id: 9000,
        log_host: Some(LogHost::start()),
        ..GithubState::default()
    };
    let server = FakeServer::start(state, route);
    let url = server.url.clone();
    server.with_state(|s| s.base = url);
    server
}

fn rate_headers(reply: Reply) -> Reply {
    reply
        .header("X-RateLimit-Limit", "5000")
        .header("X-RateLimit-Remaining", "4999")
        .header("X-RateLimit-Reset", "4102444800")
}

fn route(s: &mut GithubState, req: &Recorded) -> Reply {
    let authorized = req.header("authorization") == Some(&format!("Bearer {TOKEN}"))
        && req.header("x-github-api-version").is_some();
    if !authorized {
        return Reply::json(401, &json!({"message": "Bad credentials"}));
    }
    if s.failing.contains(&req.path) {
        return rate_headers(Reply::json(500, &json!({"message": "Server Error"})));
    }
    let prefix = format!("/repos/{}/issues", s.full_name);
    let repo = format!("/repos/{}/", s.full_name);
    let reply = if req.path == "/search/issues" {
        search(s, req)
    } else if req.path == "/graphql" && req.method == "POST" {
        pulls::graphql(s, req)
    } else if req.path == prefix {
        list_open(s, req)
    } else if let Some(rest) = req.path.strip_prefix(&format!("{prefix}/")) {
        issue_route(s, req, rest)
    } else if let Some(reply) = req
        .path
        .strip_prefix(&repo)
        .and_then(|rest| pulls::route(s, req, rest))
    {
        reply
    } else {
        not_found()
    };
    rate_headers(reply)
}

fn not_found() -> Reply {
    Reply::json(404, &json!({"message": "Not Found"}))
}

fn issue_route(s: &mut GithubState, req: &Recorded, rest: &str) -> Reply {
    let mut parts = rest.splitn(2, '/');
    let Some(n) = parts.next().and_then(|n| n.parse::<u64>().ok()) else {
        return not_found();
    };
    if !s.issues.contains_key(&n) {
        return not_found();
    }
    let tail = parts.next().unwrap_or("");
    match (req.method.as_str(), tail) {
        ("GET", "") => with_etag(req, &s.issues[&n]),
        ("PATCH", "") => patch_issue(s, n, req),
        ("GET", "comments") => paged(s, req, s.comments.get(&n).cloned().unwrap_or_default()),
        ("GET", "events") => paged(s, req, s.events.get(&n).cloned().unwrap_or_default()),
        ("POST", "comments") => post_comment(s, n, req),
        ("POST", "labels") => add_labels(s, n, req),
        ("GET", "parent") => match s.parents.get(&n).and_then(|p| s.issues.get(p)) {
            Some(p) => Reply::json(200, p),
            None => not_found(),
        },
        ("GET", "dependencies/blocked_by") if !s.dependencies_off => {
            let list: Vec<Value> = s
                .blocked_by
                .get(&n)
                .into_iter()
                .flatten()
                .filter_map(|b| s.issues.get(b).cloned())
                .collect();
            paged(s, req, list)
        }
        ("DELETE", t) if t.starts_with("labels/") => {
            remove_label(s, n, &super::fake_server::decode(&t["labels/".len()..]))
        }
        _ => not_found(),
    }
}

fn with_etag(req: &Recorded, body: &Value) -> Reply {
    let text = body.to_string();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let etag = format!("\"{:x}\"", h.finish());
    if req.header("if-none-match") == Some(etag.as_str()) {
        return Reply::empty(304).header("ETag", etag);
    }
    Reply::json(200, body).header("ETag", etag)
}

fn patch_issue(s: &mut GithubState, n: u64, req: &Recorded) -> Reply {
    let body = req.json();
    match body["state"].as_str() {
        Some(st @ ("open" | "closed")) => s.set_open(n, st == "open"),
        Some(_) => return Reply::json(422, &json!({"message": "Validation Failed"})),
        None => {}
    }
    Reply::json(200, &s.issues[&n])
}

fn post_comment(s: &mut GithubState, n: u64, req: &Recorded) -> Reply {
    let Some(body) = req.json()["body"].as_str().map(String::from) else {
        return Reply::json(422, &json!({"message": "Validation Failed"}));
    };
    s.next_comment_id += 1;
    let c = json!({"id": s.next_comment_id, "user": {"login": "sortie-bot"}, "body": body,
        "created_at": "2026-01-05T00:00:00Z"});
    s.comments.entry(n).or_default().push(c.clone());
    Reply::json(201, &c)
}

fn add_labels(s: &mut GithubState, n: u64, req: &Recorded) -> Reply {
    let wanted: Vec<String> = req.json()["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.as_str().map(String::from))
        .collect();
    if wanted
        .iter()
        .any(|l| !s.repo_labels.contains(&l.to_lowercase()))
    {
        return Reply::json(
            422,
            &json!({"message": "Validation Failed",
            "errors": [{"resource": "Label", "code": "invalid", "field": "name"}]}),
        );
    }
    let mut labels = s.labels(n);
    for l in wanted {
        if !labels.iter().any(|x| x.eq_ignore_ascii_case(&l)) {
            s.record_label_event(n, &l, "sortie-bot", true);
            labels.push(l);
        }
    }
    let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
    s.set_labels(n, &refs);
    Reply::json(200, &s.issues[&n]["labels"])
}

fn remove_label(s: &mut GithubState, n: u64, label: &str) -> Reply {
    let labels = s.labels(n);
    if !labels.iter().any(|l| l.eq_ignore_ascii_case(label)) {
        return Reply::json(404, &json!({"message": "Label does not exist"}));
    }
    let kept: Vec<&str> = labels
        .iter()
        .filter(|l| !l.eq_ignore_ascii_case(label))
        .map(String::as_str)
        .collect();
    s.set_labels(n, &kept);
    s.record_label_event(n, label, "sortie-bot", false);
    Reply::json(200, &s.issues[&n]["labels"])
}

fn list_open(s: &GithubState, req: &Recorded) -> Reply {
    let want = req.param("state").unwrap_or_else(|| "open".into());
    let items: Vec<Value> = s
        .issues
        .values()
        .filter(|i| want == "all" || i["state"] == want.as_str())
        .cloned()
        .collect();
    paged(s, req, items)
}

/// `page` of `items` by `per_page` (default 30, max 100), with an absolute `Link` to the next.
fn paged(s: &GithubState, req: &Recorded, items: Vec<Value>) -> Reply {
    let (page, per_page) = page_params(req);
    let reply = Reply::json(200, &Value::Array(page_of(&items, page, per_page)));
    with_link(s, req, reply, items.len(), page, per_page)
}

fn page_params(req: &Recorded) -> (usize, usize) {
    let page = req
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let per_page = req
        .param("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, 100);
    (page, per_page)
}

fn page_of(items: &[Value], page: usize, per_page: usize) -> Vec<Value> {
    items
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect()
}

fn with_link(
    s: &GithubState,
    req: &Recorded,
    reply: Reply,
    total: usize,
    page: usize,
    per_page: usize,
) -> Reply {
    if page * per_page >= total {
        return reply;
    }
    let mut params: Vec<(String, String)> = req
        .params()
        .into_iter()
        .filter(|(k, _)| k != "page")
        .collect();
    params.push(("page".into(), (page + 1).to_string()));
    let query: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    let next = format!("{}{}?{}", s.base, req.path, query.join("&"));
    reply.header("Link", format!("<{next}>; rel=\"next\""))
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

/// The search API over this repository: `repo:`, `type:issue`, `state:`, `label:"…"`; other
/// words are ignored (a real search would match them against text).
fn search(s: &GithubState, req: &Recorded) -> Reply {
    let q = req.param("q").unwrap_or_default();
    let mut state = None;
    let mut labels = Vec::new();
    for term in split_terms(&q) {
        if let Some(v) = term.strip_prefix("state:") {
            state = Some(v.to_string());
        } else if let Some(v) = term.strip_prefix("label:") {
            labels.push(v.trim_matches('"').to_lowercase());
        } else if let Some(v) = term.strip_prefix("repo:")
            && v != s.full_name
        {
            return Reply::json(422, &json!({"message": "Validation Failed"}));
        }
    }
    let items: Vec<Value> = s
        .issues
        .values()
        .filter(|i| i["pull_request"].is_null())
        .filter(|i| state.as_deref().is_none_or(|st| i["state"] == st))
        .filter(|i| {
            let have: Vec<String> = i["labels"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|l| l["name"].as_str().map(str::to_lowercase))
                .collect();
            labels.iter().all(|l| have.contains(l))
        })
        .cloned()
        .collect();
    let (page, per_page) = page_params(req);
    let body = json!({"total_count": items.len(), "incomplete_results": false,
        "items": page_of(&items, page, per_page)});
    with_link(s, req, Reply::json(200, &body), items.len(), page, per_page)
}

/// Search terms split on spaces outside double quotes.
fn split_terms(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in q.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}
