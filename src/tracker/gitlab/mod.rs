//! The `gitlab` tracker: issues of one GitLab project (`tracker.project: group/project` or a
//! numeric id) over REST API v4, with workflow states kept as labels (GitLab issues are only
//! opened or closed). Lists page by `X-Next-Page`, comments are the issue's notes without
//! system notes, blockers are the issue links of type `is_blocked_by` (read for one issue at a
//! time: candidates leave them unread for the dispatch pass), and a transition is one edit
//! computed from the issue as read, so a retry converges.
//!
//! API documentation: <https://docs.gitlab.com/ee/api/issues.html>,
//! <https://docs.gitlab.com/ee/api/notes.html>, <https://docs.gitlab.com/ee/api/issue_links.html>,
//! <https://docs.gitlab.com/ee/api/rest/#pagination>.

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
use crate::http_client::{HttpError, RateLimitStatus};
use crate::tracker::DefaultStates;
use crate::tracker::webhook::{self, Signature, WebhookScheme};
use crate::tracker::{
    Blockers, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind,
    TrackerResult, TrackerSettings, scope,
};

use crate::tracker::label_state::StateWords;
use api::{Edit, GitlabApi};
pub use settings::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// The configuration name of this kind (`tracker.kind`, and the `gitlab:` block).
pub const KIND: &str = "gitlab";

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
    contract: Contract::Suite("gitlab"),
    build,
};

/// GitLab sends the configured secret as `X-Gitlab-Token` and names the delivery in
/// `X-Gitlab-Event-UUID` (<https://docs.gitlab.com/user/project/integrations/webhooks/>).
const WEBHOOK: WebhookScheme = WebhookScheme {
    signature_header: "X-Gitlab-Token",
    signature: Signature::Token,
    delivery_header: "X-Gitlab-Event-UUID",
    event_header: "X-Gitlab-Event",
    timestamp: None,
    issue: |p| webhook::repo_number(p, "/object_attributes/iid", "/project/path_with_namespace"),
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
    Ok(Arc::new(GitlabTracker {
        words: StateWords {
            active: c.active.clone(),
            terminal: c.terminal.clone(),
            handoff: c.handoff.clone(),
        },
        filter: c.filter.clone(),
        api: GitlabApi::new(&c, clock),
    }))
}

/// Tracker adapter over one GitLab project.
pub struct GitlabTracker {
    api: GitlabApi,
    words: StateWords,
    /// Extra issue-list parameters for candidates (`tracker.query_filter`).
    filter: Vec<(String, String)>,
}

fn err(e: HttpError) -> TrackerError {
    TrackerError::from_http(KIND, &e)
}

impl GitlabTracker {
    fn issue_of(&self, v: Value) -> Option<Issue> {
        normalize::issue(&v, &self.words, &self.api.project)
    }

    /// The issue JSON; an id that is not this project's issue number is refused without a
    /// request.
    fn issue_json(&self, id: &str) -> TrackerResult<Value> {
        let iid = self.checked_iid(id)?;
        self.api.get_issue(&iid).map_err(err)
    }

    /// The `iid` an id names: `12`, `#12` or `<project>#12` of this project; anything else is
    /// refused before any request.
    fn checked_iid(&self, id: &str) -> TrackerResult<String> {
        scope::repo_number(KIND, id, &self.api.project)
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

impl TrackerAdapter for GitlabTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        let mut issues = self
            .api
            .issues("opened", &self.filter, |v| self.issue_of(v))
            .map_err(err)?;
        issues.retain(|i| self.words.is_active(&i.state));
        Ok(issues)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let v = self.issue_json(id)?;
        let mut issue = normalize::issue(&v, &self.words, &self.api.project).ok_or_else(|| {
            TrackerError::new(
                TrackerErrorKind::Payload,
                KIND,
                format!("GET issue {id}: no iid in the answer"),
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
        for t in wanted.iter().filter(|s| self.words.is_terminal(s)) {
            let labels = [("labels".to_string(), t.clone())];
            issues.extend(self.api.issues("closed", &labels, keep).map_err(err)?);
        }
        // Open issues can carry any state label, a terminal one included.
        issues.extend(self.api.issues("opened", &[], keep).map_err(err)?);
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
        let iid = self.checked_iid(id)?;
        let items = self.api.notes(&iid).map_err(err)?;
        Ok(items
            .iter()
            .filter(|n| !normalize::is_system_note(n))
            .map(normalize::comment)
            .collect())
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
        let iid = self.checked_iid(id)?;
        transition::apply(&self.api, &iid, &target, &self.words).map_err(err)
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        let iid = self.checked_iid(id)?;
        self.api.post_note(&iid, text).map_err(err)
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let iid = self.checked_iid(id)?;
        let edit = Edit {
            add_labels: vec![label.to_string()],
            ..Edit::default()
        };
        self.api.edit(&iid, &edit).map_err(err)
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        // GitLab ignores the removal of a label the issue does not carry.
        let iid = self.checked_iid(id)?;
        let edit = Edit {
            remove_labels: vec![label.to_string()],
            ..Edit::default()
        };
        self.api.edit(&iid, &edit).map_err(err)
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        let iid = self.checked_iid(id)?;
        let items = self.api.links(&iid).map_err(err)?;
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

    /// The issues path pins the project, so an issue the iid reads is this project's; with a
    /// configured filter, the filtered list (any state) must hold it too.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let iid = self.checked_iid(id)?;
        self.issue_json(&iid)?;
        if !self.filter.is_empty() {
            let mut params = self.filter.clone();
            params.push(("iids[]".into(), iid.clone()));
            let listed = self
                .api
                .issues("all", &params, |v| normalize::iid(&v))
                .map_err(err)?;
            if !listed.contains(&iid) {
                let shown: Vec<String> = self
                    .filter
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                return Err(scope::filtered_out(KIND, id, &shown.join("&")));
            }
        }
        Ok(IssueRef {
            id: iid.clone(),
            identifier: iid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_the_iid_of_this_project_only() {
        let iid = |id: &str| scope::repo_number(KIND, id, "group/sub/project").ok();
        assert_eq!(iid("group/sub/project#12").as_deref(), Some("12"));
        assert_eq!(iid("#12").as_deref(), Some("12"));
        assert_eq!(iid("12").as_deref(), Some("12"));
        assert_eq!(iid("group/other#12"), None);
    }
}
