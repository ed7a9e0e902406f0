//! Spend: the per-run and per-issue money budgets, the rolling spend ceilings over every
//! run, and what a session costs.

pub mod ceiling;
pub mod daemon;
pub mod feature;
pub(crate) mod hooks;
pub mod money_budget;
pub mod session_cost;
