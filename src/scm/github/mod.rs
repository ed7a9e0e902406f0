//! The `github` forge: check runs and commit statuses, job logs, reviews and review comments,
//! the review decision (GraphQL), the pull request, the guarded merge, branch deletion and
//! label events, over the shared HTTP client. Built from the `github` tracker block: its
//! endpoint, token and client keys (`timeout_ms`, `retry_base_ms`, `page_cap`,
//! `etag_cache_size`). Repository and number come with each call, from the run's PR record.

mod api;
mod ci;
mod error;
mod pulls;
mod reviews;

use std::sync::Arc;

use crate::clock::Clock;
use crate::http_client::{HttpTuning, block_number};
use crate::scm::{
    CiReport, LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef,
    ReviewComment, ReviewDecision, ScmAdapter, ScmDescriptor, ScmError, ScmResult, ScmSettings,
};

use api::Api;

/// The provider kind (`provider: github`, and the tracker kind whose block it reads).
pub const KIND: &str = "github";

/// Where the API lives unless the tracker's endpoint says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://api.github.com";
const DEFAULT_ETAG_CACHE_SIZE: usize = 1000;

/// This kind as the registry lists it.
pub const DESCRIPTOR: ScmDescriptor = ScmDescriptor {
    kind: KIND,
    contract: crate::domain::contract::Contract::File("scm_github.rs"),
    build,
};

fn build(s: &ScmSettings, clock: Arc<dyn Clock>) -> ScmResult<Box<dyn ScmAdapter>> {
    if s.token.trim().is_empty() {
        return Err(ScmError::settings(format!(
            "source control provider {KIND:?} needs an api_key, the tracker's or its own block's (a token with Pull requests, Checks and Actions read, Contents write for merges)"
        )));
    }
    let endpoint = s
        .endpoint
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .unwrap_or(DEFAULT_ENDPOINT);
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(ScmError::settings(format!(
            "source control endpoint {endpoint:?} must be an http(s) URL"
        )));
    }
    let tuning = HttpTuning::from_block(KIND, &s.block);
    let etags = block_number(KIND, &s.block, "etag_cache_size")
        .ok()
        .flatten()
        .map_or(DEFAULT_ETAG_CACHE_SIZE, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        });
    crate::mask::register_secret(&s.token);
    Ok(Box::new(GithubScm {
        api: Api::new(endpoint, &s.token, &tuning, etags, clock),
    }))
}

/// The forge adapter over one GitHub host.
pub struct GithubScm {
    api: Api,
}

impl ScmAdapter for GithubScm {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn ci_report(
        &self,
        pr: &PullRequestRef,
        git_ref: &str,
        max_log_lines: usize,
    ) -> ScmResult<CiReport> {
        ci::report(&self.api, pr, git_ref, max_log_lines)
    }

    fn review_comments(&self, pr: &PullRequestRef) -> ScmResult<Vec<ReviewComment>> {
        reviews::comments(&self.api, pr)
    }

    fn review_decision(&self, pr: &PullRequestRef) -> ScmResult<ReviewDecision> {
        reviews::decision(&self.api, pr)
    }

    fn pull_request(&self, pr: &PullRequestRef) -> ScmResult<PullRequestInfo> {
        pulls::read(&self.api, pr)
    }

    fn merge(
        &self,
        pr: &PullRequestRef,
        strategy: MergeStrategy,
        head_sha: &str,
    ) -> ScmResult<MergeOutcome> {
        pulls::merge(&self.api, pr, strategy, head_sha)
    }

    fn delete_branch(&self, pr: &PullRequestRef, branch: &str) -> ScmResult<()> {
        pulls::delete_branch(&self.api, pr, branch)
    }

    fn label_events(&self, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
        pulls::label_events(&self.api, pr)
    }

    fn remove_label(&self, pr: &PullRequestRef, label: &str) -> ScmResult<()> {
        pulls::remove_label(&self.api, pr, label)
    }
}
