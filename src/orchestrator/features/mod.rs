//! The orchestrator's features, one folder each (ARCHITECTURE.md, "Where the orchestrator's
//! features live"). Each owns its slice of scheduling state and the orchestrator's hooks for it.

pub mod agent_holds;
pub mod hosts;
pub mod reactions;
pub mod self_review;
pub mod spend;
pub mod stages;
