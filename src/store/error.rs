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

/// Attaches a context to rusqlite results (`.ctx("insert run")?`).
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for Result<T, rusqlite::Error> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite { context, source })
    }
}
