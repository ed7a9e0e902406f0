//! Store errors: every failure names what was being done so a log line is enough to act on.

use std::fmt;
use std::path::PathBuf;

/// Why a persistence operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// The database file or its directory could not be created or opened.
    Open {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The database was written by a newer sortie; running this binary against it could damage it.
    SchemaTooNew { found: i64, supported: i64 },
    /// `PRAGMA journal_mode=WAL` did not answer `wal`.
    WalUnavailable { answer: String },
    /// A migration failed; its transaction was rolled back.
    Migration {
        version: i64,
        name: &'static str,
        source: rusqlite::Error,
    },
    /// A statement failed.
    Sqlite {
        context: &'static str,
        source: rusqlite::Error,
    },
    /// A JSON column could not be encoded or decoded.
    Json {
        context: &'static str,
        source: serde_json::Error,
    },
    /// A stored timestamp could not be parsed.
    Timestamp {
        context: &'static str,
        value: String,
    },
    /// The writer thread has stopped (shutdown or a crash); nothing more can be written.
    WriterGone,
    /// The write failed because the database cannot take writes now; it is kept and retried
    /// in order until it succeeds (a run's commit notice comes when it does).
    WriteKept { error: String },
    /// Earlier writes failed and are kept for retry; the database is not writable.
    WritesFailing {
        since_ms: i64,
        pending: usize,
        error: String,
    },
    /// Another process holds the database's lock file (another sortie on the same database).
    Locked {
        db_path: PathBuf,
        lock_path: PathBuf,
        /// The pid the holder wrote into the lock file, when readable.
        holder_pid: Option<u32>,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Open { path, source } => {
                write!(f, "cannot open database {}: {source}", path.display())
            }
            StoreError::SchemaTooNew { found, supported } => write!(
                f,
                "database schema version {found} is newer than this sortie supports \
                 (highest known version {supported}); upgrade sortie to a version that \
                 knows schema {found}, or point db_path at another file"
            ),
            StoreError::WalUnavailable { answer } => write!(
                f,
                "database refused write-ahead logging (journal_mode answered {answer:?})"
            ),
            StoreError::Migration {
                version,
                name,
                source,
            } => {
                write!(f, "migration {version:03} ({name}) failed: {source}")
            }
            StoreError::Sqlite { context, source } => write!(f, "{context}: {source}"),
            StoreError::Json { context, source } => write!(f, "{context}: {source}"),
            StoreError::Timestamp { context, value } => {
                write!(f, "{context}: invalid timestamp {value:?}")
            }
            StoreError::WriterGone => write!(f, "database writer has stopped"),
            StoreError::WriteKept { error } => {
                write!(f, "database write failed, kept for retry: {error}")
            }
            StoreError::WritesFailing {
                since_ms,
                pending,
                error,
            } => write!(
                f,
                "database writes failing since {}: {pending} write(s) kept for retry; last error: {error}",
                crate::clock::rfc3339_ms(*since_ms)
            ),
            StoreError::Locked {
                db_path,
                lock_path,
                holder_pid,
            } => {
                write!(f, "database {} is in use by ", db_path.display())?;
                match holder_pid {
                    Some(pid) => write!(f, "another sortie (pid {pid})")?,
                    None => write!(f, "another sortie")?,
                }
                write!(
                    f,
                    " holding {}; stop it or point db_path at another file",
                    lock_path.display()
                )
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Open { source, .. } => Some(source.as_ref()),
            StoreError::Migration { source, .. } | StoreError::Sqlite { source, .. } => {
                Some(source)
            }
            StoreError::Json { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl StoreError {
    /// Whether the failure is the database's condition rather than the write's content: the
    /// disk is full, the file read-only, locked, unreadable or corrupt. Such a write is kept
    /// and retried; any other failure would fail again the same way.
    pub fn is_transient(&self) -> bool {
        use rusqlite::ErrorCode as C;
        let code = match self {
            StoreError::Sqlite {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } => e.code,
            _ => return false,
        };
        matches!(
            code,
            C::DiskFull
                | C::ReadOnly
                | C::SystemIoFailure
                | C::DatabaseBusy
                | C::DatabaseLocked
                | C::CannotOpen
                | C::OutOfMemory
                | C::DatabaseCorrupt
                | C::NotADatabase
                | C::FileLockingProtocolFailed
        )
    }
}

/// Attaches a context to rusqlite results (`.ctx("insert run")?`).
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for Result<T, rusqlite::Error> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite { context, source })
    }
}
