//! Triage before a fix. For a kind whose block sets `triage: true` (`ci_failure`,
//! `review_comments`, `bot_review`, `merge_conflicts`), a fix the kind's check would dispatch
//! goes to a triage run first ([`super::triage_run`]): one turn of the agent the reaction's run
//! used, in the issue's workspace, with a prompt ([`prompt`]) that describes the subject and
//! asks for a verdict in `.sortie/triage.json`:
//!
//! - `act`: the fix is dispatched as without triage (by the next check, which re-reads the
//!   forge, so a subject that moved on meanwhile is not acted on);
//! - `ignore`: nothing is dispatched for that subject (bot review serves it as `handled`);
//! - `escalate`: a standing escalation with trigger `triage`, which stands while the subject
//!   does.
//!
//! A triage run that fails, times out (`agent.turn_timeout_ms`) or writes no readable verdict
//! asks a person: the safe outcome, since Sortie cannot tell whether a fix is wanted.
//!
//! The subject is the kind's dispatch fingerprint (the failing head, the comment set, the
//! conflicting head): a new one is triaged again. Verdicts are stored (`triage_answers`), so an
//! answered subject is not triaged again after a restart.

use crate::config::reactions::ReactionsConfig;
use crate::domain::{EscalationTrigger, ReactionKind, ReactionWait};

use super::cx::CheckCx;
use super::memory::RowMemory;
pub use super::memory::{TriageMemory, Verdict};
use super::row::{LastCheck, ReactionRow};
use super::step::{FixContext, Step};

/// The file, relative to the workspace, a triage run writes its verdict to.
pub const VERDICT_FILE: &str = ".sortie/triage.json";

/// The largest verdict file read.
pub const MAX_VERDICT_BYTES: u64 = 64 * 1024;

/// The first line of every triage prompt.
pub const PROMPT_MARKER: &str = "SORTIE TRIAGE";

/// Whether the kind's block asks for triage.
pub fn enabled(kind: ReactionKind, cfg: &ReactionsConfig) -> bool {
    match kind {
        ReactionKind::Ci => cfg.ci_failure.as_ref().is_some_and(|c| c.triage),
        ReactionKind::Review => cfg.review_comments.as_ref().is_some_and(|c| c.triage),
        ReactionKind::BotReview => cfg.bot_review.as_ref().is_some_and(|c| c.triage),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().is_some_and(|c| c.triage),
        _ => false,
    }
}

/// The row's escalation before its check, so a triage escalation the kind's check cleared
/// (it reads a standing escalation as one of its own budget) stands again.
#[derive(Debug, Clone, Copy)]
pub struct EscalationBefore {
    pub at_ms: Option<i64>,
    pub trigger: Option<EscalationTrigger>,
}

impl EscalationBefore {
    pub fn of(row: &ReactionRow) -> Self {
        EscalationBefore {
            at_ms: row.escalated_at_ms,
            trigger: row.escalation_trigger,
        }
    }
}

/// The kind's check decided `step`; with triage on, a fix goes through the subject's verdict.
pub fn before_fix(
    step: Step,
    row: &mut ReactionRow,
    mem: &RowMemory,
    cx: &CheckCx<'_>,
    before: EscalationBefore,
) -> Step {
    if !enabled(row.kind, cx.cfg) {
        return step;
    }
    let Step::Dispatch {
        fingerprint: Some(fingerprint),
        context,
        ..
    } = &step
    else {
        return step;
    };
    let interval = poll_interval(row.kind, cx);
    if mem.triage.in_flight.is_some() {
        return cx.wait(ReactionWait::Triage, interval);
    }
    match mem.triage.verdict_for(fingerprint) {
        Some(Verdict::Act) => step,
        Some(Verdict::Ignore) => {
            if let Some(LastCheck::BotReview { handled, .. }) = &mut row.last_check {
                *handled = true;
            }
            cx.wait(ReactionWait::PollInterval, interval)
        }
        Some(Verdict::Escalate) if before.trigger == Some(EscalationTrigger::Triage) => {
            row.escalated_at_ms = before.at_ms;
            row.escalation_trigger = before.trigger;
            cx.wait(ReactionWait::PollInterval, interval)
        }
        Some(Verdict::Escalate) => Step::Escalate {
            trigger: EscalationTrigger::Triage,
        },
        None => Step::Triage {
            fingerprint: fingerprint.clone(),
            context: context.clone(),
        },
    }
}

