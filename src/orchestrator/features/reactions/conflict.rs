//! The `merge-conflict` kind: a pull request the forge reports as conflicting dispatches one
//! rebase run per head, up to `max_retries` per conflict episode; mergeability not computed
//! yet waits; the conflict gone ends the episode and a standing escalation.

use crate::domain::{EscalationTrigger, ReactionWait};

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::{LastCheck, ReactionRow};
use super::step::Step;

pub fn check(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(cfg) = cx.cfg.merge_conflicts.clone() else {
        return Step::End {
            why: "merge_conflicts is no longer configured",
        };
    };
    let interval = cfg.poll_interval_ms;
    let info = match cx.open_pull_request(row, interval) {
        Ok(i) => i,
        Err(step) => return *step,
    };
    row.max_attempts = Some(cfg.max_retries);
    row.last_check = Some(LastCheck::MergeConflict {
        observed_at_ms: cx.now_ms,
        head_sha: info.head_sha.clone(),
        mergeable: info.mergeable,
    });
    match info.mergeable {
        None => cx.wait(ReactionWait::PollInterval, interval),
        Some(true) => {
            row.used_attempts = Some(0);
            row.escalated_at_ms = None;
            row.escalation_trigger = None;
            mem.fingerprint = None;
            cx.wait(ReactionWait::PollInterval, interval)
        }
        Some(false) => conflicting(row, mem, cx, cfg.max_retries, interval, &info.head_sha),
    }
}

fn conflicting(
    row: &mut ReactionRow,
    mem: &RowMemory,
    cx: &CheckCx<'_>,
    max: u32,
    interval: u64,
    head: &str,
) -> Step {
    let used = row.used_attempts.unwrap_or(0);
    if row.escalated_at_ms.is_some() {
        if used < max {
            row.escalated_at_ms = None;
            row.escalation_trigger = None;
        } else {
            return cx.wait(ReactionWait::PollInterval, interval);
        }
    }
    if mem.dispatched(head) {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    if used >= max {
        return Step::Escalate {
            trigger: EscalationTrigger::BudgetExhausted,
        };
    }
    if cx.slot_busy {
        return cx.wait(ReactionWait::RetrySlot, interval);
    }
    Step::Dispatch {
        context: None,
        fingerprint: Some(head.to_string()),
        given: Vec::new(),
        counts: true,
    }
}
