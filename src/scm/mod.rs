//! The pull-request side of a forge ("source control"): what pull-request reactions read and
//! write. An adapter is built once at startup from the tracker block of the same kind (its
//! endpoint and credentials) and is called from the `orch` thread's reconcile pass; every call
//! is bounded by the HTTP client's timeout.
//!
//! Core code sees only this module's types; names of a specific forge live in its adapter
//! module (`scm::github`).

use std::sync::Arc;

use crate::clock::Clock;
use crate::domain::CiStatus;

pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod http_error;
pub mod log_tail;
pub mod verdict;

/// The pull request a reaction watches, as the run's PR record names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PullRequestRef {
    pub owner: String,
    pub repo: String,
    pub number: u64,
}

impl PullRequestRef {
    /// `owner/repo`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

/// One check run (or one commit status context) on a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRun {
    /// The forge's id (0 for a commit status context).
    pub id: u64,
    pub name: String,
    /// `queued`, `in_progress` or `completed` (other values read as `queued`).
    pub status: String,
    /// The forge's conclusion once completed (`success`, `failure`, …); `None` before.
    pub conclusion: Option<String>,
    pub details_url: String,
    /// The app that reported it (`github-actions` runs have a job log).
    pub app_slug: String,
}

/// The CI verdict over a ref, with what a CI-fix prompt needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiReport {
    pub status: CiStatus,
    /// The ref that was checked (the head sha, else the branch).
    pub git_ref: String,
    pub check_runs: Vec<CheckRun>,
    /// Names of the runs the verdict counts as failing, in the forge's order.
    pub failing_checks: Vec<String>,
    pub failing: u32,
    pub pending: u32,
    pub passing: u32,
    /// The tail of the first failing run's log (ANSI and timestamps stripped); empty when
    /// none could be read or log reading is off.
    pub log_excerpt: String,
}

/// A review comment (or a review's own body, id `review-<id>`) on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: String,
    /// The file it is on; empty for a review body.
    pub file: String,
    pub start_line: u64,
    /// 0 when the comment is on one line.
    pub end_line: u64,
    /// The author's login.
    pub reviewer: String,
    pub body: String,
    /// The forge reports the code it was on as changed since.
    pub outdated: bool,
    /// The forge marks the author as a bot account.
    pub from_bot: bool,
    /// Epoch milliseconds (0 when the forge gave none).
    pub created_at_ms: i64,
}

impl ReviewComment {
    /// A review's own body as comment `review-<id>`, on no file; `None` when the body is
    /// blank (a review that only approves or only carries code comments).
    pub fn of_review(
        review_id: u64,
        reviewer: String,
        body: &str,
        from_bot: bool,
        created_at_ms: i64,
    ) -> Option<ReviewComment> {
        let body = body.trim();
        if body.is_empty() {
            return None;
        }
        Some(ReviewComment {
            id: format!("review-{review_id}"),
            file: String::new(),
            start_line: 0,
            end_line: 0,
            reviewer,
            body: body.to_string(),
            outdated: false,
            from_bot,
            created_at_ms,
        })
    }
}

/// The pull request's review decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewDecision {
    Approved,
    ChangesRequested,
    /// A required approval is still missing.
    ReviewRequired,
    /// No review is required (or the forge reports none).
    None,
}

/// What a read of the pull request reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PullRequestInfo {
    pub open: bool,
    pub merged: bool,
    pub merge_commit_sha: Option<String>,
    /// `None` while the forge has not computed mergeability.
    pub mergeable: Option<bool>,
    /// The forge's own word (`clean`, `dirty` = conflict, `blocked` = protection, …).
    pub mergeable_state: String,
    pub head_sha: String,
    pub head_ref: String,
    /// The pull request's web page.
    pub url: String,
    pub labels: Vec<String>,
}

/// How `auto_merge` merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeStrategy {
    Merge,
    #[default]
    Squash,
    Rebase,
}

impl MergeStrategy {
    pub const ALL: &'static [MergeStrategy] = &[
        MergeStrategy::Merge,
        MergeStrategy::Squash,
        MergeStrategy::Rebase,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Merge => "merge",
            MergeStrategy::Squash => "squash",
            MergeStrategy::Rebase => "rebase",
        }
    }
}

/// What a merge call achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// Merged now; the merge commit when the forge named one.
    Merged { sha: Option<String> },
    /// The forge says it is not mergeable now (conflict, checks, protection).
    NotMergeable(String),
    /// The head moved since it was read: the guard refused the merge.
    HeadMoved,
    /// Authentication or payload refusal: retrying will not help.
    Refused(String),
}

/// A label added to or removed from the pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelEvent {
    pub label: String,
    /// Login of who did it.
    pub actor: String,
    pub created_at_ms: i64,
    /// `true` for added, `false` for removed.
    pub added: bool,
}

