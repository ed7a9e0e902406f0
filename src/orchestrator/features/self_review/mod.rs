//! Self-review: after its coding turns, in the same agent session, the agent reviews its own
//! diff; the verification commands run; a verdict asking for changes (or a failing command)
//! gets a fix turn carrying the findings, at most `self_review.max_iterations` times.
//!
//! An iteration collects the diff, runs every command, then asks for a review whose verdict the
//! agent writes to `.sortie/review_verdict.json` (removed before each review turn). It passes
//! when the reviewer says `pass` and every command passed; otherwise a fix turn follows, except
//! after the last iteration, where the phase ends with its cap reached. The phase ends early
//! when a turn does not complete, when the agent declares `blocked` in `.sortie/status`, or
//! when the run is cancelled. Every phase leaves `.sortie/review_summary.md` and an audit
//! trail that the run record stores (`review_metadata`).
//!
//! The supervisor runs the turns ([`ReviewHost`]); this module decides everything else.

pub mod diff;
pub mod feature;
pub mod progress;
pub mod prompt;
pub mod record;
pub mod verdict;
pub mod verify;

use std::path::{Path, PathBuf};

use crate::agent::{CancelReason, sortie_file, status_file};
use crate::config::reactions::SelfReviewConfig;
use crate::domain::Issue;
use crate::workspace::{HookEnv, WorkspaceManager};

pub use crate::orchestrator::core::run_record::SelfReviewPhase;
use crate::orchestrator::core::run_record::SupervisorExit;
use record::{IterationRecord, Next, PhaseStatus, ReviewMetadata};

/// The summary's name inside `.sortie`.
pub const SUMMARY_FILE: &str = "review_summary.md";

/// Which turn of an iteration runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    Review,
    Fix,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Review => "review",
            TurnKind::Fix => "fix",
        }
    }
}

/// How a review or fix turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Completed,
    /// The turn did not complete. With `exit` the run ends with it (a stop, a turn timeout, a
    /// usage limit); without, the phase ends and the run ends normally.
    Failed {
        message: String,
        exit: Option<SupervisorExit>,
    },
}

/// The supervisor's side of the phase.
pub trait ReviewHost {
    /// Runs one turn in the session (counting it as a started turn).
    fn run_turn(&mut self, prompt: &str, kind: TurnKind) -> TurnEnd;
    /// Tells the orchestrator where the phase is.
    fn report(&mut self, phase: SelfReviewPhase);
    /// Why the run was cancelled, once it was.
    fn cancel_reason(&self) -> Option<CancelReason>;
}

/// Everything the phase reads.
pub struct PhaseInput<'a> {
    pub config: &'a SelfReviewConfig,
    pub issue: &'a Issue,
    pub workspace: &'a Path,
    pub workspaces: &'a WorkspaceManager,
    /// The variables verification commands get (those of the run's hooks).
    pub env: &'a HookEnv,
    /// Disconnects when the run is cancelled: kills a running command.
    pub cancel: &'a crossbeam_channel::Receiver<()>,
    pub metrics: &'a crate::metrics::Metrics,
}

/// How the phase ended.
#[derive(Debug, Clone)]
pub struct PhaseEnd {
    pub meta: ReviewMetadata,
    /// Replaces the run's normal exit when set.
    pub exit: Option<SupervisorExit>,
    /// `.sortie/review_summary.md`, when it was written.
    pub summary_path: Option<PathBuf>,
}

