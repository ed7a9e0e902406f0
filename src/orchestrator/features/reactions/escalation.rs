//! What a standing escalation writes to the tracker: a label, a comment, or nothing.

use crate::config::reactions::{Escalation, ReactionsConfig};
use crate::domain::{EscalationMode, ReactionKind};

use super::row::{LastCheck, ReactionRow};

/// The escalation settings of the row's kind (label commands have none).
pub fn settings(kind: ReactionKind, cfg: &ReactionsConfig) -> Option<&Escalation> {
    match kind {
        ReactionKind::Ci => cfg.ci_failure.as_ref().map(|c| &c.escalation),
        ReactionKind::Review => cfg.review_comments.as_ref().map(|c| &c.escalation),
        ReactionKind::BotReview => cfg.bot_review.as_ref().map(|c| &c.escalation),
        ReactionKind::Merge => cfg.auto_merge.as_ref().map(|c| &c.escalation),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().map(|c| &c.escalation),
        ReactionKind::MergeCompletion => cfg.merge_completion.as_ref().map(|c| &c.escalation),
        ReactionKind::LabelReview | ReactionKind::LabelFix => None,
    }
}

/// The tracker write an escalation makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EscalationWrite {
    Label(String),
    Comment(String),
    None,
}

pub fn write_for(row: &ReactionRow, cfg: &ReactionsConfig) -> EscalationWrite {
    let Some(esc) = settings(row.kind, cfg) else {
        return EscalationWrite::None;
    };
    match esc.mode {
        EscalationMode::Label => EscalationWrite::Label(esc.label.clone()),
        EscalationMode::Comment => EscalationWrite::Comment(comment_text(row)),
        EscalationMode::None => EscalationWrite::None,
    }
}

/// The comment: what Sortie tried and what failed, and a request for a person.
pub fn comment_text(row: &ReactionRow) -> String {
    let pr = &row.pr;
    let used = row.used_attempts.unwrap_or(0);
    let head = match row.kind {
        ReactionKind::Ci => format!(
            "Sortie stopped fixing CI on pull request #{} after {used} attempt(s).",
            pr.pr.number
        ),
        ReactionKind::Review | ReactionKind::BotReview => format!(
            "Sortie stopped answering review comments on pull request #{} (branch {}) after {used} fix run(s).",
            pr.pr.number, pr.branch
        ),
        ReactionKind::MergeConflict => format!(
            "Sortie could not resolve the merge conflict of pull request #{} after {used} rebase run(s).",
            pr.pr.number
        ),
        ReactionKind::Merge => format!(
            "Sortie could not merge pull request #{} after {used} merge call(s).",
            pr.pr.number
        ),
        ReactionKind::MergeCompletion => format!(
            "Pull request #{} merged, but Sortie could not move the issue on.",
            pr.pr.number
        ),
        ReactionKind::LabelReview | ReactionKind::LabelFix => String::new(),
    };
    let mut text = head;
    if let Some(LastCheck::Ci {
        head_sha,
        failing_checks,
        ..
    }) = &row.last_check
    {
        text.push_str(&format!("\n\nRef: {head_sha}\nFailing checks:"));
        for name in failing_checks {
            text.push_str(&format!("\n- {name}"));
        }
    }
    text.push_str("\n\nPlease take a look: a person is needed to continue.");
    text
}
