//! Opening connections. One read-write connection (owned by the writer thread) and any number of
//! read-only ones; WAL lets readers scan history while the writer commits.
//!
//! Durability choice: `synchronous=FULL`. WAL with NORMAL already survives `kill -9` of sortie,
//! but can lose the last commits on power loss; the orchestrator treats a run as durable once
//! `record_run` returns, and writes are tens per minute, so one extra fsync per commit is free.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::error::{SqlContext, StoreError};

/// Writer waits this long for a lock held by a reader's checkpoint or an external `sqlite3`.
pub(crate) const WRITER_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Readers wait this long for the writer before giving up (an HTTP request should not hang).
const READER_BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Statements the writer keeps prepared: every write statement of the store fits.
const WRITER_STATEMENT_CACHE: usize = 64;

/// Opens the read-write connection: creates the parent directory (0700) and the file (0600)
/// or tightens an existing one (see `files`), turns on WAL (refusing to continue without it),
/// full sync, foreign keys and a busy timeout.
pub fn open_read_write(path: &Path) -> Result<Connection, StoreError> {
    super::files::prepare_database_file(path).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    let conn = Connection::open(path).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    conn.busy_timeout(WRITER_BUSY_TIMEOUT)
        .ctx("set writer busy timeout")?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .ctx("enable write-ahead logging")?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::WalUnavailable { answer: mode });
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .ctx("set synchronous=FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .ctx("enable foreign keys")?;
    conn.set_prepared_statement_cache_capacity(WRITER_STATEMENT_CACHE);
    Ok(conn)
}

/// Opens a read-only connection for history and stats reads; never used for writes.
pub fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    conn.busy_timeout(READER_BUSY_TIMEOUT)
        .ctx("set reader busy timeout")?;
    Ok(conn)
}

/// The current journal mode, lowercase (for health checks and tests).
pub fn journal_mode(conn: &Connection) -> Result<String, StoreError> {
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .ctx("read journal_mode")?;
    Ok(mode.to_ascii_lowercase())
}

/// `PRAGMA integrity_check`, joined into one string (`"ok"` when healthy).
pub fn integrity_check(conn: &Connection) -> Result<String, StoreError> {
    let mut stmt = conn
        .prepare("PRAGMA integrity_check")
        .ctx("prepare integrity_check")?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .ctx("run integrity_check")?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.ctx("read integrity_check")?);
    }
    Ok(out.join("; "))
}
