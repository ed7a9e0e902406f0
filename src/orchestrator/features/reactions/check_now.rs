//! The give-back half of a check made due on request: when the brought-forward check leaves
//! the reaction pending and started before the time the request replaced, the reaction gets
//! that time back, and the lower of the two backoff counts, so a request never leaves the
//! next check later, or the backoff higher, than without it.

use super::ReactionRow;

/// Applies the rule to `row` after a check that began at `check_started_at_ms` returned it
/// to the pending set, and clears `check_now`. A check at or after the replaced time is one
/// the reaction had anyway: its own schedule stands.
pub fn settle_check_now(row: &mut ReactionRow, check_started_at_ms: i64) {
    let Some(asked) = row.check_now.take() else {
        return;
    };
    if check_started_at_ms >= asked.replaced_next_poll_at_ms {
        return;
    }
    row.next_poll_at_ms = asked.replaced_next_poll_at_ms;
    row.backoff_count = row.backoff_count.min(asked.backoff_count_before);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ReactionKind;
    use crate::orchestrator::features::reactions::{CheckNow, ReactionIssue, ReactionPr};
    use crate::scm::PullRequestRef;

    fn row(next_poll_at_ms: i64, backoff_count: u32, check_now: Option<CheckNow>) -> ReactionRow {
        ReactionRow {
            issue: ReactionIssue::default(),
            kind: ReactionKind::Ci,
            pr: ReactionPr {
                pr: PullRequestRef {
                    owner: "o".into(),
                    repo: "r".into(),
                    number: 1,
                },
                url: String::new(),
                branch: String::new(),
                head_sha: String::new(),
            },
            created_at_ms: 0,
            dispatched_at_ms: None,
            chain_id: String::new(),
            next_poll_at_ms,
            wait: None,
            used_attempts: None,
            max_attempts: None,
            escalated_at_ms: None,
            escalation_trigger: None,
            watch_from_ms: 0,
            watch_window_ms: 0,
            last_check: None,
            rule_name: String::new(),
            agent_kind: String::new(),
            configured_model: String::new(),
            backoff_count,
            check_now,
        }
    }

    fn asked(replaced: i64, before: u32) -> Option<CheckNow> {
        Some(CheckNow {
            replaced_next_poll_at_ms: replaced,
            backoff_count_before: before,
        })
    }

    #[test]
    fn an_early_check_gives_the_replaced_time_and_the_lower_backoff_back() {
        // The check failed (backoff 2 → 3) and scheduled itself at 15s; the request had
        // replaced 60s with backoff 2.
        let mut r = row(15_000, 3, asked(60_000, 2));
        settle_check_now(&mut r, 10_000);
        assert_eq!(
            (r.next_poll_at_ms, r.backoff_count, r.check_now),
            (60_000, 2, None)
        );
    }

    #[test]
    fn a_check_that_lowered_the_backoff_keeps_its_lower_count() {
        let mut r = row(40_000, 0, asked(60_000, 4));
        settle_check_now(&mut r, 10_000);
        assert_eq!((r.next_poll_at_ms, r.backoff_count), (60_000, 0));
    }

    #[test]
    fn a_check_at_or_after_the_replaced_time_keeps_its_own_schedule() {
        let mut r = row(120_000, 5, asked(60_000, 1));
        settle_check_now(&mut r, 60_000);
        assert_eq!(
            (r.next_poll_at_ms, r.backoff_count, r.check_now),
            (120_000, 5, None)
        );
    }

    #[test]
    fn a_row_without_a_request_is_left_alone() {
        let mut r = row(30_000, 2, None);
        settle_check_now(&mut r, 0);
        assert_eq!((r.next_poll_at_ms, r.backoff_count), (30_000, 2));
    }
}
