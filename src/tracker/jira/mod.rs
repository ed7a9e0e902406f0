//! The `jira` tracker: issues of one Jira project (`tracker.project: KEY`) read by JQL, with
//! status names as states, on Jira Cloud (REST v3, the default) or Jira Server / Data Center
//! (`tracker.api_version: "2"`, REST v2). Transitions follow the project's workflow (the first
//! transition into the wanted status), comments are posted as ADF on v3 and as wiki-markup text
//! on v2 (descriptions and comments read back as text either way), and blockers come from the
//! inward side of an issue-link type in the issue payload itself.

mod adf;
mod api;
mod errors;
mod jql;
mod normalize;
mod settings;
mod transition;

/// The recorded Jira responses the unit tests read (`tests/fixtures/jira/`).
#[cfg(test)]
fn fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/jira/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{Comment, Issue, IssueRef};
use crate::http_client::{HttpError, RateLimitStatus};
use crate::tracker::DefaultStates;
use crate::tracker::webhook::{self, Signature, WebhookScheme};
use crate::tracker::{
    Blockers, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind,
    TrackerResult, TrackerSettings, scope,
};

use api::JiraApi;
use settings::ApiVersion;

/// Whether an endpoint is a Jira Cloud site, or a loopback address (tests, local proxies).
fn is_cloud_or_local(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let host = rest
        .split(['/', ':'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    host.ends_with(".atlassian.net")
        || host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The configuration name of this kind (`tracker.kind`, and the `jira:` block).
pub const KIND: &str = "jira";
pub use settings::DEFAULT_ACTIVE;

/// This kind as the registry lists it.
pub const DESCRIPTOR: TrackerDescriptor = TrackerDescriptor {
    kind: KIND,
    path_key: None,
    validate,
    labels: crate::tracker::LabelSupport {
        spaces: false,
        ..crate::tracker::LabelSupport::FULL
    },
    default_states: Some(DefaultStates {
        active: DEFAULT_ACTIVE,
        terminal: &[],
    }),
    reads_keys: &["api_version", "user_agent"],
    webhook: Some(WEBHOOK),
    contract: Contract::Suite("jira"),
    build,
};

/// Jira Cloud webhooks registered with a secret carry `X-Hub-Signature: sha256=<hex
/// HMAC-SHA256(body)>` (the WebSub `method=signature` form) and name the delivery in
/// `X-Atlassian-Webhook-Identifier`
/// (<https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks>).
const WEBHOOK: WebhookScheme = WebhookScheme {
    signature_header: "X-Hub-Signature",
    signature: Signature::HmacSha256Hex {
        prefix: Some("sha256="),
    },
    delivery_header: "X-Atlassian-Webhook-Identifier",
    event_header: "X-Atlassian-Webhook-Flow",
    timestamp: None,
    issue: |p| webhook::text_at(p, "/issue/key"),
};

fn validate(s: &TrackerSettings) -> Vec<SettingProblem> {
    settings::problems(s)
}

fn build(s: &TrackerSettings, clock: Arc<dyn Clock>) -> TrackerResult<Arc<dyn TrackerAdapter>> {
    let c = settings::parse(s)?;
    crate::mask::register_secret(c.auth.secret());
    if c.api_version == ApiVersion::V3 && !is_cloud_or_local(&c.endpoint) {
        log::warn!(
            tracker:% = KIND,
            endpoint:% = c.endpoint;
            "jira endpoint is not a Jira Cloud site; Jira Server and Data Center answer REST v3 with 404 (set tracker.api_version: \"2\")"
        );
    }
    Ok(Arc::new(JiraTracker {
        api: JiraApi::new(&c, clock),
        project: c.project.clone(),
        active: c.active.clone(),
        query_filter: c.query_filter.clone(),
        endpoint: c.endpoint.clone(),
        link_type: c.link_type.clone(),
    }))
}

/// Tracker adapter over one Jira Cloud project.
pub struct JiraTracker {
    api: JiraApi,
    project: String,
    active: Vec<String>,
    query_filter: Option<String>,
    endpoint: String,
    link_type: String,
}

fn err(e: HttpError) -> TrackerError {
    errors::from_http(&e)
}

/// An id as Jira names an issue, its number (`10001`) or its key (`PROJ-12`), trimmed;
/// anything else is refused before any request.
fn checked(id: &str) -> TrackerResult<String> {
    let t = id.trim();
    if scope::is_number(t) || scope::key_number(t).is_some() {
        return Ok(t.to_string());
    }
    Err(scope::refusal(
        KIND,
        id,
        "a jira issue id is its number (10001) or its key (PROJ-12)",
    ))
}

impl JiraTracker {
    /// The issues `jql` selects, each normalized as its page is read.
    fn issues(&self, jql: &str) -> TrackerResult<Vec<Issue>> {
        self.api
            .search(jql, api::FIELDS, |v| {
                normalize::issue(&v, &self.endpoint, &self.link_type)
            })
            .map_err(err)
    }

    /// `field → status` over the lookup queries, keyed by the issue's id or key.
    fn states_of(
        &self,
        queries: Vec<String>,
        key_of: fn(&Value) -> Option<String>,
    ) -> TrackerResult<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for q in queries {
            let found = self
                .api
                .search(&q, "status", |v| Some((key_of(&v)?, normalize::state(&v))))
                .map_err(err)?;
            out.extend(found);
        }
        Ok(out)
    }
}

fn id_key(v: &Value) -> Option<String> {
    match v.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn key_key(v: &Value) -> Option<String> {
    Some(normalize::key(v)).filter(|k| !k.is_empty())
}

impl TrackerAdapter for JiraTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        let q = jql::candidates(&self.project, &self.active, self.query_filter.as_deref());
        self.issues(&q)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let v = self.api.issue(&checked(id)?).map_err(err)?;
        let mut issue = normalize::issue(&v, &self.endpoint, &self.link_type).ok_or_else(|| {
            TrackerError::new(
                TrackerErrorKind::Payload,
                KIND,
                format!("GET issue {id}: no id or key in the answer"),
            )
        })?;
        issue.comments = Some(self.fetch_issue_comments(&issue.id)?);
        Ok(issue)
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let states: Vec<String> = states
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let q = jql::by_states(&self.project, &states, self.query_filter.as_deref());
        self.issues(&q)
    }

    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        self.states_of(jql::by_ids(ids), id_key)
    }

    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        let wanted: Vec<String> = identifiers
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| scope::key_number(k).is_some())
            .collect();
        self.states_of(jql::by_keys(&wanted), key_key)
    }

    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        let items = self.api.comments(&checked(id)?).map_err(err)?;
        Ok(items.iter().map(normalize::comment).collect())
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let id = checked(id)?;
        let id = id.as_str();
        let available = self.api.transitions(id).map_err(err)?;
        let Some(tid) = transition::choose(&available, state) else {
            // Jira offers no transition into the current status, yet being there is success.
            let current = normalize::state(&self.api.issue(id).map_err(err)?);
            if current.trim().eq_ignore_ascii_case(state.trim()) {
                return Ok(());
            }
            return Err(TrackerError::new(
                TrackerErrorKind::Payload,
                KIND,
                format!(
                    "transition of issue {id} to {state:?}: no transition leads there from its current status (available: {})",
                    transition::destinations(&available).join(", ")
                ),
            ));
        };
        log::info!(
            tracker:% = KIND,
            issue_id:% = id,
            state:% = state,
            transition_id:% = tid;
            "transitioning issue"
        );
        self.api.do_transition(id, &tid).map_err(err)
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        let body = match self.api.version() {
            ApiVersion::V3 => adf::from_text(text),
            // Server / Data Center's comment body is wiki markup; the text goes as written.
            ApiVersion::V2 => Value::String(text.to_string()),
        };
        self.api.post_comment(&checked(id)?, body).map_err(err)
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.api
            .edit_label(&checked(id)?, "add", label)
            .map_err(err)
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let id = checked(id)?;
        crate::http_client::absent_is_ok(self.api.edit_label(&id, "remove", label)).map_err(err)
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        let v = self.api.issue(&checked(id)?).map_err(err)?;
        let fields = v.get("fields").cloned().unwrap_or(Value::Null);
        Ok(Blockers {
            refs: normalize::blockers(&fields, &self.link_type),
            complete: true,
        })
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    /// Jira's issue path is site-wide, so the answer decides: the issue's project (its
    /// `project` field, else its key's prefix) must be `tracker.project`, and with
    /// `tracker.query_filter` set, a JQL search for the issue in the project and the filter
    /// must find it.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let v = self.api.issue(&checked(id)?).map_err(err)?;
        let key = normalize::key(&v);
        let owner = v
            .pointer("/fields/project/key")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| key.rsplit_once('-').map_or("", |(p, _)| p).to_string());
        scope::same_owner(KIND, id, "project", &owner, &self.project)?;
        let issue_id = normalize::id_of(v.get("id")).unwrap_or_default();
        if let Some(filter) = &self.query_filter {
            let q = jql::in_scope(&self.project, &issue_id, filter);
            if self.api.search(&q, "status", Some).map_err(err)?.is_empty() {
                return Err(scope::filtered_out(KIND, id, filter));
            }
        }
        Ok(IssueRef {
            id: issue_id,
            identifier: key,
        })
    }
}
