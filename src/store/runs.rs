//! Run history: one append-only row per finished session (and per recorded CI result). It is the
//! durable source of per-issue session budgets and spend, and what the history API pages over.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, named_params};

use super::bind;
use super::error::{SqlContext, StoreError};
use super::scope::{self, Scope};
use super::{json, time};

use crate::domain::RunStatus;

/// One finished run. Empty strings mean "unset" (the API omits them); `Option`s mean
/// "not recorded" where the API distinguishes that from empty. There is no `Default`: a run
/// always has a status, so [`RunRecord::new`] takes one.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Row id (API `run_id`); ignored on insert, set on read.
    pub run_id: i64,
    /// The workflow the run belongs to; set on read. A write stores its handle's workflow,
    /// whatever this holds.
    pub workflow: String,
    pub issue_id: String,
    pub identifier: String,
    pub display_identifier: String,
    pub issue_title: String,
    pub issue_url: String,
    pub attempt: i64,
    /// A `ci_failed` row is a recorded CI result, not an agent session.
    pub status: RunStatus,
    pub error: Option<String>,
    pub declared_outcome: Option<String>,
    pub agent_text: Option<String>,
    pub started_at_ms: i64,
    pub completed_at_ms: i64,
    /// When the pass this run belongs to was first dispatched.
    pub dispatched_at_ms: Option<i64>,
    pub workflow_file: String,
    pub agent_kind: String,
    pub rule_name: String,
    pub template: String,
    pub configured_model: String,
    pub configured_effort: String,
    pub reported_model: String,
    pub workspace: String,
    pub turns_completed: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    /// False when the agent reported no usage: the counts are unknown, not zero.
    pub tokens_measured: bool,
    /// Turns that reached the model without a figure covering them.
    pub unaccounted_turns: i64,
    pub dispatch_id: Option<String>,
    pub session_id: Option<String>,
    pub trigger: Option<String>,
    pub reaction_kind: Option<String>,
    pub reaction_config_key: Option<String>,
    pub ssh_host: Option<String>,
    pub chain_id: String,
    pub stage_previous: String,
    pub stage_previous_outcome: String,
    pub stage_target: String,
    pub stage_result: String,
    pub hop_first: bool,
    pub agent_blocked: bool,
    /// Self-review audit trail (JSON).
    pub review_metadata: Option<serde_json::Value>,
    pub usage_completeness: String,
    pub unmeasured_cause: Option<String>,
    pub usage_provenance: Option<serde_json::Value>,
    pub vendor_amounts: Option<serde_json::Value>,
    pub model_usage: Option<serde_json::Value>,
    pub skills: Option<serde_json::Value>,
    pub estimated_cost_usd: Option<f64>,
    pub cost_status: String,
    pub price_source: String,
    pub rates_version: String,
    /// The pull-request record the run left (`.sortie/scm.json`), as read at its exit.
    pub pr_record: Option<serde_json::Value>,
}

impl RunRecord {
    /// The run with its frozen price: cost, status, source, rates version and the priced
    /// `model_usage` elements.
    pub fn with_price(mut self, price: &crate::pricing::RunPrice) -> RunRecord {
        self.estimated_cost_usd = price.cost_usd;
        self.cost_status = price.status.as_str().into();
        self.price_source = price
            .price_source
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        self.rates_version = price.rates_version.clone();
        self.model_usage = Some(serde_json::Value::Array(
            price
                .parts
                .iter()
                .filter_map(crate::pricing::PartPrice::model_usage_element)
                .collect(),
        ));
        self
    }

