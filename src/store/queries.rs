//! Named read queries the HTTP API serves from run history, each returning a typed row.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension};

use super::error::{SqlContext, StoreError};

use crate::domain::OutcomeKind;

/// One issue's completed-session figures (recorded CI results excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IssueSpend {
    /// Completed sessions.
    pub sessions: u64,
    pub unmeasured: u64,
    /// Summed tokens without cache reads of the measured sessions.
    pub uncached: u64,
    /// Sessions that recorded a turn no figure covered.
    pub lower_bound: u64,
}

/// The spend columns shared by [`issue_spend`] and [`issue_spend_many`].
const SPEND_COLUMNS: &str = "COUNT(*),
    COALESCE(SUM(tokens_measured = 0), 0),
    COALESCE(SUM(CASE WHEN tokens_measured = 1
        THEN MAX(total_tokens - cache_read_tokens, 0) ELSE 0 END), 0),
    COALESCE(SUM(unaccounted_turns > 0), 0)";

fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    Ok(r.get::<_, i64>(i)?.max(0) as u64)
}

fn spend_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<IssueSpend> {
    Ok(IssueSpend {
        sessions: count(r, first)?,
        unmeasured: count(r, first + 1)?,
        uncached: count(r, first + 2)?,
        lower_bound: count(r, first + 3)?,
    })
}

/// One issue's completed-session figures.
pub fn issue_spend(conn: &Connection, issue_id: &str) -> Result<IssueSpend, StoreError> {
    conn.query_row(
        &format!(
            "SELECT {SPEND_COLUMNS} FROM run_history
             WHERE issue_id = ?1 AND status <> 'ci_failed'"
        ),
        [issue_id],
        |r| spend_at(r, 0),
    )
    .ctx("read issue spend")
}

/// The figures of several issues in one query; an issue without runs reads all zeros. The ids
/// travel as one JSON array so the statement text never changes and stays in the
/// connection's statement cache.
pub fn issue_spend_many(
    conn: &Connection,
    issue_ids: &[&str],
) -> Result<BTreeMap<String, IssueSpend>, StoreError> {
    let mut out: BTreeMap<String, IssueSpend> = issue_ids
        .iter()
        .map(|id| (id.to_string(), IssueSpend::default()))
        .collect();
    if issue_ids.is_empty() {
        return Ok(out);
    }
    let ids = serde_json::to_string(issue_ids).map_err(|source| StoreError::Json {
        context: "encode issue ids",
        source,
    })?;
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT issue_id, {SPEND_COLUMNS} FROM run_history
             WHERE status <> 'ci_failed' AND issue_id IN (SELECT value FROM json_each(?1))
             GROUP BY issue_id"
        ))
        .ctx("prepare issue spend")?;
    let rows = stmt
        .query_map([ids], |r| Ok((r.get::<_, String>(0)?, spend_at(r, 1)?)))
        .ctx("read issue spend")?;
    for row in rows {
        let (id, spend) = row.ctx("read issue spend row")?;
        out.insert(id, spend);
    }
    Ok(out)
}

/// How an issue ended, as stored in `issue_outcomes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRow {
    pub kind: OutcomeKind,
    pub observed_at_ms: i64,
    pub state: String,
    pub merge_path: String,
    pub pr_number: Option<i64>,
    pub pr_repository: String,
}

pub fn issue_outcome(conn: &Connection, issue_id: &str) -> Result<Option<OutcomeRow>, StoreError> {
    conn.query_row(
        "SELECT kind, observed_at_ms, state, merge_path, pr_number, pr_repository
         FROM issue_outcomes WHERE issue_id = ?1",
        [issue_id],
        |r| {
            Ok(OutcomeRow {
                kind: r.get(0)?,
                observed_at_ms: r.get(1)?,
                state: r.get(2)?,
                merge_path: r.get(3)?,
                pr_number: r.get(4)?,
                pr_repository: r.get(5)?,
            })
        },
    )
    .optional()
    .ctx("read issue outcome")
}

/// An issue's spend over all of its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueTotalsRow {
    pub run_count: i64,
    /// Unmeasured runs, recorded CI results excluded.
    pub unmeasured_runs: i64,
    /// input, output, total, cache read, cache write.
    pub tokens: [i64; 5],
    pub uncached_tokens: i64,
    /// Runs whose usage is not complete, recorded CI results excluded.
    pub incomplete_runs: i64,
    pub estimated_cost_usd: Option<f64>,
    /// The distinct causes of unmeasured runs (`""` where none was recorded).
    pub unmeasured_causes: Vec<String>,
    /// The runs' vendor amounts summed per unit and model, ordered by unit, then model.
    pub vendor_amounts: Vec<VendorAmountSum>,
}

