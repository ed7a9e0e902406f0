//! The pull-request reaction part of the wording table (`super::wording` holds the rest): the
//! status sentences of a pending reaction row, the `reaction_escalated` attention sentences and
//! the check-now `outcome_text`. The same rules apply: recorded facts only, no clock time, a
//! relative time measured from the snapshot, a short sentence without a period and a long one
//! with one, and the pull request named `#<n>` in a short sentence and `PR #<n>` in a long one.

use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::orchestrator::reactions::{LastCheck, ReactionRow};

use super::wording::{AttentionWords, Pair, duration};

/// The kind as a short sentence starts with it (`CI escalated on #931`).
pub fn kind_title(kind: ReactionKind) -> &'static str {
    match kind {
        ReactionKind::Ci => "CI",
        ReactionKind::Review => "Review comments",
        ReactionKind::BotReview => "Bot review",
        ReactionKind::Merge => "Auto-merge",
        ReactionKind::MergeConflict => "Merge conflict",
        ReactionKind::MergeCompletion => "Merge completion",
        ReactionKind::LabelReview => "Review label command",
        ReactionKind::LabelFix => "Fix label command",
    }
}

/// The kind inside a sentence (`a check of PR #931 for CI`).
pub fn kind_words(kind: ReactionKind) -> &'static str {
    match kind {
        ReactionKind::Ci => "CI",
        ReactionKind::Review => "review comments",
        ReactionKind::BotReview => "bot review",
        ReactionKind::Merge => "auto-merge",
        ReactionKind::MergeConflict => "the merge conflict",
        ReactionKind::MergeCompletion => "merge completion",
        ReactionKind::LabelReview => "the review label command",
        ReactionKind::LabelFix => "the fix label command",
    }
}

/// What a watch looks for (`Watching #944 for merge conflicts`).
fn watched_for(kind: ReactionKind) -> &'static str {
    match kind {
        ReactionKind::Ci => "CI",
        ReactionKind::Review => "review comments",
        ReactionKind::BotReview => "bot review comments",
        ReactionKind::Merge => "a chance to merge",
        ReactionKind::MergeConflict => "merge conflicts",
        ReactionKind::MergeCompletion => "its merge",
        ReactionKind::LabelReview => "the review label",
        ReactionKind::LabelFix => "the fix label",
    }
}

/// What a standing escalation is about (`Sortie escalated failing CI on PR #931`).
fn escalated_subject(kind: ReactionKind) -> &'static str {
    match kind {
        ReactionKind::Ci => "failing CI",
        ReactionKind::Review => "review comments",
        ReactionKind::BotReview => "bot review comments",
        ReactionKind::Merge => "the auto-merge",
        ReactionKind::MergeConflict => "a merge conflict",
        ReactionKind::MergeCompletion => "the merge completion",
        ReactionKind::LabelReview | ReactionKind::LabelFix => "a label command",
    }
}

/// What the kind counts, as its used-attempts sentence names it (`None`: counts nothing).
fn counted(kind: ReactionKind) -> Option<(&'static str, &'static str)> {
    match kind {
        ReactionKind::Ci => Some(("CI fixes used", "CI fixes")),
        ReactionKind::Review => Some(("Review fix runs used", "review fix runs")),
        ReactionKind::BotReview => Some(("Bot review fix runs used", "bot review fix runs")),
        ReactionKind::MergeConflict => Some(("Rebase runs used", "rebase runs")),
        ReactionKind::Merge => Some(("Merge attempts used", "merge attempts")),
        ReactionKind::MergeCompletion => Some(("Failed transitions", "failed transitions")),
        ReactionKind::LabelReview | ReactionKind::LabelFix => None,
    }
}

/// The setting that raises the kind's budget.
fn budget_key(kind: ReactionKind) -> Option<&'static str> {
    match kind {
        ReactionKind::Ci => Some("reactions.ci_failure.max_retries"),
        ReactionKind::Review => Some("reactions.review_comments.max_continuation_turns"),
        ReactionKind::BotReview => Some("reactions.bot_review.max_continuation_turns"),
        ReactionKind::MergeConflict => Some("reactions.merge_conflicts.max_retries"),
        ReactionKind::Merge => Some("reactions.auto_merge.max_retries"),
        ReactionKind::MergeCompletion => Some("reactions.merge_completion.max_retries"),
        ReactionKind::LabelReview | ReactionKind::LabelFix => None,
    }
}

