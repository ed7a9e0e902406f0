//! The pending-reaction pairs of an issue's `next_outcomes`: for each pending reaction that has
//! not escalated and can still see its event, what a check that finds it leads to. The
//! condition carries the time left in the watch (for review comments less the wait a found
//! comment still has); the text names, in the order the reaction's own pass decides, the
//! escalation of a reaction whose fixes are used up, the triage command of one configured with
//! it, or the fix run, and the budget hold that would stop a run instead.

use crate::config::reactions::{Escalation, ReactionsConfig};
use crate::domain::{EscalationMode, ReactionKind, ReactionWait};
use crate::orchestrator::reactions::ReactionRow;

use super::wording::duration;

/// What the snapshot says about the issue besides its reactions.
pub struct IssueFacts<'a> {
    pub cfg: &'a ReactionsConfig,
    pub poll_interval_ms: u64,
    pub now_ms: i64,
    /// The budget that holds the issue (`money`, `token` or `session` budget), if one does.
    pub budget_hold: Option<&'static str>,
}

/// The pairs of `rows` (one issue's pending reactions), in the reference's kind order.
pub fn pairs(rows: &[&ReactionRow], f: &IssueFacts<'_>) -> Vec<(String, String)> {
    let mut prs: Vec<u64> = rows.iter().map(|r| r.pr.pr.number).collect();
    prs.sort_unstable();
    prs.dedup();
    let several = prs.len() > 1;
    let mut sorted: Vec<&&ReactionRow> = rows.iter().collect();
    sorted.sort_by_key(|r| order(r.kind));
    sorted
        .into_iter()
        .filter(|r| r.escalated_at_ms.is_none())
        .filter_map(|r| pair(r, f, several))
        .collect()
}

fn order(kind: ReactionKind) -> u8 {
    match kind {
        ReactionKind::Ci => 0,
        ReactionKind::Review => 1,
        ReactionKind::BotReview => 2,
        ReactionKind::MergeConflict => 3,
        ReactionKind::Merge => 4,
        ReactionKind::MergeCompletion => 5,
        ReactionKind::LabelReview => 6,
        ReactionKind::LabelFix => 7,
    }
}

/// One reaction's pair; `None` when its watch has less than a second left.
fn pair(row: &ReactionRow, f: &IssueFacts<'_>, several: bool) -> Option<(String, String)> {
    let pr = if several {
        format!("PR #{}", row.pr.pr.number)
    } else {
        "the pull request".to_string()
    };
    let within = match row.watch_ends_at_ms() {
        Some(end) => {
            let left = end - f.now_ms - found_wait_ms(row, f);
            if left < 1000 {
                return None;
            }
            format!(" in the next {}", duration(left))
        }
        None => String::new(),
    };
    let condition = format!("If a check{within} finds {}", event(row, f.cfg, &pr));
    Some((condition, outcome(row, f, &pr)))
}

/// The wait a found review comment still has before a fix: one poll interval and, unless the
/// comments already wait to settle, the debounce.
fn found_wait_ms(row: &ReactionRow, f: &IssueFacts<'_>) -> i64 {
    if row.kind != ReactionKind::Review {
        return 0;
    }
    let debounce = match (&f.cfg.review_comments, row.wait) {
        (_, Some(ReactionWait::Debounce)) | (None, _) => 0,
        (Some(c), _) => c.debounce_ms,
    };
    i64::try_from(f.poll_interval_ms.saturating_add(debounce)).unwrap_or(i64::MAX)
}