/// Runs the phase to its end.
pub fn run_phase(input: &PhaseInput<'_>, host: &mut dyn ReviewHost) -> PhaseEnd {
    let max = input.config.max_iterations.clamp(1, 10);
    log::info!(
        issue_id:% = input.issue.id,
        issue_identifier:% = input.issue.identifier,
        max_iterations:% = max;
        "self-review started"
    );
    host.report(SelfReviewPhase::Started);
    let mut records = Vec::new();
    let mut end = (PhaseStatus::CapReached, None);
    for i in 1..=max {
        if let Some(stop) = iteration(input, host, i, max, &mut records) {
            end = stop;
            break;
        }
    }
    let (status, exit) = end;
    let meta = ReviewMetadata::finish(records, max, status);
    input.metrics.self_review_session(meta.final_verdict);
    if meta.cap_reached {
        input.metrics.self_review_cap_reached();
    }
    let summary_path = write_summary(input, &meta);
    log::info!(
        issue_id:% = input.issue.id,
        issue_identifier:% = input.issue.identifier,
        status:% = meta.status.as_str(),
        final_verdict:% = meta.final_verdict,
        iterations:% = meta.total_iterations;
        "self-review finished"
    );
    host.report(SelfReviewPhase::Done(meta.to_json().map(Box::new)));
    PhaseEnd {
        meta,
        exit,
        summary_path,
    }
}

/// The phase's end, when it ends here.
type Stop = Option<(PhaseStatus, Option<SupervisorExit>)>;

fn cancelled(host: &dyn ReviewHost) -> Stop {
    host.cancel_reason().map(|reason| {
        (
            PhaseStatus::Error,
            Some(SupervisorExit::Cancelled { reason }),
        )
    })
}

/// Runs iteration `i`, adding its record; `Some` when the phase ends with it.
fn iteration(
    input: &PhaseInput<'_>,
    host: &mut dyn ReviewHost,
    i: u32,
    max: u32,
    records: &mut Vec<IterationRecord>,
) -> Stop {
    if let Some(stop) = cancelled(host) {
        return Some(stop);
    }
    let at = prompt::Position {
        iteration: i,
        max_iterations: max,
    };
    host.report(SelfReviewPhase::Checking);
    let diff = diff::collect(
        input.workspaces,
        input.workspace,
        input.env,
        input.config.max_diff_bytes,
        input.cancel,
    );
    let commands = run_commands(input, host);
    if let Some(stop) = cancelled(host) {
        return Some(stop);
    }
    if let Err(e) = sortie_file::remove(input.workspace, verdict::VERDICT_FILE) {
        log::warn!(
            issue_identifier:% = input.issue.identifier,
            error:% = e.to_string();
            "stale verdict file not removed"
        );
    }
    let mut rec = IterationRecord {
        iteration: i,
        diff_bytes: diff.original_bytes(),
        diff_truncated: diff.truncated(),
        diff_note: diff.note().map(str::to_string),
        verification: Vec::new(),
        verdict: "none",
        agent_verdict: None,
        summary: String::new(),
        findings: 0,
        verdict_error: None,
        ended_by: None,
        fix_turn: false,
    };
    let review = prompt::review(input.issue, &diff, &commands, at);
    rec.verification = commands;
    if let Some(stop) = turn(input, host, &review, TurnKind::Review, &mut rec) {
        records.push(rec);
        return Some(stop);
    }
    let verdict = verdict::read(input.workspace);
    judge(&mut rec, &verdict);
    input.metrics.self_review_iteration(rec.verdict);
    host.report(SelfReviewPhase::Iteration(i));
    log::info!(
        issue_identifier:% = input.issue.identifier,
        iteration:% = i,
        verdict:% = rec.verdict,
        agent_verdict:% = rec.agent_verdict.unwrap_or("none");
        "self-review iteration finished"
    );
    match record::decide(rec.verdict, i, max) {
        Next::Pass => return end_with(records, rec, PhaseStatus::Passed),
        Next::CapReached => return end_with(records, rec, PhaseStatus::CapReached),
        Next::Fix => {}
    }
    if let Some(stop) = cancelled(host) {
        records.push(rec);
        return Some(stop);
    }
    rec.fix_turn = true;
    let fix = prompt::fix(&verdict, &rec.verification, at);
    let stop = turn(input, host, &fix, TurnKind::Fix, &mut rec);
    records.push(rec);
    stop
}

