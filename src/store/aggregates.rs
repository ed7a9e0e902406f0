//! Cumulative counters (single row `agent_totals` plus exits by type), incremented in the same
//! transaction as each run row so Prometheus counters resume from the right value after a
//! restart and never count a run twice.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::runs::{self, RunRecord};
use super::scope::{self, InWorkflow, Scope};
use super::sessions::{self, SessionMeta};
use crate::domain::RunStatus;

const KEY: &str = "agent_totals";

/// The persisted counters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AggregateTotals {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub dispatches: i64,
    pub seconds_running: f64,
    /// Ended sessions whose usage was never recorded.
    pub unmeasured_sessions: i64,
    /// The estimated cost recorded with the sessions' runs, in US dollars (summed from run
    /// history, which keeps every run's frozen cost).
    pub estimated_cost_usd: f64,
    /// Worker exits by run status.
    pub exits: BTreeMap<String, i64>,
    pub updated_at_ms: i64,
}

/// Adds `d` to the counter row (creating it on first use); `d.exits` is not read here.
fn add(conn: &Connection, wf: &str, d: &AggregateTotals) -> rusqlite::Result<usize> {
    bind::execute(
        conn,
        "INSERT INTO aggregate_metrics (key, input_tokens, output_tokens, total_tokens,
             cache_read_tokens, cache_write_tokens, dispatches, seconds_running,
             unmeasured_sessions, updated_at_ms, workflow)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT(workflow, key) DO UPDATE SET
             input_tokens = input_tokens + excluded.input_tokens,
             output_tokens = output_tokens + excluded.output_tokens,
             total_tokens = total_tokens + excluded.total_tokens,
             cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
             cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
             dispatches = dispatches + excluded.dispatches,
             seconds_running = seconds_running + excluded.seconds_running,
             unmeasured_sessions = unmeasured_sessions + excluded.unmeasured_sessions,
             updated_at_ms = excluded.updated_at_ms",
        params![
            KEY,
            d.input_tokens,
            d.output_tokens,
            d.total_tokens,
            d.cache_read_tokens,
            d.cache_write_tokens,
            d.dispatches,
            d.seconds_running,
            d.unmeasured_sessions,
            d.updated_at_ms,
            wf
        ],
    )
}

/// Adds one finished run. Recorded CI results are not sessions and add nothing; an unmeasured
/// run adds no tokens (its spend is unknown) but counts as an unmeasured session.
pub(crate) fn add_run(
    conn: &Connection,
    wf: &str,
    r: &RunRecord,
    now_ms: i64,
) -> Result<(), StoreError> {
    if !r.status.is_session() {
        return Ok(());
    }
    let m = i64::from(r.tokens_measured);
    let delta = AggregateTotals {
        input_tokens: r.input_tokens * m,
        output_tokens: r.output_tokens * m,
        total_tokens: r.total_tokens * m,
        cache_read_tokens: r.cache_read_tokens * m,
        cache_write_tokens: r.cache_write_tokens * m,
        dispatches: 1,
        seconds_running: ((r.completed_at_ms - r.started_at_ms).max(0) as f64) / 1000.0,
        unmeasured_sessions: 1 - m,
        estimated_cost_usd: 0.0,
        exits: BTreeMap::new(),
        updated_at_ms: now_ms,
    };
    add(conn, wf, &delta).ctx("add run to aggregate metrics")?;
    bind::execute(
        conn,
        "INSERT INTO aggregate_exits (workflow, exit_type, count) VALUES (?1, ?2, 1)
         ON CONFLICT(workflow, exit_type) DO UPDATE SET count = count + 1",
        rusqlite::params![wf, r.status],
    )
    .ctx("count worker exit")?;
    Ok(())
}

/// The error text of a run a restart found interrupted.
pub const INTERRUPTED_ERROR: &str = "interrupted: sortie restarted";

