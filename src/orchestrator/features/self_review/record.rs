//! The phase's audit trail (stored as the run's `review_metadata`), the pure iteration rule,
//! and the `.sortie/review_summary.md` text.

use std::fmt::Write as _;

use serde::Serialize;

use super::verdict::VerdictWord;
use super::verify::CommandResult;

/// How a phase ended, as `after_run` reads it in `SORTIE_SELF_REVIEW_STATUS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    /// An iteration passed: the reviewer said pass and every command passed.
    Passed,
    /// `max_iterations` ran without a pass.
    CapReached,
    /// The phase ended early: a turn failed, the agent declared `blocked`, or the run was
    /// stopped.
    Error,
}

impl PhaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseStatus::Passed => "passed",
            PhaseStatus::CapReached => "cap_reached",
            PhaseStatus::Error => "error",
        }
    }
}

/// `SORTIE_SELF_REVIEW_STATUS` of a run whose phase did not run.
pub const STATUS_DISABLED: &str = "disabled";

/// One iteration: the diff it reviewed, the commands, the verdict, what happened next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IterationRecord {
    pub iteration: u32,
    pub diff_bytes: u64,
    pub diff_truncated: bool,
    /// Why the review saw no diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_note: Option<String>,
    pub verification: Vec<CommandResult>,
    /// The iteration's verdict: `pass` only when the reviewer passed and every command passed,
    /// `iterate` otherwise when the reviewer gave a verdict, `none` without one.
    pub verdict: &'static str,
    /// What the reviewer wrote, when it wrote a valid verdict.
    pub agent_verdict: Option<&'static str>,
    /// The reviewer's summary, masked.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
    pub findings: usize,
    /// Why there is no verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict_error: Option<String>,
    /// A review or fix turn that did not complete, or what ended the phase early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<String>,
    /// Whether a fix turn ran after this review.
    pub fix_turn: bool,
}

/// The whole phase, as stored on the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewMetadata {
    pub final_verdict: &'static str,
    pub total_iterations: u32,
    pub cap_reached: bool,
    pub status: PhaseStatus,
    pub max_iterations: u32,
    pub iterations: Vec<IterationRecord>,
}

impl ReviewMetadata {
    /// Closes a phase: `passed` when it ended on a passing iteration, `cap_reached` when the
    /// cap ended it, an error otherwise. The final verdict is the last iteration's (`none`
    /// when there was none).
    pub fn finish(iterations: Vec<IterationRecord>, max_iterations: u32, end: PhaseStatus) -> Self {
        let final_verdict = iterations.last().map_or("none", |i| i.verdict);
        ReviewMetadata {
            final_verdict,
            total_iterations: iterations.len() as u32,
            cap_reached: end == PhaseStatus::CapReached,
            status: end,
            max_iterations,
            iterations,
        }
    }

    pub fn to_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self).ok()
    }
}

/// The iteration's verdict word (see [`IterationRecord::verdict`]).
pub fn iteration_verdict(agent: Option<VerdictWord>, commands_passed: bool) -> &'static str {
    match agent {
        Some(VerdictWord::Pass) if commands_passed => "pass",
        Some(_) => "iterate",
        None => "none",
    }
}

/// What follows a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The phase passed.
    Pass,
    /// The last iteration did not pass: the phase ends at its cap.
    CapReached,
    /// A fix turn, then the next iteration.
    Fix,
}

/// The iteration rule: a pass ends the phase; otherwise a fix turn follows unless this was the
/// last iteration (so a phase runs at most `2 × max − 1` turns).
pub fn decide(verdict: &str, iteration: u32, max_iterations: u32) -> Next {
    if verdict == "pass" {
        Next::Pass
    } else if iteration >= max_iterations {
        Next::CapReached
    } else {
        Next::Fix
    }
}

