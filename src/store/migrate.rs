//! Forward-only schema migrations, embedded in the binary and applied at open, each in its own
//! transaction together with its `schema_migrations` row. A database whose recorded version is
//! above the newest one compiled in is refused: an old binary must not write a newer schema.

use rusqlite::Connection;

use super::bind;
use super::error::{SqlContext, StoreError};
use crate::clock::{Clock, rfc3339_ms};

/// One numbered migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order. Append only; never edit a released file.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "001_core",
        sql: include_str!("../../sql/001_core.sql"),
    },
    Migration {
        version: 2,
        name: "002_run_detail",
        sql: include_str!("../../sql/002_run_detail.sql"),
    },
    Migration {
        version: 3,
        name: "003_events",
        sql: include_str!("../../sql/003_events.sql"),
    },
    Migration {
        version: 4,
        name: "004_parks_outcomes_attention",
        sql: include_str!("../../sql/004_parks_outcomes_attention.sql"),
    },
    Migration {
        version: 5,
        name: "005_session_process",
        sql: include_str!("../../sql/005_session_process.sql"),
    },
    Migration {
        version: 6,
        name: "006_agent_usage_holds",
        sql: include_str!("../../sql/006_agent_usage_holds.sql"),
    },
    Migration {
        version: 7,
        name: "007_price_table_cache",
        sql: include_str!("../../sql/007_price_table_cache.sql"),
    },
    Migration {
        version: 8,
        name: "008_reactions",
        sql: include_str!("../../sql/008_reactions.sql"),
    },
    Migration {
        version: 9,
        name: "009_stage_hops",
        sql: include_str!("../../sql/009_stage_hops.sql"),
    },
    Migration {
        version: 10,
        name: "010_store_tasks",
        sql: include_str!("../../sql/010_store_tasks.sql"),
    },
    Migration {
        version: 11,
        name: "011_failure_holds",
        sql: include_str!("../../sql/011_failure_holds.sql"),
    },
    Migration {
        version: 12,
        name: "012_triage_answers",
        sql: include_str!("../../sql/012_triage_answers.sql"),
    },
    Migration {
        version: 13,
        name: "013_stage_passes",
        sql: include_str!("../../sql/013_stage_passes.sql"),
    },
    Migration {
        version: 14,
        name: "014_handoff_absence",
        sql: include_str!("../../sql/014_handoff_absence.sql"),
    },
    Migration {
        version: 15,
        name: "015_pr_loop",
        sql: include_str!("../../sql/015_pr_loop.sql"),
    },
    Migration {
        version: 16,
        name: "016_workflow_keys",
        sql: include_str!("../../sql/016_workflow_keys.sql"),
    },
];

/// The newest schema version this binary knows.
pub fn supported_version() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

/// The highest applied version (0 for an empty database).
pub fn current_version(conn: &Connection) -> Result<i64, StoreError> {
    ensure_table(conn)?;
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
    .ctx("read schema version")
}

/// Applies every migration of `migrations` not yet applied; refuses a database newer than the
/// last entry of `migrations`. Returns the versions applied. Tests pass a prefix of
/// [`MIGRATIONS`] to build databases at earlier versions.
pub fn apply(
    conn: &mut Connection,
    migrations: &[Migration],
    clock: &dyn Clock,
) -> Result<Vec<i64>, StoreError> {
    let supported = migrations.last().map(|m| m.version).unwrap_or(0);
    let found = current_version(conn)?;
    if found > supported {
        return Err(StoreError::SchemaTooNew { found, supported });
    }
    let mut applied = Vec::new();
    for m in migrations {
        let done: bool = conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM schema_migrations WHERE version = ?1)",
                [m.version],
                |r| r.get(0),
            )
            .ctx("check applied migration")?;
        if done {
            continue;
        }
        let err = |source| StoreError::Migration {
            version: m.version,
            name: m.name,
            source,
        };
        let tx = conn.transaction().map_err(err)?;
        tx.execute_batch(m.sql).map_err(err)?;
        bind::execute(
            &tx,
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![m.version, rfc3339_ms(clock.now_ms())],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        log::info!(version:% = m.version, name:% = m.name; "database migration applied");
        applied.push(m.version);
    }
    Ok(applied)
}

fn ensure_table(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version INTEGER PRIMARY KEY,
             applied_at TEXT NOT NULL
         )",
    )
    .ctx("create schema_migrations")
}

/// An in-memory database at the newest schema, for unit tests.
#[cfg(test)]
pub(crate) fn test_db() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap_or_else(|e| panic!("open: {e}"));
    apply(&mut conn, MIGRATIONS, &crate::clock::ManualClock::new(0))
        .unwrap_or_else(|e| panic!("migrate: {e}"));
    conn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_strictly_increasing_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.name);
            assert!(m.name.starts_with(&format!("{:03}_", m.version)));
        }
    }
}
