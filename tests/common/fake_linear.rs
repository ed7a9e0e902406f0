//! A fake Linear GraphQL API on the fake-server framework: `POST /graphql` dispatched on the
//! operation name sortie sends, answered from in-memory state shaped like Linear's schema:
//! issues of teams with workflow states (by id), labels (team or workspace), comments and
//! inverse `blocks` relations; `nodes` connections paged by `first`/`after` with `pageInfo`;
//! the raw personal key checked in `Authorization` (an `AUTHENTICATION_ERROR` otherwise);
//! `X-RateLimit-Requests-*` headers on every answer. Unknown ids answer Linear's
//! `Entity not found` error; unknown state or label ids an `INVALID_INPUT` error.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::fake_server::{FakeServer, Fault, Recorded, Reply};
use super::vendor_check::Vendor;

pub const TEAM: &str = "ENG";
pub const TOKEN: &str = "lin_api_fake0123456789abcdef";
pub const PATH: &str = "/graphql";

/// One issue as the fake keeps it.
#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub team: String,
    pub number: u64,
    pub title: String,
    /// A workflow state id.
    pub state_id: String,
    pub priority: u64,
    /// Label ids.
    pub labels: Vec<String>,
    /// Numbers (same team) of the issues that block this one.
    pub blocked_by: Vec<u64>,
    pub comments: Vec<Value>,
}

/// The fake's data, edited by tests between polls through [`FakeServer::with_state`].
#[derive(Debug, Default)]
pub struct LinearState {
    /// Issues by UUID.
    pub issues: BTreeMap<String, FakeIssue>,
    /// `(id, name, type)` of the team's workflow states.
    pub states: Vec<(String, String, String)>,
    /// `(id, name, team key or None for a workspace label)`.
    pub labels: Vec<(String, String, Option<String>)>,
    /// When set, pages that say more follow carry no `endCursor`.
    pub drop_cursor: bool,
    /// Operations answered `{"data": {}}` (a shape the adapter cannot read) while listed.
    pub unreadable_ops: Vec<String>,
    next_comment: u64,
    served: u64,
}

/// The UUID of issue `ENG-<n>`.
pub fn issue_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

impl LinearState {
    /// Adds `ENG-<n>` in the state named `state`; returns its UUID.
    pub fn add_issue(&mut self, n: u64, title: &str, state: &str) -> String {
        let id = issue_id(n);
        let state_id = self.state_id(state).unwrap_or_default();
        self.issues.insert(
            id.clone(),
            FakeIssue {
                team: TEAM.into(),
                number: n,
                title: title.into(),
                state_id,
                priority: 3,
                labels: Vec::new(),
                blocked_by: Vec::new(),
                comments: Vec::new(),
            },
        );
        id
    }

    pub fn state_id(&self, name: &str) -> Option<String> {
        self.states
            .iter()
            .find(|(_, n, _)| n == name)
            .map(|(id, _, _)| id.clone())
    }

    /// The state name of `ENG-<n>`.
    pub fn state(&self, n: u64) -> String {
        let sid = self
            .issues
            .get(&issue_id(n))
            .map(|i| i.state_id.clone())
            .unwrap_or_default();
        self.state_name(&sid)
    }

    pub fn set_state(&mut self, n: u64, name: &str) {
        let sid = self.state_id(name).unwrap_or_default();
        if let Some(i) = self.issues.get_mut(&issue_id(n)) {
            i.state_id = sid;
        }
    }

    /// The label names of `ENG-<n>`.
    pub fn label_names(&self, n: u64) -> Vec<String> {
        let ids = self
            .issues
            .get(&issue_id(n))
            .map(|i| i.labels.clone())
            .unwrap_or_default();
        ids.iter()
            .filter_map(|l| self.labels.iter().find(|(id, _, _)| id == l))
            .map(|(_, n, _)| n.clone())
            .collect()
    }

    pub fn issue_mut(&mut self, n: u64) -> Option<&mut FakeIssue> {
        self.issues.get_mut(&issue_id(n))
    }

    fn state_name(&self, sid: &str) -> String {
        self.states
            .iter()
            .find(|(id, _, _)| id == sid)
            .map(|(_, n, _)| n.clone())
            .unwrap_or_default()
    }

    fn find(&self, id_or_identifier: &str) -> Option<String> {
        if self.issues.contains_key(id_or_identifier) {
            return Some(id_or_identifier.to_string());
        }
        self.issues
            .iter()
            .find(|(_, i)| {
                format!("{}-{}", i.team, i.number).eq_ignore_ascii_case(id_or_identifier)
            })
            .map(|(id, _)| id.clone())
    }

    fn by_number(&self, team: &str, n: u64) -> Option<(&String, &FakeIssue)> {
        self.issues
            .iter()
            .find(|(_, i)| i.team == team && i.number == n)
    }