/// Records the sessions that were still running when an earlier process died.
///
/// **Every launched session counts** (issue 11): the dispatch writes the issue's session row
/// with its dispatch id synchronously before the agent is spawned, keeps its token figures
/// current while it runs, and a clean exit records the run and clears the dispatch id. A row
/// that still names a dispatch at start-up therefore belongs to a session killed with its
/// process. Each such row becomes a `run_history` row (status `cancelled`, error
/// [`INTERRUPTED_ERROR`], the tokens it had counted), added to the counters like any finished
/// run, all in one transaction: so it counts toward `max_sessions` and `max_tokens`, appears in
/// `/api/v1/runs`, and served totals never fall below what the killed process had counted. The
/// row is marked `lost` with `recovery_pending` set, so the warm start stops its processes and
/// it is never recorded twice. Returns how many sessions were recorded.
pub(crate) fn absorb_lost_sessions(
    conn: &Connection,
    wf: &str,
    now_ms: i64,
    book: &crate::pricing::RateBook,
) -> Result<i64, StoreError> {
    let tx = conn
        .unchecked_transaction()
        .ctx("begin absorbing lost sessions")?;
    let lost: Vec<SessionMeta> = sessions::load_all(&tx, &Scope::One(wf.into()))?
        .into_iter()
        .filter(|s| s.dispatch_id.is_some())
        .collect();
    if lost.is_empty() {
        return Ok(0);
    }
    for s in &lost {
        let run = interrupted_run(s, now_ms, book);
        runs::insert(&tx, wf, &run)?;
        add_run(&tx, wf, &run, now_ms)?;
    }
    bind::execute(
        &tx,
        "UPDATE session_metadata SET dispatch_id = NULL, exit_type = 'lost', recovery_pending = 1
         WHERE dispatch_id IS NOT NULL AND workflow = ?1",
        params![wf],
    )
    .ctx("mark lost sessions")?;
    tx.commit().ctx("commit absorbing lost sessions")?;
    Ok(lost.len() as i64)
}

/// The run row of a session killed with its process, priced under `book` like any run that
/// ends: its figures are a lower bound (the process died mid-turn) and, the session row keeping
/// no split by model, they form one part under the model it reported.
fn interrupted_run(s: &SessionMeta, now_ms: i64, book: &crate::pricing::RateBook) -> RunRecord {
    // Unmeasured figures are stored as 0, so any figure or request means measured.
    let measured =
        s.api_request_count > 0 || s.input_tokens > 0 || s.output_tokens > 0 || s.total_tokens > 0;
    let started = s.started_at_ms.unwrap_or(s.updated_at_ms);
    let price = lost_session_price(s, measured, book);
    RunRecord {
        issue_id: s.issue_id.clone(),
        identifier: s.identifier.clone(),
        attempt: s.attempt + 1,
        error: Some(INTERRUPTED_ERROR.to_string()),
        started_at_ms: started,
        completed_at_ms: now_ms.max(started),
        dispatched_at_ms: Some(started),
        workflow_file: s.workflow_file.clone(),
        agent_kind: s.agent_kind.clone(),
        reported_model: s.model_name.clone(),
        workspace: s.workspace.clone(),
        input_tokens: s.input_tokens,
        output_tokens: s.output_tokens,
        total_tokens: s.total_tokens,
        cache_read_tokens: s.cache_read_tokens,
        cache_write_tokens: s.cache_write_tokens,
        tokens_measured: measured,
        dispatch_id: s.dispatch_id.clone(),
        session_id: (!s.session_id.is_empty()).then(|| s.session_id.clone()),
        usage_completeness: if measured { "partial" } else { "unmeasured" }.into(),
        usage_provenance: serde_json::to_value(
            crate::registry::caps_for_kind(&s.agent_kind)
                .map(|c| c.provenance(measured))
                .unwrap_or_default(),
        )
        .ok(),
        vendor_amounts: Some(serde_json::json!([])),
        unmeasured_cause: (!measured)
            .then(|| RunStatus::Cancelled.unmeasured_cause().as_str().into()),
        ..RunRecord::new(RunStatus::Cancelled).with_price(&price)
    }
}

