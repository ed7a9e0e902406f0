//! Read-only access: a connection of its own (WAL lets it read while the writer commits), for
//! HTTP history/stats and `sortie stats`, plus the warm-start snapshot.

use std::path::Path;

use rusqlite::Connection;

use super::aggregates::{self, AggregateTotals};
use super::attention::{self, AttentionAck};
use super::connection;
use super::error::StoreError;
use super::events::{self, RunEvents};
use super::failure_holds::{self, FailureHoldRow};
use super::outcomes::{self, IssueOutcome};
use super::parks::{self, ParkedIssue};
use super::queries::{self, IssueSpend, IssueTotalsRow, OutcomeRow};
use super::reactions::{self, Fingerprint, GivenComments, PrRun, StoredEscalation};
use super::retry::{self, RetryEntry};
use super::runs::{self, IssueGroupPage, RunFilter, RunPage, RunRecord};
use super::scope::{InWorkflow, Scope};
use super::sessions::{self, SessionMeta};
use super::usage_holds::{self, UsageHoldRow};

/// Everything the orchestrator restores at start, read in one transaction so it is consistent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WarmStartSnapshot {
    /// Queued retries, soonest first, with absolute `due_at_ms`.
    pub retries: Vec<RetryEntry>,
    /// Counters to seed Prometheus from.
    pub totals: AggregateTotals,
    pub parks: Vec<ParkedIssue>,
    pub outcomes: Vec<IssueOutcome>,
    pub acknowledgements: Vec<AttentionAck>,
    pub sessions: Vec<SessionMeta>,
    /// Usage-limit holds on agent kinds.
    pub usage_holds: Vec<UsageHoldRow>,
    pub failure_holds: Vec<FailureHoldRow>,
    pub reactions: ReactionsSnapshot,
    /// Every stored stage hop.
    pub stage_hops: Vec<crate::domain::stage::StageHop>,
    /// Each issue's count of withheld handoffs in a row.
    pub handoff_absence: Vec<(String, u32)>,
}

/// What pending reactions are rebuilt from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReactionsSnapshot {
    pub escalations: Vec<StoredEscalation>,
    pub fingerprints: Vec<Fingerprint>,
    pub given: Vec<GivenComments>,
    pub triage_answers: Vec<super::reactions::TriageAnswer>,
    pub pr_runs: Vec<PrRun>,
}

/// A read-only connection, reading one scope's rows (see [`Scope`]). Not `Sync`: open one per
/// thread or request.
pub struct ReadConn {
    conn: Connection,
    scope: Scope,
}

impl ReadConn {
    /// Opens the database read-only, reading the single workflow; it must already exist (the
    /// writer creates it).
    pub fn open(path: &Path) -> Result<ReadConn, StoreError> {
        Ok(ReadConn {
            conn: connection::open_read_only(path)?,
            scope: Scope::single(),
        })
    }

