//! The one pass over the runs of the range: every run goes into the summary, one group of
//! each breakdown (each model's part into its model's group), its spend period, and the skill
//! and self-review tallies.

use std::collections::HashSet;

use super::chains::{ChainTally, LiveStages};
use super::extras::{ReviewTally, SkillTally};
use super::range::Range;
use super::report::{StatsReport, Summary, ratio};
use super::rows::StatRun;
use super::spend::{Period, SpendTally};
use super::tally::{Breakdown, Share, Tally};

/// The name of a group for an empty value.
const NONE: &str = "<none>";
/// The name of a group for a value the run was recorded without.
const UNKNOWN: &str = "<unknown>";

fn named(v: &str) -> &str {
    if v.is_empty() { NONE } else { v }
}

/// What dispatched the run: the poll tick, a retry, or not recorded.
fn origin(r: &StatRun) -> &'static str {
    match r.trigger.as_deref() {
        _ if !r.origin_recorded => UNKNOWN,
        Some("") => "poll_tick",
        _ => "retry",
    }
}

fn provenance(r: &StatRun) -> String {
    match &r.provenance {
        None => UNKNOWN.into(),
        Some(p) if p.is_empty() => NONE.into(),
        Some(p) => p.join("+"),
    }
}

/// The report's header: what the caller knows, not the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub generated_at: String,
    pub workflow_path: String,
    pub db_path: String,
    pub schema_tier: String,
    pub warnings: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Aggregate {
    summary: Tally,
    issues: HashSet<String>,
    by_status: Breakdown,
    by_adapter: Breakdown,
    by_rule: Breakdown,
    by_template: Breakdown,
    by_model: Breakdown,
    by_trigger: Breakdown,
    by_origin: Breakdown,
    by_provenance: Breakdown,
    spend: SpendTally,
    skills: SkillTally,
    review: ReviewTally,
    chains: ChainTally,
    /// The spend period asked for; `None`: by the range's span.
    period: Option<Period>,
}

impl Aggregate {
    /// An aggregate whose spend buckets are by `period` and whose funnels follow `chains`
    /// (the dispatch rules' chains in force).
    pub fn new(period: Option<Period>, chains: &[Vec<String>]) -> Aggregate {
        Aggregate {
            period,
            chains: ChainTally::new(chains),
            ..Aggregate::default()
        }
    }

    pub fn add(&mut self, r: &StatRun) {
        let whole = Share::whole(r);
        self.summary.add(&whole);
        if !self.issues.contains(&r.issue_id) {
            self.issues.insert(r.issue_id.clone());
        }
        self.by_status.add(named(&r.status), &whole);
        self.by_adapter.add(named(&r.agent_kind), &whole);
        self.by_rule.add(named(&r.rule_name), &whole);
        self.by_template.add(named(&r.template), &whole);
        if r.parts.is_empty() {
            self.by_model.add(named(&r.fallback_model), &whole);
        }
        for part in &r.parts {
            self.by_model.add(named(&part.model), &Share::part(r, part));
        }
        let trigger = r.trigger.as_deref().map_or(UNKNOWN, named);
        self.by_trigger.add(trigger, &whole);
        self.by_origin.add(origin(r), &whole);
        self.by_provenance.add(&provenance(r), &whole);
        self.spend.add(r);
        self.skills.add(r);
        self.review.add(r);
        self.chains.add(r);
    }

    fn summary(&self) -> Summary {
        let t = &self.summary;
        Summary {
            runs: t.runs,
            issues: self.issues.len() as u64,
            succeeded: t.succeeded,
            failed: t.failed,
            stopped: t.stopped,
            cancelled: t.cancelled,
            success_rate: ratio(t.succeeded, t.runs),
            duration_seconds: t.duration(),
            mean_turns_succeeded: t.mean_turns_succeeded(),
            tokens: t.tokens(),
            cost_usd: t.cost_usd(),
            cost_per_succeeded_run_usd: t.cost_per_succeeded(),
            zero_duration_runs: t.zero_duration,
            duration_excluded_runs: t.duration_excluded,
            cost_unpriced_runs: t.unpriced,
            cost_partial_runs: t.partial,
            tokens_unmeasured_runs: t.unmeasured,
            tokens_lower_bound_runs: t.lower_bound,
            tokens_lower_bound: t.tokens_lower_bound(),
            cost_lower_bound: t.cost_lower_bound(),
            agent_priced_usd: t.agent_priced_usd(),
            unmeasured_cause: t.unmeasured_cause(),
            unmeasured_units: t.unmeasured_units(),
        }
    }

    /// The report; `chains` and `live` are the chains in force and the passes on their
    /// stages now.
    pub fn finish(
        &self,
        header: Header,
        range: &Range,
        chains: &[Vec<String>],
        live: &LiveStages,
    ) -> StatsReport {
        let all = self.summary.runs;
        let at = |ms: Option<i64>| ms.and_then(super::instant_text);
        StatsReport {
            generated_at: header.generated_at,
            workflow_path: header.workflow_path,
            db_path: header.db_path,
            since: at(range.since_ms),
            until: at(range.until_ms),
            schema_tier: header.schema_tier,
            warnings: header.warnings,
            summary: self.summary(),
            spend: self.spend.finish(range, self.period),
            by_status: self.by_status.groups(all),
            by_adapter: self.by_adapter.groups(all),
            by_rule: self.by_rule.groups(all),
            by_template: self.by_template.groups(all),
            by_model: self.by_model.groups(all),
            by_chain: self.chains.groups(all),
            chain_funnels: self.chains.funnels(chains, live),
            by_trigger: self.by_trigger.groups(all),
            by_origin: self.by_origin.groups(all),
            by_provenance: self.by_provenance.groups(all),
            skill_calls: self.skills.finish(),
            self_review: self.review.finish(),
        }
    }
}
