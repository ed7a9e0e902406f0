//! The `ci` kind: a failing verdict on the pull request's head dispatches a CI-fix run (once
//! per head), up to `max_retries`; then it escalates. A pass, or a head that is not Sortie's
//! own work, resets the count and ends a standing escalation.

use crate::config::reactions::CiFailureConfig;
use crate::domain::{CiStatus, EscalationTrigger, ReactionWait};
use crate::scm::CiReport;

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::{LastCheck, ReactionRow};
use super::step::{FixContext, Step};
use crate::prompt::{CheckRunContext, CiFailureContext};

pub fn check(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(cfg) = cx.cfg.ci_failure.clone() else {
        return Step::End {
            why: "ci_failure is no longer configured",
        };
    };
    let base = cx.poll_interval_ms;
    let info = match cx.open_pull_request(row, base) {
        Ok(i) => i,
        Err(step) => return *step,
    };
    let pr = row.pr.pr.clone();
    let head = if info.head_sha.is_empty() {
        row.pr.head_sha.clone()
    } else {
        info.head_sha.clone()
    };
    note_head(row, mem, &head, cx.now_ms);
    let git_ref = if head.is_empty() {
        row.pr.branch.clone()
    } else {
        head.clone()
    };
    let max_lines = cfg.max_log_lines;
    let report = match cx.read(|s| s.ci_report(&pr, &git_ref, max_lines)) {
        Ok(r) => r,
        Err(_) => return cx.backoff(base, row.backoff_count + 1),
    };
    row.max_attempts = Some(cfg.max_retries);
    row.last_check = Some(last_check(&report, &head, cx.now_ms));
    act(row, mem, cx, &cfg, report)
}

/// A new head clears the last check and restarts the watch; one that Sortie's runs did not
/// record resets the count and ends a standing escalation.
fn note_head(row: &mut ReactionRow, mem: &mut RowMemory, head: &str, now_ms: i64) {
    if head.is_empty() || head == mem.last_head {
        return;
    }
    let first = mem.last_head.is_empty();
    mem.last_head = head.to_string();
    if first {
        return;
    }
    row.last_check = None;
    row.watch_from_ms = now_ms;
    if !mem.own_heads.contains(head) {
        row.used_attempts = Some(0);
        end_escalation(row);
    }
}

fn end_escalation(row: &mut ReactionRow) {
    row.escalated_at_ms = None;
    row.escalation_trigger = None;
}

fn act(
    row: &mut ReactionRow,
    mem: &mut RowMemory,
    cx: &mut CheckCx<'_>,
    cfg: &CiFailureConfig,
    report: CiReport,
) -> Step {
    let interval = cx.poll_interval_ms;
    let used = row.used_attempts.unwrap_or(0);
    match report.status {
        CiStatus::Passing => {
            row.used_attempts = Some(0);
            mem.fingerprint = None;
            end_escalation(row);
            cx.wait(ReactionWait::PollInterval, interval)
        }
        CiStatus::Pending => cx.wait(ReactionWait::PollInterval, interval),
        CiStatus::Failing if row.escalated_at_ms.is_some() => {
            if used < cfg.max_retries {
                // The budget was raised: the escalation ends and the failure is acted on.
                end_escalation(row);
                return act(row, mem, cx, cfg, report);
            }
            cx.wait(ReactionWait::PollInterval, interval)
        }
        CiStatus::Failing if mem.dispatched(&report.git_ref) => {
            cx.wait(ReactionWait::PollInterval, interval)
        }
        CiStatus::Failing if used >= cfg.max_retries => Step::Escalate {
            trigger: EscalationTrigger::BudgetExhausted,
        },
        CiStatus::Failing if cx.slot_busy => cx.wait(ReactionWait::RetrySlot, interval),
        CiStatus::Failing => Step::Dispatch {
            fingerprint: Some(report.git_ref.clone()),
            context: Some(FixContext::CiFailure(context(&report))),
            given: Vec::new(),
            counts: true,
        },
    }
}

fn last_check(r: &CiReport, head: &str, now_ms: i64) -> LastCheck {
    LastCheck::Ci {
        observed_at_ms: now_ms,
        head_sha: head.to_string(),
        status: r.status,
        failing_checks: r.failing_checks.clone(),
        failing: r.failing,
        pending: r.pending,
        passing: r.passing,
    }
}

/// `.ci_failure` for the prompt; the log excerpt is never stored beyond the queued retry.
fn context(r: &CiReport) -> CiFailureContext {
    CiFailureContext {
        status: r.status,
        check_runs: r
            .check_runs
            .iter()
            .map(|c| CheckRunContext {
                name: c.name.clone(),
                status: c.status.clone(),
                conclusion: c.conclusion.clone().unwrap_or_default(),
                details_url: c.details_url.clone(),
            })
            .collect(),
        log_excerpt: r.log_excerpt.clone(),
        failing_count: r.failing,
        git_ref: r.git_ref.clone(),
    }
}
