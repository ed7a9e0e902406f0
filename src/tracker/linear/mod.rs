//! The `linear` tracker: issues of one Linear team (`tracker.project: ENG`, the team key) read
//! over Linear's GraphQL API, with the team's own workflow states as states. Transitions write
//! the state's id (resolved from the team's `workflowStates` by name, cached, refreshed on a
//! miss) with `issueUpdate`; labels are resolved to ids the same way and written with
//! `issueAddLabel`/`issueRemoveLabel`; blockers are the inverse relations of type `blocks`.
//!
//! API reference: <https://linear.app/developers/graphql> (authentication, queries and
//! mutations), <https://linear.app/developers/pagination>,
//! <https://linear.app/developers/rate-limiting>, and the published schema
//! (`packages/sdk/src/schema.graphql` of the linear/linear repository).

mod api;
mod normalize;
mod queries;
mod settings;

/// The Linear answers the unit tests read (`tests/fixtures/linear/`).
#[cfg(test)]
fn fixture(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/tests/fixtures/linear/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{Comment, Issue, IssueRef};
use crate::http_client::{HttpError, RateLimitStatus, absent_is_ok};
use crate::tracker::DefaultStates;
use crate::tracker::webhook::{self, Signature, SignedTimestamp, WebhookScheme};
use crate::tracker::{
    Blockers, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind,
    TrackerResult, TrackerSettings, scope,
};

use api::{LinearApi, connection_gap, entity_gap};
pub use settings::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// The configuration name of this kind (`tracker.kind`, and the `linear:` block).
pub const KIND: &str = "linear";

/// This kind as the registry lists it.
pub const DESCRIPTOR: TrackerDescriptor = TrackerDescriptor {
    kind: KIND,
    path_key: None,
    validate,
    labels: crate::tracker::LabelSupport {
        creates_missing: false,
        ..crate::tracker::LabelSupport::FULL
    },
    default_states: Some(DefaultStates {
        active: DEFAULT_ACTIVE,
        terminal: DEFAULT_TERMINAL,
    }),
    reads_keys: &[],
    webhook: Some(WEBHOOK),
    contract: Contract::Suite("linear"),
    build,
};

/// Linear signs with `Linear-Signature: <hex HMAC-SHA256(body)>`, names the delivery in
/// `Linear-Delivery`, and puts `webhookTimestamp` (Unix milliseconds) in the body, to be
/// within a minute of now (<https://linear.app/developers/webhooks>).
const WEBHOOK: WebhookScheme = WebhookScheme {
    signature_header: "Linear-Signature",
    signature: Signature::HmacSha256Hex { prefix: None },
    delivery_header: "Linear-Delivery",
    event_header: "Linear-Event",
    timestamp: Some(SignedTimestamp {
        field: "webhookTimestamp",
        tolerance_ms: 60_000,
    }),
    issue: |p| webhook::text_at(p, "/data/identifier"),
};

fn validate(s: &TrackerSettings) -> Vec<SettingProblem> {
    settings::problems(s)
}

fn build(s: &TrackerSettings, clock: Arc<dyn Clock>) -> TrackerResult<Arc<dyn TrackerAdapter>> {
    let c = settings::parse(s)?;
    crate::mask::register_secret(&c.token);
    Ok(Arc::new(LinearTracker {
        api: LinearApi::new(&c, clock),
        team: c.team.clone(),
        active: c.active.clone(),
        extra_filter: c.extra_filter.clone(),
        states: Mutex::new(None),
    }))
}

/// One workflow state of the team.
#[derive(Debug, Clone)]
struct WorkflowState {
    id: String,
    name: String,
}

/// Tracker adapter over one Linear team.
pub struct LinearTracker {
    api: LinearApi,
    team: String,
    active: Vec<String>,
    /// `tracker.query_filter`, for candidate and by-state reads only (by-id reads and state
    /// refreshes must see an issue the filter no longer matches).
    extra_filter: Option<Value>,
    /// The team's workflow states, read on first need and again when a name is missing.
    states: Mutex<Option<Vec<WorkflowState>>>,
}

fn err(e: HttpError) -> TrackerError {
    TrackerError::from_http(KIND, &e)
}

/// What an issue node must carry to be read.
const ISSUE_NEED: &[&str] = &["/id", "/identifier", "/state/name"];

/// An id as Linear names an issue, its UUID or its identifier (`ENG-12`), trimmed; anything
/// else is refused before any request.
fn checked(id: &str) -> TrackerResult<String> {
    let t = id.trim();
    if scope::is_uuid(t) || scope::key_number(t).is_some() {
        return Ok(t.to_string());
    }
    Err(scope::refusal(
        KIND,
        id,
        "a linear issue id is its UUID or its identifier (ENG-12)",
    ))
}

fn payload(message: String) -> TrackerError {
    TrackerError::new(TrackerErrorKind::Payload, KIND, message)
}

fn trimmed(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `ENG-12` → (`ENG`, 12); anything that is not a team key and a number is `None`.
fn split_identifier(identifier: &str) -> Option<(String, u64)> {
    scope::key_number(identifier.trim())
}

impl LinearTracker {
    fn read_states(&self) -> TrackerResult<Vec<WorkflowState>> {
        let nodes = self
            .api
            .nodes(
                "SortieWorkflowStates",
                queries::WORKFLOW_STATES,
                json!({"team": self.team}),
                "/workflowStates",
                &["/id", "/name"],
                Some,
            )
            .map_err(err)?;
        let states: Vec<WorkflowState> = nodes
            .iter()
            .filter_map(|n| {
                Some(WorkflowState {
                    id: n.get("id")?.as_str()?.to_string(),
                    name: n.get("name")?.as_str()?.to_string(),
                })
            })
            .collect();
        *self.states.lock().unwrap_or_else(|p| p.into_inner()) = Some(states.clone());
        Ok(states)
    }

    fn cached_states(&self) -> Option<Vec<WorkflowState>> {
        self.states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The team's state named `name` (case-insensitive), reading the states again on a miss.
    fn state_named(&self, name: &str) -> TrackerResult<WorkflowState> {
        let find = |states: &[WorkflowState]| {
            states
                .iter()
                .find(|s| s.name.trim().eq_ignore_ascii_case(name.trim()))
                .cloned()
        };
        if let Some(s) = self.cached_states().as_deref().and_then(find) {
            return Ok(s);
        }
        let states = self.read_states()?;
        find(&states).ok_or_else(|| {
            payload(format!(
                "team {} has no workflow state named {name:?} (states: {})",
                self.team,
                states
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    /// Config state names spelled as the team spells them when the cache knows them, so the
    /// exact-match `in` filter matches case-insensitively.
    fn spelled(&self, names: &[String]) -> TrackerResult<Vec<String>> {
        let states = match self.cached_states() {
            Some(s) => s,
            None => self.read_states()?,
        };
        Ok(names
            .iter()
            .map(|n| {
                states
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(n))
                    .map_or_else(|| n.clone(), |s| s.name.clone())
            })
            .collect())
    }

    fn issues_in(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let states = self.spelled(states)?;
        match &self.extra_filter {
            None => self.api.nodes(
                "SortieIssues",
                queries::ISSUES,
                json!({"team": self.team, "states": states}),
                "/issues",
                ISSUE_NEED,
                |v| normalize::issue(&v),
            ),
            Some(extra) => self.api.nodes(
                "SortieIssuesFiltered",
                queries::ISSUES_FILTERED,
                json!({"team": self.team, "states": states, "extra": extra}),
                "/issues",
                ISSUE_NEED,
                |v| normalize::issue(&v),
            ),
        }
        .map_err(err)
    }

    /// The issue node `id` names; `null` (no such issue) is not-found.
    fn issue_node(&self, id: &str) -> TrackerResult<Value> {
        let mut data = self
            .api
            .query(
                "SortieIssue",
                queries::ISSUE,
                json!({"id": checked(id)?}),
                |d| entity_gap(d, "issue", ISSUE_NEED),
            )
            .map_err(err)?;
        Ok(data["issue"].take())
    }

    /// The label id for `name`: a label of this team first, else a workspace label.
    fn label_id(&self, name: &str) -> TrackerResult<Option<String>> {
        let nodes = self
            .api
            .nodes(
                "SortieLabels",
                queries::LABELS,
                json!({"name": name.trim()}),
                "/issueLabels",
                &["/id", "/name"],
                Some,
            )
            .map_err(err)?;
        let named: Vec<&Value> = nodes
            .iter()
            .filter(|n| {
                n.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|l| l.trim().eq_ignore_ascii_case(name.trim()))
            })
            .collect();
        let team_of = |n: &Value| {
            n.pointer("/team/key")
                .and_then(Value::as_str)
                .map(String::from)
        };
        let pick = named
            .iter()
            .find(|n| team_of(n).is_some_and(|k| k.eq_ignore_ascii_case(&self.team)))
            .or_else(|| named.iter().find(|n| team_of(n).is_none()));
        Ok(pick.and_then(|n| n.get("id").and_then(Value::as_str).map(String::from)))
    }

    fn states_of(
        &self,
        op: &str,
        query: &str,
        vars: Value,
        key: &str,
        wanted: &BTreeSet<String>,
    ) -> TrackerResult<BTreeMap<String, String>> {
        let nodes = self
            .api
            .nodes(op, query, vars, "/issues", ISSUE_NEED, Some)
            .map_err(err)?;
        Ok(nodes
            .iter()
            .filter_map(|n| {
                let k = n.get(key)?.as_str()?.to_string();
                wanted
                    .contains(&k.to_ascii_uppercase())
                    .then(|| (k, normalize::state(n)))
            })
            .collect())
    }
}

impl TrackerAdapter for LinearTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        self.issues_in(&self.active)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let v = self.issue_node(id)?;
        let mut issue = normalize::issue(&v).ok_or_else(|| {
            payload(format!(
                "SortieIssue {id}: no id or identifier in the answer"
            ))
        })?;
        issue.comments = Some(self.fetch_issue_comments(&issue.id)?);
        Ok(issue)
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let states = trimmed(states);
        if states.is_empty() {
            return Ok(Vec::new());
        }
        self.issues_in(&states)
    }

    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        let ids: Vec<String> = trimmed(ids)
            .into_iter()
            .filter(|i| scope::is_uuid(i))
            .collect();
        let mut out = BTreeMap::new();
        for chunk in ids.chunks(api::PAGE) {
            let wanted: BTreeSet<String> = chunk.iter().map(|i| i.to_ascii_uppercase()).collect();
            out.extend(self.states_of(
                "SortieIssueStatesByIds",
                queries::STATES_BY_IDS,
                json!({"ids": chunk}),
                "id",
                &wanted,
            )?);
        }
        Ok(out)
    }

    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        // Identifiers are `<team key>-<number>`; Linear filters by team and number.
        let mut by_team: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for i in identifiers {
            if let Some((team, n)) = split_identifier(i) {
                by_team.entry(team).or_default().push(n);
            }
        }
        let mut out = BTreeMap::new();
        for (team, numbers) in by_team {
            for chunk in numbers.chunks(api::PAGE) {
                let wanted: BTreeSet<String> =
                    chunk.iter().map(|n| format!("{team}-{n}")).collect();
                out.extend(self.states_of(
                    "SortieIssueStatesByNumbers",
                    queries::STATES_BY_NUMBERS,
                    json!({"team": team, "numbers": chunk}),
                    "identifier",
                    &wanted,
                )?);
            }
        }
        Ok(out)
    }

    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        let mut comments: Vec<Comment> = self
            .api
            .nodes(
                "SortieComments",
                queries::COMMENTS,
                json!({"id": checked(id)?}),
                "/issue/comments",
                &["/id"],
                |v| Some(normalize::comment(&v)),
            )
            .map_err(err)?;
        // Oldest first, whatever order the connection used.
        comments.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(comments)
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let id = checked(id)?;
        let target = self.state_named(state)?;
        log::info!(
            tracker:% = KIND,
            issue_id:% = id,
            state:% = state,
            state_id:% = target.id;
            "transitioning issue"
        );
        self.api
            .mutate(
                "SortieIssueUpdate",
                queries::UPDATE_STATE,
                json!({"id": id, "stateId": target.id}),
                "issueUpdate",
            )
            .map(drop)
            .map_err(err)
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        self.api
            .mutate(
                "SortieCommentCreate",
                queries::COMMENT_CREATE,
                json!({"issueId": checked(id)?, "body": text}),
                "commentCreate",
            )
            .map(drop)
            .map_err(err)
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let id = checked(id)?;
        let Some(label_id) = self.label_id(label)? else {
            return Err(payload(format!(
                "label {label:?} does not exist in team {} or the workspace: create it in Linear first",
                self.team
            )));
        };
        self.api
            .mutate(
                "SortieIssueAddLabel",
                queries::ADD_LABEL,
                json!({"id": id, "labelId": label_id}),
                "issueAddLabel",
            )
            .map(drop)
            .map_err(err)
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let id = checked(id)?;
        let Some(label_id) = self.label_id(label)? else {
            return Ok(());
        };
        absent_is_ok(self.api.mutate(
            "SortieIssueRemoveLabel",
            queries::REMOVE_LABEL,
            json!({"id": id, "labelId": label_id}),
            "issueRemoveLabel",
        ))
        .map_err(err)
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        let data = self
            .api
            .query(
                "SortieBlockers",
                queries::BLOCKERS,
                json!({"id": checked(id)?}),
                |d| {
                    entity_gap(d, "issue", &["/id"])?;
                    let issue = &d["issue"];
                    connection_gap(issue, "/inverseRelations", &["/type"])
                },
            )
            .map_err(err)?;
        let v = &data["issue"];
        Ok(Blockers {
            refs: normalize::blockers(v),
            complete: normalize::blockers_complete(v),
        })
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    /// Linear looks issues up workspace-wide, so the answer decides: the issue's team must be
    /// the configured one, and with `tracker.query_filter` set, the team's issues matching it
    /// must hold the issue.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let v = self.issue_node(id)?;
        let owner = v
            .pointer("/team/key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        scope::same_owner(KIND, id, "team", owner, &self.team)?;
        let issue_id = v["id"].as_str().unwrap_or_default().to_string();
        if let Some(extra) = &self.extra_filter {
            let found = self
                .api
                .nodes(
                    "SortieIssueInFilter",
                    queries::ISSUE_IN_FILTER,
                    json!({"id": issue_id, "team": self.team, "extra": extra}),
                    "/issues",
                    &["/id"],
                    Some,
                )
                .map_err(err)?;
            if !found.iter().any(|n| n["id"] == issue_id.as_str()) {
                return Err(scope::filtered_out(KIND, id, &extra.to_string()));
            }
        }
        Ok(IssueRef {
            id: issue_id,
            identifier: v["identifier"].as_str().unwrap_or_default().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_team_and_number() {
        assert_eq!(split_identifier("eng-12"), Some(("ENG".into(), 12)));
        assert_eq!(split_identifier(" MY2-3 "), Some(("MY2".into(), 3)));
        assert_eq!(split_identifier("../ENG-3"), None);
        assert_eq!(split_identifier("ENG"), None);
        assert_eq!(split_identifier("-3"), None);
        assert_eq!(split_identifier("ENG-x"), None);
    }
}
