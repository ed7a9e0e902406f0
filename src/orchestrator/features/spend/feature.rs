//! Spend ceilings as a feature: it owns the latest evaluation of the spend windows. Each poll
//! tick and each retry check evaluates them (`on_tick`, pure rules in `spend::ceiling`), and
//! while a window holds, its gate holds every candidate: no new agent session starts, running
//! sessions go on. The evaluation reaches the snapshot.

use crate::orchestrator::claim::dispatch_pass::Gate;
use crate::orchestrator::core::effect::Effect;
use crate::orchestrator::core::feature::{Cx, Feature, PassKind};
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::features::spend::ceiling::{
    self as spend_ceiling, Ceilings, LiveSpend, SpendCeilings,
};
use crate::orchestrator::features::spend::session_cost::session_price;
use crate::pricing::CostStatus;

/// The spend feature's slice of state.
#[derive(Debug, Default)]
pub struct SpendFeature {
    /// The spend windows as of the latest poll tick or retry check; `None` while no spend
    /// ceiling is set (or before the first evaluation).
    ceilings: Option<SpendCeilings>,
    /// The ceilings every workflow of the daemon shares (`None`: none set).
    daemon: Option<super::daemon::DaemonSpend>,
    /// Their windows as of the latest evaluation.
    daemon_ceilings: Option<SpendCeilings>,
}

impl SpendFeature {
    /// Puts this workflow under the daemon-wide ceilings too.
    pub fn set_daemon(&mut self, daemon: super::daemon::DaemonSpend) {
        self.daemon = Some(daemon);
    }

    /// Evaluates the daemon-wide windows: every workflow's recorded runs and live sessions.
    fn evaluate_daemon(&mut self, cx: &Cx<'_>, own_live: LiveSpend) -> Vec<Effect> {
        let Some(daemon) = &self.daemon else {
            return Vec::new();
        };
        let live = daemon.live_total(own_live);
        let ceilings = daemon.ceilings;
        refresh(&mut self.daemon_ceilings, "daemon-wide", |previous| {
            spend_ceiling::evaluate(ceilings, cx.now_ms, live, previous, |s, e| {
                crate::orchestrator::core::persist::window_spend_all(cx.store, s, e)
            })
        })
    }
}

/// Replaces `windows` with a new evaluation and logs the holds that began or ended; a failed
/// read keeps the previous evaluation and becomes [`Effect::ReadFailed`] (`which` names the
/// windows in the log).
fn refresh(
    windows: &mut Option<SpendCeilings>,
    which: &str,
    evaluate: impl FnOnce(
        Option<&SpendCeilings>,
    ) -> Result<
        Option<SpendCeilings>,
        crate::orchestrator::core::run_record::PersistError,
    >,
) -> Vec<Effect> {
    match evaluate(windows.as_ref()) {
        Ok(next) => {
            log_spend_changes(windows.as_ref(), next.as_ref());
            *windows = next;
            Vec::new()
        }
        Err(e) => {
            log::error!(
                windows:% = which,
                error:% = e;
                "spend window read failed; keeping the previous evaluation, dispatching nothing"
            );
            vec![Effect::ReadFailed(e)]
        }
    }
}

impl Feature for SpendFeature {
    /// The hold the latest evaluation puts on every dispatch.
    fn gate(&self, _cx: &Cx<'_>, _pass: PassKind) -> Option<Gate> {
        self.ceilings
            .as_ref()
            .and_then(SpendCeilings::hold)
            .or_else(|| self.daemon_ceilings.as_ref().and_then(SpendCeilings::hold))
            .map(Gate::Every)
    }

    /// Evaluates the spend windows now. A failed read keeps the previous evaluation and fails
    /// closed: the database check fails with the error, so nothing is dispatched until a read
    /// succeeds.
    fn on_tick(&mut self, cx: &Cx<'_>) -> Vec<Effect> {
        let ceilings = Ceilings::from_config(&cx.workflow.config.agent);
        let live = if ceilings.any() || self.daemon.is_some() {
            live_spend(cx)
        } else {
            LiveSpend::default()
        };
        let daemon_effects = self.evaluate_daemon(cx, live);
        if !daemon_effects.is_empty() {
            return daemon_effects;
        }
        refresh(&mut self.ceilings, "workflow", |previous| {
            spend_ceiling::evaluate(ceilings, cx.now_ms, live, previous, |s, e| {
                crate::orchestrator::core::persist::window_spend(cx.store, s, e)
            })
        })
    }

    /// The workflow's own windows, else the daemon-wide ones.
    fn snapshot(&self, snap: &mut Snapshot, _now_ms: i64) {
        snap.spend_ceiling = self
            .ceilings
            .clone()
            .or_else(|| self.daemon_ceilings.clone());
    }
}

/// The live estimate of every session running now (and of those whose run record has not
/// committed yet), priced under the rates in force.
fn live_spend(cx: &Cx<'_>) -> LiveSpend {
    let book = cx.prices.current();
    let kind = &cx.workflow.config.agent.kind;
    let sessions = cx
        .state
        .running
        .values()
        .map(|e| &e.facts)
        .chain(cx.state.awaiting_record.values().map(|a| &a.entry.facts));
    let mut live = LiveSpend::default();
    for facts in sessions {
        let price = session_price(facts, kind, &book);
        live.usd += price.cost_usd.unwrap_or(0.0);
        live.complete &= price.status == CostStatus::Estimated;
    }
    live
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
