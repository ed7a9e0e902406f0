//! Instance-wide spend ceilings (`agent.max_daily_cost_usd`, `agent.max_weekly_cost_usd`,
//! `agent.max_monthly_cost_usd`): each window's spend is the cost recorded with every run
//! that ended in it plus the live estimate of the sessions running now, and a window whose
//! spend reached its ceiling holds every new agent session until it resets or the ceiling is
//! raised. Running sessions are never stopped by a window.
//!
//! The evaluation is pure over what it is given (the ceilings, the time, the recorded spend
//! a reader returns per window, the live estimate, the previous evaluation); the orchestrator
//! runs it at each poll tick and retry check (`spend::hooks`).

mod window;

pub use window::bounds;

use crate::domain::SpendWindow;
use crate::store::RecordedSpend;

use crate::orchestrator::claim::dispatch_pass::HoldReason;

/// The ceilings in force, in US dollars; `None`: the window is off.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ceilings {
    pub daily: Option<f64>,
    pub weekly: Option<f64>,
    pub monthly: Option<f64>,
}

impl Ceilings {
    /// The three settings; 0 (read as `None`) or anything not above 0 is off.
    pub fn from_config(agent: &crate::config::AgentConfig) -> Ceilings {
        let on = |v: Option<f64>| v.filter(|c| c.is_finite() && *c > 0.0);
        Ceilings {
            daily: on(agent.max_daily_cost_usd),
            weekly: on(agent.max_weekly_cost_usd),
            monthly: on(agent.max_monthly_cost_usd),
        }
    }

    pub fn of(&self, window: SpendWindow) -> Option<f64> {
        match window {
            SpendWindow::Daily => self.daily,
            SpendWindow::Weekly => self.weekly,
            SpendWindow::Monthly => self.monthly,
        }
    }

    pub fn any(&self) -> bool {
        SpendWindow::ALL.iter().any(|w| self.of(*w).is_some())
    }
}

/// The live part of every window's spend: the estimate of the sessions running now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveSpend {
    pub usd: f64,
    /// False when a running session's estimate is a lower bound or missing.
    pub complete: bool,
}

impl Default for LiveSpend {
    fn default() -> Self {
        LiveSpend {
            usd: 0.0,
            complete: true,
        }
    }
}

/// One window as of an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowState {
    pub window: SpendWindow,
    pub budget_usd: f64,
    pub used_usd: f64,
    /// False exactly when `used_usd` is a lower bound.
    pub used_usd_complete: bool,
    pub holds_dispatch: bool,
    /// The window's start (part of the attention item's id).
    pub start_ms: i64,
    /// The window's end, when it resets.
    pub resets_at_ms: i64,
    /// While the window holds: the first evaluation that found it holding at this start and
    /// this ceiling (kept in memory only, so a restart resets it).
    pub hold_since_ms: Option<i64>,
}

/// Every window as of the latest evaluation; a window is `None` while its ceiling is off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpendCeilings {
    pub daily: Option<WindowState>,
    pub weekly: Option<WindowState>,
    pub monthly: Option<WindowState>,
}

impl SpendCeilings {
    pub fn of(&self, window: SpendWindow) -> Option<&WindowState> {
        match window {
            SpendWindow::Daily => self.daily.as_ref(),
            SpendWindow::Weekly => self.weekly.as_ref(),
            SpendWindow::Monthly => self.monthly.as_ref(),
        }
    }

    fn slot(&mut self, window: SpendWindow) -> &mut Option<WindowState> {
        match window {
            SpendWindow::Daily => &mut self.daily,
            SpendWindow::Weekly => &mut self.weekly,
            SpendWindow::Monthly => &mut self.monthly,
        }
    }

    /// The windows that are set, daily first.
    pub fn windows(&self) -> impl Iterator<Item = &WindowState> {
        SpendWindow::ALL.iter().filter_map(|w| self.of(*w))
    }

    /// The windows that hold dispatch now, daily first.
    pub fn holding(&self) -> impl Iterator<Item = &WindowState> {
        self.windows().filter(|w| w.holds_dispatch)
    }

    /// The hold every candidate gets while a window holds: dispatch resumes only when every
    /// holding window clears, so the hold names the one that resets last (the longer window
    /// on a tie).
    pub fn hold(&self) -> Option<HoldReason> {
        self.holding()
            .max_by_key(|w| w.resets_at_ms)
            .map(|w| HoldReason::SpendCeiling {
                window: w.window,
                resets_at_ms: w.resets_at_ms,
            })
    }
}

/// Evaluates every set window at `now_ms`. `read(start, end)` answers the recorded spend of
/// the runs that ended in `[start, end)`; its first error ends the evaluation (the caller
/// keeps the previous one: a ceiling fails closed). `None` when no ceiling is set.
pub fn evaluate<E>(
    ceilings: Ceilings,
    now_ms: i64,
    live: LiveSpend,
    previous: Option<&SpendCeilings>,
    mut read: impl FnMut(i64, i64) -> Result<RecordedSpend, E>,
) -> Result<Option<SpendCeilings>, E> {
    if !ceilings.any() {
        return Ok(None);
    }
    let mut out = SpendCeilings::default();
    for &window in SpendWindow::ALL {
        let Some(budget) = ceilings.of(window) else {
            continue;
        };
        let Some((start, end)) = bounds(window, now_ms) else {
            continue;
        };
        let recorded = read(start, end)?;
        let before = previous.and_then(|p| p.of(window));
        *out.slot(window) = Some(window_state(
            window,
            budget,
            (start, end),
            recorded,
            live,
            before,
            now_ms,
        ));
    }
    Ok(Some(out))
}