    /// A run with `status` and every other field unset (empty, zero, `None`, `false`).
    pub fn new(status: RunStatus) -> RunRecord {
        RunRecord {
            run_id: 0,
            workflow: String::new(),
            issue_id: String::new(),
            identifier: String::new(),
            display_identifier: String::new(),
            issue_title: String::new(),
            issue_url: String::new(),
            attempt: 0,
            status,
            error: None,
            declared_outcome: None,
            agent_text: None,
            started_at_ms: 0,
            completed_at_ms: 0,
            dispatched_at_ms: None,
            workflow_file: String::new(),
            agent_kind: String::new(),
            rule_name: String::new(),
            template: String::new(),
            configured_model: String::new(),
            configured_effort: String::new(),
            reported_model: String::new(),
            workspace: String::new(),
            turns_completed: 0,
            input_tokens: 0,
            output_tokens: 0,
            total_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            tokens_measured: false,
            unaccounted_turns: 0,
            dispatch_id: None,
            session_id: None,
            trigger: None,
            reaction_kind: None,
            reaction_config_key: None,
            ssh_host: None,
            chain_id: String::new(),
            stage_previous: String::new(),
            stage_previous_outcome: String::new(),
            stage_target: String::new(),
            stage_result: String::new(),
            hop_first: false,
            agent_blocked: false,
            review_metadata: None,
            usage_completeness: String::new(),
            unmeasured_cause: None,
            usage_provenance: None,
            vendor_amounts: None,
            model_usage: None,
            skills: None,
            estimated_cost_usd: None,
            cost_status: String::new(),
            price_source: String::new(),
            rates_version: String::new(),
            pr_record: None,
        }
    }

    /// Tokens without cache reads, floored at zero (cache writes stay in).
    pub fn uncached_tokens(&self) -> i64 {
        (self.total_tokens - self.cache_read_tokens).max(0)
    }
}

/// Inserts the row and returns its id. Runs inside the caller's transaction.
pub(crate) fn insert(conn: &Connection, wf: &str, r: &RunRecord) -> Result<i64, StoreError> {
    let review = json::encode_opt("encode review_metadata", &r.review_metadata)?;
    let provenance = json::encode_opt("encode usage_provenance", &r.usage_provenance)?;
    let vendor = json::encode_opt("encode vendor_amounts", &r.vendor_amounts)?;
    let model_usage = json::encode_opt("encode model_usage", &r.model_usage)?;
    let skills = json::encode_opt("encode skills", &r.skills)?;
    let pr_record = json::encode_opt("encode pr_record", &r.pr_record)?;
    bind::execute(
        conn,
        "INSERT INTO run_history (issue_id, identifier, display_identifier, issue_title,
             issue_url, attempt, status, error, declared_outcome, agent_text, started_at,
             completed_at, dispatched_at, workflow_file, agent_adapter, rule_name, template,
             configured_model, configured_effort, reported_model, workspace, turns_completed,
             input_tokens, output_tokens, total_tokens, cache_read_tokens, cache_write_tokens,
             tokens_measured, unaccounted_turns, dispatch_id, session_id, retry_trigger,
             reaction_kind, reaction_config_key, ssh_host, chain_id, stage_previous,
             stage_previous_outcome, stage_target, stage_result, hop_first, agent_blocked,
             review_metadata, usage_completeness, unmeasured_cause, usage_provenance,
             vendor_amounts, model_usage, skills, estimated_cost_usd, cost_status,
             price_source, rates_version, pr_record, workflow)
         VALUES (:issue_id, :identifier, :display_identifier, :issue_title,
             :issue_url, :attempt, :status, :error, :declared_outcome, :agent_text, :started_at,
             :completed_at, :dispatched_at, :workflow_file, :agent_adapter, :rule_name, :template,
             :configured_model, :configured_effort, :reported_model, :workspace, :turns_completed,
             :input_tokens, :output_tokens, :total_tokens, :cache_read_tokens, :cache_write_tokens,
             :tokens_measured, :unaccounted_turns, :dispatch_id, :session_id, :retry_trigger,
             :reaction_kind, :reaction_config_key, :ssh_host, :chain_id, :stage_previous,
             :stage_previous_outcome, :stage_target, :stage_result, :hop_first, :agent_blocked,
             :review_metadata, :usage_completeness, :unmeasured_cause, :usage_provenance,
             :vendor_amounts, :model_usage, :skills, :estimated_cost_usd, :cost_status,
             :price_source, :rates_version, :pr_record, :workflow)",
        named_params! {
            ":issue_id": r.issue_id, ":identifier": r.identifier,
            ":display_identifier": r.display_identifier, ":issue_title": r.issue_title,
            ":issue_url": r.issue_url, ":attempt": r.attempt, ":status": r.status,
            ":error": r.error, ":declared_outcome": r.declared_outcome,
            ":agent_text": r.agent_text, ":started_at": time::to_text(r.started_at_ms),
            ":completed_at": time::to_text(r.completed_at_ms),
            ":dispatched_at": r.dispatched_at_ms.map(time::to_text),
            ":workflow_file": r.workflow_file, ":agent_adapter": r.agent_kind,
            ":rule_name": r.rule_name, ":template": r.template,
            ":configured_model": r.configured_model, ":configured_effort": r.configured_effort,
            ":reported_model": r.reported_model, ":workspace": r.workspace,
            ":turns_completed": r.turns_completed, ":input_tokens": r.input_tokens,
            ":output_tokens": r.output_tokens, ":total_tokens": r.total_tokens,
            ":cache_read_tokens": r.cache_read_tokens,
            ":cache_write_tokens": r.cache_write_tokens,
            ":tokens_measured": r.tokens_measured, ":unaccounted_turns": r.unaccounted_turns,
            ":dispatch_id": r.dispatch_id, ":session_id": r.session_id,
            ":retry_trigger": r.trigger, ":reaction_kind": r.reaction_kind,
            ":reaction_config_key": r.reaction_config_key, ":ssh_host": r.ssh_host,
            ":chain_id": r.chain_id, ":stage_previous": r.stage_previous,
            ":stage_previous_outcome": r.stage_previous_outcome,
            ":stage_target": r.stage_target, ":stage_result": r.stage_result,
            ":hop_first": r.hop_first, ":agent_blocked": r.agent_blocked,
            ":review_metadata": review, ":usage_completeness": r.usage_completeness,
            ":unmeasured_cause": r.unmeasured_cause, ":usage_provenance": provenance,
            ":vendor_amounts": vendor, ":model_usage": model_usage, ":skills": skills,
            ":estimated_cost_usd": r.estimated_cost_usd, ":cost_status": r.cost_status,
            ":price_source": r.price_source, ":rates_version": r.rates_version,
            ":pr_record": pr_record, ":workflow": wf,
        },
    )
    .ctx("insert run history row")?;
    Ok(conn.last_insert_rowid())
}