/// `.sortie/review_summary.md`: the outcome, then one section per iteration.
pub fn summary_markdown(meta: &ReviewMetadata) -> String {
    let mut s = String::from("# Self-review summary\n\n");
    let status = match meta.status {
        PhaseStatus::Passed => format!("passed at iteration {}", meta.total_iterations),
        PhaseStatus::CapReached => format!(
            "not passed after {} of {} iterations (cap reached)",
            meta.total_iterations, meta.max_iterations
        ),
        PhaseStatus::Error => format!(
            "ended early after {} of {} iterations",
            meta.total_iterations, meta.max_iterations
        ),
    };
    let _ = writeln!(s, "- Status: {status}");
    let _ = writeln!(s, "- Final verdict: {}", meta.final_verdict);
    if let Some(last) = meta.iterations.last() {
        let passed = last.verification.iter().filter(|c| c.passed()).count();
        let _ = writeln!(
            s,
            "- Verification commands (last iteration): {passed} passed, {} failed",
            last.verification.len() - passed
        );
    }
    for it in &meta.iterations {
        let _ = writeln!(s, "\n## Iteration {}\n", it.iteration);
        let _ = writeln!(s, "- Verdict: {}", it.verdict);
        if let Some(agent) = it.agent_verdict.filter(|a| *a != it.verdict) {
            let _ = writeln!(s, "- The reviewer wrote: {agent}");
        }
        if let Some(e) = &it.verdict_error {
            let _ = writeln!(s, "- No verdict: {e}");
        }
        if !it.summary.is_empty() {
            let _ = writeln!(s, "- Summary: {}", it.summary);
        }
        if it.findings > 0 {
            let _ = writeln!(s, "- Findings: {}", it.findings);
        }
        if let Some(note) = &it.diff_note {
            let _ = writeln!(s, "- Diff: {note}");
        } else {
            let cut = if it.diff_truncated { ", cut" } else { "" };
            let _ = writeln!(s, "- Diff: {} bytes{cut}", it.diff_bytes);
        }
        for c in &it.verification {
            let _ = writeln!(s, "- Verification `{}`: {}", c.command, c.outcome_words());
        }
        if let Some(end) = &it.ended_by {
            let _ = writeln!(s, "- Ended: {end}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iteration(n: u32, verdict: &'static str) -> IterationRecord {
        IterationRecord {
            iteration: n,
            diff_bytes: 10,
            diff_truncated: false,
            diff_note: None,
            verification: Vec::new(),
            verdict,
            agent_verdict: Some("pass"),
            summary: String::new(),
            findings: 0,
            verdict_error: None,
            ended_by: None,
            fix_turn: false,
        }
    }

    #[test]
    fn a_pass_needs_the_reviewer_and_every_command() {
        assert_eq!(iteration_verdict(Some(VerdictWord::Pass), true), "pass");
        assert_eq!(iteration_verdict(Some(VerdictWord::Pass), false), "iterate");
        assert_eq!(
            iteration_verdict(Some(VerdictWord::Iterate), true),
            "iterate"
        );
        assert_eq!(iteration_verdict(None, true), "none");
    }

    #[test]
    fn the_iteration_rule_fixes_until_the_cap() {
        assert_eq!(decide("pass", 1, 3), Next::Pass);
        assert_eq!(decide("pass", 3, 3), Next::Pass);
        assert_eq!(decide("iterate", 1, 3), Next::Fix);
        assert_eq!(decide("none", 2, 3), Next::Fix);
        assert_eq!(decide("iterate", 3, 3), Next::CapReached);
        assert_eq!(decide("none", 1, 1), Next::CapReached);
    }

    #[test]
    fn the_stored_record_carries_the_served_members() {
        let meta = ReviewMetadata::finish(
            vec![iteration(1, "iterate"), iteration(2, "pass")],
            3,
            PhaseStatus::Passed,
        );
        let json = meta.to_json().unwrap_or_default();
        assert_eq!(json["final_verdict"], "pass");
        assert_eq!(json["total_iterations"], 2);
        assert_eq!(json["cap_reached"], false);
        assert_eq!(json["status"], "passed");
        assert_eq!(json["iterations"][0]["verdict"], "iterate");
        let capped = ReviewMetadata::finish(vec![iteration(1, "none")], 1, PhaseStatus::CapReached);
        assert_eq!((capped.final_verdict, capped.cap_reached), ("none", true));
        let empty = ReviewMetadata::finish(Vec::new(), 3, PhaseStatus::Error);
        assert_eq!((empty.final_verdict, empty.total_iterations), ("none", 0));
        let md = summary_markdown(&meta);
        assert!(md.contains("passed at iteration 2"), "{md}");
        assert!(
            md.contains("## Iteration 1") && md.contains("## Iteration 2"),
            "{md}"
        );
        assert!(summary_markdown(&capped).contains("cap reached"));
    }
}
