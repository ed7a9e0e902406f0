//! A fake Jira Cloud REST API (v3) on the fake-server framework, behaving like the real one
//! where the adapter relies on it: issues by id and key with mutable status, labels, comments
//! (ADF bodies, checked) and inward `Blocks` links; a workflow graph, so the transitions on
//! offer depend on the current status and POSTing one that is not on offer answers 400;
//! `search/jql` over the subset of JQL sortie sends (`project =`, `status IN`, `key IN`,
//! `id IN`, a parenthesised filter that is recorded, `ORDER BY`) paged by `nextPageToken`;
//! comments paged by `startAt`/`maxResults`; Basic auth checked (401 otherwise). Every exchange
//! is checked against Jira Cloud's own v3 description (`tests/common/vendor_check.rs`).
//!
//! [`start_server`] serves Jira Server / Data Center's REST v2 instead, shaped by Atlassian's
//! Jira Server REST API reference (`/rest/api/2`): `GET search` paged by `startAt` with
//! `total`, descriptions and comment bodies as wiki-markup strings (an ADF object is refused
//! with 400, as the v2 resources refuse a non-string body), a personal access token as
//! `Authorization: Bearer` or `user:password` as Basic, and no v3 resources. No description of
//! v2 is at hand, so that mode is not checked by the tool.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::fake_server::{FakeServer, Recorded, Reply};
use super::vendor_check::Vendor;

pub const PROJECT: &str = "PROJ";
pub const EMAIL: &str = "bot@example.com";
pub const TOKEN: &str = "jira-fake-token-0123456789";
/// The personal access token the Server / Data Center mode accepts as `Bearer`.
pub const PAT: &str = "jira-server-pat-0123456789";
/// The `user:password` the Server / Data Center mode accepts as Basic.
pub const SERVER_LOGIN: &str = "jdoe:s3cret";

/// `email:token`, as `$JIRA_API_TOKEN` holds it.
pub fn api_key() -> String {
    format!("{EMAIL}:{TOKEN}")
}

/// One issue as the fake keeps it.
#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub key: String,
    pub summary: String,
    pub status: String,
    pub priority: Option<u32>,
    pub labels: Vec<String>,
    /// Ids of issues that block this one (inward `Blocks` links).
    pub blocked_by: Vec<u64>,
    pub comments: Vec<Value>,
}

/// One transition of the workflow graph.
#[derive(Debug, Clone)]
pub struct Transition {
    pub id: String,
    pub name: String,
    pub to: String,
}

/// The fake's data, edited by tests between polls through [`FakeServer::with_state`].
#[derive(Debug, Default)]
pub struct JiraState {
    pub project: String,
    /// Issues by numeric id.
    pub issues: BTreeMap<u64, FakeIssue>,
    /// Transitions on offer by current status (lowercased).
    pub workflow: BTreeMap<String, Vec<Transition>>,
    /// When set, pages that are not last carry no `nextPageToken`.
    pub drop_cursor: bool,
    /// The filters of every `search/jql` query, as sent.
    pub filters: Vec<String>,
    /// Serving Jira Server / Data Center's REST v2 instead of Cloud's v3.
    pub server: bool,
    next_comment_id: u64,
}

impl JiraState {
    /// Adds issue `PROJ-<n>` with id `10000 + n` in `status`; returns the id.
    pub fn add_issue(&mut self, n: u64, summary: &str, status: &str) -> u64 {
        let project = self.project.clone();
        self.add_issue_in(&project, n, summary, status)
    }

    /// Adds issue `<project>-<n>`: id `10000 + n` in the served project, `20000 + n` in any
    /// other (so `OTHER-9` is `20009`); returns the id.
    pub fn add_issue_in(&mut self, project: &str, n: u64, summary: &str, status: &str) -> u64 {
        let id = if project == self.project {
            10_000 + n
        } else {
            20_000 + n
        };
        self.issues.insert(
            id,
            FakeIssue {
                key: format!("{project}-{n}"),
                summary: summary.to_string(),
                status: status.to_string(),
                priority: Some(3),
                labels: Vec::new(),
                blocked_by: Vec::new(),
                comments: Vec::new(),
            },
        );
        id
    }