/// Sessions an issue has spent: its run rows, recorded CI results excluded.
pub(crate) fn count_for_issue(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<i64, StoreError> {
    conn.query_row(
        &format!(
            "SELECT COUNT(*) FROM run_history WHERE issue_id = ?1 AND status <> ?2 AND {}",
            scope::filter("workflow", 3)
        ),
        rusqlite::params![issue_id, RunStatus::CiFailed, sc.bound()],
        |r| r.get(0),
    )
    .ctx("count runs for issue")
}

/// Uncached tokens (total less cache reads, floored at zero per run) an issue's measured runs
/// spent; unmeasured runs add nothing because their spend is unknown.
pub(crate) fn uncached_tokens_for_issue(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<i64, StoreError> {
    conn.query_row(
        &format!(
            "SELECT COALESCE(SUM(MAX(total_tokens - cache_read_tokens, 0)), 0)
             FROM run_history WHERE issue_id = ?1 AND tokens_measured = 1 AND {}",
            scope::filter("workflow", 2)
        ),
        rusqlite::params![issue_id, sc.bound()],
        |r| r.get(0),
    )
    .ctx("sum uncached tokens for issue")
}

/// What one issue has spent, as budgets count it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IssueUsage {
    /// Sessions (run-history rows, recorded CI results excluded).
    pub sessions: i64,
    /// Uncached tokens of measured runs.
    pub uncached_tokens: i64,
    /// Sessions whose agent reported no token usage.
    pub unmeasured_sessions: i64,
    /// Sessions that recorded a turn no figure covered.
    pub lower_bound_sessions: i64,
    /// Sessions a budget ceiling stopped while they ran.
    pub budget_stopped_sessions: i64,
    /// The pass dispatch time of the issue's newest agent run, when recorded.
    pub latest_dispatched_at_ms: Option<i64>,
    /// The costs recorded with the issue's runs.
    pub cost: super::queries::StoredCost,
}

/// The columns of [`IssueUsage`] over the `run_history` rows of one group (`?1` is the
/// recorded-CI-result status, `?{scope_arg}` the scope), then the newest agent run's dispatch
/// time, then the [`COST_COLUMNS`](super::queries::COST_COLUMNS).
fn usage_columns(scope_arg: usize) -> String {
    format!(
        "{USAGE_TOKEN_COLUMNS}
         AND {}
         ORDER BY n.id DESC LIMIT 1), {}",
        scope::filter("n.workflow", scope_arg),
        super::queries::COST_COLUMNS
    )
}

