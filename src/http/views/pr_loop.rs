//! `pr_loop`: what each configured pull-request reaction recorded in one pass of an issue, one
//! member per key of `config.reactions` (named as in WORKFLOW.md; `label_commands` covers both
//! label commands), `{}` when no reaction is configured.

use schemars::JsonSchema;
use serde::Serialize;

use crate::config::reactions::ReactionsConfig;
use crate::store::{PassActivity, PrLoopActivity};

/// What a reaction recorded in the pass, by precedence: it began an escalation, else it acted
/// (a triage verdict, a merge, the move after a merge, a scheduled run), else it watched and
/// found nothing, else nothing is recorded.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "PrLoopResult")]
pub enum PrLoopResult {
    Escalated,
    Acted,
    Quiet,
    Unrecorded,
}

/// One reaction's record in the pass.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(rename = "PrLoopMember")]
pub struct PrLoopMember {
    pub result: PrLoopResult,
    /// Runs scheduled for the reaction in the pass (one a budget hold kept from starting
    /// included).
    pub continuations: u32,
}

impl PrLoopMember {
    fn of(a: Option<&PrLoopActivity>) -> PrLoopMember {
        let Some(a) = a else {
            return PrLoopMember {
                result: PrLoopResult::Unrecorded,
                continuations: 0,
            };
        };
        let result = if a.escalated {
            PrLoopResult::Escalated
        } else if a.acted || a.continuations > 0 {
            PrLoopResult::Acted
        } else if a.quiet {
            PrLoopResult::Quiet
        } else {
            PrLoopResult::Unrecorded
        };
        PrLoopMember {
            result,
            continuations: a.continuations,
        }
    }
}

/// A member per configured reaction key.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(rename = "PrLoop")]
pub struct PrLoopView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_failure: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_comments: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_review: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_conflicts: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_merge: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_completion: Option<PrLoopMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_commands: Option<PrLoopMember>,
}

impl PrLoopView {
    /// The members `cfg` configures, read from the pass's `activity` (`None`: a pass with no
    /// chain or no dispatch time, every member `unrecorded`).
    pub fn build(cfg: &ReactionsConfig, activity: Option<&PassActivity>) -> PrLoopView {
        if cfg.provider.is_none() {
            return PrLoopView::default();
        }
        let member = |configured: bool, key: &str| {
            configured.then(|| PrLoopMember::of(activity.and_then(|a| a.get(key))))
        };
        PrLoopView {
            ci_failure: member(cfg.ci_failure.is_some(), "ci_failure"),
            review_comments: member(cfg.review_comments.is_some(), "review_comments"),
            bot_review: member(cfg.bot_review.is_some(), "bot_review"),
            merge_conflicts: member(cfg.merge_conflicts.is_some(), "merge_conflicts"),
            auto_merge: member(cfg.auto_merge.is_some(), "auto_merge"),
            merge_completion: member(cfg.merge_completion.is_some(), "merge_completion"),
            label_commands: member(cfg.label_commands.is_some(), "label_commands"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reactions::{Escalation, LabelCommandsConfig, MergeCompletionConfig};

    #[test]
    fn results_follow_their_precedence_and_members_follow_the_configuration() {
        let mut cfg = ReactionsConfig {
            provider: Some("github".into()),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(PrLoopView::build(&cfg, None)).ok(),
            Some(serde_json::json!({}))
        );
        cfg.label_commands = Some(LabelCommandsConfig {
            review_label: None,
            fix_label: Some("fix".into()),
            poll_interval_ms: 1,
        });
        cfg.merge_completion = Some(MergeCompletionConfig {
            target_state: "done".into(),
            max_retries: 1,
            poll_interval_ms: 1,
            escalation: Escalation::default(),
        });
        let act = |escalated, acted, quiet, continuations| PrLoopActivity {
            escalated,
            acted,
            quiet,
            continuations,
        };
        let served = |a: &PassActivity| serde_json::to_value(PrLoopView::build(&cfg, Some(a))).ok();
        let mut a = PassActivity::new();
        assert_eq!(
            served(&a),
            Some(serde_json::json!({
                "merge_completion": {"result": "unrecorded", "continuations": 0},
                "label_commands": {"result": "unrecorded", "continuations": 0},
            }))
        );
        for (activity, result) in [
            (act(false, false, true, 0), "quiet"),
            (act(false, true, true, 2), "acted"),
            (act(true, true, true, 2), "escalated"),
        ] {
            a.insert("label_commands".into(), activity);
            let v = served(&a).unwrap_or_default();
            assert_eq!(v["label_commands"]["result"], result, "{v}");
            assert_eq!(
                v["label_commands"]["continuations"], activity.continuations,
                "{v}"
            );
        }
        cfg.provider = None;
        assert_eq!(PrLoopView::build(&cfg, Some(&a)), PrLoopView::default());
    }
}
