//! Spend ceilings across every workflow of a daemon (`sortie.yaml`'s `max_daily_cost_usd`,
//! `max_weekly_cost_usd`, `max_monthly_cost_usd`): the recorded spend of every workflow's
//! runs in the window plus the live estimate of every workflow's running sessions. Each
//! workflow's spend feature evaluates them at its own ticks; while one holds, every
//! workflow's dispatch is held, and a workflow's own ceilings still apply inside them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::ceiling::{Ceilings, LiveSpend};

/// One workflow's handle on the daemon-wide ceilings.
#[derive(Debug, Clone)]
pub struct DaemonSpend {
    pub ceilings: Ceilings,
    /// The name this workflow's live estimate is kept under.
    pub workflow: String,
    /// Each workflow's latest live estimate.
    live: Arc<Mutex<BTreeMap<String, LiveSpend>>>,
}

impl DaemonSpend {
    /// The ceilings as every workflow of the daemon shares them: one board per daemon, each
    /// workflow's handle from [`DaemonSpend::for_workflow`].
    pub fn new(ceilings: Ceilings) -> DaemonSpend {
        DaemonSpend {
            ceilings,
            workflow: String::new(),
            live: Arc::default(),
        }
    }

    pub fn for_workflow(&self, name: &str) -> DaemonSpend {
        DaemonSpend {
            workflow: name.to_string(),
            ..self.clone()
        }
    }

    /// Drops a removed workflow's live estimate.
    pub fn forget(&self, name: &str) {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }

    /// Records this workflow's live estimate and answers every workflow's together.
    pub fn live_total(&self, own: LiveSpend) -> LiveSpend {
        let mut board = self.live.lock().unwrap_or_else(|p| p.into_inner());
        board.insert(self.workflow.clone(), own);
        board
            .values()
            .fold(LiveSpend::default(), |acc, l| LiveSpend {
                usd: acc.usd + l.usd,
                complete: acc.complete && l.complete,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_estimates_add_up_across_workflows() {
        let board = DaemonSpend::new(Ceilings::default());
        let (a, b) = (board.for_workflow("a"), board.for_workflow("b"));
        let live = |usd, complete| LiveSpend { usd, complete };
        assert_eq!(a.live_total(live(1.0, true)).usd, 1.0);
        let both = b.live_total(live(2.5, false));
        assert_eq!(both.usd, 3.5);
        assert!(!both.complete);
        // A newer estimate replaces the workflow's previous one.
        assert_eq!(a.live_total(live(0.5, true)).usd, 3.0);
    }
}
