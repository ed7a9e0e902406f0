//! The state document's `active` list: one entry per issue across the live lists.

use std::collections::{BTreeMap, HashSet};

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::ReactionKind;

use super::between_stages::BetweenStagesView;
use super::budget::BudgetView;
use super::parked::ParkedView;
use super::pending_reaction::PendingReactionView;
use super::pr_loop::PrLoopView;
use super::retry::RetryView;
use super::running::RunningView;
use super::stage::StagePosition;
use super::{IssueFields, Sentences};

/// Which live list decided an issue's status.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LiveStatus {
    Running,
    Retrying,
    BudgetExhausted,
    Parked,
    PendingReactions,
    BetweenStages,
}

/// One issue of the `active` list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ActiveEntry")]
pub struct ActiveEntry {
    pub issue_id: String,
    pub issue_identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_identifier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    pub status: LiveStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_position: Option<StagePosition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    /// The kind of the deciding row; present exactly when `status` is `pending_reactions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_kind: Option<ReactionKind>,
    pub dispatched_at: Option<String>,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// What each configured reaction recorded in the pass of the deciding row (for pending
    /// reactions: the first escalated row, else the first); `null` when reaction activity
    /// could not be read.
    pub pr_loop: Option<PrLoopView>,
}

/// What the `active` list reads from one live row.
#[derive(Debug, Clone)]
pub struct ActiveSource<'a> {
    pub issue: &'a IssueFields,
    pub sentences: &'a Sentences,
    pub dispatched_at: Option<&'a str>,
    pub rule_name: Option<&'a str>,
    pub stage_position: Option<&'a StagePosition>,
    pub agent_kind: Option<&'a str>,
    pub configured_model: Option<&'a str>,
    /// The row's kind, for a pending reaction row.
    pub reaction_kind: Option<ReactionKind>,
}

impl<'a> From<&'a RunningView> for ActiveSource<'a> {
    fn from(r: &'a RunningView) -> Self {
        ActiveSource {
            issue: &r.issue,
            sentences: &r.sentences,
            dispatched_at: Some(&r.dispatched_at),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: None,
        }
    }
}

impl<'a> From<&'a RetryView> for ActiveSource<'a> {
    fn from(r: &'a RetryView) -> Self {
        ActiveSource {
            issue: &r.issue,
            sentences: &r.sentences,
            dispatched_at: r.dispatched_at.as_deref(),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: None,
        }
    }
}

impl<'a> From<&'a BudgetView> for ActiveSource<'a> {
    fn from(r: &'a BudgetView) -> Self {
        ActiveSource {
            issue: &r.issue,
            sentences: &r.sentences,
            dispatched_at: r.dispatched_at.as_deref(),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: None,
        }
    }
}

impl<'a> From<&'a ParkedView> for ActiveSource<'a> {
    fn from(r: &'a ParkedView) -> Self {
        ActiveSource {
            issue: &r.issue,
            sentences: &r.sentences,
            dispatched_at: r.dispatched_at.as_deref(),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: None,
        }
    }
}

impl<'a> From<&'a PendingReactionView> for ActiveSource<'a> {
    fn from(r: &'a PendingReactionView) -> Self {
        ActiveSource {
            issue: &r.fields,
            sentences: &r.sentences,
            dispatched_at: r.dispatched_at.as_deref(),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: Some(r.kind),
        }
    }
}

impl<'a> From<&'a BetweenStagesView> for ActiveSource<'a> {
    fn from(r: &'a BetweenStagesView) -> Self {
        ActiveSource {
            issue: &r.fields,
            sentences: &r.sentences,
            dispatched_at: r.dispatched_at.as_deref(),
            rule_name: r.rule_name.as_deref(),
            stage_position: r.stage_position.as_ref(),
            agent_kind: r.agent_kind.as_deref(),
            configured_model: r.configured_model.as_deref(),
            reaction_kind: None,
        }
    }
}

