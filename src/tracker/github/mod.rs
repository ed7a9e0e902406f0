//! The `github` tracker: issues of one repository (`tracker.project: owner/repo`), with
//! workflow states kept as labels (GitHub itself only knows open and closed). Reads follow
//! absolute `Link` URLs, single-issue reads are conditional on a cached ETag, blockers come
//! from the issue dependencies API (read for one issue at a time: candidates leave them
//! unread for the dispatch pass) and transitions swap labels so a retry converges.

mod api;
mod normalize;
mod settings;
mod transition;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{Comment, Issue, IssueRef};
use crate::http_client::{ErrorClass, HttpError, RateLimitStatus};
use crate::tracker::DefaultStates;
use crate::tracker::webhook::{self, Signature, WebhookScheme};
use crate::tracker::{
    Blockers, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind,
    TrackerResult, TrackerSettings, scope,
};

use crate::tracker::label_state::StateWords;
use api::GithubApi;
pub use settings::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// The configuration name of this kind (`tracker.kind`, and the `github:` block).
pub const KIND: &str = "github";

/// This kind as the registry lists it.
pub const DESCRIPTOR: TrackerDescriptor = TrackerDescriptor {
    kind: KIND,
    path_key: None,
    validate,
    labels: crate::tracker::LabelSupport::FULL,
    default_states: Some(DefaultStates {
        active: DEFAULT_ACTIVE,
        terminal: DEFAULT_TERMINAL,
    }),
    reads_keys: &[],
    webhook: Some(WEBHOOK),
    contract: Contract::Suite("github"),
    build,
};

/// GitHub signs with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)>` and names the
/// delivery in `X-GitHub-Delivery`
/// (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>).
const WEBHOOK: WebhookScheme = WebhookScheme {
    signature_header: "X-Hub-Signature-256",
    signature: Signature::HmacSha256Hex {
        prefix: Some("sha256="),
    },
    delivery_header: "X-GitHub-Delivery",
    event_header: "X-GitHub-Event",
    timestamp: None,
    issue: |p| webhook::repo_number(p, "/issue/number", "/repository/full_name"),
};

fn validate(s: &TrackerSettings) -> Vec<SettingProblem> {
    settings::problems(s)
}

fn build(s: &TrackerSettings, clock: Arc<dyn Clock>) -> TrackerResult<Arc<dyn TrackerAdapter>> {
    for w in settings::warnings(s) {
        log::warn!(tracker:% = KIND, warning:% = w; "tracker settings look wrong");
    }
    let c = settings::parse(s)?;
    crate::mask::register_secret(&c.token);
    Ok(Arc::new(GithubTracker {
        words: StateWords {
            active: c.active.clone(),
            terminal: c.terminal.clone(),
            handoff: c.handoff.clone(),
        },
        query_filter: c.query_filter.clone(),
        api: GithubApi::new(&c, clock),
    }))
}

/// Tracker adapter over one GitHub repository.
pub struct GithubTracker {
    api: GithubApi,
    words: StateWords,
    query_filter: Option<String>,
}

fn err(e: HttpError) -> TrackerError {
    TrackerError::from_http(KIND, &e)
}

impl GithubTracker {
    /// The issue number an id names: `12`, `#12` or `<owner>/<repo>#12` of this repository;
    /// anything else is refused before any request.
    fn number(&self, id: &str) -> TrackerResult<String> {
        scope::repo_number(KIND, id, &self.api.full_name)
    }

    /// A listed item as an issue; a pull request is none.
    fn issue_of(&self, v: Value) -> Option<Issue> {
        if normalize::is_pull_request(&v) {
            return None;
        }
        normalize::issue(&v, &self.words, &self.api.full_name)
    }

    /// The issue JSON; a pull request or a 404 is `NotFound`.
    fn issue_json(&self, id: &str) -> TrackerResult<Value> {
        let v = self.api.get_issue(&self.number(id)?).map_err(err)?;
        if normalize::is_pull_request(&v) {
            return Err(TrackerError::new(
                TrackerErrorKind::NotFound,
                KIND,
                format!("GET issue {id}: is a pull request, not an issue"),
            ));
        }
        Ok(v)
    }

