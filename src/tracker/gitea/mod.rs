//! The `gitea` tracker: issues of one repository on a self-hosted Gitea instance
//! (`tracker.endpoint` = the instance URL, `tracker.project: owner/repo`), with workflow
//! states kept as labels (Gitea itself only knows open and closed), as for the other
//! label-state trackers. Lists follow the `Link` header; blockers are the issues one depends
//! on (`…/dependencies`, read for one issue at a time: candidates leave them unread for the
//! dispatch pass); transitions swap labels by id so a retry converges.
//!
//! API reference: <https://docs.gitea.com/api/1.22/> (each instance serves the same swagger
//! at `/api/swagger`) and <https://docs.gitea.com/development/api-usage> for token auth and
//! paging.

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
use api::GiteaApi;
pub use settings::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// The configuration name of this kind (`tracker.kind`, and the `gitea:` block).
pub const KIND: &str = "gitea";

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
    contract: Contract::Suite("gitea"),
    build,
};

/// Gitea signs with `X-Gitea-Signature: <hex HMAC-SHA256(body)>` and names the delivery in
/// `X-Gitea-Delivery` (<https://docs.gitea.com/usage/webhooks>).
const WEBHOOK: WebhookScheme = WebhookScheme {
    signature_header: "X-Gitea-Signature",
    signature: Signature::HmacSha256Hex { prefix: None },
    delivery_header: "X-Gitea-Delivery",
    event_header: "X-Gitea-Event",
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
    Ok(Arc::new(GiteaTracker {
        words: StateWords {
            active: c.active.clone(),
            terminal: c.terminal.clone(),
            handoff: c.handoff.clone(),
        },
        api: GiteaApi::new(&c, clock),
        filter: c.filter.clone(),
    }))
}

/// Tracker adapter over one Gitea repository.
pub struct GiteaTracker {
    api: GiteaApi,
    words: StateWords,
    /// Extra issue-list parameters for candidates only (`tracker.query_filter`).
    filter: Vec<(String, String)>,
}

fn err(e: HttpError) -> TrackerError {
    TrackerError::from_http(KIND, &e)
}

impl GiteaTracker {
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
}

impl TrackerAdapter for GiteaTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        let mut issues = self
            .api
            .issues("open", None, &self.filter, |v| self.issue_of(v))
            .map_err(err)?;
        issues.retain(|i| self.words.is_active(&i.state));
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
        Ok(issue)
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let wanted: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut issues = Vec::new();
        let keep = |v| self.issue_of(v);
        // Closed issues are read per terminal label (the list's `labels` filter), so a
        // repository's closed history is not read whole.
        for t in wanted.iter().filter(|s| self.words.is_terminal(s)) {
            issues.extend(self.api.issues("closed", Some(t), &[], keep).map_err(err)?);
        }
        // Open issues can carry any state label, a terminal one included.
        issues.extend(self.api.issues("open", None, &[], keep).map_err(err)?);
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
        let items = self.api.comments(&self.number(id)?).map_err(err)?;
        Ok(items.iter().map(normalize::comment).collect())
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

    /// Reads the issue for the label's id: an absent label needs no call.
    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let v = self.issue_json(id)?;
        let found = normalize::label_entries(&v)
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(label.trim()))
            .and_then(|(_, id)| id);
        match found {
            Some(label_id) => self
                .api
                .remove_label_id(&self.number(id)?, label_id)
                .map_err(err),
            None => Ok(()),
        }
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        // A 404 is an unknown issue or a repository with dependencies turned off; the issue
        // read tells them apart, so an unknown issue stays `NotFound`.
        let items = match self.api.dependencies(&self.number(id)?) {
            Ok(items) => items,
            Err(e) if e.class == ErrorClass::NotFound => {
                self.issue_json(id)?;
                Vec::new()
            }
            Err(e) => return Err(err(e)),
        };
        Ok(Blockers {
            refs: items
                .iter()
                .filter_map(|v| normalize::blocker(v, &self.words))
                .collect(),
            complete: true,
        })
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    /// The issues path pins the repository, so an issue the number reads is this repository's;
    /// with a configured filter, the filtered list (any state) must hold it too.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let number = self.number(id)?;
        self.issue_json(&number)?;
        if !self.filter.is_empty() {
            let listed = self
                .api
                .issues("all", None, &self.filter, |v| normalize::number(&v))
                .map_err(err)?;
            if !listed.contains(&number) {
                let shown: Vec<String> = self
                    .filter
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                return Err(scope::filtered_out(KIND, id, &shown.join("&")));
            }
        }
        Ok(IssueRef {
            id: number.clone(),
            identifier: number,
        })
    }
}
