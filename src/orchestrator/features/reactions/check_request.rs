//! `POST /api/v1/reactions/{identifier}/{kind}/check`: brings a pending reaction's next check
//! forward to now (`ReactionsFeature::check_now`; the loop only refuses while it drains).
//! The reaction pass runs it on the next tick; what the request replaced is
//! kept on the row so that pass can give it back (`reactions::check_now::settle_check_now`).

use std::collections::BTreeMap;

use crate::domain::ReactionKind;
use crate::orchestrator::core::msg::{CheckNowOutcome, DueReaction};
use crate::orchestrator::features::reactions::{CheckNow, ReactionRow};

use crate::orchestrator::core::orchestrator::Orchestrator;
use crate::orchestrator::features::reactions::feature::ReactionsFeature;

/// What a request did to the row it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MadeDue {
    pub due: DueReaction,
    /// The `next_poll_at` the request replaced; `None` when the check was already due.
    pub replaced_next_poll_at_ms: Option<i64>,
}

/// Finds the row of `identifier` and `kind` and, when its next check is later than `now_ms`,
/// moves it to `now_ms` and records what it replaced. `None`: no such row.
pub(crate) fn make_due(
    reactions: &mut BTreeMap<(String, ReactionKind), ReactionRow>,
    identifier: &str,
    kind: ReactionKind,
    now_ms: i64,
) -> Option<MadeDue> {
    let row = reactions
        .values_mut()
        .find(|r| r.kind == kind && r.issue.identifier == identifier)?;
    let replaced = (row.next_poll_at_ms > now_ms).then(|| {
        let replaced = row.next_poll_at_ms;
        row.check_now = Some(CheckNow {
            replaced_next_poll_at_ms: replaced,
            backoff_count_before: row.backoff_count,
        });
        row.next_poll_at_ms = now_ms;
        replaced
    });
    Some(MadeDue {
        due: DueReaction {
            issue_id: row.issue.id.clone(),
            issue_identifier: row.issue.identifier.clone(),
            display_identifier: row.issue.display_identifier.clone(),
            kind: row.kind,
            pr: row.pr.pr.clone(),
        },
        replaced_next_poll_at_ms: replaced,
    })
}

impl ReactionsFeature {
    /// A check-now request while the process runs: the row's next check moves to now.
    pub(crate) fn check_now(
        &mut self,
        identifier: &str,
        kind: ReactionKind,
        now_ms: i64,
    ) -> CheckNowOutcome {
        let Some(made) = make_due(&mut self.rows, identifier, kind, now_ms) else {
            return CheckNowOutcome::NotFound;
        };
        if let Some(replaced) = made.replaced_next_poll_at_ms {
            log::info!(
                issue_id:% = made.due.issue_id,
                issue_identifier:% = made.due.issue_identifier,
                reaction_kind:% = kind,
                replaced_next_poll_at:% = crate::clock::rfc3339_ms(replaced);
                "reaction check made due on request"
            );
        }
        CheckNowOutcome::Due(made.due)
    }
}

impl Orchestrator {
    /// Handles a check-now request (`ReactionsFeature::check_now`); none while the process
    /// drains. The loop publishes the change after any message.
    pub(crate) fn reaction_check(
        &mut self,
        identifier: &str,
        kind: ReactionKind,
    ) -> CheckNowOutcome {
        if self.draining.is_some() {
            return CheckNowOutcome::Draining;
        }
        let now = self.clock.now_ms();
        self.features.reactions.check_now(identifier, kind, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::features::reactions::{ReactionIssue, ReactionPr};
    use crate::scm::PullRequestRef;

    fn row(identifier: &str, kind: ReactionKind, next_poll_at_ms: i64) -> ReactionRow {
        ReactionRow {
            issue: ReactionIssue {
                id: format!("id-{identifier}"),
                identifier: identifier.into(),
                ..Default::default()
            },
            kind,
            pr: ReactionPr {
                pr: PullRequestRef {
                    owner: "acme".into(),
                    repo: "web".into(),
                    number: 7,
                },
                url: String::new(),
                branch: String::new(),
                head_sha: String::new(),
            },
            created_at_ms: 0,
            dispatched_at_ms: None,
            chain_id: String::new(),
            next_poll_at_ms,
            wait: None,
            used_attempts: None,
            max_attempts: None,
            escalated_at_ms: None,
            escalation_trigger: None,
            watch_from_ms: 0,
            watch_window_ms: 0,
            last_check: None,
            rule_name: String::new(),
            agent_kind: String::new(),
            configured_model: String::new(),
            backoff_count: 3,
            check_now: None,
        }
    }

    fn table(rows: Vec<ReactionRow>) -> BTreeMap<(String, ReactionKind), ReactionRow> {
        rows.into_iter()
            .map(|r| ((r.issue.id.clone(), r.kind), r))
            .collect()
    }

    #[test]
    fn a_later_check_moves_to_now_and_keeps_what_it_replaced() {
        let mut t = table(vec![
            row("A-1", ReactionKind::Ci, 90_000),
            row("A-1", ReactionKind::Review, 80_000),
        ]);
        let made = make_due(&mut t, "A-1", ReactionKind::Review, 10_000);
        let made = made.unwrap_or_else(|| panic!("row found"));
        assert_eq!(made.replaced_next_poll_at_ms, Some(80_000));
        assert_eq!(made.due.kind, ReactionKind::Review);
        assert_eq!(made.due.pr.number, 7);
        let r = &t[&("id-A-1".to_string(), ReactionKind::Review)];
        assert_eq!(r.next_poll_at_ms, 10_000);
        assert_eq!(
            r.check_now,
            Some(CheckNow {
                replaced_next_poll_at_ms: 80_000,
                backoff_count_before: 3
            })
        );
        // The other kind of the same issue is untouched.
        let ci = &t[&("id-A-1".to_string(), ReactionKind::Ci)];
        assert_eq!((ci.next_poll_at_ms, ci.check_now), (90_000, None));
    }

    #[test]
    fn a_check_already_due_changes_nothing() {
        let mut t = table(vec![row("A-1", ReactionKind::Ci, 10_000)]);
        let before = t.clone();
        let made = make_due(&mut t, "A-1", ReactionKind::Ci, 10_000);
        assert_eq!(made.map(|m| m.replaced_next_poll_at_ms), Some(None));
        assert_eq!(t, before);
    }

    #[test]
    fn an_unknown_identifier_or_kind_is_not_found() {
        let mut t = table(vec![row("A-1", ReactionKind::Ci, 90_000)]);
        assert!(make_due(&mut t, "A-2", ReactionKind::Ci, 0).is_none());
        assert!(make_due(&mut t, "A-1", ReactionKind::BotReview, 0).is_none());
        assert!(make_due(&mut t, "a-1", ReactionKind::Ci, 0).is_none());
    }
}
