//! The `file` tracker: issues kept in a local JSON file (named by `file.path`), for demos and
//! tests without credentials. The whole file is re-read on every call, so edits made while the
//! daemon runs are picked up on the next call.
//!
//! Deliberate deviations from Go Sortie, which this tracker otherwise reads compatibly:
//! - **Write-back.** Go keeps transitions and comments in memory and loses them on restart (a
//!   handed-off issue becomes active again). Here `transition_issue`, `comment_issue`,
//!   `add_label` and `remove_label` are written to the file: each re-reads the file, edits only
//!   the touched keys of the one issue (unknown keys and key order kept), and replaces the file
//!   atomically (temp file + fsync + rename, permissions kept). The document is pretty-printed
//!   with 2-space indentation, so hand formatting elsewhere is normalized on the first write.
//! - **Live blocker state.** Go uses the `state` written inside `blocked_by`. Here a blocker
//!   that references an issue in the same file (by id, else identifier) takes that issue's
//!   current state, so moving the blocker to a terminal state unblocks its dependents; the
//!   written `state` is the fallback for issues that are not in the file.

mod document;
mod edits;
mod record;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::Clock;
use crate::domain::{Comment, Issue, state_in};
use crate::tracker::{
    Blockers, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind,
    TrackerResult, TrackerSettings,
};

pub use edits::COMMENT_AUTHOR;

/// The configuration name of this kind (`tracker.kind`, and the `file:` block).
pub const KIND: &str = "file";
/// The issues file is named by `file.path` (or `tracker.path`).
const PATH_KEY: &str = "path";

/// This kind as the registry lists it.
pub const DESCRIPTOR: TrackerDescriptor = TrackerDescriptor {
    kind: KIND,
    path_key: Some(PATH_KEY),
    validate,
    build,
};

/// The only requirement: an issues file to read.
fn validate(settings: &TrackerSettings) -> Vec<SettingProblem> {
    if settings.path.is_some() {
        return Vec::new();
    }
    let field = format!("{KIND}.{PATH_KEY}");
    vec![SettingProblem {
        message: format!("{field} is required for tracker kind {KIND:?}"),
        field,
    }]
}

fn build(
    settings: &TrackerSettings,
    clock: Arc<dyn Clock>,
) -> TrackerResult<Arc<dyn TrackerAdapter>> {
    let path = settings.path.clone().ok_or_else(|| {
        TrackerError::new(
            TrackerErrorKind::Payload,
            KIND,
            format!("missing required config key: {PATH_KEY}"),
        )
    })?;
    Ok(Arc::new(FileTracker::new(
        path,
        settings.active_states.clone(),
        clock,
    )))
}

/// Tracker adapter over one JSON file.
pub struct FileTracker {
    path: PathBuf,
    /// The `tracker.active_states` it was built with (empty = every issue is a candidate); a
    /// reload that changes tracker settings builds a new adapter.
    active_states: Vec<String>,
    clock: Arc<dyn Clock>,
}

impl FileTracker {
    pub fn new(path: PathBuf, active_states: Vec<String>, clock: Arc<dyn Clock>) -> FileTracker {
        FileTracker {
            path,
            active_states,
            clock,
        }
    }

    /// The file this adapter reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every issue in the file, normalized, blockers resolved against the file.
    fn load(&self) -> TrackerResult<Vec<Issue>> {
        let raw = document::read_document(&self.path)?;
        let mut issues = raw
            .iter()
            .enumerate()
            .map(|(i, v)| record::normalize_record(i, v))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|cause| {
                document::payload(format!(
                    "failed to parse file: {}: {cause}",
                    self.path.display()
                ))
            })?;
        record::resolve_blockers(&mut issues);
        Ok(issues)
    }

    fn find(&self, id: &str) -> TrackerResult<Issue> {
        self.load()?
            .into_iter()
            .find(|i| i.id == id)
            .ok_or_else(|| document::not_found(id))
    }

    /// Now as RFC 3339 UTC with whole seconds, the style of the file's own timestamps.
    fn now_rfc3339(&self) -> String {
        let secs = self.clock.now_ms().div_euclid(1000);
        jiff::Timestamp::from_second(secs)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    fn log_write(&self, op: &str, id: &str, changed: bool) {
        log::debug!(
            "tracker file write op={op} issue_id={id} changed={changed} path={}",
            self.path.display()
        );
    }
}

impl TrackerAdapter for FileTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        Ok(self
            .load()?
            .into_iter()
            .filter(|i| self.active_states.is_empty() || state_in(&i.state, &self.active_states))
            .map(|mut i| {
                i.comments = None;
                i
            })
            .collect())
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let mut issue = self.find(id)?;
        issue.comments.get_or_insert_with(Vec::new);
        Ok(issue)
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        if states.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .load()?
            .into_iter()
            .filter(|i| state_in(&i.state, states))
            .collect())
    }

    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let issues = self.load()?;
        Ok(ids
            .iter()
            .filter_map(|id| {
                issues
                    .iter()
                    .find(|i| &i.id == id)
                    .map(|i| (id.clone(), i.state.clone()))
            })
            .collect())
    }

    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        if identifiers.is_empty() {
            return Ok(BTreeMap::new());
        }
        let issues = self.load()?;
        Ok(identifiers
            .iter()
            .filter_map(|key| {
                issues
                    .iter()
                    .find(|i| &i.identifier == key)
                    .map(|i| (key.clone(), i.state.clone()))
            })
            .collect())
    }

    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        Ok(self.find(id)?.comments.unwrap_or_default())
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let now = self.now_rfc3339();
        let changed =
            document::modify_issue(&self.path, id, |m| Ok(edits::set_state(m, state, &now)))?;
        self.log_write("transition", id, changed);
        Ok(())
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        let now = self.now_rfc3339();
        let now_ms = self.clock.now_ms();
        let changed = document::modify_issue(&self.path, id, |m| {
            edits::append_comment(m, text, &now, now_ms)
        })?;
        self.log_write("comment", id, changed);
        Ok(())
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let changed = document::modify_issue(&self.path, id, |m| edits::add_label(m, label))?;
        self.log_write("add_label", id, changed);
        Ok(())
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let changed = document::modify_issue(&self.path, id, |m| edits::remove_label(m, label))?;
        self.log_write("remove_label", id, changed);
        Ok(())
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        Ok(Blockers {
            refs: self.find(id)?.blocked_by,
            complete: true,
        })
    }
}