    pub fn status(&self, id: u64) -> String {
        self.issues
            .get(&id)
            .map(|i| i.status.clone())
            .unwrap_or_default()
    }

    pub fn set_status(&mut self, id: u64, status: &str) {
        if let Some(i) = self.issues.get_mut(&id) {
            i.status = status.to_string();
        }
    }

    fn find(&self, id_or_key: &str) -> Option<u64> {
        if let Ok(id) = id_or_key.parse::<u64>() {
            return self.issues.contains_key(&id).then_some(id);
        }
        self.issues
            .iter()
            .find(|(_, i)| i.key.eq_ignore_ascii_case(id_or_key))
            .map(|(id, _)| *id)
    }

    fn json(&self, id: u64) -> Value {
        let i = &self.issues[&id];
        let links: Vec<Value> = i
            .blocked_by
            .iter()
            .filter_map(|b| self.issues.get(b).map(|bi| (b, bi)))
            .map(|(b, bi)| {
                json!({"type": {"name": "Blocks", "inward": "is blocked by"},
                    "inwardIssue": {"id": b.to_string(), "key": bi.key,
                        "fields": {"status": {"name": bi.status}}}})
            })
            .collect();
        let project = i.key.rsplit_once('-').map_or("", |(p, _)| p);
        json!({
            "id": id.to_string(), "key": i.key,
            "fields": {
                "project": {"key": project, "name": format!("Project {project}")},
                "summary": i.summary, "status": {"name": i.status},
                "priority": i.priority.map(|p| json!({"id": p.to_string()})),
                "labels": i.labels, "assignee": null, "issuetype": {"name": "Task"},
                "parent": null, "issuelinks": links,
                "description": if self.server {
                    json!(format!("h2. Body\nBody of {}", i.key))
                } else {
                    json!({"type": "doc", "version": 1, "content": [
                        {"type": "paragraph", "content": [{"type": "text", "text": format!("Body of {}", i.key)}]}]})
                },
                "created": format!("2026-01-01T00:00:{:02}.000+0000", id % 60),
                "updated": "2026-01-02T00:00:00.000+0000",
            }
        })
    }
}

/// The workflow of the fixtures: To Do → In Progress → Human Review → Done, and back.
pub fn default_workflow() -> BTreeMap<String, Vec<Transition>> {
    let t = |id: &str, name: &str, to: &str| Transition {
        id: id.into(),
        name: name.into(),
        to: to.into(),
    };
    BTreeMap::from([
        (
            "to do".into(),
            vec![
                t("21", "Start Progress", "In Progress"),
                t("41", "Mark Done", "Done"),
            ],
        ),
        (
            "in progress".into(),
            vec![
                t("31", "Send to Review", "Human Review"),
                t("41", "Mark Done", "Done"),
                t("11", "Stop Progress", "To Do"),
            ],
        ),
        (
            "human review".into(),
            vec![
                t("41", "Mark Done", "Done"),
                t("21", "Start Progress", "In Progress"),
            ],
        ),
        ("done".into(), vec![t("51", "Reopen", "To Do")]),
    ])
}

/// A fixture of `tests/fixtures/jira/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jira")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub type FakeJira = FakeServer<JiraState>;

/// Starts a fake serving project `PROJ` with the default workflow.
pub fn start() -> FakeJira {
    let state = JiraState {
        project: PROJECT.to_string(),
        workflow: default_workflow(),
        next_comment_id: 30_000,
        ..JiraState::default()
    };
    let server = FakeServer::start(state, route);
    server.check_against(Vendor::Jira);
    server
}

