//! The live rows of one issue (running, retrying, budget-held, parked, pending reactions,
//! between stages) and the one that decides its status: shared by the issue detail and the
//! run history, which both report an issue's live status.

use crate::orchestrator::snapshot::Snapshot;

use super::views::between_stages::BetweenStagesView;
use super::views::budget::BudgetView;
use super::views::held::SlotUse;
use super::views::issue_detail::IssueMember;
use super::views::parked::ParkedView;
use super::views::pending_reaction::{self, PendingReactionView};
use super::views::retry::RetryView;
use super::views::running::RunningView;
use super::views::stage::Stages;
use super::views::{IssueFields, IssueRows, IssueStatus, Sentences};

/// The live rows of one issue, as served.
pub(super) struct LiveRows {
    pub(super) running: Option<RunningView>,
    pub(super) retry: Option<RetryView>,
    pub(super) budget: Option<BudgetView>,
    pub(super) parked: Option<ParkedView>,
    pub(super) pending: Vec<PendingReactionView>,
    /// The index in `pending` of the row that decides a pending-reactions status.
    pub(super) deciding_pending: usize,
    pub(super) between: Option<BetweenStagesView>,
}

impl LiveRows {
    pub(super) fn build(
        snap: &Snapshot,
        found: &IssueRows<'_>,
        spend: Option<crate::store::IssueSpend>,
    ) -> LiveRows {
        let now = snap.generated_at_ms;
        let cfg = &snap.config;
        let st = Stages::of(snap);
        LiveRows {
            running: found.running.map(|r| {
                let review = snap.self_review_of(&r.dispatch_id);
                let price = snap.running_cost(&r.dispatch_id);
                RunningView::build(r, review, cfg, spend, price, now, &st)
            }),
            retry: found.retry.map(|r| RetryView::build(r, cfg, now, &st)),
            budget: found.budget.map(|b| BudgetView::build(b, cfg, &st)),
            parked: found.parked.map(|p| ParkedView::build(p, cfg, &st)),
            pending: found
                .pending
                .iter()
                .map(|r| PendingReactionView::build(r, now, &st))
                .collect(),
            between: found
                .between
                .map(|b| BetweenStagesView::build(b, cfg, &st, &SlotUse::of(snap))),
            deciding_pending: pending_reaction::deciding(&found.pending)
                .and_then(|d| found.pending.iter().position(|r| std::ptr::eq(*r, d)))
                .unwrap_or(0),
        }
    }

    /// The tracker's view of the issue from the deciding row; a pending-reactions status
    /// takes it from the issue's first row.
    pub(super) fn issue_member(&self) -> Option<IssueMember> {
        match self.deciding() {
            Some((IssueStatus::PendingReactions, _, _)) => {
                self.pending.first().map(IssueMember::of_reaction)
            }
            Some((IssueStatus::BetweenStages, _, _)) => {
                self.between.as_ref().map(IssueMember::of_hop)
            }
            Some((_, fields, _)) => Some(IssueMember::of(fields)),
            None => None,
        }
    }

    /// The row that decides the status (by precedence), with its status.
    pub(super) fn deciding(&self) -> Option<(IssueStatus, &IssueFields, &Sentences)> {
        if let Some(r) = &self.running {
            Some((IssueStatus::Running, &r.issue, &r.sentences))
        } else if let Some(r) = &self.retry {
            Some((IssueStatus::Retrying, &r.issue, &r.sentences))
        } else if let Some(r) = &self.budget {
            Some((IssueStatus::BudgetExhausted, &r.issue, &r.sentences))
        } else if let Some(r) = &self.parked {
            Some((IssueStatus::Parked, &r.issue, &r.sentences))
        } else if let Some(r) = self.pending.get(self.deciding_pending) {
            Some((IssueStatus::PendingReactions, &r.fields, &r.sentences))
        } else {
            self.between
                .as_ref()
                .map(|r| (IssueStatus::BetweenStages, &r.fields, &r.sentences))
        }
    }
}

/// The live status and sentences of an issue, `None` when no live list holds it.
pub fn live_status(snap: &Snapshot, issue_id: &str) -> Option<(IssueStatus, Sentences)> {
    let found = IssueRows::find(snap, issue_id);
    let rows = LiveRows::build(snap, &found, None);
    rows.deciding().map(|(s, _, words)| (s, words.clone()))
}
