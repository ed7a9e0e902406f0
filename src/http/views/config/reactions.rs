//! `config.reactions`: a member per reaction kind the process applies, keyed as under
//! `reactions` in WORKFLOW.md, with the members the reference lists for it.

use schemars::JsonSchema;
use serde::Serialize;

use crate::config::reactions::{
    AutoMergeConfig, BotReviewConfig, CiFailureConfig, Escalation, LabelCommandsConfig,
    MergeCompletionConfig, MergeConflictsConfig, ReactionsConfig, ReviewCommentsConfig,
};
use crate::domain::EscalationMode;
use crate::scm::MergeStrategy;

/// How `auto_merge` merges.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "ConfigMergeStrategy")]
pub enum StrategyName {
    Merge,
    Squash,
    Rebase,
}

/// The escalation members every escalating kind carries.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EscalationView {
    /// A kind configured without a mode reads `none`.
    pub escalation: EscalationMode,
    /// Present only when `escalation` is `label`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_label: Option<String>,
}

impl EscalationView {
    fn build(e: &Escalation) -> EscalationView {
        EscalationView {
            escalation: e.mode,
            escalation_label: (e.mode == EscalationMode::Label).then(|| e.label.clone()),
        }
    }
}

/// `reactions.ci_failure`: present while the CI check runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigCiFailure")]
pub struct CiFailureView {
    pub max_retries: u32,
    pub triage: bool,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// `reactions.review_comments`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigReviewComments")]
pub struct ReviewCommentsView {
    pub max_continuation_turns: u32,
    pub debounce_ms: u64,
    pub poll_interval_ms: u64,
    pub triage: bool,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// `reactions.bot_review`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigBotReview")]
pub struct BotReviewView {
    pub max_continuation_turns: u32,
    pub poll_interval_ms: u64,
    /// `[]` when empty.
    pub bot_usernames: Vec<String>,
    pub triage: bool,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// `reactions.merge_conflicts`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigMergeConflicts")]
pub struct MergeConflictsView {
    /// 0 escalates on the first detection.
    pub max_retries: u32,
    pub poll_interval_ms: u64,
    pub triage: bool,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// `reactions.auto_merge`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigAutoMerge")]
pub struct AutoMergeView {
    pub strategy: StrategyName,
    pub require_ci: bool,
    pub delete_branch: bool,
    pub poll_interval_ms: u64,
    /// null when configured as 0, which turns count-based escalation off.
    pub max_retries: Option<u32>,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// `reactions.merge_completion`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigMergeCompletion")]
pub struct MergeCompletionView {
    pub target_state: String,
    pub max_retries: u32,
    pub poll_interval_ms: u64,
    #[serde(flatten)]
    pub escalation: EscalationView,
}

/// The review and fix label commands together; no escalation members.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ConfigLabelCommands")]
pub struct LabelCommandsView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix_label: Option<String>,
    pub poll_interval_ms: u64,
}

/// `{}` when the process applies no reaction.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(rename = "ConfigReactions")]
pub struct ReactionsView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_failure: Option<CiFailureView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_comments: Option<ReviewCommentsView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_review: Option<BotReviewView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_conflicts: Option<MergeConflictsView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_merge: Option<AutoMergeView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_completion: Option<MergeCompletionView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_commands: Option<LabelCommandsView>,
}

impl ReactionsView {
    pub fn build(r: &ReactionsConfig) -> ReactionsView {
        if r.provider.is_none() {
            return ReactionsView::default();
        }
        ReactionsView {
            ci_failure: r.ci_failure.as_ref().map(ci_failure),
            review_comments: r.review_comments.as_ref().map(review_comments),
            bot_review: r.bot_review.as_ref().map(bot_review),
            merge_conflicts: r.merge_conflicts.as_ref().map(merge_conflicts),
            auto_merge: r.auto_merge.as_ref().map(auto_merge),
            merge_completion: r.merge_completion.as_ref().map(merge_completion),
            label_commands: r.label_commands.as_ref().map(label_commands),
        }
    }
}

fn ci_failure(c: &CiFailureConfig) -> CiFailureView {
    CiFailureView {
        max_retries: c.max_retries,
        triage: c.triage,
        escalation: EscalationView::build(&c.escalation),
    }
}

fn review_comments(c: &ReviewCommentsConfig) -> ReviewCommentsView {
    ReviewCommentsView {
        max_continuation_turns: c.max_continuation_turns,
        debounce_ms: c.debounce_ms,
        poll_interval_ms: c.poll_interval_ms,
        triage: c.triage,
        escalation: EscalationView::build(&c.escalation),
    }
}

fn bot_review(c: &BotReviewConfig) -> BotReviewView {
    BotReviewView {
        max_continuation_turns: c.max_continuation_turns,
        poll_interval_ms: c.poll_interval_ms,
        bot_usernames: c.bot_usernames.clone(),
        triage: c.triage,
        escalation: EscalationView::build(&c.escalation),
    }
}

fn merge_conflicts(c: &MergeConflictsConfig) -> MergeConflictsView {
    MergeConflictsView {
        max_retries: c.max_retries,
        poll_interval_ms: c.poll_interval_ms,
        triage: c.triage,
        escalation: EscalationView::build(&c.escalation),
    }
}

fn auto_merge(c: &AutoMergeConfig) -> AutoMergeView {
    AutoMergeView {
        strategy: match c.strategy {
            MergeStrategy::Merge => StrategyName::Merge,
            MergeStrategy::Squash => StrategyName::Squash,
            MergeStrategy::Rebase => StrategyName::Rebase,
        },
        require_ci: c.require_ci,
        delete_branch: c.delete_branch,
        poll_interval_ms: c.poll_interval_ms,
        max_retries: (c.max_retries > 0).then_some(c.max_retries),
        escalation: EscalationView::build(&c.escalation),
    }
}

fn merge_completion(c: &MergeCompletionConfig) -> MergeCompletionView {
    MergeCompletionView {
        target_state: c.target_state.clone(),
        max_retries: c.max_retries,
        poll_interval_ms: c.poll_interval_ms,
        escalation: EscalationView::build(&c.escalation),
    }
}

fn label_commands(c: &LabelCommandsConfig) -> LabelCommandsView {
    LabelCommandsView {
        review_label: c.review_label.clone(),
        fix_label: c.fix_label.clone(),
        poll_interval_ms: c.poll_interval_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reactions::DEFAULT_WATCH_WINDOW_MS;
    use serde_json::json;

    fn escalation(mode: EscalationMode) -> Escalation {
        Escalation {
            mode,
            label: "needs-human".into(),
            watch_window_ms: DEFAULT_WATCH_WINDOW_MS,
        }
    }

    /// The reference's example document, member for member.
    #[test]
    fn the_reference_example_is_served_as_written() {
        let r = ReactionsConfig {
            provider: Some("github".into()),
            ci_failure: Some(CiFailureConfig {
                max_retries: 2,
                max_log_lines: 50,
                triage: false,
                escalation: escalation(EscalationMode::Label),
            }),
            review_comments: Some(ReviewCommentsConfig {
                max_continuation_turns: 3,
                debounce_ms: 60_000,
                poll_interval_ms: 120_000,
                triage: false,
                escalation: escalation(EscalationMode::Label),
            }),
            bot_review: Some(BotReviewConfig {
                max_continuation_turns: 5,
                poll_interval_ms: 60_000,
                bot_usernames: vec!["review-bot".into()],
                triage: false,
                escalation: escalation(EscalationMode::None),
            }),
            merge_conflicts: Some(MergeConflictsConfig {
                max_retries: 1,
                poll_interval_ms: 60_000,
                triage: false,
                escalation: escalation(EscalationMode::Label),
            }),
            auto_merge: Some(AutoMergeConfig {
                strategy: MergeStrategy::Squash,
                require_ci: true,
                delete_branch: true,
                poll_interval_ms: 60_000,
                max_retries: 0,
                escalation: escalation(EscalationMode::Label),
            }),
            merge_completion: None,
            label_commands: None,
        };
        let got = serde_json::to_value(ReactionsView::build(&r)).unwrap();
        let want = json!({
            "ci_failure": {"max_retries": 2, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "review_comments": {"max_continuation_turns": 3, "debounce_ms": 60000, "poll_interval_ms": 120000, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "bot_review": {"max_continuation_turns": 5, "poll_interval_ms": 60000, "bot_usernames": ["review-bot"], "triage": false, "escalation": "none"},
            "merge_conflicts": {"max_retries": 1, "poll_interval_ms": 60000, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "auto_merge": {"strategy": "squash", "require_ci": true, "delete_branch": true, "poll_interval_ms": 60000, "max_retries": null, "escalation": "label", "escalation_label": "needs-human"}
        });
        assert_eq!(got, want);
    }

    #[test]
    fn merge_completion_and_label_commands_members() {
        let r = ReactionsConfig {
            provider: Some("github".into()),
            merge_completion: Some(MergeCompletionConfig {
                target_state: "Done".into(),
                max_retries: 2,
                poll_interval_ms: 60_000,
                escalation: escalation(EscalationMode::Comment),
            }),
            label_commands: Some(LabelCommandsConfig {
                review_label: None,
                fix_label: Some("sortie-fix".into()),
                poll_interval_ms: 60_000,
            }),
            ..ReactionsConfig::default()
        };
        let got = serde_json::to_value(ReactionsView::build(&r)).unwrap();
        assert_eq!(
            got,
            json!({
                "merge_completion": {"target_state": "Done", "max_retries": 2, "poll_interval_ms": 60000, "escalation": "comment"},
                "label_commands": {"fix_label": "sortie-fix", "poll_interval_ms": 60000}
            })
        );
    }

    #[test]
    fn no_provider_serves_an_empty_object() {
        let r = ReactionsConfig {
            label_commands: Some(LabelCommandsConfig {
                review_label: Some("r".into()),
                fix_label: None,
                poll_interval_ms: 60_000,
            }),
            ..ReactionsConfig::default()
        };
        let got = serde_json::to_value(ReactionsView::build(&r)).unwrap();
        assert_eq!(got, json!({}));
    }
}
