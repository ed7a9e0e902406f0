//! Shared builders for the store integration tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sortie::clock::ManualClock;
use sortie::domain::RunStatus;
use sortie::store::{RunRecord, StoredEvent};

/// 2026-03-26T14:00:00Z
pub const T0: i64 = 1_774_533_600_000;
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

pub fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("nested").join(".sortie.db")
}

/// A measured, succeeded run of `issue_id` that completed at `completed_at_ms`.
pub fn run(issue_id: &str, dispatch_id: &str, completed_at_ms: i64) -> RunRecord {
    RunRecord {
        issue_id: issue_id.into(),
        identifier: format!("MT-{issue_id}"),
        issue_title: "Fix the flaky login test".into(),
        issue_url: format!("https://tracker.example.com/browse/MT-{issue_id}"),
        attempt: 1,
        started_at_ms: completed_at_ms - 60_000,
        completed_at_ms,
        dispatched_at_ms: Some(completed_at_ms - 120_000),
        workflow_file: "WORKFLOW.md".into(),
        agent_kind: "claude-code".into(),
        rule_name: "implement".into(),
        configured_model: "model-a".into(),
        configured_effort: "high".into(),
        reported_model: "model-a-2025".into(),
        workspace: format!("/tmp/ws/MT-{issue_id}"),
        turns_completed: 3,
        input_tokens: 1000,
        output_tokens: 200,
        total_tokens: 1200,
        cache_read_tokens: 500,
        cache_write_tokens: 40,
        tokens_measured: true,
        dispatch_id: Some(dispatch_id.into()),
        session_id: Some(format!("sess-{dispatch_id}")),
        trigger: Some(String::new()),
        reaction_kind: Some(String::new()),
        reaction_config_key: Some(String::new()),
        ssh_host: Some(String::new()),
        ..RunRecord::new(RunStatus::Succeeded)
    }
}

/// `n` events with payload messages of `msg_len` characters.
pub fn events(n: i64, at_ms: i64, msg_len: usize) -> Vec<StoredEvent> {
    (1..=n)
        .map(|seq| StoredEvent {
            seq,
            at_ms: at_ms + seq,
            event_type: "notification".into(),
            payload: serde_json::json!({ "message": "m".repeat(msg_len) }),
        })
        .collect()
}

/// A plain read-write connection for fault injection (triggers) and raw inspection.
pub fn raw(path: &Path) -> rusqlite::Connection {
    match rusqlite::Connection::open(path) {
        Ok(c) => c,
        Err(e) => panic!("open raw connection: {e}"),
    }
}

pub fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
    match conn.query_row(sql, [], |r| r.get(0)) {
        Ok(n) => n,
        Err(e) => panic!("{sql}: {e}"),
    }
}
