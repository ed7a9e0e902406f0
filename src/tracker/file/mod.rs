//! The `file` tracker: issues kept in a local JSON file (named by `file.path`), for demos and
//! tests without credentials. Every call checks the file for changes, so edits made while the
//! daemon runs are picked up on the next call; an unchanged file is parsed once and its parse
//! shared by every call until it changes (see `cache` for when a file counts as unchanged).
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
//! - **Scope.** With `tracker.project` set, an id from outside sortie (an agent's tool call)
//!   reaches only issues whose identifier, as the file writes it, is `<project>-…`; without it
//!   the whole file is the scope.

mod cache;
mod document;
mod edits;
mod elements;
mod file_key;
mod group_commit;
mod heap;
mod index;
mod parse;
mod record;
mod stream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::clock::Clock;
use crate::domain::contract::Contract;
use crate::domain::{Comment, Issue, IssueRef, state_in};
use cache::FileCache;
use index::ParsedFile;

use crate::tracker::{
    Blockers, CandidateList, SettingProblem, TrackerAdapter, TrackerDescriptor, TrackerError,
    TrackerErrorKind, TrackerResult, TrackerSettings, scope,
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
    labels: crate::tracker::LabelSupport::FULL,
    default_states: None,
    reads_keys: &[],
    webhook: None,
    contract: Contract::Suite("file"),
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
    let tracker = FileTracker::new(path, settings.active_states.clone(), clock);
    Ok(Arc::new(tracker.with_project(settings.project.as_deref())))
}

/// Tracker adapter over one JSON file.
pub struct FileTracker {
    path: PathBuf,
    /// The `tracker.active_states` it was built with (empty = every issue is a candidate); a
    /// reload that changes tracker settings builds a new adapter.
    active_states: Vec<String>,
    clock: Arc<dyn Clock>,
    cache: FileCache,
    /// The sorted candidate list and the parse it was built from, held weakly: the address
    /// is not reused while this is held, so a pointer match means the same parse. The list
    /// keeps its issues alive until the next call replaces it.
    sorted: Mutex<Option<(Weak<ParsedFile>, CandidateList)>>,
    /// `tracker.project`: the identifier prefix of the issues in scope; `None` = every issue.
    project: Option<String>,
}

impl FileTracker {
    pub fn new(path: PathBuf, active_states: Vec<String>, clock: Arc<dyn Clock>) -> FileTracker {
        FileTracker {
            path,
            active_states,
            clock,
            cache: FileCache::default(),
            sorted: Mutex::new(None),
            project: None,
        }
    }

    /// Limits the scope of ids from outside sortie to identifiers `<project>-…`.
    pub fn with_project(mut self, project: Option<&str>) -> FileTracker {
        self.project = project
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from);
        self
    }

    /// Whether the issue is in an active state (every issue is when none is configured).
    fn is_candidate(&self, issue: &Issue) -> bool {
        self.active_states.is_empty() || state_in(&issue.state, &self.active_states)
    }

    /// The file this adapter reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many times this adapter has read the file's bytes; an unchanged file is not read
    /// again. For tests and benchmarks that count reads.
    pub fn reads(&self) -> u64 {
        self.cache.reads()
    }

    /// Every issue in the file, normalized, blockers resolved against the file.
    fn load(&self) -> TrackerResult<Arc<ParsedFile>> {
        self.cache.get(&self.path)
    }

    /// A rewrite of the file through [`document::modify_issue`], after which the cached parse
    /// is dropped (whether or not the write succeeded, since a failed one may have replaced
    /// the file).
    fn modify(&self, op: &str, id: &str, edit: document::Edit) -> TrackerResult<()> {
        let result = document::modify_issue(&self.path, id, edit);
        self.cache.invalidate();
        let changed = result?;
        log::debug!(
            op:% = op,
            issue_id:% = id,
            changed:% = changed,
            path:% = self.path.display();
            "tracker file write"
        );
        Ok(())
    }

    /// Now as RFC 3339 UTC with whole seconds, the style of the file's own timestamps.
    fn now_rfc3339(&self) -> String {
        let secs = self.clock.now_ms().div_euclid(1000);
        jiff::Timestamp::from_second(secs)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }
}