fn plural(n: u32, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// ` Rebase runs used: 0 of 1.`, ` Merge attempts used: 2.` without a budget, or nothing.
fn used_sentence(row: &ReactionRow) -> String {
    let (Some((label, _)), Some(used)) = (counted(row.kind), row.used_attempts) else {
        return String::new();
    };
    match row.max_attempts {
        Some(max) => format!(" {label}: {used} of {max}."),
        None => format!(" {label}: {used}."),
    }
}

/// `next check in 55s`, or `next check due now`.
fn next_check(row: &ReactionRow, now_ms: i64) -> String {
    let left = row.next_poll_at_ms - now_ms;
    if left >= 1000 {
        format!("next check in {}", duration(left))
    } else {
        "next check due now".to_string()
    }
}

/// What the latest check found, as a clause of the long sentence.
fn last_check_clause(row: &ReactionRow) -> String {
    if row.wait == Some(ReactionWait::Backoff) {
        return "the latest check could not complete".to_string();
    }
    let Some(check) = &row.last_check else {
        return "no check has completed yet".to_string();
    };
    match check {
        LastCheck::Ci {
            status, failing, ..
        } => match status {
            CiStatus::Passing => "the last check found CI passing".to_string(),
            CiStatus::Pending => "the last check found CI still running".to_string(),
            CiStatus::Failing => format!(
                "the last check found {} failing",
                plural(*failing, "check", "checks")
            ),
        },
        LastCheck::Review {
            actionable_comments,
            ..
        }
        | LastCheck::BotReview {
            actionable_comments,
            ..
        } => format!(
            "the last check found {}",
            plural(
                *actionable_comments,
                "actionable comment",
                "actionable comments"
            )
        ),
        LastCheck::MergeConflict { mergeable, .. } => match mergeable {
            Some(true) => "the last check found none".to_string(),
            Some(false) => "the last check found a conflict".to_string(),
            None => "the provider had not computed mergeability at the last check".to_string(),
        },
    }
}

/// Why the row waits, when that is not the kind's poll cadence.
fn wait_clause(row: &ReactionRow) -> Option<&'static str> {
    match row.wait {
        Some(ReactionWait::RetrySlot) => Some("its work waits for the issue's retry slot"),
        Some(ReactionWait::Triage) => Some("it waits on its triage command"),
        _ => None,
    }
}

/// The status sentences of a pending reaction row; `now_ms` is the snapshot time.
pub fn pending(row: &ReactionRow, now_ms: i64) -> Pair {
    let n = row.pr.pr.number;
    let used = used_sentence(row);
    if row.escalated_at_ms.is_some() {
        return Pair {
            short: format!("{} escalated on #{n}", kind_title(row.kind)),
            full: format!(
                "Sortie escalated {} on PR #{n}; it keeps watching the pull request.{used}",
                escalated_subject(row.kind)
            ),
        };
    }
    let next = next_check(row, now_ms);
    match &row.last_check {
        Some(LastCheck::Review {
            awaiting_approval: true,
            ..
        }) => {
            return Pair {
                short: format!("Waiting on approval of #{n}"),
                full: format!("Waiting on approval of PR #{n}; {next}.{used}"),
            };
        }
        Some(LastCheck::BotReview { handled: true, .. }) => {
            return Pair {
                short: format!("Bot review of #{n} handled"),
                full: format!(
                    "The bot review comments on PR #{n} are handled, so Sortie starts no session for them; {next}.{used}"
                ),
            };
        }
        Some(LastCheck::Review {
            actionable_comments,
            new_comments,
            ..
        }) if row.wait == Some(ReactionWait::Debounce) => {
            let fresh = plural(*new_comments, "new review comment", "new review comments");
            return Pair {
                short: format!("{fresh} on #{n}; {next}"),
                full: format!(
                    "Waiting for {fresh} on PR #{n} ({actionable_comments} actionable) to settle; {next}.{used}"
                ),
            };
        }
        _ => {}
    }
    let wait = wait_clause(row)
        .map(|w| format!("; {w}"))
        .unwrap_or_default();
    let found = match row.kind {
        ReactionKind::Ci
        | ReactionKind::Review
        | ReactionKind::BotReview
        | ReactionKind::MergeConflict => format!("; {}", last_check_clause(row)),
        _ if row.wait == Some(ReactionWait::Backoff) => format!("; {}", last_check_clause(row)),
        _ => String::new(),
    };
    Pair {
        short: format!("Watching #{n} for {}", watched_for(row.kind)),
        full: format!(
            "Sortie watches PR #{n} for {}{found}{wait}; {next}.{used}",
            watched_for(row.kind)
        ),
    }
}