/// How a forge call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScmErrorKind {
    /// Connection, timeout, truncated or unreadable body, or a 5xx answer (the trackers'
    /// classification).
    Transport,
    /// 401/403 (not a rate limit).
    Auth,
    NotFound,
    /// 429, or a 403 that is a rate limit.
    RateLimited,
    /// Any other non-success answer (an unexpected 4xx such as 410).
    Api,
    /// A success answer without what the call needs, or a 400/422 refusal of the request.
    Payload,
    /// No adapter of this build serves the provider (building only).
    Unsupported,
    /// The settings cannot make an adapter: no token, an endpoint that is not an http(s) URL,
    /// an unknown auth scheme (building only).
    Settings,
}

/// A failed forge call; the message never carries a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScmError {
    pub kind: ScmErrorKind,
    pub message: String,
}

impl std::fmt::Display for ScmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScmError {}

pub type ScmResult<T> = Result<T, ScmError>;

/// What an adapter is built from: the tracker block of the same kind (endpoint, token) and the
/// client tuning keys of that block.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ScmSettings {
    pub kind: String,
    /// API base URL; the kind's default when `None`.
    pub endpoint: Option<String>,
    pub token: String,
    /// The kind's pass-through block (timeouts and retry tuning), as decoded.
    pub block: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for ScmSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScmSettings")
            .field("kind", &self.kind)
            .field("endpoint", &self.endpoint)
            .field("token", &"[redacted]")
            .finish()
    }
}

/// The forge operations reactions use. Reads feed `health.scm` (the caller records each
/// result); writes are never retried by the adapter.
///
/// # Errors
///
/// Every method answers a [`ScmError`]; how a reaction check treats it:
///
/// - `Transport`, `RateLimited`, `Api`, `Payload`, `NotFound` on a read (CI report, review
///   comments, pull request): recorded in `health.scm`, and the check backs off (its base
///   interval doubled per failed check, capped at five minutes) before reading again.
/// - A failed `merge` counts as one of the reaction's attempts like a refusal to merge: it
///   backs off, and escalates to a person once the attempts are used up.
/// - `delete_branch` and `remove_label` failures are logged; the merge or label step they
///   follow stands.
/// - `Auth` is treated as the other failures above; `Unsupported` and `Settings` come from
///   building only
///   ([`crate::registry::build_scm`]): `sortie validate` reports them, and the daemon runs
///   with reactions off, logging why.
pub trait ScmAdapter: Send + Sync {
    /// The provider kind (`github`).
    fn kind(&self) -> &'static str;
    /// The CI verdict over `git_ref` (a sha or a branch): check runs and commit statuses
    /// together, with the log tail of the first failing run when `max_log_lines > 0`.
    fn ci_report(
        &self,
        pr: &PullRequestRef,
        git_ref: &str,
        max_log_lines: usize,
    ) -> ScmResult<CiReport>;
    /// Review comments and review bodies that ask for changes (and those of reviews where a
    /// bot account only commented: review bots rarely request changes), every page,
    /// deduplicated, with bot and outdated flags set; bot authors are kept, not filtered.
    fn review_comments(&self, pr: &PullRequestRef) -> ScmResult<Vec<ReviewComment>>;
    fn review_decision(&self, pr: &PullRequestRef) -> ScmResult<ReviewDecision>;
    fn pull_request(&self, pr: &PullRequestRef) -> ScmResult<PullRequestInfo>;
    /// Merges with `strategy`, guarded by `head_sha` (the forge refuses when the head moved).
    fn merge(
        &self,
        pr: &PullRequestRef,
        strategy: MergeStrategy,
        head_sha: &str,
    ) -> ScmResult<MergeOutcome>;
    /// Deletes the head branch; a branch already gone is `Ok`.
    fn delete_branch(&self, pr: &PullRequestRef, branch: &str) -> ScmResult<()>;
    /// Label events on the pull request, oldest first, every page.
    fn label_events(&self, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>>;
    /// Removes a label from the pull request; an absent label is `Ok`.
    fn remove_label(&self, pr: &PullRequestRef, label: &str) -> ScmResult<()>;
}

impl ScmError {
    /// A [`ScmErrorKind::Settings`] error: the one line naming what is missing or wrong.
    pub fn settings(message: impl Into<String>) -> ScmError {
        ScmError {
            kind: ScmErrorKind::Settings,
            message: message.into(),
        }
    }
}

/// What builds a forge adapter; a [`ScmErrorKind::Settings`] error names what is missing or
/// wrong.
pub type ScmBuild = fn(&ScmSettings, Arc<dyn Clock>) -> ScmResult<Box<dyn ScmAdapter>>;

/// A forge kind as the registry lists it: its name (`provider:` in the reaction blocks, the
/// tracker kind whose block it reads) and its constructor.
#[derive(Clone, Copy)]
pub struct ScmDescriptor {
    pub kind: &'static str,
    /// The test file that holds the kind to the forge operations' contract against its fake.
    pub contract: crate::domain::contract::Contract,
    pub build: ScmBuild,
}
