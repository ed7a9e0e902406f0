//! A `retrying[]` row: a queued retry and when it comes due.

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::{ConfigView, RetryRow};

use crate::domain::{ReactionKind, RetryTrigger};

use super::super::wording;
use super::stage::{RouteNames, StageLineageView, StagePosition, Stages, lineage};
use super::{IssueFields, Sentences, nonempty, ts};

/// A `retrying[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RetryRow")]
pub struct RetryView {
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    /// `null` when the first dispatch time is unknown (a retry restored without one).
    pub dispatched_at: Option<String>,
    pub attempt: u32,
    pub due_at: String,
    /// The plain sentence of the run before it, or the reschedule reason as written; the
    /// sentences use the plain form of a reason.
    pub error: Option<String>,
    /// Omitted for a review, bot review, merge conflict or label command continuation, which
    /// `reaction_kind` names instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The reaction behind the retry; omitted when it carries none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_kind: Option<ReactionKind>,
    /// The `reactions` key that configures `reaction_kind`; omitted with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_config_key: Option<String>,
    /// The dispatch rule of the run the retry follows, frozen with the retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    pub stage_lineage: Option<StageLineageView>,
    pub stage_position: Option<StagePosition>,
    pub paused: bool,
}

impl RetryView {
    pub fn build(r: &RetryRow, cfg: &ConfigView, now_ms: i64, stages: &Stages<'_>) -> RetryView {
        let error = r.error.as_deref().filter(|e| !e.trim().is_empty());
        let names = RouteNames::of(&r.route, cfg);
        RetryView {
            issue: IssueFields::of(&r.issue),
            sentences: wording::retrying(
                r.attempt,
                r.due_at_ms - now_ms,
                r.trigger.as_str(),
                error,
            )
            .into(),
            dispatched_at: (r.dispatched_at_ms > 0).then(|| ts(r.dispatched_at_ms)),
            attempt: r.attempt,
            due_at: ts(r.due_at_ms),
            error: error.map(wording::retry_error),
            trigger: nonempty(r.trigger.as_str()).filter(|_| !named_by_reaction(r)),
            reaction_kind: r.reaction.as_ref().map(|x| x.kind),
            reaction_config_key: r.reaction.as_ref().map(|x| x.kind.config_key().to_string()),
            rule_name: names.rule_name,
            agent_kind: names.agent_kind,
            configured_model: names.configured_model,
            stage_lineage: lineage(&r.route),
            stage_position: stages.of_route(&r.route, &r.issue.id),
            paused: error.is_some_and(paused),
        }
    }
}

/// Whether the retry was last put back because its issue's state or an open blocker does not
/// permit dispatching it (its error is one of the two pause reasons).
pub(crate) fn paused(error: &str) -> bool {
    use crate::domain::RescheduleReason as R;
    [R::ReactionPausedByBlocker, R::ReactionPausedByState]
        .iter()
        .any(|r| r.as_str() == error)
}

/// A continuation of a reaction other than CI serves no `trigger`: its `reaction_kind` says
/// what started it.
fn named_by_reaction(r: &RetryRow) -> bool {
    r.trigger == RetryTrigger::Continuation
        && r.reaction
            .as_ref()
            .is_some_and(|x| x.kind != ReactionKind::Ci)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::reactions::RunReaction;

    fn retry(trigger: RetryTrigger, kind: Option<ReactionKind>) -> serde_json::Value {
        let r = RetryRow {
            issue: crate::domain::Issue {
                id: "1".into(),
                identifier: "R-1".into(),
                ..Default::default()
            },
            attempt: 2,
            due_at_ms: 60_000,
            error: None,
            trigger,
            dispatched_at_ms: 1_000,
            reaction: kind.map(|kind| RunReaction {
                kind,
                attempt: Some(1),
                pr: crate::scm::PullRequestRef {
                    owner: "o".into(),
                    repo: "r".into(),
                    number: 5,
                },
            }),
            route: Default::default(),
        };
        let (cfg, hops) = (ConfigView::default(), Default::default());
        let stages = Stages {
            dispatch: &cfg.dispatch,
            hop_counts: &hops,
        };
        super::super::to_value(&RetryView::build(&r, &cfg, 0, &stages))
    }

    #[test]
    fn reaction_members_come_from_the_typed_reaction() {
        let v = retry(RetryTrigger::Error, None);
        assert!(v.get("reaction_kind").is_none());
        assert!(v.get("reaction_config_key").is_none());
        assert_eq!(v["trigger"], "error");
        let v = retry(RetryTrigger::CiFix, Some(ReactionKind::Ci));
        assert_eq!(
            (
                &v["trigger"],
                &v["reaction_kind"],
                &v["reaction_config_key"]
            ),
            (&"ci_fix".into(), &"ci".into(), &"ci_failure".into())
        );
        // An error retry of a run a reaction dispatched keeps the run's kind and its trigger.
        let v = retry(RetryTrigger::Error, Some(ReactionKind::Review));
        assert_eq!(
            (&v["trigger"], &v["reaction_kind"]),
            (&"error".into(), &"review".into())
        );
        // A review continuation is named by its kind alone.
        let v = retry(RetryTrigger::Continuation, Some(ReactionKind::Review));
        assert!(v.get("trigger").is_none());
        assert_eq!(v["reaction_config_key"], "review_comments");
        let v = retry(RetryTrigger::Continuation, Some(ReactionKind::LabelReview));
        assert_eq!(v["reaction_config_key"], "label_commands");
        assert!(v.get("trigger").is_none());
    }
}

#[cfg(test)]
mod paused_tests {
    use super::paused;

    #[test]
    fn only_the_two_pause_reasons_read_as_paused() {
        assert!(paused("reaction retry paused by an open blocking issue"));
        assert!(paused("reaction retry paused by issue state"));
        assert!(!paused("no available orchestrator slots"));
        assert!(!paused("worker exited: agent_turn_failed: boom"));
    }
}
