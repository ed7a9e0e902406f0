//! The spend ceiling gauges: each spend window's estimated spend, its ceiling, and whether it
//! holds dispatch, by `window`, as of the latest poll tick or retry check. Set at scrape time
//! from the published snapshot, like the other gauges.

use prometheus::GaugeVec;

use super::catalogue::SPEND_WINDOWS;
use super::registry::Reg;

/// One window that has a ceiling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpendGauge {
    /// A [`SPEND_WINDOWS`] value.
    pub window: &'static str,
    pub used_usd: f64,
    pub budget_usd: f64,
    pub holding: bool,
}

pub(super) struct SpendGauges {
    used: GaugeVec,
    budget: GaugeVec,
    holding: GaugeVec,
}

impl SpendGauges {
    pub(super) fn register(reg: &Reg) -> SpendGauges {
        SpendGauges {
            used: reg.gauge_vec(
                "sortie_spend_ceiling_used_usd",
                "Estimated spend of the spend window in US dollars: recorded run costs plus the live estimate.",
                "window",
            ),
            budget: reg.gauge_vec(
                "sortie_spend_ceiling_budget_usd",
                "The spend window's ceiling in US dollars.",
                "window",
            ),
            holding: reg.gauge_vec(
                "sortie_spend_ceiling_holding",
                "1 while the spend window's spend has reached its ceiling and holds dispatch.",
                "window",
            ),
        }
    }

    /// Sets the listed windows and removes the series of the others.
    pub(super) fn set(&self, windows: &[SpendGauge]) {
        for &name in SPEND_WINDOWS {
            let families = [&self.used, &self.budget, &self.holding];
            match windows.iter().find(|w| w.window == name) {
                Some(w) => {
                    self.used.with_label_values(&[name]).set(w.used_usd);
                    self.budget.with_label_values(&[name]).set(w.budget_usd);
                    self.holding
                        .with_label_values(&[name])
                        .set(if w.holding { 1.0 } else { 0.0 });
                }
                None => {
                    for f in families {
                        // Absent already: nothing to remove.
                        let _ = f.remove_label_values(&[name]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GaugeValues, Metrics};
    use super::*;

    #[test]
    fn a_set_window_has_three_series_and_an_unset_one_none() {
        let m = Metrics::new(&Default::default());
        m.set_spend(&[SpendGauge {
            window: "daily",
            used_usd: 0.5,
            budget_usd: 0.25,
            holding: true,
        }]);
        let t = m.render(&GaugeValues::default());
        assert!(
            t.contains("sortie_spend_ceiling_used_usd{window=\"daily\"} 0.5"),
            "{t}"
        );
        assert!(t.contains("sortie_spend_ceiling_budget_usd{window=\"daily\"} 0.25"));
        assert!(t.contains("sortie_spend_ceiling_holding{window=\"daily\"} 1"));
        assert!(!t.contains("window=\"weekly\""));
        m.set_spend(&[]);
        let t = m.render(&GaugeValues::default());
        assert!(!t.contains("sortie_spend_ceiling_used_usd{"), "{t}");
    }
}
