//! The `gitea` forge: pull requests over Gitea's REST API (`/api/v1`). The PR record's
//! `owner/repo` is the repository and its number the pull request's index. Built from the
//! `gitea` tracker block: its endpoint (the instance URL, required: there is no public default
//! instance; `/api/v1` is appended unless present), token (`api_key`, sent as
//! `Authorization: token …`) and client keys (`timeout_ms`, `retry_base_ms`, `page_cap`).
//!
//! Mapping (operations of <https://docs.gitea.com/api/1.22/>):
//! - CI: `repoGetCombinedStatusByRef`, one run per status context; no log tail (`ci`).
//! - Review comments and decision: `repoListPullReviews`, `repoGetPullReviewComments`
//!   (`reviews`).
//! - Read, merge (`repoMergePullRequest` with `head_commit_id` as the guard), branch deletion
//!   (`repoDeleteBranch`), label events (`issueGetCommentsAndTimeline`, entries of type
//!   `label`) and label removal (`issueRemoveLabel`) (`pulls`).

mod api;
mod ci;
mod pulls;
mod reviews;

use std::sync::Arc;

use crate::clock::Clock;
use crate::http_client::{HttpTuning, with_api_root};
use crate::scm::{
    CiReport, LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef,
    ReviewComment, ReviewDecision, ScmAdapter, ScmDescriptor, ScmError, ScmResult, ScmSettings,
};

use api::Api;

/// The provider kind (`provider: gitea`, and the tracker kind whose block it reads).
pub const KIND: &str = "gitea";

const API_ROOT: &str = "/api/v1";

/// This kind as the registry lists it.
pub const DESCRIPTOR: ScmDescriptor = ScmDescriptor {
    kind: KIND,
    contract: crate::domain::contract::Contract::File("scm_gitea.rs"),
    build,
};

fn build(s: &ScmSettings, clock: Arc<dyn Clock>) -> ScmResult<Box<dyn ScmAdapter>> {
    if s.token.trim().is_empty() {
        return Err(ScmError::settings(format!(
            "source control provider {KIND:?} needs an api_key, the tracker's or its own block's (a token with repository read and write scope)"
        )));
    }
    let Some(endpoint) = s
        .endpoint
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
    else {
        return Err(ScmError::settings(format!(
            "source control provider {KIND:?} needs the tracker's endpoint (the instance URL, e.g. https://gitea.example.com)"
        )));
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(ScmError::settings(format!(
            "source control endpoint {endpoint:?} must be an http(s) URL"
        )));
    }
    let tuning = HttpTuning::from_block(KIND, &s.block);
    crate::mask::register_secret(&s.token);
    Ok(Box::new(GiteaScm {
        api: Api::new(&with_api_root(endpoint, API_ROOT), &s.token, &tuning, clock),
    }))
}

/// The forge adapter over one Gitea instance.
pub struct GiteaScm {
    api: Api,
}

impl ScmAdapter for GiteaScm {
    fn kind(&self) -> &'static str {
        KIND
    }

    /// `max_log_lines` is not used: Gitea's statuses lead to no log (see `ci`).
    fn ci_report(
        &self,
        pr: &PullRequestRef,
        git_ref: &str,
        _max_log_lines: usize,
    ) -> ScmResult<CiReport> {
        ci::report(&self.api, pr, git_ref)
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