/// The head of [`usage_columns`]: its dispatch-time subquery continues there.
const USAGE_TOKEN_COLUMNS: &str = "SUM(CASE WHEN status <> ?1 THEN 1 ELSE 0 END),
    COALESCE(SUM(CASE WHEN tokens_measured = 1
                      THEN MAX(total_tokens - cache_read_tokens, 0) END), 0),
    COALESCE(SUM(tokens_measured = 0 AND status <> ?1), 0),
    COALESCE(SUM(unaccounted_turns > 0 AND status <> ?1), 0),
    COALESCE(SUM(status = 'budget_stopped'), 0),
    (SELECT n.dispatched_at FROM run_history n
     WHERE n.issue_id = run_history.issue_id AND n.status <> ?1";

fn usage_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<(IssueUsage, Option<String>)> {
    Ok((
        IssueUsage {
            sessions: r.get::<_, Option<i64>>(first)?.unwrap_or(0),
            uncached_tokens: r.get(first + 1)?,
            unmeasured_sessions: r.get(first + 2)?,
            lower_bound_sessions: r.get(first + 3)?,
            budget_stopped_sessions: r.get(first + 4)?,
            latest_dispatched_at_ms: None,
            cost: super::queries::cost_at(r, first + 6)?,
        },
        r.get(first + 5)?,
    ))
}

/// Reads the dispatch time [`usage_at`] leaves as text.
fn dated((mut usage, dispatched): (IssueUsage, Option<String>)) -> Result<IssueUsage, StoreError> {
    usage.latest_dispatched_at_ms = dispatched
        .map(|d| time::from_text("run dispatched_at", &d))
        .transpose()?;
    Ok(usage)
}

/// Budget usage of one issue (all zeros for an issue without runs).
pub(crate) fn usage_for_issue(
    conn: &Connection,
    sc: &Scope,
    issue_id: &str,
) -> Result<IssueUsage, StoreError> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {} FROM run_history WHERE issue_id = ?2 AND {} GROUP BY issue_id",
            usage_columns(3),
            scope::filter("workflow", 3)
        ))
        .ctx("prepare usage of issue")?;
    let row = st
        .query_row(
            rusqlite::params![RunStatus::CiFailed, issue_id, sc.bound()],
            |r| usage_at(r, 0),
        )
        .optional()
        .ctx("query usage of issue")?;
    row.map(dated).transpose().map(Option::unwrap_or_default)
}

/// Which run column [`last_ssh_host`] matches.
#[derive(Debug, Clone, Copy)]
pub enum IssueKey {
    Id,
    Identifier,
}

/// The SSH host of the issue's newest run: `None` when it has none or ran here (`""`).
pub(crate) fn last_ssh_host(
    conn: &Connection,
    sc: &Scope,
    key: IssueKey,
    value: &str,
) -> Result<Option<String>, StoreError> {
    let column = match key {
        IssueKey::Id => "issue_id",
        IssueKey::Identifier => "identifier",
    };
    let sql = format!(
        "SELECT ssh_host FROM run_history WHERE {column} = ?1 AND {} ORDER BY id DESC LIMIT 1",
        scope::filter("workflow", 2)
    );
    let mut st = conn.prepare_cached(&sql).ctx("prepare last ssh host")?;
    let host: Option<Option<String>> = st
        .query_row(rusqlite::params![value, sc.bound()], |r| r.get(0))
        .optional()
        .ctx("query last ssh host")?;
    Ok(host.flatten().filter(|h| !h.is_empty()))
}

