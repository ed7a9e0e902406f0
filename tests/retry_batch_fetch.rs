//! Retries that fall due together share one tracker fetch: a restart with many overdue retries
//! reads the file tracker's file once to fire them, not once per retry. Counted through a
//! wrapper around the real file tracker, so nothing here depends on timing.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::in_process::{START_MS, mock_orchestrator_with};
use sortie::clock::Clock;
use sortie::domain::{Comment, Issue};
use sortie::store::Store;
use sortie::tracker::file::FileTracker;
use sortie::tracker::{Blockers, TrackerAdapter, TrackerResult};

const ISSUES: usize = 30;
const OVERDUE: usize = 25;
const SLOTS: usize = 5;

/// The file tracker, counting the single-issue fetches, the batch fetches and the file reads
/// the batch fetches made.
struct Counting {
    inner: FileTracker,
    by_id: AtomicU64,
    batches: AtomicU64,
    batch_ids: AtomicU64,
    batch_reads: AtomicU64,
}

impl TrackerAdapter for Counting {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
        self.inner.fetch_candidate_issues()
    }
    fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
        self.by_id.fetch_add(1, Ordering::SeqCst);
        self.inner.fetch_issue_by_id(id)
    }
    fn fetch_issues_by_ids(&self, ids: &[String]) -> BTreeMap<String, TrackerResult<Issue>> {
        let before = self.inner.reads();
        let answer = self.inner.fetch_issues_by_ids(ids);
        let reads = self.inner.reads() - before;
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.batch_ids.fetch_add(ids.len() as u64, Ordering::SeqCst);
        self.batch_reads.fetch_add(reads, Ordering::SeqCst);
        answer
    }
    fn fetch_issues_by_states(&self, states: &[String]) -> TrackerResult<Vec<Issue>> {
        self.inner.fetch_issues_by_states(states)
    }
    fn fetch_issue_states_by_ids(&self, ids: &[String]) -> TrackerResult<BTreeMap<String, String>> {
        self.inner.fetch_issue_states_by_ids(ids)
    }
    fn fetch_issue_states_by_identifiers(
        &self,
        identifiers: &[String],
    ) -> TrackerResult<BTreeMap<String, String>> {
        self.inner.fetch_issue_states_by_identifiers(identifiers)
    }
    fn fetch_issue_comments(&self, id: &str) -> TrackerResult<Vec<Comment>> {
        self.inner.fetch_issue_comments(id)
    }
    fn transition_issue(&self, id: &str, state: &str) -> TrackerResult<()> {
        self.inner.transition_issue(id, state)
    }
    fn comment_issue(&self, id: &str, text: &str) -> TrackerResult<()> {
        self.inner.comment_issue(id, text)
    }
    fn add_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.inner.add_label(id, label)
    }
    fn remove_label(&self, id: &str, label: &str) -> TrackerResult<()> {
        self.inner.remove_label(id, label)
    }
    fn fetch_blockers(&self, id: &str) -> TrackerResult<Blockers> {
        self.inner.fetch_blockers(id)
    }
}

fn backlog() -> String {
    let issues: Vec<serde_json::Value> = (0..ISSUES)
        .map(|i| {
            serde_json::json!({"id": format!("i{i}"), "identifier": format!("MT-{i}"),
                "title": format!("issue {i}"), "state": "To Do", "priority": 1})
        })
        .collect();
    serde_json::Value::Array(issues).to_string()
}

/// Queues `OVERDUE` retries that fell due before the start, as a stopped sortie leaves them.
fn queue_overdue_retries(dir: &std::path::Path) {
    let db = dir.join("sortie.db");
    let clock: Arc<dyn Clock> = common::store::clock();
    match Store::open(&db, clock) {
        Ok(store) => store.close().unwrap_or_else(|e| panic!("close: {e}")),
        Err(e) => panic!("open store: {e}"),
    }
    let conn = common::store::raw(&db);
    for i in 0..OVERDUE {
        conn.execute(
            "INSERT INTO retry_entries (issue_id, identifier, attempt, due_at_ms) VALUES (?1, ?2, 2, ?3)",
            rusqlite::params![format!("i{i}"), format!("MT-{i}"), START_MS - 60_000 - i as i64],
        )
        .unwrap_or_else(|e| panic!("insert retry: {e}"));
    }
}

#[test]
fn overdue_retries_at_start_share_one_fetch_and_one_file_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    queue_overdue_retries(dir.path());
    let counting: Arc<Counting> = Arc::new(Counting {
        inner: FileTracker::new(
            dir.path().join("issues.json"),
            vec!["To Do".into()],
            common::store::clock(),
        ),
        by_id: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        batch_ids: AtomicU64::new(0),
        batch_reads: AtomicU64::new(0),
    });
    let tracker: Arc<dyn TrackerAdapter> = counting.clone();
    let mut p = mock_orchestrator_with(
        dir.path(),
        &backlog(),
        &format!("  max_concurrent_agents: {SLOTS}\nmock:\n  turn_delay_ms: 3600000\n"),
        |_, _| tracker,
    );
    assert_eq!(p.orch.snapshot_now().retrying.len(), OVERDUE);

    // One step fires every due retry, then runs the first tick.
    p.orch.step(Duration::ZERO);

    assert_eq!(counting.by_id.load(Ordering::SeqCst), 0);
    assert_eq!(counting.batches.load(Ordering::SeqCst), 1);
    assert_eq!(counting.batch_ids.load(Ordering::SeqCst), OVERDUE as u64);
    assert_eq!(counting.batch_reads.load(Ordering::SeqCst), 1);
    let snap = p.orch.snapshot_now();
    assert_eq!(snap.running.len(), SLOTS);
    assert_eq!(snap.retrying.len(), OVERDUE - SLOTS);
    assert!(
        snap.retrying
            .iter()
            .all(|r| r.error.as_deref() == Some("no available orchestrator slots")),
        "the rest wait for a slot: {:?}",
        snap.retrying.iter().map(|r| &r.error).collect::<Vec<_>>()
    );
}