impl TrackerAdapter for FileTracker {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        Ok(self
            .load()?
            .issues()
            .iter()
            .filter(|i| self.is_candidate(i))
            .map(|i| Issue::clone(i))
            .collect())
    }

    /// Built once per version of the file and handed out again until the file changes.
    fn fetch_sorted_candidates(&self) -> TrackerResult<CandidateList> {
        let parsed = self.load()?;
        let mut sorted = self.sorted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((of, list)) = sorted.as_ref()
            && std::ptr::eq(of.as_ptr(), Arc::as_ptr(&parsed))
        {
            return Ok(list.clone());
        }
        let mut list: Vec<Arc<Issue>> = parsed
            .issues()
            .iter()
            .filter(|i| self.is_candidate(i))
            .cloned()
            .collect();
        list.sort_by(|a, b| crate::domain::dispatch_order(a, b));
        let list: CandidateList = list.into();
        *sorted = Some((Arc::downgrade(&parsed), list.clone()));
        Ok(list)
    }

    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        let mut issue = self
            .load()?
            .full_by_id(id)
            .ok_or_else(|| document::not_found(id))?;
        issue.comments.get_or_insert_with(Vec::new);
        Ok(issue)
    }

    fn fetch_issues_by_ids(&self, ids: &[String]) -> BTreeMap<String, TrackerResult<Issue>> {
        let parsed = self.load();
        ids.iter()
            .map(|id| {
                let found = parsed.as_ref().map_err(Clone::clone).and_then(|p| {
                    let mut issue = p.full_by_id(id).ok_or_else(|| document::not_found(id))?;
                    issue.comments.get_or_insert_with(Vec::new);
                    Ok(issue)
                });
                (id.clone(), found)
            })
            .collect()
    }

    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        if states.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .load()?
            .full_issues()
            .filter(|i| state_in(&i.state, states))
            .collect())
    }

    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        if ids.is_empty() {
            return Ok(BTreeMap::new());
        }
        let parsed = self.load()?;
        Ok(ids
            .iter()
            .filter_map(|id| parsed.by_id(id).map(|i| (id.clone(), i.state.clone())))
            .collect())
    }

    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        if identifiers.is_empty() {
            return Ok(BTreeMap::new());
        }
        let parsed = self.load()?;
        Ok(identifiers
            .iter()
            .filter_map(|key| {
                parsed
                    .by_identifier(key)
                    .map(|i| (key.clone(), i.state.clone()))
            })
            .collect())
    }

    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        let issue = self
            .load()?
            .full_by_id(id)
            .ok_or_else(|| document::not_found(id))?;
        Ok(issue.comments.unwrap_or_default())
    }

    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        let now = self.now_rfc3339();
        let state = state.to_string();
        self.modify(
            "transition",
            id,
            Box::new(move |m| Ok(edits::set_state(m, &state, &now))),
        )
    }

    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        let now = self.now_rfc3339();
        let now_ms = self.clock.now_ms();
        let text = text.to_string();
        self.modify(
            "comment",
            id,
            Box::new(move |m| edits::append_comment(m, &text, &now, now_ms)),
        )
    }

    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let label = label.to_string();
        self.modify(
            "add_label",
            id,
            Box::new(move |m| edits::add_label(m, &label)),
        )
    }

    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        let label = label.to_string();
        self.modify(
            "remove_label",
            id,
            Box::new(move |m| edits::remove_label(m, &label)),
        )
    }

    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        let parsed = self.load()?;
        let issue = parsed.by_id(id).ok_or_else(|| document::not_found(id))?;
        Ok(Blockers {
            refs: issue.blocked_by.clone(),
            complete: issue.blockers_read != crate::domain::BlockersRead::Incomplete,
        })
    }

    /// By id, else by identifier (exact, then case-insensitive); in scope when its
    /// identifier's prefix before the last `-` is `tracker.project`.
    fn resolve_in_scope(&self, id: &str) -> TrackerResult<IssueRef> {
        let wanted = id.trim();
        let parsed = self.load()?;
        let issue = parsed
            .by_id(wanted)
            .or_else(|| parsed.by_identifier(wanted))
            .or_else(|| {
                parsed
                    .issues()
                    .iter()
                    .find(|i| i.identifier.eq_ignore_ascii_case(wanted))
                    .map(|i| &**i)
            })
            .ok_or_else(|| document::not_found(id))?;
        if let Some(project) = &self.project {
            let owner = issue.identifier.rsplit_once('-').map_or("", |(p, _)| p);
            scope::same_owner(KIND, id, "project", owner, project)?;
        }
        Ok(IssueRef {
            id: issue.id.clone(),
            identifier: issue.identifier.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, UNIX_EPOCH};

    use super::cache::Probes;
    use super::file_key::FileKey;
    use super::*;
    use crate::clock::ManualClock;

    const ISSUES: &str = r#"[
        {"id": "1", "identifier": "P-1", "title": "one", "state": "To Do"},
        {"id": "2", "identifier": "P-2", "title": "two", "state": "To Do",
         "blocked_by": [{"id": "1"}], "comments": [{"body": "hello"}]}
    ]"#;

    fn tracker(probes: Probes) -> (tempfile::TempDir, FileTracker) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("issues.json");
        std::fs::write(&path, ISSUES).unwrap_or_else(|e| panic!("write: {e}"));
        let mut t = FileTracker::new(path, vec![], Arc::new(ManualClock::new(0)));
        t.cache = FileCache::with_probes(probes);
        (dir, t)
    }

    fn issue(t: &FileTracker, id: &str) -> Issue {
        t.fetch_issue_by_id(id)
            .unwrap_or_else(|e| panic!("fetch {id}: {e}"))
    }

    #[test]
    fn own_writes_are_seen_even_where_the_stat_shows_nothing() {
        let (_dir, t) = tracker(Probes {
            key: |m| FileKey {
                dev: m.dev(),
                ..FileKey::default()
            },
            now: || UNIX_EPOCH + Duration::from_secs(10),
        });
        assert_eq!(issue(&t, "1").state, "To Do");
        assert!(t.transition_issue("1", "Done").is_ok());
        assert_eq!(issue(&t, "1").state, "Done");
        assert_eq!(issue(&t, "2").blocked_by[0].state, "Done");
        assert!(t.add_label("1", "Ready").is_ok());
        assert_eq!(issue(&t, "1").labels, ["ready"]);
        assert!(t.comment_issue("1", "note").is_ok());
        assert_eq!(issue(&t, "1").comments.map(|c| c.len()), Some(1));
    }

    #[test]
    fn a_batch_fetch_reads_the_file_once() {
        let (_dir, t) = tracker(Probes {
            now: || std::time::SystemTime::now() + Duration::from_secs(60),
            ..Probes::default()
        });
        let ids: Vec<String> = ["2", "1", "9"].iter().map(|s| s.to_string()).collect();
        let got = t.fetch_issues_by_ids(&ids);
        assert_eq!(t.reads(), 1);
        let two = got.get("2").and_then(|r| r.as_ref().ok());
        assert_eq!(two.and_then(|i| i.comments.as_ref()).map(Vec::len), Some(1));
        let one = got.get("1").and_then(|r| r.as_ref().ok());
        assert_eq!(one.and_then(|i| i.comments.clone()), Some(vec![]));
        let nine = got.get("9").and_then(|r| r.as_ref().err()).map(|e| e.kind);
        assert_eq!(nine, Some(TrackerErrorKind::NotFound));
        // Candidates come from the same parse, without comments.
        let candidates = t.fetch_candidate_issues().unwrap_or_default();
        assert_eq!(candidates.len(), 2);
        assert!(candidates.iter().all(|i| i.comments.is_none()));
        assert_eq!(t.reads(), 1);
    }
}
