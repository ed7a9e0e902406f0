//! Spend ceilings as the orchestrator applies them: each poll tick and each retry check
//! evaluates the windows (`spend::ceiling`), and while one holds, the dispatch pass and due
//! retries start no new agent session. Running sessions go on.

use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::spend::ceiling::{
    self as spend_ceiling, Ceilings, LiveSpend, SpendCeilings,
};
use crate::orchestrator::features::spend::session_cost::session_price;
use crate::pricing::CostStatus;

impl Orchestrator {
    /// Evaluates the spend windows now. A failed read keeps the previous evaluation and fails
    /// closed: the database check fails with the error, so nothing is dispatched until a read
    /// succeeds.
    pub(crate) fn evaluate_spend_ceilings(&mut self) {
        let ceilings = Ceilings::from_config(&self.workflow.config.agent);
        let now = self.clock.now_ms();
        let live = if ceilings.any() {
            self.live_spend()
        } else {
            LiveSpend::default()
        };
        let store = Arc::clone(&self.store);
        let evaluated =
            spend_ceiling::evaluate(ceilings, now, live, self.state.spend.as_ref(), |s, e| {
                persist::window_spend(&store, s, e)
            });
        match evaluated {
            Ok(next) => {
                log_spend_changes(self.state.spend.as_ref(), next.as_ref());
                self.state.spend = next;
            }
            Err(e) => {
                log::error!(
                    error:% = e;
                    "spend window read failed; keeping the previous evaluation, dispatching nothing"
                );
                self.state.health.budget_read_failure = Some(e.clone());
                self.state.health.database.record(now, Err(e));
            }
        }
    }

    /// The hold the latest evaluation puts on every dispatch.
    pub(crate) fn spend_hold(&self) -> Option<HoldReason> {
        self.state.spend.as_ref().and_then(SpendCeilings::hold)
    }

    /// When a retry that a spend window stops checks again: after the ordinary failure
    /// backoff of its attempt (as a retry that found no free slot), or at the window's reset
    /// when that comes first. A raised ceiling lifts it at that check.
    pub(crate) fn spend_retry_due_ms(&self, attempt: u32, resets_at_ms: i64) -> i64 {
        let backoff = failure_delay_ms(attempt, self.backoff_cap());
        let next_check = self
            .clock
            .now_ms()
            .saturating_add(i64::try_from(backoff).unwrap_or(i64::MAX));
        resets_at_ms.min(next_check)
    }

    /// The live estimate of every session running now (and of those whose run record has not
    /// committed yet), priced under the rates in force.
    fn live_spend(&self) -> LiveSpend {
        let book = self.prices.current();
        let kind = &self.workflow.config.agent.kind;
        let sessions = self
            .state
            .running
            .values()
            .map(|e| &e.facts)
            .chain(self.state.awaiting_record.values().map(|a| &a.entry.facts));
        let mut live = LiveSpend::default();
        for facts in sessions {
            let price = session_price(facts, kind, &book);
            live.usd += price.cost_usd.unwrap_or(0.0);
            live.complete &= price.status == CostStatus::Estimated;
        }
        live
    }
}

/// Logs a window that began or stopped holding dispatch (not every evaluation).
fn log_spend_changes(before: Option<&SpendCeilings>, after: Option<&SpendCeilings>) {
    let holding = |s: Option<&SpendCeilings>, w| {
        s.and_then(|s| s.of(w))
            .filter(|w| w.holds_dispatch)
            .map(|w| (w.start_ms, w.budget_usd))
    };
    for &window in crate::domain::SpendWindow::ALL {
        let (was, is) = (holding(before, window), holding(after, window));
        if was == is {
            continue;
        }
        match after
            .and_then(|s| s.of(window))
            .filter(|w| w.holds_dispatch)
        {
            Some(w) => log::warn!(
                window:% = window,
                used_usd:% = format!("{:.4}", w.used_usd),
                used_usd_complete:% = w.used_usd_complete,
                budget_usd:% = w.budget_usd,
                resets_at:% = crate::clock::rfc3339_ms(w.resets_at_ms);
                "spend ceiling reached, holding every dispatch"
            ),
            None => log::info!(window:% = window; "spend ceiling hold lifted"),
        }
    }
}
