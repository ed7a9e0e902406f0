//! The pull-request side of the fake GitHub: pull requests, check runs and commit statuses by
//! ref, job logs behind a redirect to a second host, reviews and their comments, issue events,
//! the GraphQL review decision, the guarded merge and branch deletion. State lives in
//! [`GithubState`]; the helpers tests call are methods there (see the module doc of
//! `fake_github`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{GithubState, not_found, page_of, page_params, paged, with_etag, with_link};
use crate::common::fake_server::{FakeServer, Recorded, Reply, decode};

/// The second host job logs are downloaded from, as GitHub's log storage: it refuses a request
/// that carries an `Authorization` header (400, like the real storage) and one without the
/// signed query (403).
pub struct LogHost {
    pub server: FakeServer<BTreeMap<u64, String>>,
}

impl std::fmt::Debug for LogHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHost")
            .field("url", &self.server.url)
            .finish()
    }
}

impl LogHost {
    pub fn start() -> LogHost {
        LogHost {
            server: FakeServer::start(BTreeMap::new(), |logs: &mut BTreeMap<u64, String>, req| {
                serve_log(logs, req)
            }),
        }
    }
}

fn serve_log(logs: &BTreeMap<u64, String>, req: &Recorded) -> Reply {
    if req.header("authorization").is_some() {
        return Reply {
            status: 400,
            headers: vec![("Content-Type".into(), "application/xml".into())],
            body: b"<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism allowed</Message></Error>".to_vec(),
        };
    }
    if req.param("sig").is_none() {
        return Reply::empty(403);
    }
    let id = req
        .path
        .strip_prefix("/job-logs/")
        .and_then(|i| i.parse::<u64>().ok());
    match id.and_then(|i| logs.get(&i)) {
        Some(text) => Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: text.clone().into_bytes(),
        },
        None => Reply::empty(404),
    }
}

/// A pull request in GitHub's shape (labels are filled in from its issue when served).
pub fn pull_json(full_name: &str, number: u64, head_ref: &str, head_sha: &str) -> Value {
    json!({
        "id": 5000 + number, "number": number, "state": "open", "title": format!("PR {number}"),
        "html_url": format!("https://github.com/{full_name}/pull/{number}"),
        "merged": false, "merged_at": null, "merge_commit_sha": null,
        "mergeable": null, "mergeable_state": "unknown", "draft": false,
        "head": {"ref": head_ref, "sha": head_sha}, "base": {"ref": "main"},
        "labels": [],
    })
}

/// A check run in GitHub's shape, reported by GitHub Actions.
pub fn check_run_json(id: u64, name: &str, status: &str, conclusion: Option<&str>) -> Value {
    json!({
        "id": id, "name": name, "status": status, "conclusion": conclusion,
        "html_url": format!("https://github.com/owner/repo/runs/{id}"),
        "details_url": format!("https://github.com/owner/repo/actions/runs/1/job/{id}"),
        "app": {"slug": "github-actions"},
    })
}

/// A commit-status context (`state`: success, pending, failure, error).
pub fn status_json(context: &str, state: &str) -> Value {
    json!({"context": context, "state": state,
        "target_url": format!("https://ci.example/{context}"), "description": null})
}

/// A review in GitHub's shape.
pub fn review_json(id: u64, state: &str, body: &str, login: &str, bot: bool) -> Value {
    json!({"id": id, "state": state, "body": body,
        "user": {"login": login, "type": if bot { "Bot" } else { "User" }},
        "submitted_at": "2026-04-01T10:00:00Z"})
}

/// An inline review comment in GitHub's shape (`position: None` = outdated).
#[allow(clippy::too_many_arguments)]
pub fn review_comment_json(
    id: u64,
    path: &str,
    start_line: Option<u64>,
    line: Option<u64>,
    position: Option<u64>,
    body: &str,
    login: &str,
    bot: bool,
) -> Value {
    json!({"id": id, "path": path, "start_line": start_line, "line": line,
        "position": position, "body": body,
        "user": {"login": login, "type": if bot { "Bot" } else { "User" }},
        "created_at": "2026-04-01T10:05:00Z"})
}

