//! Run statistics: the one aggregation behind `GET /api/v1/stats` and `sortie stats`. It opens
//! the database file read-only (never creating it, never through the orchestrator's
//! connection), scans the runs completed in a range once, and builds the report: counts,
//! success rate, duration percentiles, token sums and the cost recorded with each run, spend
//! per UTC day or month, and breakdowns by status, agent kind, dispatch rule, prompt template,
//! model, retry trigger, run origin, usage provenance and stage chain, and a funnel per
//! stage chain.
//!
//! Nothing is priced here: a run's cost is the `estimated_cost_usd` frozen when it was
//! recorded. Recorded CI results (`ci_failed` rows) are not agent runs and are left out.
//! Rules where the reference leaves the choice open: the summary's `failed` counts every
//! status that is not `succeeded`, `cancelled` or `budget_stopped` (`stopped`); durations
//! are `completed_at - started_at`, a zero duration and an unmeasurable one are counted and
//! left out of the percentiles; a run that split its spend by model counts in each of its
//! models' groups with that model's part; an empty value groups as `<none>` and a value the
//! run was recorded without as `<unknown>`.

mod aggregate;
pub mod chains;
mod extras;
pub mod range;
pub mod report;
mod rows;
mod spend;
mod tally;

use std::path::Path;

use rusqlite::Connection;

use super::connection;
use super::error::{SqlContext, StoreError};
use super::migrate;
use super::scope::Scope;

pub use aggregate::Header;
pub use range::{Range, RangeError};
pub use report::StatsReport;
pub use spend::{HOUR_BUCKETS_UP_TO_DAYS, Period};

/// The first schema version with every column the report reads.
const FULL_TIER_VERSION: i64 = 6;

/// Why no report was built.
#[derive(Debug)]
pub enum StatsError {
    Store(StoreError),
    /// The database predates the columns the report reads; the daemon migrates it at start.
    SchemaTooOld {
        found: i64,
        needed: i64,
    },
}

impl std::fmt::Display for StatsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatsError::Store(e) => write!(f, "{e}"),
            StatsError::SchemaTooOld { found, needed } => write!(
                f,
                "database schema version {found} predates the run statistics (version {needed} or later); start sortie once on this database to migrate it"
            ),
        }
    }
}

impl std::error::Error for StatsError {}

impl From<StoreError> for StatsError {
    fn from(e: StoreError) -> Self {
        StatsError::Store(e)
    }
}

/// What the caller supplies: where to read, what to name, and when "now" is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsRequest<'a> {
    pub db_path: &'a Path,
    pub workflow_path: &'a str,
    pub now_ms: i64,
    pub range: Range,
    /// The stage chains of the dispatch rules in force (the funnels follow them).
    pub chains: &'a [Vec<String>],
}

/// Builds the report over a connection of its own, closed when it returns.
pub fn build(req: &StatsRequest<'_>) -> Result<StatsReport, StatsError> {
    build_by(req, None)
}

/// [`build`] with the spend buckets of `period` (`None`: by the range's span). The caller
/// checks [`Period::fits`] first.
pub fn build_by(req: &StatsRequest<'_>, period: Option<Period>) -> Result<StatsReport, StatsError> {
    build_in(req, period, &Scope::single())
}

/// [`build_by`] over the runs and live passes of `scope` (the single workflow for
/// [`build_by`]; every workflow for [`Scope::All`]).
pub fn build_in(
    req: &StatsRequest<'_>,
    period: Option<Period>,
    scope: &Scope,
) -> Result<StatsReport, StatsError> {
    let conn = connection::open_read_only(req.db_path)?;
    let warnings = schema_warnings(&conn)?;
    let mut agg = aggregate::Aggregate::new(period, req.chains);
    rows::for_each_run(&conn, scope, &req.range, |r| agg.add(&r))?;
    let live = chains::read_live(&conn, scope)?;
    let header = Header {
        generated_at: instant_text(req.now_ms).unwrap_or_default(),
        workflow_path: req.workflow_path.to_string(),
        db_path: req.db_path.display().to_string(),
        schema_tier: "full".into(),
        warnings,
    };
    Ok(agg.finish(header, &req.range, req.chains, &live))
}

/// The report over no runs (the OpenAPI document's example).
pub fn empty(header: Header, range: &Range) -> StatsReport {
    aggregate::Aggregate::default().finish(header, range, &[], &chains::LiveStages::new())
}

/// Refuses a schema without the report's columns; warns about one newer than this build.
fn schema_warnings(conn: &Connection) -> Result<Vec<String>, StatsError> {
    let found: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .ctx("read schema version")?;
    if found < FULL_TIER_VERSION {
        return Err(StatsError::SchemaTooOld {
            found,
            needed: FULL_TIER_VERSION,
        });
    }
    let supported = migrate::supported_version();
    Ok(if found > supported {
        vec![format!(
            "the database schema (version {found}) is newer than this build's (version {supported}); columns it added are not read"
        )]
    } else {
        Vec::new()
    })
}

/// An instant in UTC, whole seconds unless it has a fraction (`2026-07-01T00:00:00Z`).
pub fn instant_text(ms: i64) -> Option<String> {
    jiff::Timestamp::from_millisecond(ms)
        .ok()
        .map(|t| t.to_string())
}

#[cfg(test)]
mod tests;
