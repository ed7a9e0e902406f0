//! One run as the report reads it: the columns of a `run_history` row that the figures need,
//! decoded leniently. A JSON column that does not decode reads as not recorded, so one damaged
//! row cannot take the whole report down; recorded CI results are not runs and never read.

use rusqlite::{Connection, Row};
use serde::Deserialize;

use super::super::error::{SqlContext, StoreError};
use super::super::scope::{self, Scope};
use super::super::time;
use super::range::Range;
use crate::domain::RunStatus;

/// The four outcomes the summary counts (every status maps to one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Stopped,
    Cancelled,
}

/// How far the run's token figure reaches (the runs route's `usage_completeness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    Complete,
    LowerBound,
    Unmeasured,
}

/// The recorded cost status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostWord {
    Estimated,
    Partial,
    Unpriced,
    Unmeasured,
}

impl CostWord {
    fn read(word: &str, unmeasured: bool) -> CostWord {
        match word {
            _ if unmeasured => CostWord::Unmeasured,
            "estimated" => CostWord::Estimated,
            "partial" => CostWord::Partial,
            "unmeasured" => CostWord::Unmeasured,
            _ => CostWord::Unpriced,
        }
    }
}

/// A model's part of a run's spend (`model_usage[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPart {
    pub model: String,
    pub tokens: [i64; 5],
    pub cost: Option<f64>,
    pub cost_status: CostWord,
    /// The part was priced from the amount the agent reported.
    pub agent_priced: bool,
}

/// What the self-review record holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Review {
    None,
    Unparsed,
    Recorded {
        verdict: String,
        iterations: Option<f64>,
        cap_reached: bool,
    },
}

/// One skill call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillCall {
    pub skill: String,
    pub tool_error: bool,
}

/// One run in the range.
#[derive(Debug, Clone, PartialEq)]
pub struct StatRun {
    pub issue_id: String,
    pub status: String,
    pub outcome: Outcome,
    pub completed_ms: i64,
    /// `None` when the duration cannot be measured (a bad start time, or ending before it).
    pub duration_ms: Option<i64>,
    pub turns: i64,
    /// `[input, output, total, cache_read, cache_write]`; `None` when unmeasured.
    pub tokens: Option<[i64; 5]>,
    pub completeness: Completeness,
    pub unmeasured_cause: Option<String>,
    pub unmeasured_units: Vec<String>,
    pub cost: Option<f64>,
    pub cost_status: CostWord,
    pub parts: Vec<ModelPart>,
    pub agent_kind: String,
    pub rule_name: String,
    pub template: String,
    /// The reported model, else the configured one (`""` when neither).
    pub fallback_model: String,
    /// `None`: not recorded; `Some("")`: a dispatch from the poll tick.
    pub trigger: Option<String>,
    pub origin_recorded: bool,
    /// `None`: not recorded; `Some([])`: no source settled a figure.
    pub provenance: Option<Vec<String>>,
    pub skills: Option<Vec<SkillCall>>,
    pub review: Review,
    /// The pass's stage chain identifier (`""` when recorded without one).
    pub chain_id: String,
    /// The rule a hop decision of the run's exit targeted; `""` when it reached none.
    pub stage_target: String,
    /// What became of that hop (`advanced`, `partial`, `failed`, `ceiling`).
    pub stage_result: String,
    pub identifier: String,
}

impl StatRun {
    /// The part priced from agent-reported amounts, summed; `None` when no part was.
    pub fn agent_priced_usd(&self) -> Option<f64> {
        self.parts
            .iter()
            .filter(|p| p.agent_priced)
            .map(|p| p.cost.unwrap_or(0.0))
            .reduce(|a, b| a + b)
    }
}

const COLUMNS: &str = "issue_id, status, started_at, completed_at, turns_completed,
    input_tokens, output_tokens, total_tokens, cache_read_tokens, cache_write_tokens,
    tokens_measured, unaccounted_turns, usage_completeness, unmeasured_cause,
    usage_provenance, vendor_amounts, model_usage, skills, review_metadata,
    estimated_cost_usd, cost_status, agent_adapter, rule_name, template, configured_model,
    reported_model, retry_trigger, dispatch_id, chain_id, stage_target, stage_result,
    identifier";