/// The kind's check cadence.
fn poll_interval(kind: ReactionKind, cx: &CheckCx<'_>) -> u64 {
    let cfg = cx.cfg;
    let v = match kind {
        ReactionKind::Review => cfg.review_comments.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::BotReview => cfg.bot_review.as_ref().map(|c| c.poll_interval_ms),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().map(|c| c.poll_interval_ms),
        _ => None,
    };
    v.unwrap_or(cx.poll_interval_ms)
}

/// Why a triage run gave no verdict. Every one asks a person (the verdict is `escalate`); the
/// text is logged, masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriageError {
    /// The reaction's agent could not be prepared (its route is refused).
    AgentUnavailable,
    /// The run's thread did not start.
    NoThread(String),
    /// The issue's workspace could not be locked.
    Workspace(String),
    /// An earlier verdict file could not be removed before the turn.
    VerdictNotRemoved(String),
    /// The agent's session did not start.
    AgentNotStarted(String),
    /// The thread that drains the turn's events did not start.
    EventDrain(String),
    /// The turn ran past its deadline and was stopped.
    TimedOut { after_ms: u128 },
    /// The turn was cancelled (shutdown, reload).
    Cancelled(String),
    /// The turn did not complete.
    TurnFailed(String),
    /// The agent wrote no verdict file.
    NoVerdictFile,
    /// The verdict path is not a regular file (a symlink is not followed).
    NotRegularFile,
    /// The verdict file is over [`MAX_VERDICT_BYTES`].
    TooLarge,
    /// The verdict file could not be read.
    NotRead(String),
    /// The verdict file is not JSON.
    NotJson(String),
    /// The verdict file has no `verdict` string.
    NoVerdictWord,
    /// The `verdict` is none of `act`, `ignore`, `escalate`.
    UnknownVerdict(String),
    /// The triage run panicked (a bug).
    Panicked(String),
    /// Every SSH host is at its session limit or out of service.
    NoSshHost,
}

impl std::fmt::Display for TriageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriageError::AgentUnavailable => {
                f.write_str("the reaction's agent could not be prepared")
            }
            TriageError::NoThread(e) => write!(f, "no thread: {e}"),
            TriageError::Workspace(e) => write!(f, "workspace: {e}"),
            TriageError::VerdictNotRemoved(e) => write!(f, "{VERDICT_FILE} not removed: {e}"),
            TriageError::AgentNotStarted(e) => write!(f, "agent not started: {e}"),
            TriageError::EventDrain(e) => write!(f, "event drain thread: {e}"),
            TriageError::TimedOut { after_ms } => {
                write!(f, "no verdict within {after_ms} ms; the turn was stopped")
            }
            TriageError::Cancelled(reason) => write!(f, "the turn was cancelled ({reason})"),
            TriageError::TurnFailed(e) => write!(f, "the turn failed: {e}"),
            TriageError::NoVerdictFile => write!(f, "the agent wrote no {VERDICT_FILE}"),
            TriageError::NotRegularFile => write!(f, "{VERDICT_FILE} is not a regular file"),
            TriageError::TooLarge => {
                write!(f, "{VERDICT_FILE} is larger than {MAX_VERDICT_BYTES} bytes")
            }
            TriageError::NotRead(e) => write!(f, "{VERDICT_FILE} not read: {e}"),
            TriageError::NotJson(e) => write!(f, "the verdict file is not JSON: {e}"),
            TriageError::NoVerdictWord => f.write_str("the verdict file has no verdict string"),
            TriageError::UnknownVerdict(word) => {
                write!(
                    f,
                    "unknown verdict {word:?}; expected act, ignore or escalate"
                )
            }
            TriageError::Panicked(panic) => write!(f, "the triage run panicked: {panic}"),
            TriageError::NoSshHost => f.write_str("no SSH host has room for the triage run"),
        }
    }
}