impl GithubState {
    /// Adds an open pull request (and its issue, which carries its labels and events) whose
    /// head branch exists; mergeability is not computed yet (`null`).
    pub fn add_pull(&mut self, number: u64, head_ref: &str, head_sha: &str) {
        let pull = pull_json(&self.full_name, number, head_ref, head_sha);
        let mut issue = super::issue_json(number, &format!("PR {number}"), &[], false);
        issue["pull_request"] =
            json!({"url": format!("{}/repos/{}/pulls/{number}", self.base, self.full_name)});
        self.issues.insert(number, issue);
        self.pulls.insert(number, pull);
        self.branches.insert(head_ref.to_string());
    }

    /// The pull request as `GET …/pulls/{n}` serves it (`Null` when there is none).
    pub fn pr(&self, number: u64) -> Value {
        let Some(mut pull) = self.pulls.get(&number).cloned() else {
            return Value::Null;
        };
        if let Some(issue) = self.issues.get(&number) {
            pull["labels"] = issue["labels"].clone();
        }
        pull
    }

    /// A new head commit (a push).
    pub fn set_head(&mut self, number: u64, sha: &str) {
        if let Some(p) = self.pulls.get_mut(&number) {
            p["head"]["sha"] = json!(sha);
        }
    }

    /// GitHub's mergeability (`None` = not computed) and `mergeable_state` (`clean`, `dirty`,
    /// `blocked`, `unknown`, …).
    pub fn set_mergeable(&mut self, number: u64, mergeable: Option<bool>, state: &str) {
        if let Some(p) = self.pulls.get_mut(&number) {
            p["mergeable"] = json!(mergeable);
            p["mergeable_state"] = json!(state);
        }
    }

    /// The pull request merged by someone (closed, merged, with this merge commit).
    pub fn set_merged(&mut self, number: u64, merge_commit_sha: Option<&str>) {
        if let Some(p) = self.pulls.get_mut(&number) {
            p["merged"] = json!(true);
            p["state"] = json!("closed");
            p["merge_commit_sha"] = json!(merge_commit_sha);
        }
        self.set_open(number, false);
    }

    /// Closes (or reopens) the pull request without merging it.
    pub fn set_pull_open(&mut self, number: u64, open: bool) {
        if let Some(p) = self.pulls.get_mut(&number) {
            p["state"] = json!(if open { "open" } else { "closed" });
        }
        self.set_open(number, open);
    }

    /// The check runs of a ref (a sha or a branch), replacing earlier ones.
    pub fn set_check_runs(&mut self, git_ref: &str, runs: Vec<Value>) {
        self.check_runs.insert(git_ref.to_string(), runs);
    }

    /// The commit-status contexts of a ref, replacing earlier ones.
    pub fn set_statuses(&mut self, git_ref: &str, statuses: Vec<Value>) {
        self.statuses.insert(git_ref.to_string(), statuses);
    }

    /// The log of job (check run) `id`, served from the log host behind a redirect.
    pub fn set_job_log(&mut self, id: u64, text: &str) {
        if let Some(h) = &self.log_host {
            h.server
                .with_state(|logs| logs.insert(id, text.to_string()));
        }
    }

    /// Requests the log host received (to check that no credential reached it).
    pub fn log_downloads(&self) -> Vec<Recorded> {
        self.log_host
            .as_ref()
            .map(|h| h.server.journal())
            .unwrap_or_default()
    }

    /// Adds a review (see [`review_json`]).
    pub fn add_review(&mut self, pr: u64, review: Value) {
        self.reviews.entry(pr).or_default().push(review);
    }

    /// Adds an inline comment to review `review_id` (see [`review_comment_json`]).
    pub fn add_review_comment(&mut self, pr: u64, review_id: u64, comment: Value) {
        self.review_comments
            .entry((pr, review_id))
            .or_default()
            .push(comment);
    }

