//! The `gitlab` forge: merge requests over GitLab's REST API v4. The PR record's `owner/repo`
//! is the project's full path (`group/sub` + `project`, sent URL-encoded) and its number the
//! merge request iid. Built from the `gitlab` tracker block: its endpoint (the instance root;
//! `/api/v4` is appended unless present), token (`gitlab.auth`: `private_token` or `bearer`)
//! and client keys (`timeout_ms`, `retry_base_ms`, `page_cap`).
//!
//! Mapping (docs relied on):
//! - CI: the merge request's `head_pipeline` (or the newest pipeline of the ref) and its jobs as
//!   check runs; the first failing job's trace as the log tail.
//!   <https://docs.gitlab.com/ee/api/pipelines.html>, <https://docs.gitlab.com/ee/api/jobs.html>
//! - Review comments: unresolved, resolvable, non-system notes of the discussions (diff notes
//!   carry `position.new_path` / `new_line`); GitLab reports no "outdated" flag here, so none is
//!   set. <https://docs.gitlab.com/ee/api/discussions.html>
//! - Review decision: a reviewer in state `requested_changes` → changes requested; else
//!   `approved` → approved; approvals still owed (`approvals_left`, else `approvals_required`
//!   less `approved_by`, where the instance sends them) → review required; else none.
//!   <https://docs.gitlab.com/ee/api/merge_request_approvals.html>
//! - Read, merge (`sha` guard, `squash` for the squash strategy; the rebase strategy merges as
//!   the project's merge method is configured), label removal (`remove_labels`):
//!   <https://docs.gitlab.com/ee/api/merge_requests.html>
//! - Branch deletion: <https://docs.gitlab.com/ee/api/branches.html>
//! - Label events (`add` / `remove`): <https://docs.gitlab.com/ee/api/resource_label_events.html>

mod api;
mod ci;
mod error;
mod mr;
mod reviews;

use std::sync::Arc;

use crate::clock::Clock;
use crate::http_client::HttpTuning;
use crate::scm::{
    CiReport, LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef,
    ReviewComment, ReviewDecision, ScmAdapter, ScmDescriptor, ScmError, ScmResult, ScmSettings,
};

use api::Api;

/// The provider kind (`provider: gitlab`, and the tracker kind whose block it reads).
pub const KIND: &str = "gitlab";

/// The instance unless the tracker's endpoint says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://gitlab.com";
const API_PATH: &str = "/api/v4";

/// This kind as the registry lists it.
pub const DESCRIPTOR: ScmDescriptor = ScmDescriptor {
    kind: KIND,
    contract: crate::domain::contract::Contract::File("scm_gitlab.rs"),
    build,
};

/// The API base for an endpoint: `/api/v4` appended unless it is there already.
pub fn api_base(endpoint: &str) -> String {
    crate::http_client::with_api_root(endpoint, API_PATH)
}

fn build(s: &ScmSettings, clock: Arc<dyn Clock>) -> ScmResult<Box<dyn ScmAdapter>> {
    if s.token.trim().is_empty() {
        return Err(ScmError::settings(format!(
            "source control provider {KIND:?} needs an api_key, the tracker's or its own block's (a token with the api scope)"
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
    let bearer = match s.block.get("auth").and_then(|v| v.as_str()) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case("private_token") => false,
        Some(a) if a.eq_ignore_ascii_case("bearer") => true,
        Some(a) => {
            return Err(ScmError::settings(format!(
                "gitlab.auth must be \"private_token\" or \"bearer\", got {a:?}"
            )));
        }
    };
    let tuning = HttpTuning::from_block(KIND, &s.block);
    crate::mask::register_secret(&s.token);
    Ok(Box::new(GitlabScm {
        api: Api::new(&api_base(endpoint), &s.token, bearer, &tuning, clock),
    }))
}

/// The forge adapter over one GitLab instance.
pub struct GitlabScm {
    api: Api,
}

impl ScmAdapter for GitlabScm {
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
        mr::read(&self.api, pr)
    }

    fn merge(
        &self,
        pr: &PullRequestRef,
        strategy: MergeStrategy,
        head_sha: &str,
    ) -> ScmResult<MergeOutcome> {
        mr::merge(&self.api, pr, strategy, head_sha)
    }

    fn delete_branch(&self, pr: &PullRequestRef, branch: &str) -> ScmResult<()> {
        mr::delete_branch(&self.api, pr, branch)
    }

    fn label_events(&self, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
        mr::label_events(&self.api, pr)
    }

    fn remove_label(&self, pr: &PullRequestRef, label: &str) -> ScmResult<()> {
        mr::remove_label(&self.api, pr, label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_base_is_appended_once() {
        assert_eq!(api_base("https://gl.example/"), "https://gl.example/api/v4");
        assert_eq!(
            api_base("https://gl.example/api/v4"),
            "https://gl.example/api/v4"
        );
    }
}