fn end_with(records: &mut Vec<IterationRecord>, rec: IterationRecord, s: PhaseStatus) -> Stop {
    records.push(rec);
    Some((s, None))
}

/// Runs the commands in order, stopping at a cancel.
fn run_commands(input: &PhaseInput<'_>, host: &dyn ReviewHost) -> Vec<verify::CommandResult> {
    let verifier = verify::Verifier {
        workspaces: input.workspaces,
        workspace: input.workspace,
        env: input.env,
        timeout_ms: input.config.verification_timeout_ms,
        cancel: input.cancel,
        metrics: input.metrics,
    };
    let mut results = Vec::new();
    for command in &input.config.verification_commands {
        if host.cancel_reason().is_some() {
            break;
        }
        results.push(verifier.run(command));
    }
    results
}

/// Fills the record's verdict members from the verdict file.
fn judge(rec: &mut IterationRecord, verdict: &Result<verdict::Verdict, verdict::VerdictError>) {
    let commands_passed = rec.verification.iter().all(verify::CommandResult::passed);
    let word = verdict.as_ref().ok().map(|v| v.word);
    rec.verdict = record::iteration_verdict(word, commands_passed);
    rec.agent_verdict = word.map(verdict::VerdictWord::as_str);
    match verdict {
        Ok(v) => {
            rec.summary = crate::mask::mask(&v.summary);
            rec.findings = v.findings.len();
        }
        Err(reason) => rec.verdict_error = Some(crate::mask::mask(&reason.to_string())),
    }
}

/// Runs one turn and reads `.sortie/status` after it; `Some` when the phase ends.
fn turn(
    input: &PhaseInput<'_>,
    host: &mut dyn ReviewHost,
    prompt: &str,
    kind: TurnKind,
    rec: &mut IterationRecord,
) -> Stop {
    if let TurnEnd::Failed { message, exit } = host.run_turn(prompt, kind) {
        log::warn!(
            issue_identifier:% = input.issue.identifier,
            iteration:% = rec.iteration,
            turn_kind:% = kind.as_str(),
            error:% = message;
            "self-review turn did not complete"
        );
        rec.ended_by = Some(crate::mask::mask(&format!(
            "the {} turn did not complete: {message}",
            kind.as_str()
        )));
        return Some((PhaseStatus::Error, exit));
    }
    let exit = declared_blocked(input)?;
    rec.ended_by = Some("the agent declared blocked".into());
    Some((PhaseStatus::Error, Some(exit)))
}

/// A `blocked` status ends the run with it; any other status is ignored in the phase (and
/// removed, so it cannot end a later run).
fn declared_blocked(input: &PhaseInput<'_>) -> Option<SupervisorExit> {
    let status = status_file::read(input.workspace);
    if let Some(warning) = &status.warning {
        log::warn!(
            issue_identifier:% = input.issue.identifier,
            reason:% = warning;
            "status file refused"
        );
    }
    match status.outcome? {
        status_file::DeclaredOutcome::Blocked => Some(SupervisorExit::Normal {
            declared: Some(status_file::DeclaredOutcome::Blocked),
            statement: status.statement,
        }),
        other => {
            log::info!(
                issue_identifier:% = input.issue.identifier,
                status:% = other.token();
                "status ignored during self-review"
            );
            let _ = status_file::clear(input.workspace);
            None
        }
    }
}

fn write_summary(input: &PhaseInput<'_>, meta: &ReviewMetadata) -> Option<PathBuf> {
    let body = record::summary_markdown(meta);
    if let Err(e) = sortie_file::write(input.workspace, SUMMARY_FILE, body.as_bytes()) {
        log::warn!(
            issue_identifier:% = input.issue.identifier,
            error:% = e.to_string();
            "review summary not written"
        );
    }
    sortie_file::is_plain_file(input.workspace, SUMMARY_FILE)
        .then(|| sortie_file::sortie_dir(input.workspace).join(SUMMARY_FILE))
}

#[cfg(test)]
mod tests;
