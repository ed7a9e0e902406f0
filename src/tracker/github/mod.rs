//! The `github` tracker: issues of one repository (`tracker.project: owner/repo`), with
//! workflow states kept as labels (GitHub itself only knows open and closed). Reads follow
//! absolute `Link` URLs, single-issue reads are conditional on a cached ETag, blockers come
//! from the issue dependencies API (read for one issue at a time: candidates leave them
//! unread for the dispatch pass) and transitions swap labels so a retry converges.

mod api;
mod normalize;
mod settings;
mod transition;

use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{BlockerRef, Comment, Issue};
use crate::http_client::{ErrorClass, HttpError, RateLimitStatus};
use crate::tracker::DefaultStates;
use crate::tracker::label_state::StateWords;
use crate::tracker::rest_labels::{Keep, LabelApi, LabelTracker, http_err};
use crate::tracker::webhook::{self, Signature, WebhookScheme};
use crate::tracker::{
    SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerResult, TrackerSettings,
};

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
    let repo = Github {
        query_filter: c.query_filter.clone(),
        api: GithubApi::new(&c, clock),
    };
    Ok(Arc::new(LabelTracker::new(repo, c.words)))
}

/// Tracker adapter over one GitHub repository.
pub type GithubTracker = LabelTracker<Github>;

/// One GitHub repository's issues API, with the configured search filter.
pub struct Github {
    api: GithubApi,
    query_filter: Option<String>,
}

impl LabelApi for Github {
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
        match &self.query_filter {
            Some(f) => self.api.search(&format!("state:open {f}"), keep),
            None => self.api.open_issues(keep),
        }
    }

    fn closed_with_label(&self, label: &str, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        let label = label.replace('"', "");
        self.api
            .search(&format!("state:closed label:\"{label}\""), keep)
    }

    fn open_issues(&self, keep: Keep) -> Result<Vec<Issue>, HttpError> {
        self.api.open_issues(keep)
    }

    fn comments(&self, number: &str) -> Result<Vec<Comment>, HttpError> {
        self.api
            .list_issue_part(number, "/comments", "comments", "id", |v| {
                Some(normalize::comment(&v))
            })
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

    fn remove_label(t: &LabelTracker<Self>, id: &str, label: &str) -> TrackerResult<()> {
        let number = t.number(id)?;
        t.api
            .api
            .remove_label(&number, label)
            .map_err(http_err::<Self>)
    }

    /// A 404 is an unknown issue or a repository without the dependencies API.
    fn blockers(t: &LabelTracker<Self>, id: &str) -> TrackerResult<Vec<BlockerRef>> {
        let number = t.number(id)?;
        let listed = t.api.api.list_issue_part(
            &number,
            "/dependencies/blocked_by",
            "blockers",
            "number",
            |v| normalize::blocker(&v, &t.words),
        );
        t.blockers_or_none(id, listed)
    }

    /// The parent issue, from its own endpoint (a 404 is none).
    fn complete(&self, issue: &mut Issue) -> TrackerResult<()> {
        issue.parent = match self.api.get_parent(&issue.id) {
            Ok(v) => normalize::parent(&v),
            Err(e) if e.class == ErrorClass::NotFound => None,
            Err(e) => return Err(http_err::<Self>(e)),
        };
        Ok(())
    }

    /// The filter's search must list the issue.
    fn filtered_out(&self, number: &str) -> Result<Option<String>, HttpError> {
        let Some(filter) = &self.query_filter else {
            return Ok(None);
        };
        let listed = self.api.search(filter, |v| normalize::number(&v))?;
        Ok((!listed.iter().any(|n| n == number)).then(|| filter.clone()))
    }
}