/// One window's state from its spend; a hold keeps the time it began while the window's
/// start and ceiling stay the same (a new window or an edited ceiling is a new hold).
fn window_state(
    window: SpendWindow,
    budget_usd: f64,
    (start_ms, resets_at_ms): (i64, i64),
    recorded: RecordedSpend,
    live: LiveSpend,
    before: Option<&WindowState>,
    now_ms: i64,
) -> WindowState {
    let used_usd = recorded.usd.max(0.0) + live.usd.max(0.0);
    let holds_dispatch = used_usd >= budget_usd;
    let hold_since_ms = holds_dispatch.then(|| {
        before
            .filter(|b| b.start_ms == start_ms && b.budget_usd == budget_usd)
            .and_then(|b| b.hold_since_ms)
            .unwrap_or(now_ms)
    });
    WindowState {
        window,
        budget_usd,
        used_usd,
        used_usd_complete: recorded.incomplete_runs == 0 && live.complete,
        holds_dispatch,
        start_ms,
        resets_at_ms,
        hold_since_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thursday 2026-03-26T14:30:00Z.
    const NOW: i64 = 1_774_535_400_000;

    fn spent(usd: f64) -> impl FnMut(i64, i64) -> Result<RecordedSpend, String> {
        move |_, _| {
            Ok(RecordedSpend {
                usd,
                runs: 1,
                incomplete_runs: 0,
            })
        }
    }

    fn daily(budget: f64) -> Ceilings {
        Ceilings {
            daily: Some(budget),
            ..Default::default()
        }
    }

    #[test]
    fn no_ceiling_means_no_evaluation_and_no_read() {
        let got = evaluate(
            Ceilings::default(),
            NOW,
            LiveSpend::default(),
            None,
            |_, _| Err("read".to_string()),
        );
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn a_window_holds_once_recorded_plus_live_spend_reaches_its_ceiling() {
        let below = evaluate(daily(1.0), NOW, LiveSpend::default(), None, spent(0.6))
            .unwrap()
            .unwrap();
        let d = below.daily.as_ref().unwrap();
        assert!(!d.holds_dispatch && d.hold_since_ms.is_none());
        assert!(below.weekly.is_none() && below.monthly.is_none());
        assert_eq!(below.hold(), None);
        let live = LiveSpend {
            usd: 0.4,
            complete: false,
        };
        let at = evaluate(daily(1.0), NOW, live, Some(&below), spent(0.6))
            .unwrap()
            .unwrap();
        let d = at.daily.as_ref().unwrap();
        assert!(d.holds_dispatch);
        assert!(!d.used_usd_complete, "a live lower bound makes the sum one");
        assert_eq!(d.hold_since_ms, Some(NOW));
        assert_eq!(
            at.hold(),
            Some(HoldReason::SpendCeiling {
                window: SpendWindow::Daily,
                resets_at_ms: d.resets_at_ms
            })
        );
        // Later evaluations keep when the hold began; a raised ceiling is a new hold.
        let later = evaluate(daily(1.0), NOW + 5, live, Some(&at), spent(0.7)).unwrap();
        assert_eq!(later.unwrap().daily.unwrap().hold_since_ms, Some(NOW));
        let raised = evaluate(daily(1.1), NOW + 9, live, Some(&at), spent(0.7)).unwrap();
        assert_eq!(raised.unwrap().daily.unwrap().hold_since_ms, Some(NOW + 9));
    }

    #[test]
    fn an_incomplete_run_makes_the_window_a_lower_bound() {
        let got = evaluate(daily(5.0), NOW, LiveSpend::default(), None, |_, _| {
            Ok::<_, String>(RecordedSpend {
                usd: 1.0,
                runs: 2,
                incomplete_runs: 1,
            })
        })
        .unwrap()
        .unwrap();
        assert!(!got.daily.unwrap().used_usd_complete);
    }

    #[test]
    fn the_hold_names_the_holding_window_that_resets_last() {
        let all = Ceilings {
            daily: Some(1.0),
            weekly: Some(1.0),
            monthly: Some(100.0),
        };
        let got = evaluate(all, NOW, LiveSpend::default(), None, spent(2.0))
            .unwrap()
            .unwrap();
        assert_eq!(got.holding().count(), 2);
        assert!(matches!(
            got.hold(),
            Some(HoldReason::SpendCeiling {
                window: SpendWindow::Weekly,
                ..
            })
        ));
    }

    #[test]
    fn a_failed_read_is_an_error_not_an_open_window() {
        let got = evaluate(daily(1.0), NOW, LiveSpend::default(), None, |_, _| {
            Err("disk".to_string())
        });
        assert_eq!(got, Err("disk".to_string()));
    }
}
