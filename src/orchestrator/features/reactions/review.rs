//! The `review` and `bot-review` kinds: actionable comments (not outdated; from people, or
//! from the configured bot accounts) that no run was given yet dispatch one fix run per new
//! comment set, up to `max_continuation_turns`. Human review waits `debounce_ms` after the
//! newest comment; with nothing to answer, a missing required approval is reported.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::domain::{EscalationTrigger, ReactionKind, ReactionWait};
use crate::scm::{ReviewComment, ReviewDecision};

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::{LastCheck, ReactionRow};
use super::step::{FixContext, Step};
use crate::prompt::ReviewCommentContext;

/// The settings either kind applies.
struct Rules {
    bots: BTreeSet<String>,
    debounce_ms: u64,
    poll_interval_ms: u64,
    max_turns: u32,
}

fn rules(kind: ReactionKind, cx: &CheckCx<'_>) -> Option<Rules> {
    let bots: BTreeSet<String> = cx
        .cfg
        .bot_review
        .as_ref()
        .map(|b| b.bot_usernames.iter().map(|u| u.to_lowercase()).collect())
        .unwrap_or_default();
    match kind {
        ReactionKind::Review => cx.cfg.review_comments.as_ref().map(|c| Rules {
            bots,
            debounce_ms: c.debounce_ms,
            poll_interval_ms: c.poll_interval_ms,
            max_turns: c.max_continuation_turns,
        }),
        _ => cx.cfg.bot_review.as_ref().map(|c| Rules {
            bots,
            debounce_ms: 0,
            poll_interval_ms: c.poll_interval_ms,
            max_turns: c.max_continuation_turns,
        }),
    }
}

/// The comments the kind acts on.
fn actionable(
    kind: ReactionKind,
    all: Vec<ReviewComment>,
    bots: &BTreeSet<String>,
) -> Vec<ReviewComment> {
    all.into_iter()
        .filter(|c| !c.outdated)
        .filter(|c| {
            let listed = bots.contains(&c.reviewer.to_lowercase());
            match kind {
                ReactionKind::Review => !listed && !c.from_bot,
                _ => listed,
            }
        })
        .collect()
}

/// Hex SHA-256 of the sorted ids joined by newlines.
pub fn fingerprint(ids: &[&str]) -> String {
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    let digest = Sha256::digest(sorted.join("\n").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn check(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(rules) = rules(row.kind, cx) else {
        return Step::End {
            why: "the review reaction is no longer configured",
        };
    };
    let base = rules.poll_interval_ms.max(10_000);
    let pr = row.pr.pr.clone();
    let all = match cx.read(|s| s.review_comments(&pr)) {
        Ok(c) => c,
        Err(_) => return cx.backoff(base, row.backoff_count + 1),
    };
    let actionable = actionable(row.kind, all, &rules.bots);
    let fresh: Vec<&ReviewComment> = actionable
        .iter()
        .filter(|c| !mem.given.contains(&c.id))
        .collect();
    row.max_attempts = Some(rules.max_turns);
    let awaiting = if actionable.is_empty() && row.kind == ReactionKind::Review {
        match cx.read(|s| s.review_decision(&pr)) {
            Ok(d) => d == ReviewDecision::ReviewRequired,
            Err(_) => previous_awaiting(row),
        }
    } else {
        false
    };
    row.last_check = Some(last_check(
        row.kind,
        cx.now_ms,
        actionable.len(),
        fresh.len(),
        awaiting,
    ));
    if awaiting {
        read_url(row, cx);
    }
    decide(row, mem, cx, &rules, &fresh)
}

fn decide(
    row: &mut ReactionRow,
    mem: &RowMemory,
    cx: &mut CheckCx<'_>,
    rules: &Rules,
    fresh: &[&ReviewComment],
) -> Step {
    let interval = rules.poll_interval_ms;
    if fresh.is_empty() {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    let ids: Vec<&str> = fresh.iter().map(|c| c.id.as_str()).collect();
    let print = fingerprint(&ids);
    if mem.dispatched(&print) {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    let newest = fresh.iter().map(|c| c.created_at_ms).max().unwrap_or(0);
    let quiet_at = newest.saturating_add(rules.debounce_ms as i64);
    if rules.debounce_ms > 0 && cx.now_ms < quiet_at {
        return Step::Wait {
            wait: ReactionWait::Debounce,
            next_poll_at_ms: quiet_at,
        };
    }
    let used = row.used_attempts.unwrap_or(0);
    if row.escalated_at_ms.is_some() && used >= rules.max_turns {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    row.escalated_at_ms = None;
    row.escalation_trigger = None;
    if used >= rules.max_turns {
        return Step::Escalate {
            trigger: EscalationTrigger::BudgetExhausted,
        };
    }
    if cx.slot_busy {
        row.watch_from_ms = cx.now_ms;
        return cx.wait(ReactionWait::RetrySlot, interval);
    }
    Step::Dispatch {
        context: Some(FixContext::ReviewComments(
            fresh.iter().map(|c| given(c)).collect(),
        )),
        fingerprint: Some(print),
        given: ids.iter().map(|s| s.to_string()).collect(),
        counts: true,
    }
}

/// A check that cannot read the review decision keeps the previous value.
fn previous_awaiting(row: &ReactionRow) -> bool {
    matches!(
        row.last_check,
        Some(LastCheck::Review {
            awaiting_approval: true,
            ..
        })
    )
}

/// While approval is awaited the pull request is read on every check, so its link follows it.
fn read_url(row: &mut ReactionRow, cx: &mut CheckCx<'_>) {
    let pr = row.pr.pr.clone();
    if let Ok(info) = cx.read(|s| s.pull_request(&pr))
        && !info.url.is_empty()
    {
        row.pr.url = info.url;
    }
}

fn last_check(
    kind: ReactionKind,
    now_ms: i64,
    actionable: usize,
    fresh: usize,
    awaiting: bool,
) -> LastCheck {
    let actionable_comments = actionable as u32;
    let new_comments = fresh as u32;
    match kind {
        ReactionKind::Review => LastCheck::Review {
            observed_at_ms: now_ms,
            actionable_comments,
            new_comments,
            awaiting_approval: awaiting,
        },
        _ => LastCheck::BotReview {
            observed_at_ms: now_ms,
            actionable_comments,
            new_comments,
            handled: false,
        },
    }
}

fn given(c: &ReviewComment) -> ReviewCommentContext {
    ReviewCommentContext {
        id: c.id.clone(),
        file: c.file.clone(),
        start_line: c.start_line,
        end_line: c.end_line,
        reviewer: c.reviewer.clone(),
        body: c.body.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_ignores_order() {
        assert_eq!(fingerprint(&["b", "a"]), fingerprint(&["a", "b"]));
        assert_ne!(fingerprint(&["a"]), fingerprint(&["a", "b"]));
        assert_eq!(fingerprint(&["a", "b"]).len(), 64);
    }
}
