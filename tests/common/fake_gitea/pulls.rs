//! The pull-request side of the fake Gitea, shaped as Gitea's REST API documents it
//! (<https://docs.gitea.com/api/1.22/>): a pull request is also an issue (its labels, state and
//! timeline live there, as in Gitea, so the issue routes serve it too); the pull request read
//! (`repoGetPullRequest`), the combined commit status of a ref (`repoGetCombinedStatusByRef`,
//! a branch name resolving to its head), reviews and their code comments, the merge
//! (`repoMergePullRequest`: 409 "head out of date" for a stale `head_commit_id`, 404 when
//! closed, 405 for a draft or a pull request Gitea holds as not mergeable, 405 when already
//! merged), branch deletion (404 when absent) and the issue timeline (a label removed through
//! the API records its `label` entry).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{GiteaState, fixture, issue_json, message, not_found, paged};
use crate::common::fake_server::{Recorded, Reply, decode};

/// The merge commit a merge records.
pub const MERGE_SHA: &str = "feedfacefeedfacefeedfacefeedfacefeedface";

/// What the pull-request endpoints serve beyond the issue entry.
#[derive(Debug, Default)]
pub struct PullState {
    /// Pull-request JSON by index (labels and state are taken from the issue entry).
    pub pulls: BTreeMap<u64, Value>,
    /// Commit statuses by sha, oldest first.
    pub statuses: BTreeMap<String, Vec<Value>>,
    /// Reviews by pull-request index, oldest first.
    pub reviews: BTreeMap<u64, Vec<Value>>,
    /// Code comments by review id.
    pub review_comments: BTreeMap<u64, Vec<Value>>,
    /// Timeline entries by issue index, oldest first.
    pub timeline: BTreeMap<u64, Vec<Value>>,
    pub branches: BTreeSet<String>,
    next_event_id: u64,
}

/// A commit status in Gitea's shape.
pub fn status_json(id: u64, context: &str, status: &str, target_url: &str) -> Value {
    json!({"id": id, "status": status, "target_url": target_url, "description": "",
        "context": context, "creator": {"id": -2, "login": "gitea-actions"},
        "created_at": "2026-04-01T09:01:00Z", "updated_at": "2026-04-01T09:02:00Z"})
}

/// The combined state Gitea computes: any failure or error fails, else any pending is
/// pending, else success (warnings count as success).
fn combined_state(statuses: &[Value]) -> &'static str {
    let has = |w: &[&str]| {
        statuses
            .iter()
            .any(|s| s["status"].as_str().is_some_and(|x| w.contains(&x)))
    };
    if has(&["failure", "error"]) {
        "failure"
    } else if statuses.is_empty() || has(&["pending"]) {
        "pending"
    } else {
        "success"
    }
}

impl GiteaState {
    /// Adds open pull request `index` (the recorded fixture) from `branch` at `sha`, mergeable,
    /// with its issue entry carrying `labels`.
    pub fn add_pull(&mut self, index: u64, branch: &str, sha: &str, labels: &[&str]) {
        let mut issue = issue_json(&self.base, index, "Fix the flaky login handler", false);
        issue["pull_request"] = json!({"merged": false, "merged_at": null, "draft": false,
            "html_url": format!("{}/{}/pulls/{index}", self.base, self.full_name)});
        self.issues.insert(index, issue);
        self.set_labels(index, labels);
        let mut v = fixture("pull_request.json");
        v["number"] = json!(index);
        v["head"]["ref"] = json!(branch);
        v["head"]["label"] = json!(branch);
        v["head"]["sha"] = json!(sha);
        v["html_url"] = json!(format!("{}/{}/pulls/{index}", self.base, self.full_name));
        self.pr.pulls.insert(index, v);
        self.pr.branches.insert(branch.to_string());
    }

    /// Sets a field of pull request `index` (`mergeable`, `draft`, `title`, `head`, …).
    pub fn set_pull(&mut self, index: u64, key: &str, value: Value) {
        if let Some(p) = self.pr.pulls.get_mut(&index) {
            p[key] = value;
        }
    }

    /// Moves the head of pull request `index` to `sha`.
    pub fn set_head(&mut self, index: u64, sha: &str) {
        if let Some(p) = self.pr.pulls.get_mut(&index) {
            p["head"]["sha"] = json!(sha);
        }
    }

    /// Adds (or replaces, by context) a commit status of `sha`.
    pub fn set_status(&mut self, sha: &str, status: Value) {
        let list = self.pr.statuses.entry(sha.to_string()).or_default();
        list.retain(|s| s["context"] != status["context"]);
        list.push(status);
    }

    pub fn set_reviews(&mut self, index: u64, reviews: Vec<Value>) {
        self.pr.reviews.insert(index, reviews);
    }

    pub fn set_review_comments(&mut self, review: u64, comments: Vec<Value>) {
        self.pr.review_comments.insert(review, comments);
    }

    /// Records a label timeline entry as Gitea does for a person's edit.
    pub fn add_label_event(&mut self, index: u64, label: &str, user: &str, added: bool) {
        self.pr.next_event_id += 1;
        let id = 1200 + self.pr.next_event_id;
        let label = self
            .label(label)
            .unwrap_or_else(|| json!({"id": 0, "name": label}));
        self.pr.timeline.entry(index).or_default().push(json!({
            "id": id, "type": "label", "user": {"id": 4, "login": user},
            "body": if added { "1" } else { "" }, "label": label,
            "created_at": format!("2026-04-01T11:{:02}:00Z", id % 60),
            "updated_at": format!("2026-04-01T11:{:02}:00Z", id % 60),
        }));
    }

