//! The per-issue money ceiling (`agent.max_cost_usd`): the issue's estimated cost, compared
//! with the ceiling as the seed's `issue_estimated_cost_usd` is (the costs recorded with its
//! completed runs plus, while a session runs, that session's live estimate; a lower bound
//! unless estimated).

use crate::pricing::{CostStatus, IssueCostParts, RunPrice};
use crate::store::IssueUsage;

use crate::orchestrator::core::state::{HoldMoney, RunFacts};

/// `agent.max_cost_usd` when it sets a ceiling.
pub fn ceiling(max_cost_usd: Option<f64>) -> Option<f64> {
    max_cost_usd.filter(|c| c.is_finite() && *c > 0.0)
}

/// The cost parts of the issue's completed runs; `session` adds a running session's token
/// figures (its measurement, uncached tokens and unaccounted turns).
fn parts(usage: &IssueUsage, session: Option<(bool, u64, bool)>) -> IssueCostParts {
    let runs_complete = usage.unmeasured_sessions == 0 && usage.lower_bound_sessions == 0;
    let (session_complete, session_uncached) = match session {
        Some((measured, uncached, unaccounted)) => (measured && !unaccounted, uncached),
        None => (true, 0),
    };
    let complete = runs_complete && session_complete;
    let sum = usage.uncached_tokens.max(0) as u64 + session_uncached;
    let mut p = IssueCostParts {
        tokens_complete: complete,
        tokens_known: sum > 0 || complete,
        ..IssueCostParts::default()
    };
    usage.cost.add_to(&mut p);
    p
}

/// The issue's estimated cost from its completed runs alone.
pub fn stored_cost(usage: &IssueUsage) -> (Option<f64>, CostStatus) {
    parts(usage, None).total()
}

/// The issue's estimated cost with a running session's live price.
pub fn live_cost(
    facts: &RunFacts,
    before: &IssueUsage,
    price: &RunPrice,
) -> (Option<f64>, CostStatus) {
    let uncached = if facts.tokens_measured {
        facts.tokens.uncached_tokens()
    } else {
        0
    };
    let session = (
        facts.tokens_measured,
        uncached,
        facts.turns_without_figure > 0,
    );
    let mut p = parts(before, Some(session));
    let spent = uncached > 0 || facts.tokens.output_tokens > 0;
    p.add(price.status, price.cost_usd, spent);
    p.total()
}

/// What a hold serves about the money ceiling.
pub fn hold_money(usage: &IssueUsage, budget_usd: f64) -> HoldMoney {
    let (used_usd, status) = stored_cost(usage);
    HoldMoney {
        used_usd,
        complete: status == CostStatus::Estimated,
        budget_usd,
    }
}

/// Whether an estimated cost reaches the ceiling.
pub fn reached(used: Option<f64>, ceiling: f64) -> bool {
    used.is_some_and(|u| u >= ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredCost;

    fn usage(usd: f64, unmeasured: i64) -> IssueUsage {
        IssueUsage {
            sessions: 2,
            uncached_tokens: 1_000,
            unmeasured_sessions: unmeasured,
            cost: StoredCost {
                usd,
                priced_runs: 2,
                priced_spent_runs: 2,
                ..StoredCost::default()
            },
            ..IssueUsage::default()
        }
    }

    #[test]
    fn the_recorded_costs_are_the_issue_cost_and_an_unmeasured_run_makes_it_a_lower_bound() {
        assert_eq!(
            stored_cost(&usage(3.0, 0)),
            (Some(3.0), CostStatus::Estimated)
        );
        assert_eq!(
            stored_cost(&usage(3.0, 1)),
            (Some(3.0), CostStatus::Partial)
        );
        let held = hold_money(&usage(3.0, 1), 2.5);
        assert_eq!((held.used_usd, held.complete), (Some(3.0), false));
        assert!(reached(held.used_usd, 2.5));
        assert!(!reached(None, 2.5));
        assert_eq!(ceiling(Some(0.0)), None);
    }
}
