//! The merge-request side of the fake GitLab, shaped as the REST API v4 documents it
//! (<https://docs.gitlab.com/ee/api/merge_requests.html>, `pipelines.html`, `jobs.html`,
//! `discussions.html`, `merge_request_approvals.html`, reviewers with their states, `resource_label_events.html`,
//! `branches.html`): merge requests with `head_pipeline` filled in from the newest pipeline of
//! their `sha`; pipelines and their jobs; job traces as plain text; discussions; approvals;
//! resource label events (a `remove_labels` edit records one); the merge with its `sha` guard
//! (409), 405 for a merge request not open or not mergeable, 406 for a conflict; branch
//! deletion (404 when absent).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{GitlabState, PROJECT, fixture, not_found, paged};
use crate::common::fake_server::{Recorded, Reply, decode};

/// What the merge-request endpoints serve.
#[derive(Debug, Default)]
pub struct MrState {
    pub mrs: BTreeMap<u64, Value>,
    /// Pipeline JSON by id.
    pub pipelines: BTreeMap<u64, Value>,
    /// Jobs by pipeline id.
    pub jobs: BTreeMap<u64, Vec<Value>>,
    /// Trace text by job id.
    pub traces: BTreeMap<u64, String>,
    pub discussions: BTreeMap<u64, Vec<Value>>,
    pub approvals: BTreeMap<u64, Value>,
    /// Reviewers with their states (GitLab 17); a merge request without an entry answers 404
    /// there, as an older instance does.
    pub reviewers: BTreeMap<u64, Vec<Value>>,
    pub label_events: BTreeMap<u64, Vec<Value>>,
    pub branches: BTreeSet<String>,
    next_event_id: u64,
}

/// A pipeline in GitLab's shape.
pub fn pipeline_json(id: u64, sha: &str, git_ref: &str, status: &str) -> Value {
    json!({"id": id, "iid": id - 9000, "project_id": super::PROJECT_ID, "sha": sha,
        "ref": git_ref, "status": status, "source": "merge_request_event",
        "created_at": "2026-04-01T09:00:00.000Z", "updated_at": "2026-04-01T09:05:00.000Z",
        "web_url": format!("https://gitlab.example.com/{PROJECT}/-/pipelines/{id}")})
}

/// A job in GitLab's shape.
pub fn job_json(id: u64, name: &str, status: &str) -> Value {
    json!({"id": id, "name": name, "stage": "test", "status": status, "allow_failure": false,
        "web_url": format!("https://gitlab.example.com/{PROJECT}/-/jobs/{id}")})
}

impl GitlabState {
    /// Adds merge request `iid` (the recorded fixture) on `branch` at `sha`, mergeable.
    pub fn add_mr(&mut self, iid: u64, branch: &str, sha: &str) {
        let mut v = fixture("merge_request.json");
        v["iid"] = json!(iid);
        v["source_branch"] = json!(branch);
        v["sha"] = json!(sha);
        v["web_url"] = json!(format!(
            "https://gitlab.example.com/{PROJECT}/-/merge_requests/{iid}"
        ));
        self.mr.mrs.insert(iid, v);
        self.mr.branches.insert(branch.to_string());
    }

    pub fn mr_json(&self, iid: u64) -> Value {
        self.mr.mrs.get(&iid).cloned().unwrap_or(Value::Null)
    }

    /// Sets a field of merge request `iid` (`sha`, `state`, `detailed_merge_status`, …).
    pub fn set_mr(&mut self, iid: u64, key: &str, value: Value) {
        if let Some(m) = self.mr.mrs.get_mut(&iid) {
            m[key] = value;
        }
    }

    /// Adds a pipeline with its jobs.
    pub fn add_pipeline(&mut self, pipeline: Value, jobs: Vec<Value>) {
        let id = pipeline["id"].as_u64().unwrap_or(0);
        self.mr.pipelines.insert(id, pipeline);
        self.mr.jobs.insert(id, jobs);
    }