/// Why the escalation began, as a clause after the pull request.
fn trigger_clause(row: &ReactionRow) -> String {
    match row.escalation_trigger {
        Some(EscalationTrigger::BudgetExhausted) => {
            match (counted(row.kind), row.used_attempts, row.max_attempts) {
                (Some((_, noun)), Some(used), Some(max)) => {
                    format!(" after {used} of {max} {noun}")
                }
                (Some((_, noun)), Some(used), None) => format!(" after {used} {noun}"),
                _ => " after its tries were used up".to_string(),
            }
        }
        Some(EscalationTrigger::Triage) => " because its triage command asked for a person".into(),
        Some(EscalationTrigger::Refused) => {
            " because the forge or the tracker refused a write".into()
        }
        Some(EscalationTrigger::MissingMergeCommit) => {
            " because the forge reports the pull request merged without a merge commit".into()
        }
        None => String::new(),
    }
}

/// What the latest check found, for an escalation's why sentence.
fn escalation_finding(row: &ReactionRow) -> String {
    match &row.last_check {
        Some(LastCheck::Ci {
            status: CiStatus::Failing,
            failing_checks,
            failing,
            ..
        }) => {
            if failing_checks.is_empty() {
                format!(
                    "; the latest check found {} failing",
                    plural(*failing, "check", "checks")
                )
            } else {
                format!(
                    "; the latest check found {} failing",
                    failing_checks.join(", ")
                )
            }
        }
        Some(_) if row.kind != ReactionKind::Ci => {
            format!("; {}", last_check_clause(row)).replace("the last check", "the latest check")
        }
        _ => String::new(),
    }
}

/// What ends the kind's escalation, before the budget and the issue's own clauses.
fn clears_event(kind: ReactionKind, n: u64) -> String {
    match kind {
        ReactionKind::Ci => format!("a check of PR #{n} passes, a new commit lands on it"),
        ReactionKind::Review => format!("PR #{n} has no actionable review comment left"),
        ReactionKind::BotReview => format!("PR #{n} has no actionable bot review comment left"),
        ReactionKind::MergeConflict => format!("a check of PR #{n} finds no merge conflict"),
        ReactionKind::Merge => format!("a person merges PR #{n}"),
        ReactionKind::MergeCompletion | ReactionKind::LabelReview | ReactionKind::LabelFix => {
            "the issue moves to its target state".to_string()
        }
    }
}

/// The three sentences of a `reaction_escalated` item.
pub fn attention_escalated(row: &ReactionRow) -> AttentionWords {
    let n = row.pr.pr.number;
    let why = format!(
        "Sortie escalated {} on PR #{n}{}{}.",
        escalated_subject(row.kind),
        trigger_clause(row),
        escalation_finding(row)
    );
    let mut parts = vec![clears_event(row.kind, n)];
    if row.kind != ReactionKind::MergeCompletion {
        parts.push("it merges or closes".to_string());
    }
    let raise = (row.escalation_trigger == Some(EscalationTrigger::BudgetExhausted))
        .then(|| budget_key(row.kind).zip(row.used_attempts))
        .flatten();
    if let Some((key, used)) = raise {
        parts.push(format!("`{key}` rises above {used}"));
    }
    let issue = if row.issue.state.is_empty() {
        "the issue reaches a terminal tracker state".to_string()
    } else {
        format!(
            "the issue reaches a terminal tracker state or leaves {}",
            row.issue.state
        )
    };
    parts.push(issue);
    let last = parts.pop().unwrap_or_default();
    let clears = format!("Clears when {}, or {last}.", parts.join(", "));
    AttentionWords {
        reason: format!("{} escalated on #{n}", kind_title(row.kind)),
        why,
        clears,
    }
}

/// The 202 `outcome_text` of a check made due: `MT-653: a check of PR #931 for CI is queued
/// for the next poll tick.`
pub fn check_queued(key: &str, number: u64, kind: ReactionKind) -> String {
    format!(
        "{key}: a check of PR #{number} for {} is queued for the next poll tick.",
        kind_words(kind)
    )
}
