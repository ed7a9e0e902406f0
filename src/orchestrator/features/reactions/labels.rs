//! The label commands (`label-review`, `label-fix`): a person adds the configured label to the
//! pull request; once a label event confirms it, the label is consumed and a review or fix
//! session is dispatched. They count nothing and never escalate.

use crate::domain::{ReactionKind, ReactionWait};

use super::cx::CheckCx;
use super::memory::RowMemory;
use super::row::ReactionRow;
use super::step::Step;

pub fn check(row: &mut ReactionRow, mem: &mut RowMemory, cx: &mut CheckCx<'_>) -> Step {
    let Some(cfg) = cx.cfg.label_commands.clone() else {
        return Step::End {
            why: "label_commands is no longer configured",
        };
    };
    let label = match row.kind {
        ReactionKind::LabelReview => cfg.review_label.clone(),
        _ => cfg.fix_label.clone(),
    };
    let Some(label) = label.map(|l| l.to_lowercase()) else {
        return Step::End {
            why: "the label command is no longer configured",
        };
    };
    let interval = cfg.poll_interval_ms;
    let info = match cx.open_pull_request(row, interval) {
        Ok(i) => i,
        Err(step) => return *step,
    };
    let pr = row.pr.pr.clone();
    if !info.labels.iter().any(|l| l.to_lowercase() == label) {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    let events = match cx.read(|s| s.label_events(&pr)) {
        Ok(e) => e,
        Err(_) => return cx.backoff(interval, row.backoff_count + 1),
    };
    let Some(added) = events
        .iter()
        .rev()
        .find(|e| e.added && e.label.to_lowercase() == label)
    else {
        return cx.wait(ReactionWait::PollInterval, interval);
    };
    let print = format!("{}@{}", added.label, added.created_at_ms);
    if mem.dispatched(&print) {
        return cx.wait(ReactionWait::PollInterval, interval);
    }
    if cx.slot_busy {
        return cx.wait(ReactionWait::RetrySlot, interval);
    }
    if let Err(e) = cx.scm.remove_label(&pr, &added.label) {
        log::warn!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            label:% = added.label,
            error:% = e.to_string();
            "label command not consumed"
        );
        return cx.backoff(interval, row.backoff_count + 1);
    }
    Step::Dispatch {
        context: None,
        fingerprint: Some(print),
        given: Vec::new(),
        counts: false,
    }
}
