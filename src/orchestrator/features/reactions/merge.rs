//! The `merge` kind (`auto_merge`): a mergeable pull request (with a passing CI verdict when
//! `require_ci`) is merged once with the configured strategy, guarded by the head it read;
//! the branch is deleted when configured. A refusal escalates at once; failed merge calls
//! count towards `max_retries` (0: never escalates by count).

use crate::domain::{CiStatus, EscalationTrigger, ReactionWait};
use crate::scm::MergeOutcome;

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::ReactionRow;
use super::step::Step;

pub fn check(row: &mut ReactionRow, _mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(cfg) = cx.cfg.auto_merge.clone() else {
        return Step::End {
            why: "auto_merge is no longer configured",
        };
    };
    let interval = cfg.poll_interval_ms;
    row.max_attempts = (cfg.max_retries > 0).then_some(cfg.max_retries);
    let info = match cx.pull_request(row, interval) {
        Ok(i) => i,
        Err(step) => return *step,
    };
    let pr = row.pr.pr.clone();
    if info.merged {
        return Step::Merged {
            merge_path: "auto_merge",
            transition_to: None,
            merged_here: false,
        };
    }
    if !info.open {
        return Step::End {
            why: "the pull request closed",
        };
    }
    if row.escalated_at_ms.is_some() || info.mergeable != Some(true) {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    if cfg.require_ci {
        let head = info.head_sha.clone();
        match cx.read(|s| s.ci_report(&pr, &head, 0)) {
            Ok(r) if r.status == CiStatus::Passing => {}
            Ok(_) => return cx.wait(ReactionWait::PollInterval, interval),
            Err(_) => return cx.backoff(interval, row.backoff_count + 1),
        }
    }
    let used = row.used_attempts.unwrap_or(0) + 1;
    row.used_attempts = Some(used);
    match cx.scm.merge(&pr, cfg.strategy, &info.head_sha) {
        Ok(MergeOutcome::Merged { .. }) => {
            if cfg.delete_branch && !info.head_ref.is_empty() {
                delete_branch(cx, row, &info.head_ref);
            }
            Step::Merged {
                merge_path: "auto_merge",
                transition_to: None,
                merged_here: true,
            }
        }
        Ok(MergeOutcome::Refused(_)) => Step::Escalate {
            trigger: EscalationTrigger::Refused,
        },
        Ok(MergeOutcome::NotMergeable(_) | MergeOutcome::HeadMoved) | Err(_)
            if cfg.max_retries > 0 && used >= cfg.max_retries =>
        {
            Step::Escalate {
                trigger: EscalationTrigger::BudgetExhausted,
            }
        }
        Ok(MergeOutcome::NotMergeable(_) | MergeOutcome::HeadMoved) => {
            cx.wait(ReactionWait::PollInterval, interval)
        }
        Err(_) => cx.backoff(interval, row.backoff_count + 1),
    }
}

fn delete_branch(cx: &CheckCx<'_>, row: &ReactionRow, branch: &str) {
    if let Err(e) = cx.scm.delete_branch(&row.pr.pr, branch) {
        log::warn!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            branch:% = branch,
            error:% = e.to_string();
            "branch delete after merge failed"
        );
    }
}