    /// The same connection, reading `scope`'s rows. Across every workflow ([`Scope::All`]) a
    /// lookup of one issue answers with the first workflow's row by name, and lists carry each
    /// row's workflow (`RunRecord::workflow`, the `*_in` reads).
    pub fn with_scope(mut self, scope: Scope) -> ReadConn {
        self.scope = scope;
        self
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Pull-request reaction activity of each pass `(issue_id, chain_id)` asked for.
    pub fn pr_loop(
        &self,
        passes: &[(String, String)],
    ) -> Result<std::collections::BTreeMap<(String, String), super::PassActivity>, StoreError> {
        super::pr_loop::read(&self.conn, &self.scope, passes)
    }
    pub fn load_retry_entries(&self) -> Result<Vec<RetryEntry>, StoreError> {
        retry::load_all(&self.conn, &self.scope)
    }
    pub fn count_runs_for_issue(&self, issue_id: &str) -> Result<i64, StoreError> {
        runs::count_for_issue(&self.conn, &self.scope, issue_id)
    }
    pub fn uncached_tokens_for_issue(&self, issue_id: &str) -> Result<i64, StoreError> {
        runs::uncached_tokens_for_issue(&self.conn, &self.scope, issue_id)
    }
    pub fn aggregate_totals(&self) -> Result<AggregateTotals, StoreError> {
        aggregates::load(&self.conn, &self.scope)
    }
    /// The agent kinds and models run history records spend on.
    pub fn model_use(&self) -> Result<Vec<super::ModelUse>, StoreError> {
        super::model_use::load(&self.conn, &self.scope)
    }
    pub fn load_outcomes(&self) -> Result<Vec<IssueOutcome>, StoreError> {
        outcomes::load_all(&self.conn, &self.scope)
    }
    pub fn load_acknowledgements(&self) -> Result<Vec<AttentionAck>, StoreError> {
        attention::load_all(&self.conn, &self.scope)
    }
    pub fn session(&self, issue_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        sessions::get(&self.conn, &self.scope, issue_id)
    }
    /// Runs matching `filter` recorded before `cursor`, newest first, `limit` per page.
    pub fn list_runs(
        &self,
        filter: &RunFilter,
        cursor: Option<i64>,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        runs::list(&self.conn, &self.scope, filter, cursor, limit)
    }
    /// Issues by their newest matching run (for `GET /api/v1/runs/issues`).
    pub fn list_issue_groups(
        &self,
        filter: &RunFilter,
        cursor: Option<i64>,
        limit: usize,
    ) -> Result<IssueGroupPage, StoreError> {
        runs::list_issue_groups(&self.conn, &self.scope, filter, cursor, limit)
    }
    pub fn run(&self, run_id: i64) -> Result<Option<RunRecord>, StoreError> {
        runs::get(&self.conn, &self.scope, run_id)
    }
    /// The stored events of a finished run; `None` when none are retained.
    pub fn run_events(&self, dispatch_id: &str) -> Result<Option<RunEvents>, StoreError> {
        events::run_events(&self.conn, dispatch_id)
    }
    pub fn stored_event_bytes(&self) -> Result<i64, StoreError> {
        events::stored_bytes(&self.conn)
    }
    pub fn has_events(&self, dispatch_id: &str) -> Result<bool, StoreError> {
        events::has_events(&self.conn, dispatch_id)
    }
    pub fn warm_start_snapshot(&self) -> Result<WarmStartSnapshot, StoreError> {
        warm_start_snapshot(&self.conn, &self.scope)
    }
    /// Whether the database answers a trivial query (the readiness probe).
    pub fn ping(&self) -> Result<(), StoreError> {
        use super::error::SqlContext;
        self.conn
            .query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
            .ctx("ping")
            .map(|_| ())
    }
    /// One issue's completed-session figures.
    pub fn issue_spend(&self, issue_id: &str) -> Result<IssueSpend, StoreError> {
        queries::issue_spend(&self.conn, &self.scope, issue_id)
    }
    /// Several issues' completed-session figures in one query.
    pub fn issue_spend_many(
        &self,
        issue_ids: &[&str],
    ) -> Result<std::collections::BTreeMap<String, IssueSpend>, StoreError> {
        queries::issue_spend_many(&self.conn, &self.scope, issue_ids)
    }
    /// How the issue ended, if it did.
    pub fn issue_outcome(&self, issue_id: &str) -> Result<Option<OutcomeRow>, StoreError> {
        queries::issue_outcome(&self.conn, &self.scope, issue_id)
    }
    /// The issue's spend over all of its runs.
    pub fn issue_totals(&self, issue_id: &str) -> Result<IssueTotalsRow, StoreError> {
        queries::issue_totals(&self.conn, &self.scope, issue_id)
    }
    /// The dispatch id of the issue's newest run that has one.
    pub fn newest_dispatch_id(&self, issue_id: &str) -> Result<Option<String>, StoreError> {
        queries::newest_dispatch_id(&self.conn, &self.scope, issue_id)
    }
    /// The issue id of the newest run recorded under `identifier`.
    pub fn issue_id_by_identifier(&self, identifier: &str) -> Result<Option<String>, StoreError> {
        queries::issue_id_by_identifier(&self.conn, &self.scope, identifier)
    }
    /// The newest run end per workspace directory name (workspace retention).
    pub fn workspace_last_activity(
        &self,
    ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
        queries::workspace_last_activity(&self.conn, &self.scope)
    }
    /// The scope's queued retries, each with its workflow, soonest first.
    pub fn retries_in(&self) -> Result<Vec<InWorkflow<RetryEntry>>, StoreError> {
        retry::load_in(&self.conn, &self.scope)
    }
    /// The scope's parked issues, each with its workflow.
    pub fn parks_in(&self) -> Result<Vec<InWorkflow<ParkedIssue>>, StoreError> {
        parks::load_in(&self.conn, &self.scope)
    }
    /// The scope's failure holds, each with its workflow.
    pub fn failure_holds_in(&self) -> Result<Vec<InWorkflow<FailureHoldRow>>, StoreError> {
        failure_holds::load_in(&self.conn, &self.scope)
    }
    /// The scope's usage holds, each with its workflow.
    pub fn usage_holds_in(&self) -> Result<Vec<InWorkflow<UsageHoldRow>>, StoreError> {
        usage_holds::load_in(&self.conn, &self.scope)
    }
    /// The scope's attention acknowledgements, each with its workflow.
    pub fn acknowledgements_in(&self) -> Result<Vec<InWorkflow<AttentionAck>>, StoreError> {
        attention::load_in(&self.conn, &self.scope)
    }
    /// The scope's session rows, each with its workflow.
    pub fn sessions_in(&self) -> Result<Vec<InWorkflow<SessionMeta>>, StoreError> {
        sessions::load_in(&self.conn, &self.scope)
    }
    /// The counters of each workflow of the scope that has any.
    pub fn aggregate_totals_by_workflow(
        &self,
    ) -> Result<Vec<InWorkflow<AggregateTotals>>, StoreError> {
        aggregates::load_by_workflow(&self.conn, &self.scope)
    }
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        connection::integrity_check(&self.conn)
    }
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        connection::journal_mode(&self.conn)
    }
}