    fn states_of(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for id in ids {
            match self.issue_json(id) {
                Ok(v) => {
                    out.insert(id.clone(), normalize::state(&v, &self.words));
                }
                Err(e) if scope::omitted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn parent(&self, number: &str) -> TrackerResult<Option<crate::domain::IssueRef>> {
        match self.api.get_parent(number) {
            Ok(v) => Ok(normalize::parent(&v)),
            Err(e) if e.class == ErrorClass::NotFound => Ok(None),
            Err(e) => Err(err(e)),
        }
    }
}

impl TrackerAdapter for GithubTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        let keep = |v| self.issue_of(v);
        let mut issues = match &self.query_filter {
            Some(f) => self.api.search(&format!("state:open {f}"), keep),
            None => self.api.open_issues(keep),
        }
        .map_err(err)?;
        issues.retain(|i| self.words.is_active(&i.state));
        // GitHub lists an issue's blockers only through their own endpoint: the candidates
        // leave them unread (unless the payload proves there are none), and the dispatch pass
        // reads the few it reaches, within its per-pass budget.
        Ok(issues)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let v = self.issue_json(id)?;
        let mut issue =
            normalize::issue(&v, &self.words, &self.api.full_name).ok_or_else(|| {
                TrackerError::new(
                    TrackerErrorKind::Payload,
                    KIND,
                    format!("GET issue {id}: no number in the answer"),
                )
            })?;
        issue.comments = Some(self.fetch_issue_comments(&issue.id)?);
        issue.blocked_by = self.fetch_blockers(&issue.id)?.refs;
        issue.blockers_read = crate::domain::BlockersRead::Complete;
        issue.parent = self.parent(&issue.id)?;
        Ok(issue)
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let wanted: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut issues = Vec::new();
        for t in wanted.iter().filter(|s| self.words.is_terminal(s)) {
            let label = t.replace('"', "");
            issues.extend(
                self.api
                    .search(&format!("state:closed label:\"{label}\""), |v| {
                        self.issue_of(v)
                    })
                    .map_err(err)?,
            );
        }
        // Open issues can carry any state label, a terminal one included.
        issues.extend(self.api.open_issues(|v| self.issue_of(v)).map_err(err)?);
        let mut seen = BTreeSet::new();
        issues.retain(|i| wanted.contains(&i.state.to_lowercase()) && seen.insert(i.id.clone()));
        Ok(issues)
    }

    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        self.states_of(ids)
    }

    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        self.states_of(identifiers)
    }

    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        self.api
            .list_issue_part(&self.number(id)?, "/comments", "comments", "id", |v| {
                Some(normalize::comment(&v))
            })
            .map_err(err)
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let target = state.trim().to_lowercase();
        if !self.words.is_state_label(&target) {
            return Err(TrackerError::new(
                TrackerErrorKind::Payload,
                KIND,
                format!(
                    "transition of issue {id} to {state:?}: not an active, terminal or handoff state"
                ),
            ));
        }
        transition::apply(&self.api, &self.number(id)?, &target, &self.words).map_err(err)
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        self.api.post_comment(&self.number(id)?, text).map_err(err)
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.api.add_label(&self.number(id)?, label).map_err(err)
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.api.remove_label(&self.number(id)?, label).map_err(err)
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        // A 404 is an unknown issue or a repository without the dependencies API; the issue
        // read tells them apart, so an unknown issue stays `NotFound`.
        let number = self.number(id)?;
        let refs = match self.api.list_issue_part(
            &number,
            "/dependencies/blocked_by",
            "blockers",
            "number",
            |v| normalize::blocker(&v, &self.words),
        ) {
            Ok(refs) => refs,
            Err(e) if e.class == ErrorClass::NotFound => {
                self.issue_json(id)?;
                Vec::new()
            }
            Err(e) => return Err(err(e)),
        };
        Ok(Blockers {
            refs,
            complete: true,
        })
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    /// The issues path pins the repository, so an issue the number reads is this repository's;
    /// with `tracker.query_filter` set, the filter's search must list it too.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let number = self.number(id)?;
        self.issue_json(&number)?;
        if let Some(filter) = &self.query_filter {
            let listed = self
                .api
                .search(filter, |v| normalize::number(&v))
                .map_err(err)?;
            if !listed.contains(&number) {
                return Err(scope::filtered_out(KIND, id, filter));
            }
        }
        Ok(IssueRef {
            id: number.clone(),
            identifier: number,
        })
    }
}