    /// The GraphQL `reviewDecision` (`APPROVED`, `CHANGES_REQUESTED`, `REVIEW_REQUIRED`; `None`
    /// = null).
    pub fn set_review_decision(&mut self, pr: u64, decision: Option<&str>) {
        match decision {
            Some(d) => self.review_decisions.insert(pr, d.to_string()),
            None => self.review_decisions.remove(&pr),
        };
    }

    /// A person adds (or removes) a label: the label set changes and a `labeled` (or
    /// `unlabeled`) event by `actor` is recorded.
    pub fn add_label_event(&mut self, number: u64, label: &str, actor: &str, added: bool) {
        let mut labels = self.labels(number);
        labels.retain(|l| !l.eq_ignore_ascii_case(label));
        if added {
            labels.push(label.to_string());
        }
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        self.set_labels(number, &refs);
        self.record_label_event(number, label, actor, added);
    }

    /// Records a label event without touching the labels.
    pub fn record_label_event(&mut self, number: u64, label: &str, actor: &str, added: bool) {
        self.event_seq += 1;
        let at = jiff::Timestamp::from_second(1_775_000_000 + self.event_seq as i64)
            .map(|t| t.to_string())
            .unwrap_or_default();
        let event = json!({"id": 70_000 + self.event_seq,
            "event": if added { "labeled" } else { "unlabeled" },
            "label": {"name": label, "color": "ededed"}, "actor": {"login": actor, "type": "User"},
            "created_at": at});
        self.events.entry(number).or_default().push(event);
    }

    /// Any other issue event (`closed`, `assigned`, …), for filtering tests.
    pub fn add_event(&mut self, number: u64, event: Value) {
        self.events.entry(number).or_default().push(event);
    }

    pub fn branch_exists(&self, name: &str) -> bool {
        self.branches.contains(name)
    }
}

