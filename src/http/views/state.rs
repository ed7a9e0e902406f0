//! `GET /api/v1/state`: the document built from the published snapshot.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::Snapshot;
use crate::store::IssueSpend;

use super::active::{ActiveEntry, ActiveSource, LiveStatus, active};
use super::attention::AttentionItemView;
use super::between_stages::{self, BetweenStagesView};
use super::budget::BudgetView;
use super::config::ConfigDoc;
use super::health::HealthView;
use super::held::{HeldView, SlotUse};
use super::parked::ParkedView;
use super::pending_reaction::{self, PendingReactionView};
use super::pr_loop::PrLoopView;
use super::retry::RetryView;
use super::running::{CostStatus, RunningView, row_usage, session_kind};
use super::stage::Stages;
use super::{IssueFields, ts};

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Counts {
    pub running: usize,
    pub retrying: usize,
    pub budget_exhausted: usize,
    pub parked: usize,
    pub pending_reactions: usize,
    pub between_stages: usize,
    pub held: usize,
    /// Items not yet acknowledged.
    pub attention: usize,
}

/// Token and time totals since the database was created, plus the sessions running now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentTotalsView {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub seconds_running: f64,
    pub unmeasured_sessions: u64,
    /// Running sessions of a reporting agent that have not reported yet.
    pub running_unreported: u64,
    /// Running sessions of an agent that does not report usage.
    pub running_non_reporting: u64,
}

/// The whole state document.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "State")]
pub struct StateDoc {
    pub generated_at: String,
    pub version: String,
    pub started_at: String,
    pub counts: Counts,
    pub running: Vec<RunningView>,
    pub retrying: Vec<RetryView>,
    pub budget_exhausted: Vec<BudgetView>,
    pub parked: Vec<ParkedView>,
    /// Sorted by issue identifier, issue id, kind.
    pub pending_reactions: Vec<PendingReactionView>,
    /// Sorted by issue identifier, then issue id.
    pub between_stages: Vec<BetweenStagesView>,
    pub active: Vec<ActiveEntry>,
    pub held: Vec<HeldView>,
    /// What needs a person: critical items first, then by `since` (null first), then by id.
    pub attention: Vec<AttentionItemView>,
    pub agent_totals: AgentTotalsView,
    /// Σ of the running sessions' live estimates; omitted without a rate source and while no
    /// running, measured session is priced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_estimated_cost_usd: Option<f64>,
    /// Running, measured sessions no rate prices; present exactly when a rate source is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_unpriced_running: Option<usize>,
    pub rate_limits: BTreeMap<String, super::rate_limits::AgentRateLimitsView>,
    /// The spend windows against their ceilings; omitted while no ceiling is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend_ceiling: Option<super::spend_ceiling::SpendCeilingView>,
    pub config: ConfigDoc,
    pub health: HealthView,
}

/// Rows sorted by issue identifier then id (the order of parked, budget and held rows).
fn sort_by_issue<T>(rows: &mut [T], issue: impl Fn(&T) -> &IssueFields) {
    rows.sort_by(|a, b| {
        let (a, b) = (issue(a), issue(b));
        (&a.issue_identifier, &a.issue_id).cmp(&(&b.issue_identifier, &b.issue_id))
    });
}

fn agent_totals(snap: &Snapshot) -> AgentTotalsView {
    let (mut unreported, mut non_reporting) = (0u64, 0u64);
    for r in &snap.running {
        let u = row_usage(r, session_kind(r, &snap.config));
        if !u.measured {
            if u.awaited {
                unreported += 1;
            } else {
                non_reporting += 1;
            }
        }
    }
    let now = snap.generated_at_ms;
    // Elapsed time of the sessions running now counts too.
    let live_seconds: f64 = snap
        .running
        .iter()
        .map(|r| ((now - r.started_at_ms).max(0) as f64) / 1000.0)
        .sum();
    let t = &snap.totals;
    AgentTotalsView {
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        total_tokens: t.total_tokens,
        cache_read_tokens: t.cache_read_tokens,
        cache_write_tokens: t.cache_write_tokens,
        seconds_running: t.seconds_running + live_seconds,
        unmeasured_sessions: t.unmeasured_sessions,
        running_unreported: unreported,
        running_non_reporting: non_reporting,
    }
}

/// Σ of the priced running rows' estimates, `None` without a rate source or a priced row.
fn active_cost(snap: &Snapshot, running: &[RunningView]) -> Option<f64> {
    let priced: Vec<f64> = running
        .iter()
        .filter_map(|r| r.spend.estimated_cost_usd)
        .collect();
    (snap.has_rate_source && !priced.is_empty()).then(|| priced.iter().sum())
}

/// The document's rows, each list in its API order.
struct Rows {
    running: Vec<RunningView>,
    retrying: Vec<RetryView>,
    budget: Vec<BudgetView>,
    parked: Vec<ParkedView>,
    held: Vec<HeldView>,
    pending: Vec<PendingReactionView>,
    between: Vec<BetweenStagesView>,
}

