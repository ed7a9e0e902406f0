//! Named read queries the HTTP API serves from run history, each returning a typed row.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension};

use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};

use crate::domain::OutcomeKind;

/// One issue's completed-session figures (recorded CI results excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IssueSpend {
    /// Completed sessions.
    pub sessions: u64,
    pub unmeasured: u64,
    /// Summed tokens without cache reads of the measured sessions.
    pub uncached: u64,
    /// Sessions that recorded a turn no figure covered.
    pub lower_bound: u64,
    /// The costs recorded with the sessions.
    pub cost: StoredCost,
}

/// The costs recorded with a group of runs, each frozen when its run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StoredCost {
    /// Σ of the priced runs' costs.
    pub usd: f64,
    /// Runs recorded `estimated` or `partial`.
    pub priced_runs: u64,
    /// Priced runs that spent tokens.
    pub priced_spent_runs: u64,
    /// Runs recorded `partial`.
    pub partial_runs: u64,
    /// Measured runs that spent tokens and were recorded `unpriced`.
    pub unpriced_spent_runs: u64,
}

impl StoredCost {
    /// Adds these runs to an issue's cost parts.
    pub fn add_to(&self, parts: &mut crate::pricing::IssueCostParts) {
        parts.usd += self.usd;
        parts.any_priced |= self.priced_runs > 0;
        parts.priced_with_spend |= self.priced_spent_runs > 0;
        parts.unpriced_with_spend |= self.unpriced_spent_runs > 0;
        parts.left_out |= self.partial_runs > 0 || self.unpriced_spent_runs > 0;
    }
}

/// The [`StoredCost`] columns over a group of `run_history` rows.
pub(crate) const COST_COLUMNS: &str =
    "COALESCE(SUM(CASE WHEN cost_status IN ('estimated', 'partial')
                      THEN estimated_cost_usd END), 0.0),
    COALESCE(SUM(cost_status IN ('estimated', 'partial')), 0),
    COALESCE(SUM(cost_status IN ('estimated', 'partial') AND total_tokens > 0), 0),
    COALESCE(SUM(cost_status = 'partial'), 0),
    COALESCE(SUM(cost_status = 'unpriced' AND tokens_measured = 1 AND total_tokens > 0), 0)";

/// Reads the [`COST_COLUMNS`] starting at column `first`.
pub(crate) fn cost_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<StoredCost> {
    Ok(StoredCost {
        usd: r.get(first)?,
        priced_runs: count(r, first + 1)?,
        priced_spent_runs: count(r, first + 2)?,
        partial_runs: count(r, first + 3)?,
        unpriced_spent_runs: count(r, first + 4)?,
    })
}

/// The spend columns shared by [`issue_spend`] and [`issue_spend_many`].
fn spend_columns() -> String {
    format!(
        "COUNT(*),
    COALESCE(SUM(tokens_measured = 0), 0),
    COALESCE(SUM(CASE WHEN tokens_measured = 1
        THEN MAX(total_tokens - cache_read_tokens, 0) ELSE 0 END), 0),
    COALESCE(SUM(unaccounted_turns > 0), 0), {COST_COLUMNS}"
    )
}

fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    Ok(r.get::<_, i64>(i)?.max(0) as u64)
}

fn spend_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<IssueSpend> {
    Ok(IssueSpend {
        sessions: count(r, first)?,
        unmeasured: count(r, first + 1)?,
        uncached: count(r, first + 2)?,
        lower_bound: count(r, first + 3)?,
        cost: cost_at(r, first + 4)?,
    })
}

/// One issue's completed-session figures.
pub fn issue_spend(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<IssueSpend, StoreError> {
    conn.query_row(
        &format!(
            "SELECT {} FROM run_history
             WHERE issue_id = ?1 AND status <> 'ci_failed' AND {}",
            spend_columns(),
            scope::filter("workflow", 2)
        ),
        rusqlite::params![issue_id, sc.bound()],
        |r| spend_at(r, 0),
    )
    .ctx("read issue spend")
}

/// The figures of several issues in one query; an issue without runs reads all zeros. The ids
/// travel as one JSON array so the statement text never changes and stays in the
/// connection's statement cache.
pub fn issue_spend_many(
    conn: &Connection,
    sc: &Scope,
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
            "SELECT issue_id, {} FROM run_history
             WHERE status <> 'ci_failed' AND issue_id IN (SELECT value FROM json_each(?1))
               AND {}
             GROUP BY issue_id",
            spend_columns(),
            scope::filter("workflow", 2)
        ))
        .ctx("prepare issue spend")?;
    let rows = stmt
        .query_map(rusqlite::params![ids, sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, spend_at(r, 1)?))
        })
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