/// Budget usage of every issue that has runs, in one query (the dispatch pass reads it once
/// per tick instead of once per candidate).
pub(crate) fn usage_by_issue(
    conn: &Connection,
    sc: &Scope,
) -> Result<std::collections::HashMap<String, IssueUsage>, StoreError> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT issue_id, {} FROM run_history WHERE {} GROUP BY issue_id",
            usage_columns(2),
            scope::filter("workflow", 2)
        ))
        .ctx("prepare usage by issue")?;
    let rows = st
        .query_map(rusqlite::params![RunStatus::CiFailed, sc.bound()], |r| {
            Ok((r.get::<_, String>(0)?, usage_at(r, 1)?))
        })
        .ctx("query usage by issue")?;
    let mut out = std::collections::HashMap::new();
    for row in rows {
        let (id, usage) = row.ctx("read usage by issue")?;
        out.insert(id, dated(usage)?);
    }
    Ok(out)
}

/// Which rule a run must have been routed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleFilter {
    Named(String),
    /// Runs that record no rule name (the API's `<none>`).
    Unnamed,
}

/// Filters of the run-history listing; `None` = not filtered. All match exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// `identifier` equals it (for [`list_issue_groups`]: identifier or display identifier).
    pub issue_identifier: Option<String>,
    pub issue_id: Option<String>,
    pub rule: Option<RuleFilter>,
    pub status: Option<RunStatus>,
    /// `stage_target` equals it.
    pub stage: Option<String>,
    /// Completed at or after (epoch ms).
    pub since_ms: Option<i64>,
    /// Completed before (epoch ms).
    pub until_ms: Option<i64>,
    /// The issue's outcome was observed at or after (epoch ms).
    pub ended_since_ms: Option<i64>,
    /// The issue's outcome was observed before (epoch ms).
    pub ended_until_ms: Option<i64>,
}

/// One page of runs, newest first; `next_cursor` is the last run's id when more follow.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunPage {
    pub runs: Vec<RunRecord>,
    pub next_cursor: Option<i64>,
}

/// One page of issues with their newest matching run id, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IssueGroupPage {
    /// `(issue_id, newest matching run_id)`.
    pub groups: Vec<(String, i64)>,
    pub next_cursor: Option<i64>,
}

/// Accumulates `AND`-ed conditions with numbered parameters.
#[derive(Default)]
struct Conditions {
    sql: Vec<String>,
    args: Vec<Value>,
}

impl Conditions {
    /// Adds a parameter and returns its number.
    fn arg(&mut self, v: Value) -> usize {
        self.args.push(v);
        self.args.len()
    }
    fn eq(&mut self, col: &str, v: &Option<String>) {
        if let Some(v) = v {
            let n = self.arg(Value::Text(v.clone()));
            self.sql.push(format!("{col} = ?{n}"));
        }
    }
    fn joined(&self) -> String {
        if self.sql.is_empty() {
            "1 = 1".into()
        } else {
            self.sql.join(" AND ")
        }
    }
}

fn conditions(sc: &Scope, f: &RunFilter, identifier_or_display: bool) -> Conditions {
    let mut c = Conditions::default();
    let n = c.arg(
        sc.bound()
            .map_or(Value::Null, |w| Value::Text(w.to_string())),
    );
    c.sql.push(scope::filter("workflow", n));
    if let Some(v) = &f.issue_identifier {
        let n = c.arg(Value::Text(v.clone()));
        c.sql.push(if identifier_or_display {
            format!("(identifier = ?{n} OR display_identifier = ?{n})")
        } else {
            format!("identifier = ?{n}")
        });
    }
    c.eq("issue_id", &f.issue_id);
    match &f.rule {
        Some(RuleFilter::Named(r)) => c.eq("rule_name", &Some(r.clone())),
        Some(RuleFilter::Unnamed) => c.sql.push("rule_name = ''".into()),
        None => {}
    }
    if let Some(status) = f.status {
        let n = c.arg(Value::Text(status.as_str().to_string()));
        c.sql.push(format!("status = ?{n}"));
    }
    c.eq("stage_target", &f.stage);
    if let Some(ms) = f.since_ms {
        let n = c.arg(Value::Text(time::to_text(ms)));
        c.sql.push(format!("completed_at >= ?{n}"));
    }
    if let Some(ms) = f.until_ms {
        let n = c.arg(Value::Text(time::to_text(ms)));
        c.sql.push(format!("completed_at < ?{n}"));
    }
    if f.ended_since_ms.is_some() || f.ended_until_ms.is_some() {
        let mut cond = vec![
            "o.issue_id = run_history.issue_id AND o.workflow = run_history.workflow".to_string(),
        ];
        if let Some(ms) = f.ended_since_ms {
            let n = c.arg(Value::Integer(ms));
            cond.push(format!("o.observed_at_ms >= ?{n}"));
        }
        if let Some(ms) = f.ended_until_ms {
            let n = c.arg(Value::Integer(ms));
            cond.push(format!("o.observed_at_ms < ?{n}"));
        }
        c.sql.push(format!(
            "EXISTS (SELECT 1 FROM issue_outcomes o WHERE {})",
            cond.join(" AND ")
        ));
    }
    c
}