/// Starts a fake Jira Server / Data Center (REST v2) serving project `PROJ`.
pub fn start_server() -> FakeJira {
    let state = JiraState {
        project: PROJECT.to_string(),
        workflow: default_workflow(),
        next_comment_id: 30_000,
        server: true,
        ..JiraState::default()
    };
    FakeServer::start(state, route)
}

fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, &json!({"errorMessages": [message], "errors": {}}))
}

/// Whether the request carries the mode's credentials.
fn authorized(s: &JiraState, req: &Recorded) -> bool {
    let basic = |pair: &str| format!("Basic {}", data_encoding::BASE64.encode(pair.as_bytes()));
    let got = req.header("authorization").unwrap_or_default();
    if s.server {
        got == format!("Bearer {PAT}") || got == basic(SERVER_LOGIN)
    } else {
        got == basic(&api_key())
    }
}

fn route(s: &mut JiraState, req: &Recorded) -> Reply {
    if !authorized(s, req) {
        return error(401, "Client must be authenticated to access this resource.");
    }
    let base = if s.server {
        "/rest/api/2"
    } else {
        "/rest/api/3"
    };
    match (req.method.as_str(), req.path.strip_prefix(base)) {
        ("GET", Some("/search/jql")) if !s.server => return search(s, req),
        ("GET", Some("/search")) if s.server => return search(s, req),
        _ => {}
    }
    let Some(rest) = req.path.strip_prefix(&format!("{base}/issue/")) else {
        return error(404, "Not found");
    };
    let (id_or_key, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(id) = s.find(&super::fake_server::decode(id_or_key)) else {
        return error(
            404,
            "Issue does not exist or you do not have permission to see it.",
        );
    };
    match (req.method.as_str(), tail) {
        ("GET", "") => Reply::json(200, &s.json(id)),
        ("PUT", "") => edit(s, id, req),
        ("GET", "comment") => comments(s, id, req),
        ("POST", "comment") => add_comment(s, id, req),
        ("GET", "transitions") => Reply::json(200, &json!({"transitions": offered(s, id)})),
        ("POST", "transitions") => transition(s, id, req),
        _ => error(404, "Not found"),
    }
}

fn offered(s: &JiraState, id: u64) -> Vec<Value> {
    let status = s.status(id).to_lowercase();
    s.workflow
        .get(&status)
        .into_iter()
        .flatten()
        .map(|t| json!({"id": t.id, "name": t.name, "to": {"name": t.to}}))
        .collect()
}

fn transition(s: &mut JiraState, id: u64, req: &Recorded) -> Reply {
    let wanted = req.json()["transition"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let status = s.status(id).to_lowercase();
    let to = s
        .workflow
        .get(&status)
        .and_then(|ts| ts.iter().find(|t| t.id == wanted))
        .map(|t| t.to.clone());
    match to {
        Some(to) => {
            s.set_status(id, &to);
            Reply::empty(204)
        }
        None => error(400, "Transition id is not valid for this issue."),
    }
}

fn edit(s: &mut JiraState, id: u64, req: &Recorded) -> Reply {
    let body = req.json();
    let Some(ops) = body["update"]["labels"].as_array() else {
        return error(400, "No update given.");
    };
    let Some(issue) = s.issues.get_mut(&id) else {
        return error(404, "Not found");
    };
    for op in ops {
        if let Some(l) = op["add"].as_str() {
            if !issue.labels.iter().any(|x| x == l) {
                issue.labels.push(l.to_string());
            }
        } else if let Some(l) = op["remove"].as_str() {
            issue.labels.retain(|x| x != l);
        } else {
            return error(400, "Unknown label operation.");
        }
    }
    Reply::empty(204)
}

/// An ADF document as Jira accepts it: `doc`, version 1, a content array of typed nodes.
pub fn is_adf(v: &Value) -> bool {
    v["type"] == "doc"
        && v["version"] == 1
        && v["content"]
            .as_array()
            .is_some_and(|c| c.iter().all(|n| n["type"].is_string()))
}

fn add_comment(s: &mut JiraState, id: u64, req: &Recorded) -> Reply {
    let body = req.json()["body"].clone();
    if s.server && !body.is_string() {
        return error(
            400,
            "Can not deserialize instance of java.lang.String out of START_OBJECT token",
        );
    }
    if !s.server && !is_adf(&body) {
        return error(400, "Comment body is not valid Atlassian Document Format.");
    }
    s.next_comment_id += 1;
    let c = json!({"id": s.next_comment_id.to_string(), "author": {"displayName": "Sortie Bot"},
        "body": body, "created": "2026-01-05T00:00:00.000+0000"});
    if let Some(i) = s.issues.get_mut(&id) {
        i.comments.push(c.clone());
    }
    Reply::json(201, &c)
}

fn number(req: &Recorded, name: &str, default: usize) -> usize {
    req.param(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn comments(s: &JiraState, id: u64, req: &Recorded) -> Reply {
    let all = &s.issues[&id].comments;
    let start = number(req, "startAt", 0);
    let max = number(req, "maxResults", 50).clamp(1, 100);
    let page: Vec<Value> = all.iter().skip(start).take(max).cloned().collect();
    Reply::json(
        200,
        &json!({"startAt": start, "maxResults": max, "total": all.len(), "comments": page}),
    )
}

/// The quoted (or bare numeric) values inside `<word> IN (…)`, or `None` when absent.
fn in_list(jql: &str, word: &str) -> Option<Vec<String>> {
    let at = jql.find(&format!("{word} IN ("))? + word.len() + 5;
    let end = jql[at..].find(')')? + at;
    Some(
        jql[at..end]
            .split(',')
            .map(|v| v.trim().trim_matches('"').to_lowercase())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn matches(s: &JiraState, id: u64, jql: &str) -> bool {
    let i = &s.issues[&id];
    let project = i.key.rsplit_once('-').map_or("", |(p, _)| p);
    let project_ok = match jql.strip_prefix("project = \"") {
        Some(rest) => rest.split('"').next() == Some(project),
        None => true,
    };
    let ok = |word: &str, value: &str| {
        in_list(jql, word).is_none_or(|vs| vs.iter().any(|v| v == &value.to_lowercase()))
    };
    project_ok && ok("status", &i.status) && ok("key", &i.key) && ok("id", &id.to_string())
}

/// `search/jql` over the issues; the cursor is the offset of the next page.
fn search(s: &mut JiraState, req: &Recorded) -> Reply {
    let jql = req.param("jql").unwrap_or_default();
    if let Some(at) = jql.find(" AND (") {
        let tail = &jql[at + 6..];
        let filter = tail.rsplit_once(") ORDER BY").map_or(tail, |(f, _)| f);
        s.filters.push(filter.to_string());
    }
    let mut ids: Vec<u64> = s
        .issues
        .keys()
        .copied()
        .filter(|id| matches(s, *id, &jql))
        .collect();
    if jql.contains("ORDER BY priority") {
        ids.sort_by_key(|id| (s.issues[id].priority.unwrap_or(u32::MAX), *id));
    }
    let start: usize = if s.server {
        number(req, "startAt", 0)
    } else {
        req.param("nextPageToken")
            .and_then(|t| t.strip_prefix("tok-").and_then(|n| n.parse().ok()))
            .unwrap_or(0)
    };
    let max = number(req, "maxResults", 50).clamp(1, 100);
    let page: Vec<Value> = ids
        .iter()
        .skip(start)
        .take(max)
        .map(|id| s.json(*id))
        .collect();
    if s.server {
        return Reply::json(
            200,
            &json!({"expand": "names,schema", "startAt": start, "maxResults": max,
                "total": ids.len(), "issues": page}),
        );
    }
    let last = start + max >= ids.len();
    let mut body = json!({"issues": page, "isLast": last});
    if !last && !s.drop_cursor {
        body["nextPageToken"] = json!(format!("tok-{}", start + max));
    }
    Reply::json(200, &body)
}
