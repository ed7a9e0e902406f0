//! The orchestrator's features, one folder each (ARCHITECTURE.md, "The orchestrator's
//! layout"). A converted feature owns its slice of scheduling state and implements
//! `core::feature::Feature` in its `feature.rs`; the loop applies the effects it returns.

pub mod agent_holds;
pub mod hosts;
pub mod reactions;
pub mod self_review;
pub mod spend;
pub mod stages;

use crate::orchestrator::core::feature::Feature;

/// The converted features, owned by the loop.
#[derive(Debug, Default)]
pub struct Features {
    pub spend: spend::feature::SpendFeature,
    pub agent_holds: agent_holds::feature::AgentHoldsFeature,
    pub hosts: hosts::feature::HostsFeature,
    pub self_review: self_review::feature::SelfReviewFeature,
    pub reactions: reactions::feature::ReactionsFeature,
    pub stages: stages::feature::StagesFeature,
}

impl Features {
    /// Every converted feature in its declared order: the order the dispatch pass asks their
    /// gates in, so the order their hold reasons win. The failure breaker's gate (claim core)
    /// comes before them. A spend window holds every dispatch, and an agent-kind hold every
    /// dispatch of the kind: a freed slot, host or closed blocker would not dispatch the
    /// issue, so their reasons win over those; an unconfirmed stage hop's comes last.
    pub fn in_order(&self) -> [&dyn Feature; 6] {
        [
            &self.spend,
            &self.agent_holds,
            &self.hosts,
            &self.self_review,
            &self.reactions,
            &self.stages,
        ]
    }

    /// [`Features::in_order`], to call the methods that change a feature's state.
    pub fn in_order_mut(&mut self) -> [&mut dyn Feature; 6] {
        [
            &mut self.spend,
            &mut self.agent_holds,
            &mut self.hosts,
            &mut self.self_review,
            &mut self.reactions,
            &mut self.stages,
        ]
    }
}
