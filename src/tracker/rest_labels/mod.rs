//! The adapter shared by the trackers whose issues are only open or closed and whose workflow
//! states are labels on one repository or project, read over a REST API. [`LabelTracker`]
//! implements the whole [`TrackerAdapter`] contract once: id scoping, label-state mapping,
//! candidate and state reads, transitions, comments and blockers. A kind supplies a
//! [`LabelApi`]: the vendor's requests and the reading of its JSON, nothing else.

pub mod settings;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::domain::{BlockerRef, BlockersRead, Comment, Issue, IssueRef};
use crate::http_client::{ErrorClass, HttpError, RateLimitStatus};
use crate::tracker::label_state::StateWords;
use crate::tracker::{
    Blockers, TrackerAdapter, TrackerError, TrackerErrorKind, TrackerResult, scope,
};

/// Keeps a listed item as an issue, or drops it (a pull request, an item without a number).
pub type Keep<'a> = &'a dyn Fn(Value) -> Option<Issue>;

/// One kind's requests and JSON reading. Every request error is an [`HttpError`] that
/// [`LabelTracker`] turns into a [`TrackerError`] of the kind (`TrackerError::from_http`: a 404
/// is `NotFound`, 401/403 `Auth`, a timeout `Transport`); methods that need the adapter's own
/// reads take it and answer a [`TrackerError`] themselves.
pub trait LabelApi: Sized + Send + Sync + 'static {
    /// The kind's configuration name, for errors and logs.
    const KIND: &'static str;
    /// What the answer calls an issue's number, for the error of an answer without one.
    const NUMBER_NAME: &'static str = "number";

    /// The configured repository or project (`owner/repo`, `group/project`): the `<home>` of a
    /// `<home>#12` id.
    fn home(&self) -> &str;
    fn rate_limit(&self) -> Option<RateLimitStatus>;
    /// One issue's JSON; an unknown number is a 404.
    fn get_issue(&self, number: &str) -> Result<Value, HttpError>;
    /// Whether an item the issues API answers is a pull request rather than an issue.
    fn is_pull_request(_v: &Value) -> bool {
        false
    }
    /// An item as an issue, its state read from its labels; `None` without a number.
    fn issue(&self, v: &Value, words: &StateWords) -> Option<Issue>;
    /// An item's state, read from its labels.
    fn state(v: &Value, words: &StateWords) -> String;
    /// The open issues `tracker.query_filter` selects (all open issues without one).
    fn candidates(&self, keep: Keep) -> Result<Vec<Issue>, HttpError>;
    /// The closed issues carrying `label`.
    fn closed_with_label(&self, label: &str, keep: Keep) -> Result<Vec<Issue>, HttpError>;
    /// Every open issue, unfiltered.
    fn open_issues(&self, keep: Keep) -> Result<Vec<Issue>, HttpError>;
    fn comments(&self, number: &str) -> Result<Vec<Comment>, HttpError>;
    /// Moves the issue to `target` (a configured state word, lowercased) so that a retry
    /// converges: labels swapped, open/closed set to match.
    fn transition(&self, number: &str, target: &str, words: &StateWords) -> Result<(), HttpError>;
    fn post_comment(&self, number: &str, text: &str) -> Result<(), HttpError>;
    fn add_label(&self, number: &str, label: &str) -> Result<(), HttpError>;
    /// Removes `label`; an absent label is no error.
    fn remove_label(t: &LabelTracker<Self>, id: &str, label: &str) -> TrackerResult<()>;
    /// The issues blocking `id`.
    fn blockers(t: &LabelTracker<Self>, id: &str) -> TrackerResult<Vec<BlockerRef>>;
    /// What a full read adds to an issue beyond its JSON, comments and blockers.
    fn complete(&self, _issue: &mut Issue) -> TrackerResult<()> {
        Ok(())
    }
    /// With `tracker.query_filter` set and the filtered list not holding `number`: the filter
    /// as the refusal quotes it. `None` when there is no filter or it holds the issue.
    fn filtered_out(&self, number: &str) -> Result<Option<String>, HttpError>;
}

/// Tracker adapter over one repository or project of a label-state kind.
pub struct LabelTracker<A: LabelApi> {
    pub api: A,
    pub words: StateWords,
}

/// A request error as a tracker error of the kind.
pub fn http_err<A: LabelApi>(e: HttpError) -> TrackerError {
    TrackerError::from_http(A::KIND, &e)
}

impl<A: LabelApi> LabelTracker<A> {
    pub fn new(api: A, words: StateWords) -> Self {
        LabelTracker { api, words }
    }

    /// The issue number an id names: `12`, `#12` or `<home>#12` of this repository or
    /// project; anything else is refused before any request.
    pub fn number(&self, id: &str) -> TrackerResult<String> {
        scope::repo_number(A::KIND, id, self.api.home())
    }