fn lost_session_price(
    s: &SessionMeta,
    measured: bool,
    book: &crate::pricing::RateBook,
) -> crate::pricing::RunPrice {
    use crate::pricing::UsageCompleteness;
    let tokens = crate::agent::TokenUsage {
        input_tokens: s.input_tokens.max(0) as u64,
        output_tokens: s.output_tokens.max(0) as u64,
        total_tokens: s.total_tokens.max(0) as u64,
        cache_read_tokens: s.cache_read_tokens.max(0) as u64,
        cache_write_tokens: s.cache_write_tokens.max(0) as u64,
    };
    let completeness = if measured {
        UsageCompleteness::LowerBound
    } else {
        UsageCompleteness::Unmeasured
    };
    let parts = [(s.model_name.clone(), tokens)];
    book.price_run(
        &s.agent_kind,
        completeness,
        &tokens,
        &parts,
        &Default::default(),
    )
}

/// The counters of the scope (summed across workflows for [`Scope::All`]); zeros when
/// nothing was ever recorded.
pub(crate) fn load(conn: &Connection, sc: &Scope) -> Result<AggregateTotals, StoreError> {
    let mut t = conn
        .query_row(
            &format!(
                "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                     COALESCE(SUM(total_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
                     COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(dispatches), 0),
                     COALESCE(SUM(seconds_running), 0.0),
                     COALESCE(SUM(unmeasured_sessions), 0), COALESCE(MAX(updated_at_ms), 0)
                 FROM aggregate_metrics WHERE key = ?1 AND {}",
                scope::filter("workflow", 2)
            ),
            rusqlite::params![KEY, sc.bound()],
            |r| {
                Ok(AggregateTotals {
                    input_tokens: r.get(0)?,
                    output_tokens: r.get(1)?,
                    total_tokens: r.get(2)?,
                    cache_read_tokens: r.get(3)?,
                    cache_write_tokens: r.get(4)?,
                    dispatches: r.get(5)?,
                    seconds_running: r.get(6)?,
                    unmeasured_sessions: r.get(7)?,
                    estimated_cost_usd: 0.0,
                    exits: BTreeMap::new(),
                    updated_at_ms: r.get(8)?,
                })
            },
        )
        .ctx("load aggregate metrics")?;
    t.estimated_cost_usd = conn
        .query_row(
            &format!(
                "SELECT COALESCE(SUM(estimated_cost_usd), 0.0) FROM run_history
                 WHERE status <> ?1 AND {}",
                scope::filter("workflow", 2)
            ),
            rusqlite::params![RunStatus::CiFailed, sc.bound()],
            |r| r.get(0),
        )
        .ctx("sum recorded run costs")?;
    let mut stmt = conn
        .prepare(&format!(
            "SELECT exit_type, SUM(count) FROM aggregate_exits WHERE {} GROUP BY exit_type",
            scope::filter("workflow", 1)
        ))
        .ctx("prepare load worker exits")?;
    let rows = stmt
        .query_map([sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .ctx("load worker exits")?;
    for row in rows {
        let (k, v) = row.ctx("read worker exit count")?;
        t.exits.insert(k, v);
    }
    Ok(t)
}

/// The counters of each workflow of the scope that has any, by workflow name.
pub(crate) fn load_by_workflow(
    conn: &Connection,
    sc: &Scope,
) -> Result<Vec<InWorkflow<AggregateTotals>>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT workflow FROM aggregate_metrics WHERE {}
             UNION SELECT workflow FROM run_history WHERE {}
             ORDER BY 1",
            scope::filter("workflow", 1),
            scope::filter("workflow", 1)
        ))
        .ctx("prepare list workflows with counters")?;
    let names = stmt
        .query_map([sc.bound()], |r| r.get::<_, String>(0))
        .ctx("list workflows with counters")?
        .collect::<rusqlite::Result<Vec<_>>>()
        .ctx("read workflow with counters")?;
    names
        .into_iter()
        .map(|workflow| {
            let row = load(conn, &Scope::one(&workflow))?;
            Ok(InWorkflow { workflow, row })
        })
        .collect()
}