    pub fn set_trace(&mut self, job: u64, text: &str) {
        self.mr.traces.insert(job, text.to_string());
    }

    pub fn set_discussions(&mut self, iid: u64, discussions: Vec<Value>) {
        self.mr.discussions.insert(iid, discussions);
    }

    /// One reviewer per `(username, state)`, in GitLab's reviewers shape.
    pub fn set_reviewers(&mut self, iid: u64, reviewers: &[(&str, &str)]) {
        let list = reviewers
            .iter()
            .enumerate()
            .map(|(n, (user, state))| {
                json!({"user": {"id": 500 + n, "username": user, "name": user, "state": "active"},
                    "state": state, "created_at": "2026-04-01T09:30:00.000Z"})
            })
            .collect();
        self.mr.reviewers.insert(iid, list);
    }

    pub fn set_approvals(&mut self, iid: u64, approvals: Value) {
        self.mr.approvals.insert(iid, approvals);
    }

    /// Records a label event as GitLab would for a person's edit.
    pub fn add_label_event(&mut self, iid: u64, label: &str, user: &str, added: bool) {
        self.mr.next_event_id += 1;
        let id = self.mr.next_event_id;
        self.mr.label_events.entry(iid).or_default().push(json!({
            "id": id, "user": {"id": 2, "username": user, "name": user, "state": "active"},
            "created_at": format!("2026-04-01T11:00:{:02}.000Z", id % 60),
            "resource_type": "MergeRequest", "resource_id": 155016530,
            "label": {"id": 70 + id, "name": label, "color": "#44AD8E", "description": ""},
            "action": if added { "add" } else { "remove" }
        }));
    }

    pub fn branch_exists(&self, name: &str) -> bool {
        self.mr.branches.contains(name)
    }

    /// The merge request with `head_pipeline` as GitLab fills it in.
    fn served_mr(&self, iid: u64) -> Option<Value> {
        let mut v = self.mr.mrs.get(&iid)?.clone();
        let head = self
            .mr
            .pipelines
            .values()
            .rev()
            .find(|p| p["sha"] == v["sha"])
            .cloned();
        v["head_pipeline"] = head.unwrap_or(Value::Null);
        Some(v)
    }
}

