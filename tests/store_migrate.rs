//! Migrations: from empty, from every earlier version with data preserved, newer refused; WAL
//! and integrity.

mod common;

use common::store::*;
use sortie::clock::Clock;
use sortie::domain::RunStatus;
use sortie::store::{RunFilter, Store, StoreError, connection, migrate};

#[test]
fn fresh_database_gets_every_migration_wal_and_integrity_ok() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path, clock()).unwrap();
    let read = store.read_conn().unwrap();
    assert_eq!(read.journal_mode().unwrap(), "wal");
    assert_eq!(read.integrity_check().unwrap(), "ok");
    let raw = raw(&path);
    assert_eq!(
        count(&raw, "SELECT COUNT(*) FROM schema_migrations"),
        migrate::MIGRATIONS.len() as i64
    );
    assert_eq!(
        migrate::current_version(&raw).unwrap(),
        migrate::supported_version()
    );
    let sync: i64 = store
        .writer()
        .query(|c| {
            c.pragma_query_value(None, "synchronous", |r| r.get(0))
                .map_err(|source| StoreError::Sqlite {
                    context: "sync",
                    source,
                })
        })
        .unwrap();
    assert_eq!(sync, 2, "synchronous=FULL on the writer connection");
}

/// Builds a database at version `k` holding data written with the v1 columns, then opens it with
/// the full migration set: every row must survive and read with the documented defaults.
#[test]
fn upgrades_from_every_earlier_version_preserve_data() {
    let c = clock();
    for k in 0..migrate::MIGRATIONS.len() {
        let dir = tempfile::tempdir().unwrap();
        let path = db_path(&dir);
        {
            let mut conn = connection::open_read_write(&path).unwrap();
            let applied = migrate::apply(&mut conn, &migrate::MIGRATIONS[..k], c.as_ref()).unwrap();
            assert_eq!(applied.len(), k);
            if k >= 1 {
                conn.execute_batch(
                    "INSERT INTO retry_entries (issue_id, identifier, attempt, due_at_ms, error)
                         VALUES ('i1', 'MT-1', 2, 1774533700000, 'boom');
                     INSERT INTO run_history (issue_id, identifier, attempt, agent_adapter,
                         workspace, started_at, completed_at, status, error)
                         VALUES ('i1', 'MT-1', 1, 'claude-code', '/ws/MT-1',
                                 '2026-03-26T14:00:00.000Z', '2026-03-26T14:05:00.000Z',
                                 'failed', 'exit 1');
                     INSERT INTO aggregate_metrics (key, input_tokens, output_tokens,
                         total_tokens, dispatches, seconds_running)
                         VALUES ('agent_totals', 10, 20, 30, 1, 300.0);",
                )
                .unwrap();
            }
        }
        let store = Store::open(&path, c.clone()).unwrap_or_else(|e| panic!("from v{k}: {e}"));
        let read = store.read_conn().unwrap();
        assert_eq!(read.integrity_check().unwrap(), "ok", "from v{k}");
        let raw = raw(&path);
        assert_eq!(
            migrate::current_version(&raw).unwrap(),
            migrate::supported_version()
        );
        if k == 0 {
            assert!(read.load_retry_entries().unwrap().is_empty());
            continue;
        }
        let retries = read.load_retry_entries().unwrap();
        assert_eq!(retries.len(), 1, "from v{k}");
        assert_eq!(retries[0].due_at_ms, 1_774_533_700_000);
        assert_eq!(retries[0].attempt, 2);
        assert_eq!(retries[0].error.as_deref(), Some("boom"));
        assert!(retries[0].issue_labels.is_empty());
        assert_eq!(
            retries[0].trigger, None,
            "queued before the trigger was stored"
        );

        let page = read.list_runs(&RunFilter::default(), None, 10).unwrap();
        assert_eq!(page.runs.len(), 1, "from v{k}");
        let r = &page.runs[0];
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(r.completed_at_ms, T0 + 5 * 60_000);
        assert!(r.tokens_measured, "pre-upgrade rows read measured");
        assert_eq!(r.unaccounted_turns, 0);
        assert_eq!(r.dispatch_id, None, "no dispatch id before it was stored");
        assert_eq!(r.configured_model, "");
        assert_eq!(read.count_runs_for_issue("i1").unwrap(), 1);

        let totals = read.aggregate_totals().unwrap();
        assert_eq!(
            (totals.input_tokens, totals.total_tokens, totals.dispatches),
            (10, 30, 1)
        );
        assert_eq!(totals.unmeasured_sessions, 0);
        drop(read);
        // The upgraded database keeps accumulating.
        store
            .writer()
            .record_run(run("i1", "D1", T0 + DAY_MS), events(2, T0, 10))
            .unwrap();
        let totals = store.read_conn().unwrap().aggregate_totals().unwrap();
        assert_eq!(totals.dispatches, 2);
        assert_eq!(totals.total_tokens, 1230);
    }
}

#[test]
fn newer_schema_is_refused_with_upgrade_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    Store::open(&path, clock()).unwrap().close().unwrap();
    raw(&path)
        .execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (99, '2030-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
    let err = match Store::open(&path, clock()) {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(e) => e,
    };
    let supported = migrate::supported_version();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, supported: s } if s == supported),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("99") && msg.contains(&supported.to_string()),
        "{msg}"
    );
    assert!(msg.contains("upgrade sortie"), "{msg}");
}

#[test]
fn migrations_record_applied_time_from_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    Store::open(&path, c.clone()).unwrap().close().unwrap();
    let at: String = raw(&path)
        .query_row(
            "SELECT applied_at FROM schema_migrations WHERE version = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(at, sortie::clock::rfc3339_ms(c.now_ms()));
}