impl Rows {
    fn of(snap: &Snapshot, spend: &BTreeMap<String, Option<IssueSpend>>) -> Rows {
        let now = snap.generated_at_ms;
        let cfg = &snap.config;
        let stages = Stages::of(snap);
        let running: Vec<RunningView> = snap
            .running
            .iter()
            .map(|r| {
                let s = spend.get(&r.issue.id).copied().flatten();
                let review = snap.self_review_of(&r.dispatch_id);
                let price = snap.running_cost(&r.dispatch_id);
                RunningView::build(r, review, cfg, s, price, now, &stages)
            })
            .collect();
        let retrying: Vec<RetryView> = snap
            .retrying
            .iter()
            .map(|r| RetryView::build(r, cfg, now, &stages))
            .collect();
        let mut budget: Vec<BudgetView> = snap
            .budget_exhausted
            .iter()
            .map(|b| BudgetView::build(b, cfg, &stages))
            .collect();
        sort_by_issue(&mut budget, |r| &r.issue);
        let mut parked: Vec<ParkedView> = snap
            .parked
            .iter()
            .map(|p| ParkedView::build(p, cfg, &stages))
            .collect();
        sort_by_issue(&mut parked, |r| &r.issue);
        let slots = SlotUse::of(snap);
        let mut held: Vec<HeldView> = snap
            .held
            .iter()
            .map(|h| HeldView::build(h, &slots))
            .collect();
        sort_by_issue(&mut held, |r| &r.issue);
        Rows {
            running,
            retrying,
            budget,
            parked,
            held,
            pending: pending_reaction::build_all(&snap.pending_reactions, now, &stages),
            between: between_stages::build_all(&snap.between_stages, cfg, &stages, &slots),
        }
    }

    /// Every issue with live work, one entry each, from the rows above.
    fn active(&self, snap: &Snapshot) -> Vec<ActiveEntry> {
        let pending_sources: Vec<ActiveSource<'_>> =
            pending_reaction::by_issue(&self.pending, &snap.pending_reactions)
                .into_iter()
                .flatten()
                .map(|i| ActiveSource::from(&self.pending[i]))
                .collect();
        active(&[
            (
                LiveStatus::Running,
                self.running.iter().map(ActiveSource::from).collect(),
            ),
            (
                LiveStatus::Retrying,
                self.retrying.iter().map(ActiveSource::from).collect(),
            ),
            (
                LiveStatus::BudgetExhausted,
                self.budget.iter().map(ActiveSource::from).collect(),
            ),
            (
                LiveStatus::Parked,
                self.parked.iter().map(ActiveSource::from).collect(),
            ),
            (LiveStatus::PendingReactions, pending_sources),
            (
                LiveStatus::BetweenStages,
                self.between.iter().map(ActiveSource::from).collect(),
            ),
        ])
    }
}

impl StateDoc {
    /// Serves each active entry's `pr_loop` from `by_issue` (issue id → value); `None`, when
    /// reaction activity could not be read, serves `null` on every entry.
    pub fn set_pr_loop(&mut self, by_issue: Option<&BTreeMap<String, PrLoopView>>) {
        for e in &mut self.active {
            e.pr_loop = match by_issue {
                None => None,
                Some(m) => m.get(&e.issue_id).cloned().or(e.pr_loop.take()),
            };
        }
    }
}

impl StateDoc {
    /// `spend` holds the completed-session figures of each running issue (`None` when
    /// unreadable); `attention` the current items.
    pub fn build(
        snap: &Snapshot,
        version: &str,
        spend: &BTreeMap<String, Option<IssueSpend>>,
        attention: Vec<AttentionItemView>,
        unacknowledged: usize,
    ) -> StateDoc {
        let now = snap.generated_at_ms;
        let cfg = &snap.config;
        let rows = Rows::of(snap, spend);
        let mut active = rows.active(snap);
        let unrecorded = PrLoopView::build(&cfg.reactions, None);
        for e in &mut active {
            e.pr_loop = Some(unrecorded.clone());
        }
        let Rows {
            running,
            retrying,
            budget,
            parked,
            held,
            pending,
            between,
        } = rows;
        let active_estimated_cost_usd = active_cost(snap, &running);
        let cost_unpriced_running = snap.has_rate_source.then(|| {
            running
                .iter()
                .filter(|r| r.spend.cost_status == CostStatus::Unpriced)
                .count()
        });
        StateDoc {
            generated_at: ts(now),
            version: version.to_string(),
            started_at: ts(snap.started_at_ms),
            counts: Counts {
                running: running.len(),
                retrying: retrying.len(),
                budget_exhausted: budget.len(),
                parked: parked.len(),
                pending_reactions: pending.len(),
                between_stages: between.len(),
                held: held.len(),
                attention: unacknowledged,
            },
            running,
            retrying,
            budget_exhausted: budget,
            parked,
            pending_reactions: pending,
            between_stages: between,
            active,
            held,
            attention,
            agent_totals: agent_totals(snap),
            active_estimated_cost_usd,
            cost_unpriced_running,
            rate_limits: super::rate_limits::build(&snap.rate_limits, snap.generated_at_ms),
            spend_ceiling: super::spend_ceiling::SpendCeilingView::build(
                snap.spend_ceiling.as_ref(),
            ),
            config: ConfigDoc::build(cfg),
            health: HealthView::build(snap),
        }
    }
}