/// The routes below the project prefix; `None` when the path is not one of them.
pub(super) fn route(s: &mut GitlabState, req: &Recorded, rest: &str) -> Option<Reply> {
    let m = req.method.as_str();
    if let Some(tail) = rest.strip_prefix("/merge_requests/") {
        let mut parts = tail.splitn(2, '/');
        let iid = parts.next().and_then(|n| n.parse::<u64>().ok())?;
        let Some(mr) = s.served_mr(iid) else {
            return Some(not_found());
        };
        return Some(match (m, parts.next().unwrap_or("")) {
            ("GET", "") => Reply::json(200, &mr),
            ("PUT", "") => edit(s, iid, req),
            ("PUT", "merge") => merge(s, iid, mr, req),
            // Discussions and label events are not in GitLab's generated description (it is
            // partial): their shapes follow https://docs.gitlab.com/api/discussions/ and
            // https://docs.gitlab.com/api/resource_label_events/ (see the allowlist).
            ("GET", "discussions") => {
                paged(req, s.mr.discussions.get(&iid).cloned().unwrap_or_default())
            }
            // GitLab Free's answer unless a test sets one: the fields the description has.
            ("GET", "approvals") => Reply::json(
                200,
                s.mr.approvals
                    .get(&iid)
                    .unwrap_or(&json!({"approved": false,
                    "approved_by": [], "user_has_approved": false, "user_can_approve": true})),
            ),
            // Not paged: GitLab answers every reviewer at once.
            ("GET", "reviewers") => match s.mr.reviewers.get(&iid) {
                Some(list) => Reply::json(200, &Value::Array(list.clone())),
                None => not_found(),
            },
            ("GET", "resource_label_events") => paged(
                req,
                s.mr.label_events.get(&iid).cloned().unwrap_or_default(),
            ),
            _ => not_found(),
        });
    }
    if rest == "/pipelines" && m == "GET" {
        let (sha, git_ref) = (req.param("sha"), req.param("ref"));
        let list: Vec<Value> =
            s.mr.pipelines
                .values()
                .rev()
                .filter(|p| sha.as_deref().is_none_or(|x| p["sha"] == x))
                .filter(|p| git_ref.as_deref().is_none_or(|x| p["ref"] == x))
                .cloned()
                .collect();
        return Some(paged(req, list));
    }
    if let Some(tail) = rest.strip_prefix("/pipelines/") {
        let id = tail.strip_suffix("/jobs")?.parse::<u64>().ok()?;
        return Some(match s.mr.jobs.get(&id) {
            Some(jobs) if m == "GET" => paged(req, jobs.clone()),
            _ => not_found(),
        });
    }
    if let Some(tail) = rest.strip_prefix("/jobs/") {
        let id = tail.strip_suffix("/trace")?.parse::<u64>().ok()?;
        return Some(match s.mr.traces.get(&id) {
            Some(text) if m == "GET" => Reply {
                status: 200,
                headers: vec![("Content-Type".into(), "text/plain".into())],
                body: text.clone().into_bytes(),
            },
            _ => not_found(),
        });
    }
    if let Some(branch) = rest.strip_prefix("/repository/branches/")
        && m == "DELETE"
    {
        let name = decode(branch);
        return Some(if s.mr.branches.remove(&name) {
            Reply::empty(204)
        } else {
            Reply::json(404, &json!({"message": "404 Branch Not Found"}))
        });
    }
    None
}

fn edit(s: &mut GitlabState, iid: u64, req: &Recorded) -> Reply {
    let body = req.json();
    let remove: Vec<String> = body["remove_labels"]
        .as_str()
        .unwrap_or("")
        .split(',')
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let user = "sortie-bot";
    for label in remove {
        let had = s.mr.mrs[&iid]["labels"]
            .as_array()
            .is_some_and(|ls| ls.iter().any(|l| l == label.as_str()));
        if had {
            if let Some(ls) =
                s.mr.mrs
                    .get_mut(&iid)
                    .and_then(|m| m["labels"].as_array_mut())
            {
                ls.retain(|l| l != label.as_str());
            }
            s.add_label_event(iid, &label, user, false);
        }
    }
    Reply::json(200, &s.served_mr(iid).unwrap_or(Value::Null))
}

fn merge(s: &mut GitlabState, iid: u64, mr: Value, req: &Recorded) -> Reply {
    let body = req.json();
    let refuse = |status: u16, message: &str| Reply::json(status, &json!({"message": message}));
    if mr["state"] != "opened" {
        return refuse(405, "405 Method Not Allowed");
    }
    if let Some(sha) = body["sha"].as_str()
        && mr["sha"] != sha
    {
        return refuse(409, "SHA does not match HEAD of source branch");
    }
    match mr["detailed_merge_status"].as_str() {
        Some("mergeable") => {}
        Some("conflict") => return refuse(406, "Branch cannot be merged"),
        _ => return refuse(405, "405 Method Not Allowed"),
    }
    let squash = body["squash"].as_bool() == Some(true);
    let key = if squash {
        "squash_commit_sha"
    } else {
        "merge_commit_sha"
    };
    s.set_mr(iid, "state", json!("merged"));
    s.set_mr(iid, key, json!("feedfacefeedfacefeedfacefeedfacefeedface"));
    s.set_mr(iid, "merged_at", json!("2026-04-01T12:00:00.000Z"));
    Reply::json(200, &s.served_mr(iid).unwrap_or(Value::Null))
}