/// Calls `each` with every run completed in `range`, in the order SQLite scans them.
pub fn for_each_run(
    conn: &Connection,
    sc: &Scope,
    range: &Range,
    mut each: impl FnMut(StatRun),
) -> Result<(), StoreError> {
    let since = range.since_ms.map(time::to_text);
    let until = range.until_ms.map(time::to_text);
    // Only the bounds given become conditions, so a bounded scan walks the completion index.
    let in_scope = scope::filter(scope::column(conn, "run_history")?, 2);
    let mut sql = format!("SELECT {COLUMNS} FROM run_history WHERE status <> ?1 AND {in_scope}");
    let mut args: Vec<rusqlite::types::Value> = vec![
        RunStatus::CiFailed.as_str().to_string().into(),
        sc.bound()
            .map_or(rusqlite::types::Value::Null, |w| w.to_string().into()),
    ];
    for (bound, op) in [(since, ">="), (until, "<")] {
        if let Some(t) = bound {
            args.push(rusqlite::types::Value::Text(t));
            sql.push_str(&format!(" AND completed_at {op} ?{}", args.len()));
        }
    }
    let mut stmt = conn.prepare(&sql).ctx("prepare stats scan")?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(args))
        .ctx("scan runs for stats")?;
    while let Some(row) = rows.next().ctx("read run for stats")? {
        each(read(row)?);
    }
    Ok(())
}

fn read(r: &Row<'_>) -> Result<StatRun, StoreError> {
    read_columns(r).ctx("read run for stats")?
}

fn read_columns(r: &Row<'_>) -> rusqlite::Result<Result<StatRun, StoreError>> {
    let status: String = r.get(1)?;
    let started: String = r.get(2)?;
    let completed: String = r.get(3)?;
    let completed_ms = match time::from_text("run completed_at", &completed) {
        Ok(ms) => ms,
        Err(e) => return Ok(Err(e)),
    };
    let duration_ms = time::from_text("run started_at", &started)
        .ok()
        .map(|s| completed_ms - s)
        .filter(|d| *d >= 0);
    let measured_flag: bool = r.get(10)?;
    let unaccounted: i64 = r.get(11)?;
    let completeness = completeness(&r.get::<_, String>(12)?, measured_flag, unaccounted);
    let unmeasured = completeness == Completeness::Unmeasured;
    let figures = [r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?];
    let cause = unmeasured.then(|| {
        r.get::<_, Option<String>>(13)
            .ok()
            .flatten()
            .unwrap_or_else(|| "unknown".into())
    });
    let units = match cause.as_deref() {
        Some("amounts_only") => vendor_units(r.get(15)?),
        _ => Vec::new(),
    };
    let configured: String = r.get(24)?;
    let reported: String = r.get(25)?;
    let trigger: Option<String> = r.get(26)?;
    let dispatch_id: Option<String> = r.get(27)?;
    Ok(Ok(StatRun {
        issue_id: r.get(0)?,
        outcome: outcome(&status),
        status,
        completed_ms,
        duration_ms,
        turns: r.get(4)?,
        tokens: (!unmeasured).then_some(figures),
        completeness,
        unmeasured_cause: cause,
        unmeasured_units: units,
        cost: r.get(19)?,
        cost_status: CostWord::read(&r.get::<_, String>(20)?, unmeasured),
        parts: model_parts(r.get(16)?),
        agent_kind: r.get(21)?,
        rule_name: r.get(22)?,
        template: r.get(23)?,
        fallback_model: if reported.is_empty() {
            configured
        } else {
            reported
        },
        origin_recorded: trigger.is_some() || dispatch_id.is_some(),
        trigger,
        provenance: provenance(r.get(14)?),
        skills: skills(r.get(17)?),
        review: review(r.get(18)?),
        chain_id: r.get(28)?,
        stage_target: r.get(29)?,
        stage_result: r.get(30)?,
        identifier: r.get(31)?,
    }))
}

