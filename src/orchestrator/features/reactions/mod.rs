//! Pull-request reactions: after a run hands off a pull request, `orch` keeps watching it (CI,
//! reviews, conflicts, merge, label commands), dispatches fix runs as continuation retries
//! carrying the reaction's context into the prompt, and escalates to a person when a kind's
//! budget is spent.
//!
//! Each kind's check is a function of the row, the engine's memory and the forge
//! ([`cx::CheckCx`]); it returns a [`step::Step`] that the feature turns into effects
//! (`apply_pass.rs`, `act.rs`: retries, escalation writes, outcomes, persistence), applied by
//! the loop.

mod act;
mod activity;
mod apply_pass;
mod cadence;
pub mod check_now;
pub(crate) mod check_request;
mod ci;
mod completion;
mod conflict;
pub mod cx;
pub mod escalation;
pub mod feature;
#[cfg(test)]
mod feature_tests;
mod holds;
pub(crate) mod hooks;
mod labels;
pub mod memory;
mod merge;
pub(crate) mod pass;
mod rebuild;
mod review;
pub mod row;
pub mod seed;
pub mod step;
#[cfg(test)]
mod tests;
pub mod triage;
pub(crate) mod triage_hooks;
pub mod triage_run;
mod triage_verdict;

pub use memory::RowMemory;
pub use row::{CheckNow, LastCheck, ReactionIssue, ReactionPr, ReactionRow, RunReaction};
pub use step::{FixContext, Step};

use crate::domain::ReactionKind;

/// Checks one due row; a fix goes through triage when the kind asks for it.
pub fn check_row(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut cx::CheckCx<'_>) -> Step {
    let before = triage::EscalationBefore::of(row);
    let step = check_kind(row, mem, cx);
    triage::before_fix(step, row, mem, cx, before)
}

fn check_kind(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut cx::CheckCx<'_>) -> Step {
    match row.kind {
        ReactionKind::Ci => ci::check(row, mem, cx),
        ReactionKind::Review | ReactionKind::BotReview => review::check(row, mem, cx),
        ReactionKind::MergeConflict => conflict::check(row, mem, cx),
        ReactionKind::Merge => merge::check(row, mem, cx),
        ReactionKind::MergeCompletion => completion::check(row, mem, cx),
        ReactionKind::LabelReview | ReactionKind::LabelFix => labels::check(row, mem, cx),
    }
}

/// The review-comment fingerprint (hex SHA-256 of the sorted ids).
pub fn comment_fingerprint(ids: &[&str]) -> String {
    review::fingerprint(ids)
}