/// Runs matching `filter`, recorded before `cursor` (a run id), newest first, at most `limit`.
pub(crate) fn list(
    conn: &Connection,
    sc: &Scope,
    filter: &RunFilter,
    cursor: Option<i64>,
    limit: usize,
) -> Result<RunPage, StoreError> {
    let mut c = conditions(sc, filter, false);
    if let Some(cur) = cursor {
        let n = c.arg(Value::Integer(cur));
        c.sql.push(format!("id < ?{n}"));
    }
    let limit = limit.max(1);
    let n = c.arg(Value::Integer(limit as i64 + 1));
    let sql = format!(
        "SELECT * FROM run_history WHERE {} ORDER BY id DESC LIMIT ?{n}",
        c.joined()
    );
    let args = c.args;
    let mut stmt = conn.prepare(&sql).ctx("prepare list runs")?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(args))
        .ctx("list runs")?;
    let mut runs = Vec::new();
    while let Some(row) = rows.next().ctx("read run row")? {
        runs.push(from_row(row)?);
    }
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(|r| r.run_id)
    } else {
        None
    };
    Ok(RunPage { runs, next_cursor })
}

/// Issues with a run matching `filter`, ordered by their newest matching run, newest first;
/// `cursor` selects issues whose newest matching run is older than it.
pub(crate) fn list_issue_groups(
    conn: &Connection,
    sc: &Scope,
    filter: &RunFilter,
    cursor: Option<i64>,
    limit: usize,
) -> Result<IssueGroupPage, StoreError> {
    let mut c = conditions(sc, filter, true);
    let mut having = String::new();
    if let Some(cur) = cursor {
        let n = c.arg(Value::Integer(cur));
        having = format!("HAVING MAX(id) < ?{n}");
    }
    let limit = limit.max(1);
    let n = c.arg(Value::Integer(limit as i64 + 1));
    let sql = format!(
        "SELECT issue_id, MAX(id) AS newest FROM run_history WHERE {}
         GROUP BY workflow, issue_id {having} ORDER BY newest DESC LIMIT ?{n}",
        c.joined()
    );
    let args = c.args;
    let mut stmt = conn.prepare(&sql).ctx("prepare list run issues")?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .ctx("list run issues")?;
    let mut groups = Vec::new();
    for g in rows {
        groups.push(g.ctx("read run issue group")?);
    }
    let next_cursor = if groups.len() > limit {
        groups.truncate(limit);
        groups.last().map(|g| g.1)
    } else {
        None
    };
    Ok(IssueGroupPage {
        groups,
        next_cursor,
    })
}

/// One run by id.
pub(crate) fn get(
    conn: &Connection,
    sc: &Scope,
    run_id: i64,
) -> Result<Option<RunRecord>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM run_history WHERE id = ?1 AND {}",
            scope::filter("workflow", 2)
        ))
        .ctx("prepare get run")?;
    let mut rows = stmt
        .query(rusqlite::params![run_id, sc.bound()])
        .ctx("get run")?;
    match rows.next().ctx("read run row")? {
        Some(row) => Ok(Some(from_row(row)?)),
        None => Ok(None),
    }
}