impl ActiveEntry {
    fn of(src: &ActiveSource<'_>, status: LiveStatus) -> ActiveEntry {
        ActiveEntry {
            issue_id: src.issue.issue_id.clone(),
            issue_identifier: src.issue.issue_identifier.clone(),
            display_identifier: src.issue.display_identifier.clone(),
            issue_title: src.issue.issue_title.clone(),
            issue_url: src.issue.issue_url.clone(),
            status,
            rule_name: src.rule_name.map(str::to_string),
            stage_position: src.stage_position.cloned(),
            agent_kind: src.agent_kind.map(str::to_string),
            configured_model: src.configured_model.map(str::to_string),
            reaction_kind: src
                .reaction_kind
                .filter(|_| status == LiveStatus::PendingReactions),
            dispatched_at: src.dispatched_at.map(str::to_string),
            sentences: src.sentences.clone(),
            pr_loop: Some(PrLoopView::default()),
        }
    }
}

/// One entry per issue, its status by list precedence (the order of `lists`), ordered by
/// place (earliest `dispatched_at` over all of the issue's rows, undated first), then
/// identifier, then id.
pub fn active(lists: &[(LiveStatus, Vec<ActiveSource<'_>>)]) -> Vec<ActiveEntry> {
    let mut firsts: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for (_, rows) in lists {
        for r in rows {
            let e = firsts.entry(r.issue.issue_id.as_str()).or_insert(None);
            if let Some(d) = r.dispatched_at
                && e.is_none_or(|cur| d < cur)
            {
                *e = Some(d);
            }
        }
    }
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for (status, rows) in lists {
        for r in rows {
            let id = r.issue.issue_id.as_str();
            if !seen.insert(id) {
                continue;
            }
            let place = firsts.get(id).copied().flatten();
            entries.push((place, ActiveEntry::of(r, *status)));
        }
    }
    entries.sort_by(|(pa, a), (pb, b)| {
        pa.cmp(pb)
            .then_with(|| {
                a.issue_identifier
                    .as_bytes()
                    .cmp(b.issue_identifier.as_bytes())
            })
            .then_with(|| a.issue_id.as_bytes().cmp(b.issue_id.as_bytes()))
    });
    entries.into_iter().map(|(_, e)| e).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(id: &str, ident: &str) -> IssueFields {
        IssueFields {
            issue_id: id.into(),
            issue_identifier: ident.into(),
            issue_title: None,
            issue_url: None,
            issue_labels: vec![],
            display_identifier: None,
            issue_type: None,
            state: None,
        }
    }

    fn words(s: &str) -> Sentences {
        Sentences {
            status_text: s.into(),
            status_text_full: format!("{s}."),
        }
    }

    #[test]
    fn active_orders_by_place_then_identifier() {
        let (i1, i2, i3) = (fields("1", "A"), fields("2", "B"), fields("3", "C"));
        let (turn, x, y, p) = (words("Turn 1"), words("x"), words("y"), words("p"));
        let src = |issue, sentences, d| ActiveSource {
            issue,
            sentences,
            dispatched_at: d,
            rule_name: None,
            stage_position: None,
            agent_kind: None,
            configured_model: None,
            reaction_kind: None,
        };
        let a = active(&[
            (
                LiveStatus::Running,
                vec![src(&i2, &turn, Some("2026-01-01T00:00:02.000Z"))],
            ),
            (
                LiveStatus::Retrying,
                vec![
                    src(&i1, &x, Some("2026-01-01T00:00:03.000Z")),
                    src(&i2, &y, Some("2026-01-01T00:00:01.000Z")),
                ],
            ),
            (LiveStatus::Parked, vec![src(&i3, &p, None)]),
        ]);
        let ids: Vec<&str> = a.iter().map(|v| v.issue_id.as_str()).collect();
        // Undated first; issue 2 is placed by its earliest row (its retry row) but its status
        // is running by precedence.
        assert_eq!(ids, vec!["3", "2", "1"]);
        assert_eq!(a[1].status, LiveStatus::Running);
        assert_eq!(a[1].sentences.status_text, "Turn 1");
    }
}