pub fn issue_outcome(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<Option<OutcomeRow>, StoreError> {
    conn.query_row(
        &format!(
            "SELECT kind, observed_at_ms, state, merge_path, pr_number, pr_repository
             FROM issue_outcomes WHERE issue_id = ?1 AND {} ORDER BY workflow LIMIT 1",
            scope::filter("workflow", 2)
        ),
        rusqlite::params![issue_id, sc.bound()],
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
    /// The runs' vendor amounts summed per unit and model, ordered by unit, then model;
    /// US-dollar amounts are not listed.
    pub vendor_amounts: Vec<VendorAmountSum>,
    /// The costs recorded with the runs.
    pub cost: StoredCost,
    /// The units the `amounts_only` runs reported, ascending.
    pub unmeasured_units: Vec<String>,
    /// Σ of the model parts priced from the agent's US-dollar amounts; `None` without any.
    pub agent_priced_usd: Option<f64>,
    /// The models of those parts, ascending.
    pub agent_priced_models: Vec<String>,
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

pub fn issue_totals(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<IssueTotalsRow, StoreError> {
    let in_scope = scope::filter("workflow", 2);
    let mut totals = conn
        .query_row(
            &format!(
                "SELECT COUNT(*),
                    COALESCE(SUM(tokens_measured = 0 AND status <> 'ci_failed'), 0),
                    COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                    COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
                    COALESCE(SUM(cache_write_tokens), 0),
                    COALESCE(SUM(MAX(total_tokens - cache_read_tokens, 0)), 0),
                    COALESCE(SUM(usage_completeness <> 'complete' AND status <> 'ci_failed'), 0),
                    SUM(estimated_cost_usd), {COST_COLUMNS}
             FROM run_history WHERE issue_id = ?1 AND {in_scope}"
            ),
            rusqlite::params![issue_id, sc.bound()],
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
                    cost: cost_at(r, 10)?,
                    unmeasured_units: Vec::new(),
                    agent_priced_usd: None,
                    agent_priced_models: Vec::new(),
                })
            },
        )
        .ctx("read issue totals")?;
    let mut stmt = conn
        .prepare(&format!(
            "SELECT DISTINCT COALESCE(unmeasured_cause, '') FROM run_history
             WHERE issue_id = ?1 AND tokens_measured = 0 AND status <> 'ci_failed'
               AND {in_scope}"
        ))
        .ctx("prepare unmeasured causes")?;
    let rows = stmt
        .query_map(rusqlite::params![issue_id, sc.bound()], |r| {
            r.get::<_, String>(0)
        })
        .ctx("read unmeasured causes")?;
    // A row that cannot be read is skipped, as a cause that was never recorded.
    totals.unmeasured_causes = rows.filter_map(Result::ok).collect();
    totals.vendor_amounts = vendor_amount_sums(conn, sc, issue_id)?;
    totals.unmeasured_units = amounts_only_units(conn, sc, issue_id)?;
    (totals.agent_priced_usd, totals.agent_priced_models) = agent_priced(conn, sc, issue_id)?;
    Ok(totals)
}

/// The distinct units the issue's `amounts_only` runs reported, ascending.
fn amounts_only_units(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT DISTINCT COALESCE(json_extract(a.value, '$.unit'), '')
             FROM run_history AS r, json_each(r.vendor_amounts) AS a
             WHERE r.issue_id = ?1 AND r.unmeasured_cause = 'amounts_only' AND {}
               AND json_valid(r.vendor_amounts) AND json_type(r.vendor_amounts) = 'array'
             ORDER BY 1",
            scope::filter("r.workflow", 2)
        ))
        .ctx("prepare amounts-only units")?;
    let rows = stmt
        .query_map(rusqlite::params![issue_id, sc.bound()], |r| {
            r.get::<_, String>(0)
        })
        .ctx("read amounts-only units")?;
    rows.collect::<Result<Vec<_>, _>>()
        .ctx("read amounts-only units")
}