    pub fn branch_exists(&self, name: &str) -> bool {
        self.pr.branches.contains(name)
    }

    /// The pull request as Gitea serves it: labels and open/closed state from its issue.
    pub fn served_pull(&self, index: u64) -> Option<Value> {
        let mut v = self.pr.pulls.get(&index)?.clone();
        let issue = self.issues.get(&index)?;
        v["labels"] = issue["labels"].clone();
        v["state"] = issue["state"].clone();
        v["closed_at"] = issue["closed_at"].clone();
        Some(v)
    }

    /// The sha a ref names: a pull request head branch resolves to its head, else the ref.
    fn resolve_ref(&self, git_ref: &str) -> String {
        self.pr
            .pulls
            .values()
            .find(|p| p["head"]["ref"] == git_ref)
            .and_then(|p| p["head"]["sha"].as_str())
            .unwrap_or(git_ref)
            .to_string()
    }
}

/// The routes below `/repos/{owner}/{repo}` this module serves; `None` for other paths.
pub(super) fn route(s: &mut GiteaState, req: &Recorded, rest: &str) -> Option<Reply> {
    let m = req.method.as_str();
    if let Some(tail) = rest.strip_prefix("/pulls/") {
        let mut parts = tail.splitn(2, '/');
        let index = parts.next().and_then(|n| n.parse::<u64>().ok())?;
        let Some(pull) = s.served_pull(index) else {
            return Some(not_found());
        };
        return Some(pull_route(s, req, index, pull, parts.next().unwrap_or("")));
    }
    if let Some(tail) = rest.strip_prefix("/commits/")
        && m == "GET"
    {
        let git_ref = decode(tail.strip_suffix("/status")?);
        let sha = s.resolve_ref(&git_ref);
        let statuses = s.pr.statuses.get(&sha).cloned().unwrap_or_default();
        let body = json!({"state": combined_state(&statuses), "sha": sha,
            "total_count": statuses.len(), "statuses": statuses,
            "repository": {"id": 7, "full_name": s.full_name}});
        return Some(Reply::json(200, &body));
    }
    if let Some(branch) = rest.strip_prefix("/branches/")
        && m == "DELETE"
    {
        // Gitea routes `/branches/*` and unescapes it: `a/b` and `a%2Fb` name one branch.
        return Some(if s.pr.branches.remove(&decode(branch)) {
            Reply::empty(204)
        } else {
            message(404, "The branch does not exist.")
        });
    }
    None
}

fn pull_route(s: &mut GiteaState, req: &Recorded, index: u64, pull: Value, tail: &str) -> Reply {
    match (req.method.as_str(), tail) {
        ("GET", "") => Reply::json(200, &pull),
        ("POST", "merge") => merge(s, index, &pull, req),
        ("GET", "reviews") => paged(
            s,
            req,
            s.pr.reviews.get(&index).cloned().unwrap_or_default(),
        ),
        ("GET", t) => match t
            .strip_prefix("reviews/")
            .and_then(|r| r.strip_suffix("/comments"))
            .and_then(|id| id.parse::<u64>().ok())
        {
            Some(id) => Reply::json(
                200,
                &Value::Array(s.pr.review_comments.get(&id).cloned().unwrap_or_default()),
            ),
            None => not_found(),
        },
        _ => not_found(),
    }
}

/// The merge styles `MergePullRequestOption.do` takes.
const MERGE_STYLES: &[&str] = &[
    "merge",
    "rebase",
    "rebase-merge",
    "squash",
    "fast-forward-only",
    "manually-merged",
];

/// The merge body's `do`, its key matched without regard to case as Gitea's form decoding
/// (Go's `encoding/json`) matches it: `do` (the 1.21+ description) and `Do` (older ones) both
/// name it.
pub fn merge_style(body: &Value) -> Option<String> {
    body.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("do"))
        .and_then(|(_, v)| v.as_str())
        .map(String::from)
}

fn merge(s: &mut GiteaState, index: u64, pull: &Value, req: &Recorded) -> Reply {
    let body = req.json();
    if pull["merged"].as_bool() == Some(true) {
        return message(405, "The PR is already merged");
    }
    if pull["state"] != "open" {
        return not_found();
    }
    match merge_style(&body) {
        None => return message(422, "[Do]: Required"),
        Some(style) if !MERGE_STYLES.contains(&style.as_str()) => {
            return message(422, "[Do]: In");
        }
        Some(_) => {}
    }
    if let Some(head) = body["head_commit_id"].as_str()
        && !head.is_empty()
        && pull["head"]["sha"] != head
    {
        return message(409, "head out of date");
    }
    let title = pull["title"].as_str().unwrap_or("");
    if pull["draft"].as_bool() == Some(true) || title.starts_with("WIP:") {
        return message(
            405,
            "The given pull request is a work in progress and cannot be merged",
        );
    }
    if pull["mergeable"].as_bool() != Some(true) {
        return message(405, "Please try again later");
    }
    s.set_pull(index, "merged", json!(true));
    s.set_pull(index, "merge_commit_sha", json!(MERGE_SHA));
    s.set_pull(index, "merged_at", json!("2026-04-01T12:00:00Z"));
    s.set_open(index, false);
    Reply::empty(200)
}

/// `GET /issues/{index}/timeline`, paged as Gitea pages it.
pub(super) fn timeline(s: &GiteaState, req: &Recorded, index: u64) -> Reply {
    paged(
        s,
        req,
        s.pr.timeline.get(&index).cloned().unwrap_or_default(),
    )
}