    fn small(&self, id: &str) -> Value {
        let i = &self.issues[id];
        json!({"id": id, "identifier": format!("{}-{}", i.team, i.number),
            "state": {"name": self.state_name(&i.state_id)}})
    }

    fn node(&self, id: &str) -> Value {
        let i = &self.issues[id];
        let identifier = format!("{}-{}", i.team, i.number);
        let relations: Vec<Value> = i
            .blocked_by
            .iter()
            .filter_map(|n| self.by_number(&i.team, *n))
            .map(|(bid, _)| json!({"type": "blocks", "issue": self.small(bid)}))
            .collect();
        let labels: Vec<Value> = i
            .labels
            .iter()
            .filter_map(|l| self.labels.iter().find(|(id, _, _)| id == l))
            .map(|(_, n, _)| json!({"name": n}))
            .collect();
        let ty = self
            .states
            .iter()
            .find(|(sid, _, _)| *sid == i.state_id)
            .map(|(_, _, t)| t.clone())
            .unwrap_or_default();
        json!({
            "id": id, "identifier": identifier, "title": i.title,
            "description": format!("Body of {identifier}"), "priority": i.priority,
            "url": format!("https://linear.app/acme/issue/{identifier}"),
            "branchName": identifier.to_lowercase(),
            "createdAt": format!("2026-01-01T00:00:{:02}.000Z", i.number % 60),
            "updatedAt": "2026-01-02T00:00:00.000Z",
            "state": {"name": self.state_name(&i.state_id), "type": ty},
            "team": {"key": i.team},
            "assignee": null, "parent": null,
            "labels": {"nodes": labels},
            "inverseRelations": {"nodes": relations, "pageInfo": {"hasNextPage": false}},
        })
    }
}

/// A new team's workflow (ids `st-…`).
pub fn default_states() -> Vec<(String, String, String)> {
    [
        ("st-backlog", "Backlog", "backlog"),
        ("st-todo", "Todo", "unstarted"),
        ("st-progress", "In Progress", "started"),
        ("st-review", "In Review", "started"),
        ("st-done", "Done", "completed"),
        ("st-canceled", "Canceled", "canceled"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect()
}

/// A fixture of `tests/fixtures/linear/`.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/linear")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub type FakeLinear = FakeServer<LinearState>;

/// Starts a fake serving team `ENG` with the default workflow and labels `sortie-parked`
/// (team) and `ai` (workspace).
pub fn start() -> FakeLinear {
    let state = LinearState {
        states: default_states(),
        labels: vec![
            (
                "lb-parked".into(),
                "sortie-parked".into(),
                Some(TEAM.into()),
            ),
            (
                "lb-other-team".into(),
                "sortie-parked".into(),
                Some("OPS".into()),
            ),
            ("lb-ai".into(), "ai".into(), None),
        ],
        next_comment: 1,
        ..LinearState::default()
    };
    let server = FakeServer::start(state, route);
    server.check_against(Vendor::Linear);
    server
}

/// The variables of every request of operation `op`, in order.
pub fn calls(fake: &FakeLinear, op: &str) -> Vec<Value> {
    fake.requests("POST", PATH)
        .iter()
        .map(Recorded::json)
        .filter(|b| b["operationName"] == op)
        .map(|b| b["variables"].clone())
        .collect()
}

/// A rate-limited answer as Linear sends it: HTTP 400, `RATELIMITED`, budget spent until
/// `reset_in_ms` from now (epoch milliseconds in `X-RateLimit-Requests-Reset`).
pub fn ratelimited(reset_in_ms: u64) -> Fault {
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64 + reset_in_ms)
        .unwrap_or(0);
    Fault::Status(
        Reply::json(400, &fixture("error_ratelimited.json"))
            .header("X-RateLimit-Requests-Limit", "5000")
            .header("X-RateLimit-Requests-Remaining", "0")
            .header("X-RateLimit-Requests-Reset", reset.to_string()),
    )
}

/// A refused key: HTTP 400 with `AUTHENTICATION_ERROR`.
pub fn unauthenticated() -> Fault {
    Fault::Status(Reply::json(400, &fixture("error_authentication.json")))
}

fn gql_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"errors": [{"message": message, "extensions": {"code": code, "userError": true}}], "data": null}),
    )
}

fn not_found(what: &str) -> Reply {
    Reply::json(200, &fixture("error_not_found.json")).header("X-Fake-Missing", what.to_string())
}

