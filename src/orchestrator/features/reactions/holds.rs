//! Budget holds of reaction fixes. A fix a spent budget keeps from starting leaves its issue in
//! the handoff state, which is not among a poll tick's candidates, so the tick's rebuild of the
//! holds would drop it at once; it is kept, re-read against the budget, while the issue's
//! reactions are pending and the budget still holds it.

use std::collections::{BTreeMap, HashMap};

use crate::orchestrator::core::orchestrator::*;
use crate::store::IssueUsage;

impl Orchestrator {
    /// Adds to `holds` (this tick's) each earlier hold of an issue with pending reactions that
    /// the tick did not see and whose budget still holds it, keeping its start and selection.
    pub(crate) fn keep_reaction_budget_holds(
        &self,
        holds: &mut BTreeMap<String, BudgetHold>,
        usage: &HashMap<String, IssueUsage>,
    ) {
        for (id, prev) in &self.state.budget_held {
            let watched = self.features.reactions.watches(id);
            if holds.contains_key(id) || !watched || self.state.running.contains_key(id) {
                continue;
            }
            let used = usage.get(id).copied().unwrap_or_default();
            if let Ok(Some(mut h)) =
                self.budget_hold_for(&prev.issue, Some(used), prev.dispatched_at_ms)
            {
                h.since_ms = prev.since_ms;
                h.route = prev.route.clone();
                holds.insert(id.clone(), h);
            }
        }
    }
}
