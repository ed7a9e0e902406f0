//! Persistence: SQLite with embedded forward-only migrations, one writer thread owning the only
//! read-write connection, and read-only connections for history. It is what makes a restart a
//! warm start: retries keep their absolute due times, budgets count run history, counters
//! resume, and finished runs stay queryable.

pub mod adopt;
mod aggregates;
mod attention;
mod bind;
pub mod connection;
mod error;
mod event_retry;
mod events;
mod failure_holds;
pub mod files;
mod handoff_absence;
mod json;
pub mod live_figures;
pub mod lock;
pub mod migrate;
mod model_use;
mod outcomes;
mod parks;
pub mod pr_loop;
mod price_cache;
mod queries;
mod reactions;
mod read;
mod read_pool;
mod record;
mod retry;
mod runs;
mod scope;
pub mod scrub;
mod sessions;
mod spend_window;
mod stage_hops;
mod stage_passes;
pub mod stats;
mod time;
mod usage_holds;
mod vocabulary;
mod write_backlog;
pub mod write_latency;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use aggregates::{AggregateTotals, INTERRUPTED_ERROR};
pub use attention::AttentionAck;
pub use error::StoreError;
pub use event_retry::{
    EventRetryBuffer, MAX_BUFFER_BYTES, PendingEvents, PendingSummary, RETRY_DELAYS_MS,
};
pub use events::{EventLimits, PruneReport, RunEvents, StoredEvent};
pub use failure_holds::FailureHoldRow;
pub use handoff_absence::HandoffAbsenceWrite;
pub use lock::DbLock;
pub use model_use::ModelUse;
pub use outcomes::{IssueOutcome, replaces as outcome_replaces};
pub use parks::ParkedIssue;
pub use pr_loop::{PassActivity, PrLoopActivity, PrLoopMark, PrLoopWrite};
pub use price_cache::PriceCache;
pub use queries::{IssueSpend, IssueTotalsRow, OutcomeRow, StoredCost};
pub use reactions::{
    Fingerprint, GivenComments, PrRun, ReactionWrite, StoredEscalation, TriageAnswer,
};
pub use read::{ReactionsSnapshot, ReadConn, WarmStartSnapshot};
pub use read_pool::{ReadPool, ScopedPool};
pub use record::{RecordOutcome, RunWrite};
pub use retry::RetryEntry;
pub use runs::{IssueGroupPage, IssueKey, IssueUsage, RuleFilter, RunFilter, RunPage, RunRecord};
pub use scope::{InWorkflow, Scope};
pub use sessions::SessionMeta;
pub use spend_window::RecordedSpend;
pub use stage_hops::StageHopWrite;
pub use usage_holds::UsageHoldRow;
pub use vocabulary::unknown_word;
pub use write_backlog::{BACKLOG_DELAYS_MS, WriteFailure};
pub use writer::{OnCommit, WriterHandle};

use crate::clock::Clock;

/// Tunables; the defaults are the documented limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    pub event_limits: EventLimits,
    /// Memory for events whose write failed (4 MiB).
    pub event_retry_buffer_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            event_limits: EventLimits::default(),
            event_retry_buffer_bytes: MAX_BUFFER_BYTES,
        }
    }
}

/// A handle on the open database: its writer thread, the path readers open and the pool request
/// handlers read through, shared by every handle, and the workflow this handle reads and writes
/// (see [`Scope`]). The writer stops when the last handle drops, or at [`Store::close`].
pub struct Store {
    shared: Arc<Shared>,
    workflow: Arc<str>,
}

struct Shared {
    path: PathBuf,
    pool: ReadPool,
    writer: WriterHandle,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Store {
    /// Opens (creating file and directory if needed), enables WAL, applies pending migrations
    /// and starts the writer thread. A database newer than this binary is refused with
    /// [`StoreError::SchemaTooNew`]. The handle is scoped to the single workflow (`''`).
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Store, StoreError> {
        Self::open_with(path, clock, StoreOptions::default())
    }

    pub fn open_with(
        path: &Path,
        clock: Arc<dyn Clock>,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let mut conn = connection::open_read_write(path)?;
        migrate::apply(&mut conn, migrate::MIGRATIONS, clock.as_ref())?;
        let (writer, thread) = writer::spawn(
            conn,
            clock,
            options.event_limits,
            options.event_retry_buffer_bytes,
        )?;
        let workflow: Arc<str> = Arc::from("");
        Ok(Store {
            shared: Arc::new(Shared {
                path: path.to_path_buf(),
                pool: ReadPool::new(path),
                writer: writer.scoped(workflow.clone()),
                thread: Mutex::new(Some(thread)),
            }),
            workflow,
        })
    }

    /// A handle on the same writer and read pool that reads and writes `workflow`'s rows.
    pub fn scoped(&self, workflow: &str) -> Store {
        Store {
            shared: self.shared.clone(),
            workflow: Arc::from(workflow),
        }
    }

    /// The workflow this handle reads and writes (`''`: the single workflow).
    pub fn workflow(&self) -> &str {
        &self.workflow
    }

    /// This handle's scope.
    pub fn scope(&self) -> Scope {
        Scope::One(self.workflow.clone())
    }

    /// A handle to the single writer (cloneable, `Send`), writing this handle's workflow.
    pub fn writer(&self) -> WriterHandle {
        self.shared.writer.scoped(self.workflow.clone())
    }

    /// A new read-only connection (one per thread/request), reading this handle's workflow.
    pub fn read_conn(&self) -> Result<ReadConn, StoreError> {
        Ok(ReadConn::open(&self.shared.path)?.with_scope(self.scope()))
    }

    /// Pooled read-only connections, for request handlers that read on every request; they
    /// read this handle's workflow.
    pub fn read_pool(&self) -> ScopedPool<'_> {
        self.shared.pool.scoped(self.scope())
    }

    /// Pooled read-only connections reading `scope` (every workflow, for an answer that
    /// aggregates them).
    pub fn read_pool_in(&self, scope: Scope) -> ScopedPool<'_> {
        self.shared.pool.scoped(scope)
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Applies every queued write, stops the writer (for every handle) and waits for it.
    pub fn close(self) -> Result<(), StoreError> {
        self.shared.stop()
    }
}

impl Shared {
    fn stop(&self) -> Result<(), StoreError> {
        let thread = match self.thread.lock() {
            Ok(mut t) => t.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(thread) = thread else {
            return Ok(());
        };
        // Already stopped (an explicit writer shutdown) is fine.
        let r = match self.writer.shutdown() {
            Err(StoreError::WriterGone) => Ok(()),
            r => r,
        };
        if thread.join().is_err() {
            log::error!("database writer thread panicked");
        }
        r
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            log::warn!(error:% = e; "database close failed");
        }
    }
}