fn outcome(status: &str) -> Outcome {
    match status.parse::<RunStatus>() {
        Ok(RunStatus::Succeeded) => Outcome::Succeeded,
        Ok(RunStatus::Cancelled) => Outcome::Cancelled,
        Ok(RunStatus::BudgetStopped) => Outcome::Stopped,
        _ => Outcome::Failed,
    }
}

/// The same reading the runs route gives `usage_completeness`, including rows recorded before
/// the column was kept.
fn completeness(word: &str, measured: bool, unaccounted_turns: i64) -> Completeness {
    match word {
        "complete" => Completeness::Complete,
        "lower_bound" | "partial" => Completeness::LowerBound,
        "unmeasured" => Completeness::Unmeasured,
        _ if !measured => Completeness::Unmeasured,
        _ if unaccounted_turns > 0 => Completeness::LowerBound,
        _ => Completeness::Complete,
    }
}

fn decode<T: for<'de> Deserialize<'de>>(text: Option<String>) -> Option<T> {
    serde_json::from_str(text.as_deref()?).ok()
}

#[derive(Deserialize)]
struct UnitJson {
    #[serde(default)]
    unit: String,
}

fn vendor_units(text: Option<String>) -> Vec<String> {
    let mut units: Vec<String> = decode::<Vec<UnitJson>>(text)
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.unit)
        .filter(|u| !u.is_empty())
        .collect();
    units.sort();
    units.dedup();
    units
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokensJson {
    input_tokens: i64,
    output_tokens: i64,
    total_tokens: i64,
    cache_read_tokens: i64,
    cache_write_tokens: i64,
}

#[derive(Deserialize)]
struct PartJson {
    #[serde(default)]
    model: String,
    #[serde(default)]
    tokens: TokensJson,
    estimated_cost_usd: Option<f64>,
    #[serde(default)]
    cost_status: String,
    price_source: Option<String>,
}

fn model_parts(text: Option<String>) -> Vec<ModelPart> {
    decode::<Vec<PartJson>>(text)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let t = p.tokens;
            ModelPart {
                model: p.model,
                tokens: [
                    t.input_tokens,
                    t.output_tokens,
                    t.total_tokens,
                    t.cache_read_tokens,
                    t.cache_write_tokens,
                ],
                cost: p.estimated_cost_usd,
                cost_status: CostWord::read(&p.cost_status, false),
                agent_priced: p.price_source.as_deref() == Some("agent"),
            }
        })
        .collect()
}

#[derive(Deserialize)]
struct ProvenanceJson {
    #[serde(default)]
    source: String,
    #[serde(default)]
    strategy: String,
}

fn provenance(text: Option<String>) -> Option<Vec<String>> {
    let pairs: Vec<ProvenanceJson> = decode(text)?;
    Some(
        pairs
            .into_iter()
            .map(|p| format!("{}:{}", p.source, p.strategy))
            .collect(),
    )
}

#[derive(Deserialize)]
struct SkillJson {
    #[serde(default)]
    skill: String,
    #[serde(default)]
    tool_error: bool,
}

fn skills(text: Option<String>) -> Option<Vec<SkillCall>> {
    let calls: Vec<SkillJson> = decode(text)?;
    Some(
        calls
            .into_iter()
            .map(|c| SkillCall {
                skill: c.skill,
                tool_error: c.tool_error,
            })
            .collect(),
    )
}

fn review(text: Option<String>) -> Review {
    let Some(text) = text else {
        return Review::None;
    };
    let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Review::Unparsed;
    };
    Review::Recorded {
        verdict: m
            .get("final_verdict")
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
            .unwrap_or("none")
            .to_string(),
        iterations: m.get("total_iterations").and_then(|v| v.as_f64()),
        cap_reached: m
            .get("cap_reached")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
    }
}