fn from_row(r: &Row<'_>) -> Result<RunRecord, StoreError> {
    type Texts = (String, String, Option<String>);
    let get = |r: &Row<'_>| -> rusqlite::Result<(RunRecord, Texts, [Option<String>; 6])> {
        let rec = RunRecord {
            run_id: r.get("id")?,
            workflow: r.get("workflow")?,
            issue_id: r.get("issue_id")?,
            identifier: r.get("identifier")?,
            display_identifier: r.get("display_identifier")?,
            issue_title: r.get("issue_title")?,
            issue_url: r.get("issue_url")?,
            attempt: r.get("attempt")?,
            status: r.get("status")?,
            error: r.get("error")?,
            declared_outcome: r.get("declared_outcome")?,
            agent_text: r.get("agent_text")?,
            started_at_ms: 0,
            completed_at_ms: 0,
            dispatched_at_ms: None,
            workflow_file: r.get("workflow_file")?,
            agent_kind: r.get("agent_adapter")?,
            rule_name: r.get("rule_name")?,
            template: r.get("template")?,
            configured_model: r.get("configured_model")?,
            configured_effort: r.get("configured_effort")?,
            reported_model: r.get("reported_model")?,
            workspace: r.get("workspace")?,
            turns_completed: r.get("turns_completed")?,
            input_tokens: r.get("input_tokens")?,
            output_tokens: r.get("output_tokens")?,
            total_tokens: r.get("total_tokens")?,
            cache_read_tokens: r.get("cache_read_tokens")?,
            cache_write_tokens: r.get("cache_write_tokens")?,
            tokens_measured: r.get("tokens_measured")?,
            unaccounted_turns: r.get("unaccounted_turns")?,
            dispatch_id: r.get("dispatch_id")?,
            session_id: r.get("session_id")?,
            trigger: r.get("retry_trigger")?,
            reaction_kind: r.get("reaction_kind")?,
            reaction_config_key: r.get("reaction_config_key")?,
            ssh_host: r.get("ssh_host")?,
            chain_id: r.get("chain_id")?,
            stage_previous: r.get("stage_previous")?,
            stage_previous_outcome: r.get("stage_previous_outcome")?,
            stage_target: r.get("stage_target")?,
            stage_result: r.get("stage_result")?,
            hop_first: r.get("hop_first")?,
            agent_blocked: r.get("agent_blocked")?,
            review_metadata: None,
            usage_completeness: r.get("usage_completeness")?,
            unmeasured_cause: r.get("unmeasured_cause")?,
            usage_provenance: None,
            vendor_amounts: None,
            model_usage: None,
            skills: None,
            estimated_cost_usd: r.get("estimated_cost_usd")?,
            cost_status: r.get("cost_status")?,
            price_source: r.get("price_source")?,
            rates_version: r.get("rates_version")?,
            pr_record: None,
        };
        let times = (
            r.get("started_at")?,
            r.get("completed_at")?,
            r.get("dispatched_at")?,
        );
        let json = [
            r.get("review_metadata")?,
            r.get("usage_provenance")?,
            r.get("vendor_amounts")?,
            r.get("model_usage")?,
            r.get("skills")?,
            r.get("pr_record")?,
        ];
        Ok((rec, times, json))
    };
    let (mut rec, (started, completed, dispatched), [review, prov, vendor, usage, skills, pr]) =
        get(r).ctx("read run row")?;
    rec.started_at_ms = time::from_text("run started_at", &started)?;
    rec.completed_at_ms = time::from_text("run completed_at", &completed)?;
    rec.dispatched_at_ms = dispatched
        .map(|d| time::from_text("run dispatched_at", &d))
        .transpose()?;
    rec.review_metadata = json::decode_opt("decode review_metadata", review)?;
    rec.usage_provenance = json::decode_opt("decode usage_provenance", prov)?;
    rec.vendor_amounts = json::decode_opt("decode vendor_amounts", vendor)?;
    rec.model_usage = json::decode_opt("decode model_usage", usage)?;
    rec.skills = json::decode_opt("decode skills", skills)?;
    rec.pr_record = json::decode_opt("decode pr_record", pr)?;
    Ok(rec)
}
