//! The state document's `spend_ceiling`: each spend window's estimated spend against its
//! ceiling as of the latest poll tick or retry check.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::spend_ceiling::{SpendCeilings, WindowState};

use super::ts;

/// One window that has a ceiling.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "SpendCeilingWindow")]
pub struct SpendWindowView {
    /// The ceiling, in US dollars.
    pub budget_usd: f64,
    /// The cost recorded with every run that ended in the window plus the live estimate of
    /// the sessions running now.
    pub used_usd: f64,
    /// False exactly when `used_usd` is a lower bound.
    pub used_usd_complete: bool,
    /// True while the spend has reached `budget_usd`: no new agent session starts.
    pub holds_dispatch: bool,
    /// The end of the window.
    pub resets_at: String,
}

/// The three windows; each null while its setting is 0.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "SpendCeiling")]
pub struct SpendCeilingView {
    pub daily: Option<SpendWindowView>,
    pub weekly: Option<SpendWindowView>,
    pub monthly: Option<SpendWindowView>,
}

impl SpendWindowView {
    fn build(w: &WindowState) -> SpendWindowView {
        SpendWindowView {
            budget_usd: w.budget_usd,
            used_usd: w.used_usd,
            used_usd_complete: w.used_usd_complete,
            holds_dispatch: w.holds_dispatch,
            resets_at: ts(w.resets_at_ms),
        }
    }
}

impl SpendCeilingView {
    /// `None` (the member is omitted) while no window has a ceiling.
    pub fn build(spend: Option<&SpendCeilings>) -> Option<SpendCeilingView> {
        let s = spend?;
        let view = SpendCeilingView {
            daily: s.daily.as_ref().map(SpendWindowView::build),
            weekly: s.weekly.as_ref().map(SpendWindowView::build),
            monthly: s.monthly.as_ref().map(SpendWindowView::build),
        };
        (view.daily.is_some() || view.weekly.is_some() || view.monthly.is_some()).then_some(view)
    }
}
