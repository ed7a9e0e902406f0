//! The report's served shape, shared by `GET /api/v1/stats` and `sortie stats --format json`
//! (the HTTP views re-export it so the OpenAPI document is generated from these types).
//! Member order is the served order. Figures are rounded once, here: money to 9 decimals,
//! rates and shares to 4, means to 2, durations in seconds to 3.

use schemars::JsonSchema;
use serde::Serialize;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsReport")]
pub struct StatsReport {
    /// The instant of the request (a duration bound counts back from it).
    pub generated_at: String,
    pub workflow_path: String,
    pub db_path: String,
    /// The resolved bounds in UTC; `null` when open.
    pub since: Option<String>,
    pub until: Option<String>,
    /// `full`: the database holds every column the report reads.
    pub schema_tier: String,
    pub warnings: Vec<String>,
    pub summary: Summary,
    pub spend: Spend,
    pub by_status: Vec<Group>,
    pub by_adapter: Vec<Group>,
    pub by_rule: Vec<Group>,
    pub by_template: Vec<Group>,
    pub by_model: Vec<Group>,
    /// The passes in which a stage hop was due or made.
    pub by_chain: Vec<ChainGroup>,
    /// One funnel per stage chain of the dispatch rules in force.
    pub chain_funnels: Vec<ChainFunnel>,
    pub by_trigger: Vec<Group>,
    pub by_origin: Vec<Group>,
    pub by_provenance: Vec<Group>,
    pub skill_calls: SkillCalls,
    pub self_review: SelfReview,
}

/// Duration percentiles (nearest rank) and mean over the runs with a positive duration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsDuration")]
pub struct Duration {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub mean: Option<f64>,
    pub samples: u64,
}

/// Token sums of the measured runs; `uncached` is `total` less `cache_read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "StatsTokens")]
pub struct Tokens {
    pub input: i64,
    pub output: i64,
    pub total: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub uncached: i64,
}

/// Every run in the range.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSummary")]
pub struct Summary {
    pub runs: u64,
    /// Distinct issues among the runs.
    pub issues: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub stopped: u64,
    pub cancelled: u64,
    pub success_rate: Option<f64>,
    pub duration_seconds: Duration,
    pub mean_turns_succeeded: Option<f64>,
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    pub cost_per_succeeded_run_usd: Option<f64>,
    pub zero_duration_runs: u64,
    pub duration_excluded_runs: u64,
    pub cost_unpriced_runs: u64,
    pub cost_partial_runs: u64,
    pub tokens_unmeasured_runs: u64,
    pub tokens_lower_bound_runs: u64,
    pub tokens_lower_bound: bool,
    pub cost_lower_bound: bool,
    pub agent_priced_usd: Option<f64>,
    pub unmeasured_cause: Option<String>,
    pub unmeasured_units: Vec<String>,
}

/// One group of a breakdown.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsGroup")]
pub struct Group {
    pub name: String,
    pub runs: u64,
    pub succeeded: u64,
    pub success_rate: Option<f64>,
    /// The group's runs over all runs in the range.
    pub share: Option<f64>,
    pub duration_seconds: Duration,
    pub mean_turns: Option<f64>,
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    pub cost_per_succeeded_run_usd: Option<f64>,
    pub tokens_unmeasured_runs: u64,
    pub cost_unpriced_runs: u64,
    pub cost_partial_runs: u64,
    pub tokens_lower_bound_runs: u64,
    pub tokens_lower_bound: bool,
    pub cost_lower_bound: bool,
    pub agent_priced_usd: Option<f64>,
    pub unmeasured_cause: Option<String>,
    pub unmeasured_units: Vec<String>,
}

/// Recorded cost, tokens and outcomes per UTC hour (`period` `hour`, asked for), day (`day`)
/// or month (`month`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSpend")]
pub struct Spend {
    pub period: String,
    /// Periods that hold a run, oldest first.
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSpendBucket")]
pub struct Bucket {
    pub start: String,
    pub runs: u64,
    /// The period's runs by outcome, as the summary counts them.
    pub succeeded: u64,
    pub failed: u64,
    pub stopped: u64,
    pub cancelled: u64,
    /// Token sums of the period's measured runs; `null` when none was measured.
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    pub tokens_unmeasured_runs: u64,
    pub cost_unpriced_runs: u64,
    pub cost_partial_runs: u64,
    pub cost_lower_bound: bool,
    pub agent_priced_usd: Option<f64>,
}

/// The skill calls the runs recorded.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSkillCalls")]
pub struct SkillCalls {
    /// Runs that recorded no skill list (their agent reports none, or they predate it).
    pub unrecorded_runs: u64,
    pub by_skill: Vec<SkillEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSkill")]
pub struct SkillEntry {
    pub name: String,
    /// Calls, repeats included.
    pub calls: u64,
    /// Runs with at least one call.
    pub runs: u64,
    /// Calls that failed.
    pub tool_errors: u64,
}

/// The self-review records of the runs.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsSelfReview")]
pub struct SelfReview {
    pub runs_with_metadata: u64,
    pub by_final_verdict: Vec<VerdictEntry>,
    pub cap_reached_runs: u64,
    pub mean_iterations: Option<f64>,
    /// Runs whose record could not be read.
    pub unparsed_runs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "StatsVerdict")]
pub struct VerdictEntry {
    pub name: String,
    pub runs: u64,
}

/// Rounds to `places` decimals.
pub fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    let r = (v * f).round() / f;
    if r == 0.0 { 0.0 } else { r }
}

/// Money: 9 decimals.
pub fn usd(v: f64) -> f64 {
    round(v, 9)
}

/// `part / whole` to 4 decimals; `None` over nothing.
pub fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| round(part as f64 / whole as f64, 4))
}

/// One `by_chain` entry: a pass in which a hop was due or made. `name` is its `chain_id`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "StatsChainGroup")]
pub struct ChainGroup {
    #[serde(flatten)]
    pub group: Group,
    /// The identifier of the pass's issue.
    pub issue_identifier: String,
    /// The rules the pass's runs in the range ran on, in the order each first ended.
    pub rules: Vec<String>,
    /// Hops the pass's runs made (`advanced` or `partial`).
    pub hops_made: u64,
    /// Hops that were due and not made (`failed` or `ceiling`): the issue was handed off.
    pub hops_not_made: u64,
}

/// One stage of a funnel. The first four count passes by their runs completed in the range;
/// the last three are the passes on the stage at the time of the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "StatsFunnelStage")]
pub struct FunnelStage {
    pub rule: String,
    /// Passes with a run on the stage.
    pub passes: u64,
    /// Passes with a succeeded run on the stage.
    pub succeeded: u64,
    /// Passes whose run on the stage made the hop to the next one.
    pub advanced: u64,
    /// Passes whose run on the stage was due a hop that was not made.
    pub not_advanced: u64,
    /// Passes whose session on the stage is running now.
    pub running: u64,
    /// Passes queued for a retry on the stage now.
    pub queued: u64,
    /// Passes held by a budget on the stage now.
    pub budget_held: u64,
}

/// The funnel of one chain of the dispatch rules in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "StatsChainFunnel")]
pub struct ChainFunnel {
    /// The chain's rule names in `next` order (a member of `config.dispatch.chains`).
    pub chain: Vec<String>,
    pub stages: Vec<FunnelStage>,
}
