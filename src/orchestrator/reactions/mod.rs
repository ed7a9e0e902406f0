//! Pull-request reactions: after a run hands off a pull request, `orch` keeps watching it (CI,
//! reviews, conflicts, merge, label commands), dispatches fix runs as continuation retries
//! carrying the reaction's context into the prompt, and escalates to a person when a kind's
//! budget is spent.

pub mod check_now;
pub mod row;

pub use row::{CheckNow, LastCheck, ReactionIssue, ReactionPr, ReactionRow, RunReaction};
