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

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{BlockerRef, Comment, Issue};
use crate::http_client::{HttpError, RateLimitStatus};
use crate::tracker::DefaultStates;
use crate::tracker::label_state::StateWords;
use crate::tracker::rest_labels::{Keep, LabelApi, LabelTracker, http_err, shown_filter};
use crate::tracker::webhook::{self, Signature, WebhookScheme};
use crate::tracker::{
    SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerResult, TrackerSettings,
};

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
    let project = Gitlab {
        filter: c.filter.clone(),
        api: GitlabApi::new(&c, clock),
    };
    Ok(Arc::new(LabelTracker::new(project, c.words)))
}

/// Tracker adapter over one GitLab project.
pub type GitlabTracker = LabelTracker<Gitlab>;

/// One GitLab project's issues API, with the configured list filter.
pub struct Gitlab {
    api: GitlabApi,
    /// Extra issue-list parameters for candidates (`tracker.query_filter`).
    filter: Vec<(String, String)>,
}

impl LabelApi for Gitlab {
    const KIND: &'static str = KIND;
    const NUMBER_NAME: &'static str = "iid";

    fn home(&self) -> &str {
        &self.api.project
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    fn get_issue(&self, iid: &str) -> Result<Value, HttpError> {
        self.api.get_issue(iid)
    }

    fn issue(&self, v: &Value, words: &StateWords) -> Option<Issue> {
        normalize::issue(v, words, &self.api.project)
    }

    fn state(v: &Value, words: &StateWords) -> String {
        normalize::state(v, words)
    }

    fn candidates(&self, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.issues("opened", &self.filter, keep)
    }

    fn closed_with_label(&self, label: &str, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        let labels = [("labels".to_string(), label.to_string())];
        self.api.issues("closed", &labels, keep)
    }

    fn open_issues(&self, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.issues("opened", &[], keep)
    }

    /// The issue's notes without system notes.
    fn comments(&self, iid: &str) -> Result<Vec<Comment>, HttpError> {
        let items = self.api.notes(iid)?;
        Ok(items
            .iter()
            .filter(|n| !normalize::is_system_note(n))
            .map(normalize::comment)
            .collect())
    }

    fn transition(&self, iid: &str, target: &str, words: &StateWords) -> Result<(), HttpError> {
        transition::apply(&self.api, iid, target, words)
    }

    fn post_comment(&self, iid: &str, text: &str) -> Result<(), HttpError> {
        self.api.post_note(iid, text)
    }

    fn add_label(&self, iid: &str, label: &str) -> Result<(), HttpError> {
        let edit = Edit {
            add_labels: vec![label.to_string()],
            ..Edit::default()
        };
        self.api.edit(iid, &edit)
    }

    /// GitLab ignores the removal of a label the issue does not carry.
    fn remove_label(t: &LabelTracker<Self>, id: &str, label: &str) -> TrackerResult<()> {
        let iid = t.number(id)?;
        let edit = Edit {
            remove_labels: vec![label.to_string()],
            ..Edit::default()
        };
        t.api.api.edit(&iid, &edit).map_err(http_err::<Self>)
    }

    /// The issue links of type `is_blocked_by`.
    fn blockers(t: &LabelTracker<Self>, id: &str) -> TrackerResult<Vec<BlockerRef>> {
        let iid = t.number(id)?;
        let items = t.api.api.links(&iid).map_err(http_err::<Self>)?;
        Ok(items
            .iter()
            .filter_map(|v| normalize::blocker(v, &t.words))
            .collect())
    }

    /// The filtered list (any state), narrowed to the iid, must hold the issue.
    fn filtered_out(&self, iid: &str) -> Result<Option<String>, HttpError> {
        if self.filter.is_empty() {
            return Ok(None);
        }
        let mut params = self.filter.clone();
        params.push(("iids[]".into(), iid.to_string()));
        let listed = self.api.issues("all", &params, |v| normalize::iid(&v))?;
        Ok((!listed.iter().any(|n| n == iid)).then(|| shown_filter(&self.filter)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::scope;

    #[test]
    fn ids_name_the_iid_of_this_project_only() {
        let iid = |id: &str| scope::repo_number(KIND, id, "group/sub/project").ok();
        assert_eq!(iid("group/sub/project#12").as_deref(), Some("12"));
        assert_eq!(iid("#12").as_deref(), Some("12"));
        assert_eq!(iid("12").as_deref(), Some("12"));
        assert_eq!(iid("group/other#12"), None);
    }
}