/// What the check finds, as the condition names it.
fn event(row: &ReactionRow, cfg: &ReactionsConfig, pr: &str) -> String {
    let label = |l: &Option<String>| l.clone().unwrap_or_default();
    let labels = cfg.label_commands.as_ref();
    match row.kind {
        ReactionKind::Ci => format!("a failing CI run on {pr}"),
        ReactionKind::Review => format!("new review comments on {pr}"),
        ReactionKind::BotReview => format!("new bot review comments on {pr}"),
        ReactionKind::MergeConflict => format!("a new merge conflict on {pr}"),
        ReactionKind::Merge => format!("{pr} ready to merge"),
        ReactionKind::MergeCompletion => format!("{pr} merged"),
        ReactionKind::LabelReview => format!(
            "the {} label on {pr}",
            labels.map(|c| label(&c.review_label)).unwrap_or_default()
        ),
        ReactionKind::LabelFix => format!(
            "the {} label on {pr}",
            labels.map(|c| label(&c.fix_label)).unwrap_or_default()
        ),
    }
}

/// The kind's triage setting and escalation, when it has them.
fn settings(kind: ReactionKind, cfg: &ReactionsConfig) -> (bool, Option<&Escalation>) {
    match kind {
        ReactionKind::Ci => cfg
            .ci_failure
            .as_ref()
            .map_or((false, None), |c| (c.triage, Some(&c.escalation))),
        ReactionKind::Review => cfg
            .review_comments
            .as_ref()
            .map_or((false, None), |c| (c.triage, Some(&c.escalation))),
        ReactionKind::BotReview => cfg
            .bot_review
            .as_ref()
            .map_or((false, None), |c| (c.triage, Some(&c.escalation))),
        ReactionKind::MergeConflict => cfg
            .merge_conflicts
            .as_ref()
            .map_or((false, None), |c| (c.triage, Some(&c.escalation))),
        ReactionKind::Merge => (false, cfg.auto_merge.as_ref().map(|c| &c.escalation)),
        ReactionKind::MergeCompletion => {
            (false, cfg.merge_completion.as_ref().map(|c| &c.escalation))
        }
        ReactionKind::LabelReview | ReactionKind::LabelFix => (false, None),
    }
}

/// What Sortie then does.
fn outcome(row: &ReactionRow, f: &IssueFacts<'_>, pr: &str) -> String {
    let (triage, escalation) = settings(row.kind, f.cfg);
    let used = row.used_attempts.unwrap_or(0);
    if let Some(max) = row.max_attempts.filter(|m| used >= *m) {
        return escalates(escalation, max);
    }
    if triage {
        return "Sortie runs the reaction's triage command in place of the fix, and its verdict decides.".into();
    }
    let run = match row.kind {
        ReactionKind::Ci => "CI fix",
        ReactionKind::Review => "review fix",
        ReactionKind::BotReview => "bot review fix",
        ReactionKind::MergeConflict => "rebase",
        ReactionKind::Merge => return format!("Sortie merges {pr}."),
        ReactionKind::MergeCompletion => {
            let to = f
                .cfg
                .merge_completion
                .as_ref()
                .map(|c| c.target_state.as_str())
                .unwrap_or_default();
            return format!("Sortie moves the issue to {to}.");
        }
        ReactionKind::LabelReview => "review label run",
        ReactionKind::LabelFix => "fix label run",
    };
    if let Some(budget) = f.budget_hold {
        return format!("The {budget} holds the issue, so Sortie starts no {run}.");
    }
    match row.max_attempts {
        Some(max) => format!("Sortie dispatches {run} {} of {max}.", used + 1),
        None => format!("Sortie dispatches a {run}."),
    }
}

/// How a reaction whose `max` fixes are used up escalates.
fn escalates(escalation: Option<&Escalation>, max: u32) -> String {
    let spent = format!("With {max} of {max} used, Sortie");
    match escalation.map(|e| (e.mode, e.label.as_str())) {
        Some((EscalationMode::Label, label)) => {
            format!("{spent} escalates to a person with the {label} label.")
        }
        Some((EscalationMode::Comment, _)) => {
            format!("{spent} escalates to a person with a comment on the issue.")
        }
        _ => format!("{spent} escalates to a person with an attention item."),
    }
}