/// Reads the warm-start state inside one read transaction.
pub(crate) fn warm_start_snapshot(
    conn: &Connection,
    sc: &Scope,
) -> Result<WarmStartSnapshot, StoreError> {
    use super::error::SqlContext;
    conn.execute_batch("BEGIN DEFERRED")
        .ctx("begin snapshot read")?;
    let snap = (|| {
        Ok(WarmStartSnapshot {
            retries: retry::load_all(conn, sc)?,
            totals: aggregates::load(conn, sc)?,
            parks: parks::load_all(conn, sc)?,
            outcomes: outcomes::load_all(conn, sc)?,
            acknowledgements: attention::load_all(conn, sc)?,
            sessions: sessions::load_all(conn, sc)?,
            usage_holds: usage_holds::load_all(conn, sc)?,
            failure_holds: failure_holds::load_all(conn, sc)?,
            stage_hops: super::stage_hops::load_all(conn, sc)?,
            handoff_absence: super::handoff_absence::load_all(conn, sc)?,
            reactions: ReactionsSnapshot {
                escalations: reactions::load_escalations(conn, sc)?,
                fingerprints: reactions::load_fingerprints(conn, sc)?,
                given: reactions::load_given(conn, sc)?,
                triage_answers: reactions::load_triage_answers(conn, sc)?,
                pr_runs: reactions::latest_pr_runs(conn, sc)?,
            },
        })
    })();
    conn.execute_batch("COMMIT").ctx("end snapshot read")?;
    snap
}
