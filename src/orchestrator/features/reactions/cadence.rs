//! A pending reaction's cadence: when its next check is due after a step.

use crate::config::reactions::ReactionsConfig;
use crate::domain::ReactionKind;
use crate::domain::ReactionWait;
use crate::orchestrator::features::reactions::ReactionRow;

/// The row waits `wait` until `next_poll_at_ms`; a backoff counts one more failed check, any
/// other wait ends the count.
pub(crate) fn set_wait(row: &mut ReactionRow, wait: ReactionWait, next_poll_at_ms: i64) {
    if wait == ReactionWait::Backoff {
        row.backoff_count += 1;
    } else {
        row.backoff_count = 0;
    }
    row.wait = Some(wait);
    row.next_poll_at_ms = next_poll_at_ms;
}

/// The kind's check cadence.
pub(crate) fn poll_interval(kind: ReactionKind, cfg: &ReactionsConfig, base_ms: u64) -> u64 {
    let v = match kind {
        ReactionKind::Ci => None,
        ReactionKind::Review => cfg.review_comments.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::BotReview => cfg.bot_review.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::Merge => cfg.auto_merge.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::MergeCompletion => cfg.merge_completion.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::LabelReview | ReactionKind::LabelFix => {
            cfg.label_commands.as_ref().map(|c| c.poll_interval_ms)
        }
    };
    v.unwrap_or(base_ms)
}
