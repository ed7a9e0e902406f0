//! An issue's estimated cost: the costs recorded with its completed runs plus the live
//! estimate of a running session, with the status the seed gives `issue_cost_status`.

use super::cost::CostStatus;

/// What an issue's parts (its runs, and a running session) contribute to its cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IssueCostParts {
    /// Σ of the priced parts' costs.
    pub usd: f64,
    /// Some part is priced (a part measured at zero tokens included).
    pub any_priced: bool,
    /// Some priced part spent tokens.
    pub priced_with_spend: bool,
    /// Some part that spent tokens has no rate, or a priced part is itself a lower bound.
    pub left_out: bool,
    /// Some part that spent tokens is unpriced.
    pub unpriced_with_spend: bool,
    /// The token figures cover the issue's whole spend (`used_tokens_complete`).
    pub tokens_complete: bool,
    /// The issue's token figure is known (`used_tokens` is non-null).
    pub tokens_known: bool,
}

impl IssueCostParts {
    /// Adds one run's or session's recorded price: its status, cost and whether it spent tokens.
    pub fn add(&mut self, status: CostStatus, usd: Option<f64>, spent: bool) {
        match status {
            CostStatus::Estimated | CostStatus::Partial => {
                self.usd += usd.unwrap_or(0.0);
                self.any_priced = true;
                self.priced_with_spend |= spent;
                self.left_out |= status == CostStatus::Partial;
            }
            CostStatus::Unpriced if spent => {
                self.unpriced_with_spend = true;
                self.left_out = true;
            }
            CostStatus::Unpriced | CostStatus::Unmeasured => {}
        }
    }

    /// The issue's estimated cost and its status; the cost is `Some` exactly when priced.
    pub fn total(&self) -> (Option<f64>, CostStatus) {
        if !self.tokens_known {
            return (None, CostStatus::Unmeasured);
        }
        let priced = |whole: bool| {
            let status = if whole {
                CostStatus::Estimated
            } else {
                CostStatus::Partial
            };
            (Some(self.usd), status)
        };
        if self.priced_with_spend {
            return priced(self.tokens_complete && !self.left_out);
        }
        if self.unpriced_with_spend {
            return (None, CostStatus::Unpriced);
        }
        if self.any_priced {
            return priced(self.tokens_complete);
        }
        (None, CostStatus::Unmeasured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(complete: bool) -> IssueCostParts {
        IssueCostParts {
            tokens_complete: complete,
            tokens_known: true,
            ..IssueCostParts::default()
        }
    }

    #[test]
    fn priced_parts_sum_and_a_left_out_part_makes_the_issue_partial() {
        let mut p = known(true);
        p.add(CostStatus::Estimated, Some(1.5), true);
        p.add(CostStatus::Estimated, Some(0.25), true);
        assert_eq!(p.total(), (Some(1.75), CostStatus::Estimated));
        p.add(CostStatus::Unpriced, None, true);
        assert_eq!(p.total(), (Some(1.75), CostStatus::Partial));
    }

    #[test]
    fn a_zero_token_part_without_a_rate_leaves_nothing_out() {
        let mut p = known(true);
        p.add(CostStatus::Estimated, Some(2.0), true);
        p.add(CostStatus::Unpriced, None, false);
        assert_eq!(p.total(), (Some(2.0), CostStatus::Estimated));
    }

    #[test]
    fn only_unpriced_spend_is_unpriced_and_unknown_tokens_are_unmeasured() {
        let mut p = known(true);
        p.add(CostStatus::Unpriced, None, true);
        assert_eq!(p.total(), (None, CostStatus::Unpriced));
        let mut u = IssueCostParts::default();
        u.add(CostStatus::Estimated, Some(1.0), true);
        assert_eq!(u.total(), (None, CostStatus::Unmeasured));
        assert_eq!(known(true).total(), (None, CostStatus::Unmeasured));
    }

    #[test]
    fn incomplete_tokens_make_a_priced_issue_a_lower_bound() {
        let mut p = known(false);
        p.add(CostStatus::Estimated, Some(1.0), true);
        assert_eq!(p.total(), (Some(1.0), CostStatus::Partial));
    }
}
