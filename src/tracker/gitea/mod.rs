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
    let repo = Gitea {
        api: GiteaApi::new(&c, clock),
        filter: c.filter.clone(),
    };
    Ok(Arc::new(LabelTracker::new(repo, c.words)))
}

/// Tracker adapter over one Gitea repository.
pub type GiteaTracker = LabelTracker<Gitea>;

/// One Gitea repository's issues API, with the configured list filter.
pub struct Gitea {
    api: GiteaApi,
    /// Extra issue-list parameters for candidates only (`tracker.query_filter`).
    filter: Vec<(String, String)>,
}

impl LabelApi for Gitea {
    const KIND: &'static str = KIND;

    fn home(&self) -> &str {
        &self.api.full_name
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    fn get_issue(&self, number: &str) -> Result<Value, HttpError> {
        self.api.get_issue(number)
    }

    fn is_pull_request(v: &Value) -> bool {
        normalize::is_pull_request(v)
    }

    fn issue(&self, v: &Value, words: &StateWords) -> Option<Issue> {
        normalize::issue(v, words, &self.api.full_name)
    }

    fn state(v: &Value, words: &StateWords) -> String {
        normalize::state(v, words)
    }

    fn candidates(&self, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.issues("open", None, &self.filter, keep)
    }

    /// The list's `labels` filter.
    fn closed_with_label(&self, label: &str, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.issues("closed", Some(label), &[], keep)
    }

    fn open_issues(&self, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.issues("open", None, &[], keep)
    }

    fn comments(&self, number: &str) -> Result<Vec<Comment>, HttpError> {
        let items = self.api.comments(number)?;
        Ok(items.iter().map(normalize::comment).collect())
    }

    fn transition(&self, number: &str, target: &str, words: &StateWords) -> Result<(), HttpError> {
        transition::apply(&self.api, number, target, words)
    }

    fn post_comment(&self, number: &str, text: &str) -> Result<(), HttpError> {
        self.api.post_comment(number, text)
    }

    fn add_label(&self, number: &str, label: &str) -> Result<(), HttpError> {
        self.api.add_label(number, label)
    }

    /// Reads the issue for the label's id: an absent label needs no call.
    fn remove_label(t: &LabelTracker<Self>, id: &str, label: &str) -> TrackerResult<()> {
        let v = t.issue_json(id)?;
        let found = normalize::label_entries(&v)
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(label.trim()))
            .and_then(|(_, id)| id);
        match found {
            Some(label_id) => t
                .api
                .api
                .remove_label_id(&t.number(id)?, label_id)
                .map_err(http_err::<Self>),
            None => Ok(()),
        }
    }

    /// A 404 is an unknown issue or a repository with dependencies turned off.
    fn blockers(t: &LabelTracker<Self>, id: &str) -> TrackerResult<Vec<BlockerRef>> {
        let listed = t.api.api.dependencies(&t.number(id)?).map(|items| {
            items
                .iter()
                .filter_map(|v| normalize::blocker(v, &t.words))
                .collect()
        });
        t.blockers_or_none(id, listed)
    }

    /// The filtered list (any state) must hold the issue.
    fn filtered_out(&self, number: &str) -> Result<Option<String>, HttpError> {
        if self.filter.is_empty() {
            return Ok(None);
        }
        let listed = self
            .api
            .issues("all", None, &self.filter, |v| normalize::number(&v))?;
        Ok((!listed.iter().any(|n| n == number)).then(|| shown_filter(&self.filter)))
    }
}
