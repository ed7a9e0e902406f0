//! The `merge-completion` kind: once the pull request merged (by anyone), the issue moves to
//! `target_state` and its outcome is `merged`. A merged pull request without a merge commit
//! after a grace period escalates (`missing_merge_commit`); a closed one ends the watch.
//! Failed transitions are counted by the scheduler, which applies [`Step::Merged`].

use crate::domain::{EscalationTrigger, ReactionWait};

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::ReactionRow;
use super::step::Step;

/// How long a merged pull request may lack its merge commit before escalating.
pub const MERGE_COMMIT_GRACE_MS: i64 = 5 * 60 * 1000;

pub fn check(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(cfg) = cx.cfg.merge_completion.clone() else {
        return Step::End {
            why: "merge_completion is no longer configured",
        };
    };
    let interval = cfg.poll_interval_ms;
    row.max_attempts = Some(cfg.max_retries);
    if row.escalated_at_ms.is_some() {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    if cx.slot_busy {
        return cx.wait(ReactionWait::RetrySlot, interval);
    }
    let info = match cx.pull_request(row, interval) {
        Ok(i) => i,
        Err(step) => return *step,
    };
    if !info.merged {
        if !info.open {
            return Step::End {
                why: "the pull request closed without merging",
            };
        }
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    if info.merge_commit_sha.as_deref().unwrap_or("").is_empty() {
        let seen = *mem.merged_seen_at_ms.get_or_insert(cx.now_ms);
        if cx.now_ms - seen >= MERGE_COMMIT_GRACE_MS {
            return Step::Escalate {
                trigger: EscalationTrigger::MissingMergeCommit,
            };
        }
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    Step::Merged {
        merge_path: "merge_completion",
        transition_to: Some(cfg.target_state.clone()),
        merged_here: false,
    }
}
