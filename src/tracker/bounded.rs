//! Every adapter the registry builds is wrapped here, so each call on it is one read with one
//! byte budget (`tracker.max_poll_bytes`): all answers of the call (every page of a poll's
//! candidate list, an issue with its comments and blockers, a batch of issues) together may
//! take at most that, and one answer an eighth of it, whatever the kind. The shared HTTP
//! client charges the budget (`crate::http_client::with_read_budget`); a tracker without HTTP
//! (the file tracker) reads nothing through it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Blockers, TrackerAdapter, TrackerResult, TrackerSettings};
use crate::domain::{Comment, Issue, IssueRef};
use crate::http_client::{RateLimitStatus, ReadBudget, with_read_budget};

/// The setting the budget goes by in errors.
const SETTING: &str = "tracker.max_poll_bytes";

/// An adapter whose every call runs under one read budget.
pub struct Bounded {
    inner: Arc<dyn TrackerAdapter>,
    budget: ReadBudget,
}

/// `inner` with a read budget per call, sized by `settings.max_poll_bytes`.
pub fn wrap(inner: Arc<dyn TrackerAdapter>, settings: &TrackerSettings) -> Arc<dyn TrackerAdapter> {
    let total = settings
        .max_poll_bytes
        .unwrap_or(super::DEFAULT_MAX_POLL_BYTES);
    Arc::new(Bounded {
        inner,
        budget: ReadBudget::new(total, SETTING),
    })
}

impl Bounded {
    fn read<T>(&self, f: impl FnOnce(&dyn TrackerAdapter) -> T) -> T {
        with_read_budget(&self.budget, || f(self.inner.as_ref()))
    }
}

impl TrackerAdapter for Bounded {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        self.read(|t| t.fetch_candidate_issues())
    }
    fn fetch_sorted_candidates(&self) -> TrackerResult<super::CandidateList> {
        self.read(|t| t.fetch_sorted_candidates())
    }
    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        self.read(|t| t.fetch_issue_by_id(id))
    }
    fn fetch_issues_by_ids(&self, ids: &[String]) -> BTreeMap<String, TrackerResult<Issue>> {
        self.read(|t| t.fetch_issues_by_ids(ids))
    }
    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        self.read(|t| t.fetch_issues_by_states(states))
    }
    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        self.read(|t| t.fetch_issue_states_by_ids(ids))
    }
    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        self.read(|t| t.fetch_issue_states_by_identifiers(identifiers))
    }
    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        self.read(|t| t.fetch_issue_comments(id))
    }
    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        self.read(|t| t.transition_issue(id, state))
    }
    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        self.read(|t| t.comment_issue(id, text))
    }
    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.read(|t| t.add_label(id, label))
    }
    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.read(|t| t.remove_label(id, label))
    }
    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        self.read(|t| t.fetch_blockers(id))
    }
    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.inner.rate_limit()
    }
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        self.read(|t| t.resolve_in_scope(id))
    }
}