/// Σ and models of the issue's model parts priced from the agent's US-dollar amounts.
fn agent_priced(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<(Option<f64>, Vec<String>), StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT COALESCE(json_extract(p.value, '$.model'), ''),
                    COALESCE(SUM(json_extract(p.value, '$.estimated_cost_usd')), 0.0)
             FROM run_history AS r, json_each(r.model_usage) AS p
             WHERE r.issue_id = ?1 AND {} AND json_valid(r.model_usage)
               AND json_type(r.model_usage) = 'array'
               AND json_extract(p.value, '$.price_source') = 'agent'
             GROUP BY 1 ORDER BY 1",
            scope::filter("r.workflow", 2)
        ))
        .ctx("prepare agent-priced parts")?;
    let rows = stmt
        .query_map(rusqlite::params![issue_id, sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?))
        })
        .ctx("read agent-priced parts")?;
    let parts = rows
        .collect::<Result<Vec<_>, _>>()
        .ctx("read agent-priced parts")?;
    if parts.is_empty() {
        return Ok((None, Vec::new()));
    }
    let usd = parts.iter().map(|(_, u)| u).sum();
    Ok((Some(usd), parts.into_iter().map(|(m, _)| m).collect()))
}

/// Sums the elements of the runs' stored `vendor_amounts` arrays per unit and model. A stored
/// value that is not a JSON array (a row written before they were kept) adds nothing.
fn vendor_amount_sums(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<Vec<VendorAmountSum>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT COALESCE(json_extract(a.value, '$.unit'), ''),
                    COALESCE(json_extract(a.value, '$.model'), ''),
                    COALESCE(SUM(json_extract(a.value, '$.amount')), 0.0),
                    COALESCE(MAX(json_extract(a.value, '$.lower_bound')), 0)
             FROM run_history AS r, json_each(r.vendor_amounts) AS a
             WHERE r.issue_id = ?1 AND {} AND json_valid(r.vendor_amounts)
               AND json_type(r.vendor_amounts) = 'array'
               AND COALESCE(json_extract(a.value, '$.unit'), '') <> 'USD'
             GROUP BY 1, 2 ORDER BY 1, 2",
            scope::filter("r.workflow", 2)
        ))
        .ctx("prepare vendor amounts")?;
    let rows = stmt
        .query_map(rusqlite::params![issue_id, sc.bound()], |r| {
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
pub fn newest_dispatch_id(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<Option<String>, StoreError> {
    conn.query_row(
        &format!(
            "SELECT dispatch_id FROM run_history
             WHERE issue_id = ?1 AND dispatch_id IS NOT NULL AND dispatch_id <> '' AND {}
             ORDER BY id DESC LIMIT 1",
            scope::filter("workflow", 2)
        ),
        rusqlite::params![issue_id, sc.bound()],
        |r| r.get(0),
    )
    .optional()
    .ctx("read newest dispatch id")
}

/// The issue id of the newest run recorded under `identifier` (finds a renamed issue).
pub fn issue_id_by_identifier(
    conn: &Connection,
    sc: &Scope,
    identifier: &str,
) -> Result<Option<String>, StoreError> {
    conn.query_row(
        &format!(
            "SELECT issue_id FROM run_history WHERE identifier = ?1 AND {}
             ORDER BY id DESC LIMIT 1",
            scope::filter("workflow", 2)
        ),
        rusqlite::params![identifier, sc.bound()],
        |r| r.get(0),
    )
    .optional()
    .ctx("read issue id by identifier")
}

/// The newest `completed_at` (epoch ms) of the runs recorded in each workspace directory,
/// keyed by the directory's name (the last component of the recorded path): what workspace
/// retention reads as a workspace's latest activity. A row whose time does not parse is skipped.
pub fn workspace_last_activity(
    conn: &Connection,
    sc: &Scope,
) -> Result<std::collections::HashMap<String, i64>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT workspace, MAX(completed_at) FROM run_history WHERE {} GROUP BY workspace",
            scope::filter("workflow", 1)
        ))
        .ctx("read workspace activity")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .ctx("read workspace activity")?;
    let mut out = std::collections::HashMap::new();
    for row in rows {
        let (workspace, at) = row.ctx("read workspace activity")?;
        let Some(name) = std::path::Path::new(&workspace)
            .file_name()
            .and_then(|n| n.to_str())
        else {
            continue;
        };
        let Ok(ms) = super::time::from_text("workspace activity", &at) else {
            continue;
        };
        let newest = out.entry(name.to_string()).or_insert(ms);
        *newest = (*newest).max(ms);
    }
    Ok(out)
}