    /// A listed item as an issue; a pull request is none.
    fn issue_of(&self, v: Value) -> Option<Issue> {
        if A::is_pull_request(&v) {
            return None;
        }
        self.api.issue(&v, &self.words)
    }

    /// The issue JSON; a pull request or a 404 is `NotFound`.
    pub fn issue_json(&self, id: &str) -> TrackerResult<Value> {
        let v = self
            .api
            .get_issue(&self.number(id)?)
            .map_err(http_err::<A>)?;
        if A::is_pull_request(&v) {
            return Err(TrackerError::new(
                TrackerErrorKind::NotFound,
                A::KIND,
                format!("GET issue {id}: is a pull request, not an issue"),
            ));
        }
        Ok(v)
    }

    /// The blockers a dependencies list answers; a 404 is an unknown issue or a repository
    /// without dependencies, which a read of the issue tells apart, so an unknown issue stays
    /// `NotFound`.
    pub fn blockers_or_none(
        &self,
        id: &str,
        listed: Result<Vec<BlockerRef>, HttpError>,
    ) -> TrackerResult<Vec<BlockerRef>> {
        match listed {
            Ok(refs) => Ok(refs),
            Err(e) if e.class == ErrorClass::NotFound => {
                self.issue_json(id)?;
                Ok(Vec::new())
            }
            Err(e) => Err(http_err::<A>(e)),
        }
    }

    fn states_of(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for id in ids {
            match self.issue_json(id) {
                Ok(v) => {
                    out.insert(id.clone(), A::state(&v, &self.words));
                }
                Err(e) if scope::omitted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

impl<A: LabelApi> TrackerAdapter for LabelTracker<A> {
    fn kind(&self) -> &'static str {
        A::KIND
    }

    /// Blockers are listed only through their own endpoint: the candidates leave them unread
    /// (unless the payload proves there are none), and the dispatch pass reads the few it
    /// reaches, within its per-pass budget.
    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        let keep = |v| self.issue_of(v);
        let mut issues = self.api.candidates(&keep).map_err(http_err::<A>)?;
        issues.retain(|i| self.words.is_active(&i.state));
        Ok(issues)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let v = self.issue_json(id)?;
        let mut issue = self.api.issue(&v, &self.words).ok_or_else(|| {
            TrackerError::new(
                TrackerErrorKind::Payload,
                A::KIND,
                format!("GET issue {id}: no {} in the answer", A::NUMBER_NAME),
            )
        })?;
        issue.comments = Some(self.fetch_issue_comments(&issue.id)?);
        issue.blocked_by = self.fetch_blockers(&issue.id)?.refs;
        issue.blockers_read = BlockersRead::Complete;
        self.api.complete(&mut issue)?;
        Ok(issue)
    }

    /// Closed issues are read per terminal label, so a repository's closed history is not
    /// read whole; open issues can carry any state label, a terminal one included.
    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        let wanted: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let keep = |v| self.issue_of(v);
        let mut issues = Vec::new();
        for t in wanted.iter().filter(|s| self.words.is_terminal(s)) {
            let closed = self.api.closed_with_label(t, &keep);
            issues.extend(closed.map_err(http_err::<A>)?);
        }
        issues.extend(self.api.open_issues(&keep).map_err(http_err::<A>)?);
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
        let number = self.number(id)?;
        self.api.comments(&number).map_err(http_err::<A>)
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let target = state.trim().to_lowercase();
        if !self.words.is_state_label(&target) {
            return Err(TrackerError::new(
                TrackerErrorKind::Payload,
                A::KIND,
                format!(
                    "transition of issue {id} to {state:?}: not an active, terminal or handoff state"
                ),
            ));
        }
        let number = self.number(id)?;
        let moved = self.api.transition(&number, &target, &self.words);
        moved.map_err(http_err::<A>)
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        let number = self.number(id)?;
        self.api.post_comment(&number, text).map_err(http_err::<A>)
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let number = self.number(id)?;
        self.api.add_label(&number, label).map_err(http_err::<A>)
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        A::remove_label(self, id, label)
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        Ok(Blockers {
            refs: A::blockers(self, id)?,
            complete: true,
        })
    }

    fn rate_limit(&self) -> Option<RateLimitStatus> {
        self.api.rate_limit()
    }

    /// The issues path pins the repository or project, so an issue the number reads is its
    /// own; with `tracker.query_filter` set, the filtered list must hold it too.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let number = self.number(id)?;
        self.issue_json(&number)?;
        let excluded = self.api.filtered_out(&number).map_err(http_err::<A>)?;
        if let Some(filter) = excluded {
            return Err(scope::filtered_out(A::KIND, id, &filter));
        }
        Ok(IssueRef {
            id: number.clone(),
            identifier: number,
        })
    }
}

/// `key=value&key=value` as a refusal quotes a list filter.
pub fn shown_filter(filter: &[(String, String)]) -> String {
    let shown: Vec<String> = filter.iter().map(|(k, v)| format!("{k}={v}")).collect();
    shown.join("&")
}