impl std::error::Error for TriageError {}

/// Reads a verdict file's text: `{"verdict": "act" | "ignore" | "escalate", "reason": "…"}`.
/// Returns the verdict and its reason (empty when none was given).
pub fn parse_verdict(text: &str) -> Result<(Verdict, String), TriageError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| TriageError::NotJson(e.to_string()))?;
    let word = v
        .get("verdict")
        .and_then(serde_json::Value::as_str)
        .ok_or(TriageError::NoVerdictWord)?;
    let verdict =
        Verdict::parse(word).ok_or_else(|| TriageError::UnknownVerdict(word.to_string()))?;
    let reason = v
        .get("reason")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(500)
        .collect();
    Ok((verdict, reason))
}

/// The triage turn's prompt: the subject, what each verdict does, and where to write it.
pub fn prompt(row: &ReactionRow, context: Option<&FixContext>) -> String {
    let mut p = format!(
        "{PROMPT_MARKER}\n\nYou are triaging work on issue {} ({}) for Sortie, which watches pull request {}#{}.\n",
        row.issue.identifier,
        row.issue.title,
        row.pr.pr.repository(),
        row.pr.pr.number,
    );
    p.push_str(&subject(row.kind, context));
    p.push_str(
        "\nDecide whether Sortie should start a fix run for this. Read the workspace if it helps, \
         but change no file other than the verdict file.\n\
         Write your verdict as JSON to .sortie/triage.json in the current directory:\n\
         {\"verdict\": \"act\" | \"ignore\" | \"escalate\", \"reason\": \"one sentence\"}\n\
         - act: a fix run should address it.\n\
         - ignore: nothing needs doing (a false alarm, already handled, or not applicable).\n\
         - escalate: a person needs to decide.\n",
    );
    p
}

fn subject(kind: ReactionKind, context: Option<&FixContext>) -> String {
    match (kind, context) {
        (ReactionKind::Ci, Some(FixContext::CiFailure(c))) => {
            let mut s = format!(
                "CI is failing on {}: {} failing check(s).\n",
                c.git_ref, c.failing_count
            );
            for r in &c.check_runs {
                s.push_str(&format!(
                    "- check {}: {} {}\n",
                    r.name, r.status, r.conclusion
                ));
            }
            if !c.log_excerpt.is_empty() {
                s.push_str(&format!("Log excerpt:\n{}\n", c.log_excerpt));
            }
            s
        }
        (_, Some(FixContext::ReviewComments(comments))) => {
            let mut s = format!(
                "The pull request has {} new {} comment(s):\n",
                comments.len(),
                if kind == ReactionKind::BotReview {
                    "bot review"
                } else {
                    "review"
                }
            );
            for c in comments {
                s.push_str(&format!(
                    "- {} by {} on {}:{}: {}\n",
                    c.id, c.reviewer, c.file, c.start_line, c.body
                ));
            }
            s
        }
        (ReactionKind::MergeConflict, _) => {
            "The pull request has merge conflicts with its base branch.\n".to_string()
        }
        _ => format!("The {kind} reaction found something to fix.\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_files_parse_strictly() {
        assert_eq!(
            parse_verdict(r#"{"verdict": "Ignore", "reason": "flaky"}"#),
            Ok((Verdict::Ignore, "flaky".to_string()))
        );
        assert_eq!(
            parse_verdict(r#"{"verdict": "act"}"#),
            Ok((Verdict::Act, String::new()))
        );
        assert!(parse_verdict(r#"{"verdict": "maybe"}"#).is_err());
        assert!(parse_verdict(r#"{"reason": "x"}"#).is_err());
        assert!(parse_verdict("not json").is_err());
    }

    #[test]
    fn the_memory_answers_only_its_subject() {
        let m = TriageMemory {
            in_flight: None,
            answer: Some(("a".into(), Verdict::Ignore)),
        };
        assert_eq!(m.verdict_for("a"), Some(Verdict::Ignore));
        assert_eq!(m.verdict_for("b"), None);
    }
}