/// One unit and model's amount over an issue's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct VendorAmountSum {
    pub unit: String,
    pub model: String,
    pub amount: f64,
    /// Some run's amount was a lower bound.
    pub lower_bound: bool,
}

pub fn issue_totals(conn: &Connection, issue_id: &str) -> Result<IssueTotalsRow, StoreError> {
    let mut totals = conn
        .query_row(
            "SELECT COUNT(*),
                    COALESCE(SUM(tokens_measured = 0 AND status <> 'ci_failed'), 0),
                    COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                    COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
                    COALESCE(SUM(cache_write_tokens), 0),
                    COALESCE(SUM(MAX(total_tokens - cache_read_tokens, 0)), 0),
                    COALESCE(SUM(usage_completeness <> 'complete' AND status <> 'ci_failed'), 0),
                    SUM(estimated_cost_usd)
             FROM run_history WHERE issue_id = ?1",
            [issue_id],
            |r| {
                Ok(IssueTotalsRow {
                    run_count: r.get(0)?,
                    unmeasured_runs: r.get(1)?,
                    tokens: [r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?],
                    uncached_tokens: r.get(7)?,
                    incomplete_runs: r.get(8)?,
                    estimated_cost_usd: r.get(9)?,
                    unmeasured_causes: Vec::new(),
                    vendor_amounts: Vec::new(),
                })
            },
        )
        .ctx("read issue totals")?;
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT COALESCE(unmeasured_cause, '') FROM run_history
             WHERE issue_id = ?1 AND tokens_measured = 0 AND status <> 'ci_failed'",
        )
        .ctx("prepare unmeasured causes")?;
    let rows = stmt
        .query_map([issue_id], |r| r.get::<_, String>(0))
        .ctx("read unmeasured causes")?;
    // A row that cannot be read is skipped, as a cause that was never recorded.
    totals.unmeasured_causes = rows.filter_map(Result::ok).collect();
    totals.vendor_amounts = vendor_amount_sums(conn, issue_id)?;
    Ok(totals)
}

/// Sums the elements of the runs' stored `vendor_amounts` arrays per unit and model. A stored
/// value that is not a JSON array (a row written before they were kept) adds nothing.
fn vendor_amount_sums(
    conn: &Connection,
    issue_id: &str,
) -> Result<Vec<VendorAmountSum>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT COALESCE(json_extract(a.value, '$.unit'), ''),
                    COALESCE(json_extract(a.value, '$.model'), ''),
                    COALESCE(SUM(json_extract(a.value, '$.amount')), 0.0),
                    COALESCE(MAX(json_extract(a.value, '$.lower_bound')), 0)
             FROM run_history AS r, json_each(r.vendor_amounts) AS a
             WHERE r.issue_id = ?1 AND json_valid(r.vendor_amounts)
               AND json_type(r.vendor_amounts) = 'array'
             GROUP BY 1, 2 ORDER BY 1, 2",
        )
        .ctx("prepare vendor amounts")?;
    let rows = stmt
        .query_map([issue_id], |r| {
            Ok(VendorAmountSum {
                unit: r.get(0)?,
                model: r.get(1)?,
                amount: r.get(2)?,
                lower_bound: r.get::<_, i64>(3)? != 0,
            })
        })
        .ctx("read vendor amounts")?;
    rows.collect::<Result<Vec<_>, _>>()
        .ctx("read vendor amounts")
}

/// The dispatch id of the issue's newest run that has one.
pub fn newest_dispatch_id(conn: &Connection, issue_id: &str) -> Result<Option<String>, StoreError> {
    conn.query_row(
        "SELECT dispatch_id FROM run_history
         WHERE issue_id = ?1 AND dispatch_id IS NOT NULL AND dispatch_id <> ''
         ORDER BY id DESC LIMIT 1",
        [issue_id],
        |r| r.get(0),
    )
    .optional()
    .ctx("read newest dispatch id")
}

/// The issue id of the newest run recorded under `identifier` (finds a renamed issue).
pub fn issue_id_by_identifier(
    conn: &Connection,
    identifier: &str,
) -> Result<Option<String>, StoreError> {
    conn.query_row(
        "SELECT issue_id FROM run_history WHERE identifier = ?1 ORDER BY id DESC LIMIT 1",
        [identifier],
        |r| r.get(0),
    )
    .optional()
    .ctx("read issue id by identifier")
}