/// Routes under `/repos/{owner}/{repo}/` that are the pull-request side; `None` for others.
pub(super) fn route(s: &mut GithubState, req: &Recorded, rest: &str) -> Option<Reply> {
    let parts: Vec<&str> = rest.split('/').collect();
    let reply = match (req.method.as_str(), parts.as_slice()) {
        ("GET", ["pulls", n]) => match n.parse().ok().map(|n| s.pr(n)) {
            Some(p) if !p.is_null() => with_etag(req, &p),
            _ => not_found(),
        },
        ("PUT", ["pulls", n, "merge"]) => merge(s, n.parse().unwrap_or(0), req),
        ("GET", ["pulls", n, "reviews"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            if !s.pulls.contains_key(&n) {
                return Some(not_found());
            }
            paged(s, req, s.reviews.get(&n).cloned().unwrap_or_default())
        }
        ("GET", ["pulls", n, "reviews", id, "comments"]) => {
            let (n, id): (u64, u64) = (n.parse().unwrap_or(0), id.parse().unwrap_or(0));
            let known = s
                .reviews
                .get(&n)
                .into_iter()
                .flatten()
                .any(|r| r["id"] == id);
            if !known {
                return Some(not_found());
            }
            let list = s.review_comments.get(&(n, id)).cloned().unwrap_or_default();
            paged(s, req, list)
        }
        ("GET", ["commits", git_ref, "check-runs"]) => {
            let runs = s
                .check_runs
                .get(&decode(git_ref))
                .cloned()
                .unwrap_or_default();
            let (page, per_page) = page_params(req);
            let body =
                json!({"total_count": runs.len(), "check_runs": page_of(&runs, page, per_page)});
            with_link(s, req, Reply::json(200, &body), runs.len(), page, per_page)
        }
        ("GET", ["commits", git_ref, "status"]) => combined_status(s, req, &decode(git_ref)),
        ("GET", ["actions", "jobs", id, "logs"]) => job_log(s, id.parse().unwrap_or(0)),
        ("DELETE", ["git", "refs", "heads", branch @ ..]) => {
            let name = decode(&branch.join("/"));
            if s.branches.remove(&name) {
                Reply::empty(204)
            } else {
                Reply::json(422, &json!({"message": "Reference does not exist"}))
            }
        }
        _ => return None,
    };
    Some(reply)
}

fn combined_status(s: &GithubState, req: &Recorded, git_ref: &str) -> Reply {
    let list = s.statuses.get(git_ref).cloned().unwrap_or_default();
    let has = |w: &[&str]| {
        list.iter()
            .any(|x| w.contains(&x["state"].as_str().unwrap_or("")))
    };
    let state = if has(&["failure", "error"]) {
        "failure"
    } else if has(&["pending"]) || list.is_empty() {
        "pending"
    } else {
        "success"
    };
    let (page, per_page) = page_params(req);
    let body = json!({"state": state, "sha": git_ref, "total_count": list.len(),
        "statuses": page_of(&list, page, per_page)});
    with_etag(req, &body)
}

fn job_log(s: &GithubState, id: u64) -> Reply {
    let Some(host) = &s.log_host else {
        return not_found();
    };
    if !host.server.with_state(|logs| logs.contains_key(&id)) {
        return not_found();
    }
    Reply::empty(302).header(
        "Location",
        format!("{}/job-logs/{id}?sig=fake-signature", host.server.url),
    )
}

fn merge(s: &mut GithubState, n: u64, req: &Recorded) -> Reply {
    let Some(pull) = s.pulls.get(&n).cloned() else {
        return not_found();
    };
    let body = req.json();
    let method = body["merge_method"].as_str().unwrap_or("merge");
    if !["merge", "squash", "rebase"].contains(&method) {
        return Reply::json(422, &json!({"message": "Validation Failed"}));
    }
    if pull["merged"] == true || pull["state"] != "open" || pull["mergeable"] != true {
        return Reply::json(405, &json!({"message": "Pull Request is not mergeable"}));
    }
    if let Some(sha) = body["sha"].as_str()
        && pull["head"]["sha"] != sha
    {
        return Reply::json(
            409,
            &json!({"message": "Head branch was modified. Review and try the merge again."}),
        );
    }
    s.merge_seq += 1;
    let sha = format!("{:040x}", 0xfeed_0000_u64 + s.merge_seq);
    s.set_merged(n, Some(&sha));
    Reply::json(
        200,
        &json!({"sha": sha, "merged": true, "message": "Pull Request successfully merged"}),
    )
}

/// `POST /graphql`: the one query the adapter sends, `pullRequest(number) { reviewDecision }`.
pub(super) fn graphql(s: &GithubState, req: &Recorded) -> Reply {
    let body = req.json();
    if !body["query"]
        .as_str()
        .is_some_and(|q| q.contains("reviewDecision"))
    {
        return Reply::json(
            200,
            &json!({"errors": [{"message": "unsupported query in the fake"}]}),
        );
    }
    let v = &body["variables"];
    let repo = format!(
        "{}/{}",
        v["owner"].as_str().unwrap_or(""),
        v["repo"].as_str().unwrap_or("")
    );
    if repo != s.full_name {
        return Reply::json(
            200,
            &json!({"data": {"repository": null}, "errors": [{"type": "NOT_FOUND",
            "path": ["repository"], "message": format!("Could not resolve to a Repository with the name '{repo}'.")}]}),
        );
    }
    let n = v["number"].as_u64().unwrap_or(0);
    if !s.pulls.contains_key(&n) {
        return Reply::json(
            200,
            &json!({"data": {"repository": {"pullRequest": null}}, "errors": [{"type": "NOT_FOUND",
            "path": ["repository", "pullRequest"], "message": format!("Could not resolve to a PullRequest with the number of {n}.")}]}),
        );
    }
    let decision = s.review_decisions.get(&n).cloned();
    Reply::json(
        200,
        &json!({"data": {"repository": {"pullRequest": {"reviewDecision": decision}}}}),
    )
}