fn route(s: &mut LinearState, req: &Recorded) -> Reply {
    if req.method != "POST" || req.path != PATH {
        return Reply::json(404, &json!({"message": "Not found"}));
    }
    if req.header("authorization") != Some(TOKEN) {
        return Reply::json(400, &fixture("error_authentication.json"));
    }
    s.served += 1;
    let body = req.json();
    let vars = body["variables"].clone();
    let op = body["operationName"].as_str().unwrap_or_default();
    if s.unreadable_ops.iter().any(|o| o == op) {
        return Reply::json(200, &json!({"data": {}}));
    }
    let reply = match op {
        "SortieIssues" | "SortieIssuesFiltered" => issues(s, &vars),
        "SortieIssue" => match s.find(vars["id"].as_str().unwrap_or_default()) {
            Some(id) => Reply::json(200, &json!({"data": {"issue": s.node(&id)}})),
            None => not_found("issue"),
        },
        "SortieIssueInFilter" => {
            let id = vars["id"].as_str().unwrap_or_default();
            let found: Vec<String> = s
                .issues
                .iter()
                .filter(|(k, i)| *k == id && i.team == vars["team"].as_str().unwrap_or_default())
                .filter(|(_, i)| extra_matches(s, i, &vars["extra"]))
                .map(|(k, _)| k.clone())
                .collect();
            page(s, &found, &vars, "issues", |_, id| json!({"id": id}))
        }
        "SortieIssueStatesByIds" => {
            let ids: Vec<String> = strings(&vars["ids"]);
            let found: Vec<String> = s
                .issues
                .keys()
                .filter(|k| ids.contains(k))
                .cloned()
                .collect();
            page(s, &found, &vars, "issues", |s, id| s.small(id))
        }
        "SortieIssueStatesByNumbers" => {
            let team = vars["team"].as_str().unwrap_or_default().to_string();
            let numbers: Vec<u64> = vars["numbers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .map(|n| n as u64)
                .collect();
            let found: Vec<String> = s
                .issues
                .iter()
                .filter(|(_, i)| i.team == team && numbers.contains(&i.number))
                .map(|(id, _)| id.clone())
                .collect();
            page(s, &found, &vars, "issues", |s, id| s.small(id))
        }
        "SortieComments" => match s.find(vars["id"].as_str().unwrap_or_default()) {
            Some(id) => {
                let all = s.issues[&id].comments.clone();
                let (items, info) = slice(s, &all, &vars);
                Reply::json(
                    200,
                    &json!({"data": {"issue": {"comments": {"nodes": items, "pageInfo": info}}}}),
                )
            }
            None => not_found("issue"),
        },
        "SortieBlockers" => match s.find(vars["id"].as_str().unwrap_or_default()) {
            Some(id) => {
                let n = s.node(&id);
                Reply::json(
                    200,
                    &json!({"data": {"issue": {"id": id, "inverseRelations": n["inverseRelations"]}}}),
                )
            }
            None => not_found("issue"),
        },
        "SortieWorkflowStates" => {
            let all: Vec<Value> = if vars["team"] == TEAM {
                s.states
                    .iter()
                    .map(|(id, n, t)| json!({"id": id, "name": n, "type": t}))
                    .collect()
            } else {
                Vec::new()
            };
            let (items, info) = slice(s, &all, &vars);
            Reply::json(
                200,
                &json!({"data": {"workflowStates": {"nodes": items, "pageInfo": info}}}),
            )
        }
        "SortieLabels" => {
            let name = vars["name"].as_str().unwrap_or_default().to_lowercase();
            let all: Vec<Value> = s
                .labels
                .iter()
                .filter(|(_, n, _)| n.to_lowercase() == name)
                .map(|(id, n, t)| json!({"id": id, "name": n, "team": t.as_ref().map(|k| json!({"key": k}))}))
                .collect();
            let (items, info) = slice(s, &all, &vars);
            Reply::json(
                200,
                &json!({"data": {"issueLabels": {"nodes": items, "pageInfo": info}}}),
            )
        }
        "SortieIssueUpdate" => update_state(s, &vars),
        "SortieCommentCreate" => comment(s, &vars),
        "SortieIssueAddLabel" | "SortieIssueRemoveLabel" => {
            let add = body["operationName"] == "SortieIssueAddLabel";
            edit_label(s, &vars, add)
        }
        other => gql_error(
            400,
            "GRAPHQL_VALIDATION_FAILED",
            &format!("Unknown operation {other:?}"),
        ),
    };
    let remaining = 5000u64.saturating_sub(s.served);
    reply
        .header("X-RateLimit-Requests-Limit", "5000")
        .header("X-RateLimit-Requests-Remaining", remaining.to_string())
        .header("X-RateLimit-Requests-Reset", "1767225600000")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// One page of `all` by `first`/`after` (cursor `c-<offset>`).
fn slice(s: &LinearState, all: &[Value], vars: &Value) -> (Vec<Value>, Value) {
    let first = vars["first"].as_u64().unwrap_or(50).clamp(1, 250) as usize;
    let start: usize = vars["after"]
        .as_str()
        .and_then(|c| c.strip_prefix("c-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let items: Vec<Value> = all.iter().skip(start).take(first).cloned().collect();
    let more = start + first < all.len();
    let cursor = if more && s.drop_cursor {
        Value::Null
    } else {
        json!(format!("c-{}", start + items.len()))
    };
    (items, json!({"hasNextPage": more, "endCursor": cursor}))
}

fn page(
    s: &LinearState,
    ids: &[String],
    vars: &Value,
    field: &str,
    f: impl Fn(&LinearState, &str) -> Value,
) -> Reply {
    let all: Vec<Value> = ids.iter().map(|id| f(s, id)).collect();
    let (items, info) = slice(s, &all, vars);
    Reply::json(
        200,
        &json!({"data": {field: {"nodes": items, "pageInfo": info}}}),
    )
}

/// Whether `i` matches an extra `IssueFilter`; the fake understands one shape,
/// `{"labels": {"name": {"eq": <name>}}}` (anything else matches every issue).
fn extra_matches(s: &LinearState, i: &FakeIssue, extra: &Value) -> bool {
    let Some(name) = extra.pointer("/labels/name/eq").and_then(Value::as_str) else {
        return true;
    };
    i.labels.iter().any(|l| {
        s.labels
            .iter()
            .any(|(id, n, _)| id == l && n.eq_ignore_ascii_case(name))
    })
}

fn issues(s: &LinearState, vars: &Value) -> Reply {
    let team = vars["team"].as_str().unwrap_or_default();
    let states = strings(&vars["states"]);
    let extra = &vars["extra"];
    let mut ids: Vec<(u64, String)> = s
        .issues
        .iter()
        .filter(|(_, i)| i.team == team && states.contains(&s.state_name(&i.state_id)))
        .filter(|(_, i)| extra.is_null() || extra_matches(s, i, extra))
        .map(|(id, i)| (i.number, id.clone()))
        .collect();
    ids.sort();
    let ids: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
    page(s, &ids, vars, "issues", |s, id| s.node(id))
}

fn update_state(s: &mut LinearState, vars: &Value) -> Reply {
    let Some(id) = s.find(vars["id"].as_str().unwrap_or_default()) else {
        return not_found("issue");
    };
    let sid = vars["stateId"].as_str().unwrap_or_default().to_string();
    if !s.states.iter().any(|(x, _, _)| *x == sid) {
        return gql_error(
            400,
            "INVALID_INPUT",
            "stateId: workflow state not found in team",
        );
    }
    if let Some(i) = s.issues.get_mut(&id) {
        i.state_id = sid;
    }
    // Exactly what `SortieIssueUpdate` selects.
    let issue = json!({"id": id, "state": {"name": s.state_name(&s.issues[&id].state_id)}});
    Reply::json(
        200,
        &json!({"data": {"issueUpdate": {"success": true, "issue": issue}}}),
    )
}

fn comment(s: &mut LinearState, vars: &Value) -> Reply {
    let Some(id) = s.find(vars["issueId"].as_str().unwrap_or_default()) else {
        return not_found("issue");
    };
    let body = vars["body"].as_str().unwrap_or_default().to_string();
    if body.trim().is_empty() {
        return gql_error(400, "INVALID_INPUT", "body: should not be empty");
    }
    // Stamped after every seeded comment: a posted comment is the newest, as in Linear.
    s.next_comment += 1;
    let c = json!({"id": format!("cm-{}", s.next_comment), "body": body,
        "createdAt": format!("2026-06-01T00:00:{:02}.000Z", s.next_comment % 60),
        "user": {"name": "Sortie Bot"}});
    if let Some(i) = s.issues.get_mut(&id) {
        i.comments.push(c.clone());
    }
    Reply::json(
        200,
        &json!({"data": {"commentCreate": {"success": true, "comment": {"id": c["id"]}}}}),
    )
}

fn edit_label(s: &mut LinearState, vars: &Value, add: bool) -> Reply {
    let Some(id) = s.find(vars["id"].as_str().unwrap_or_default()) else {
        return not_found("issue");
    };
    let lid = vars["labelId"].as_str().unwrap_or_default().to_string();
    if !s.labels.iter().any(|(x, _, _)| *x == lid) {
        return not_found("label");
    }
    let field = if add {
        "issueAddLabel"
    } else {
        "issueRemoveLabel"
    };
    if let Some(i) = s.issues.get_mut(&id) {
        if add {
            if !i.labels.contains(&lid) {
                i.labels.push(lid);
            }
        } else {
            i.labels.retain(|l| *l != lid);
        }
    }
    Reply::json(200, &json!({"data": {field: {"success": true}}}))
}
