//! The recorded spend of a spend window: the cost frozen with every run that ended in it. One
//! query per window over `idx_run_history_completed_at`; run history keeps `completed_at` as
//! fixed-format RFC 3339 text, so a range of text is a range of time.

use rusqlite::Connection;

use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};
use super::time;

use crate::domain::RunStatus;

/// What the runs that ended in a window cost, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RecordedSpend {
    /// Σ `estimated_cost_usd` (runs without a figure add nothing).
    pub usd: f64,
    /// Agent sessions counted (CI results are not sessions).
    pub runs: i64,
    /// Counted runs whose figure is a lower bound or missing: partial, unpriced or unmeasured,
    /// and runs recorded before costs were frozen unless they spent nothing.
    pub incomplete_runs: i64,
}

/// The recorded spend of runs that ended in `[start_ms, end_ms)`.
pub(crate) fn window_spend(
    conn: &Connection,
    sc: &Scope,
    start_ms: i64,
    end_ms: i64,
) -> Result<RecordedSpend, StoreError> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT COALESCE(SUM(estimated_cost_usd), 0.0), COUNT(*),
                 COALESCE(SUM(CASE
                     WHEN cost_status = 'estimated' THEN 0
                     WHEN cost_status = '' AND tokens_measured = 1 AND total_tokens = 0
                          AND unaccounted_turns = 0 THEN 0
                     ELSE 1 END), 0)
             FROM run_history
             WHERE completed_at >= ?1 AND completed_at < ?2 AND status != ?3 AND {}",
            scope::filter("workflow", 4)
        ))
        .ctx("prepare window spend")?;
    st.query_row(
        rusqlite::params![
            time::to_text(start_ms),
            time::to_text(end_ms),
            RunStatus::CiFailed,
            sc.bound()
        ],
        |r| {
            Ok(RecordedSpend {
                usd: r.get(0)?,
                runs: r.get(1)?,
                incomplete_runs: r.get(2)?,
            })
        },
    )
    .ctx("query window spend")
}
