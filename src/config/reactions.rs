//! `reactions` and `self_review`: the typed settings of the pull-request reactions and of the
//! agent's review of its own diff before handoff.
//!
//! A reaction block is applied when the workflow names a source-control provider for it
//! (`provider: github` on any block; every block that names one must agree) and the tracker is
//! of the same kind, whose block supplies the endpoint and credentials. All kinds except
//! `ci_failure` are fixed at startup: a reload neither adds nor removes them.

use crate::domain::EscalationMode;
use crate::scm::MergeStrategy;

/// Default `watch_window_ms` of every escalating kind: a day.
pub const DEFAULT_WATCH_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// Default `poll_interval_ms` of the kinds whose reference gives no default.
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 60_000;

/// The escalation members every escalating kind shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// `label`, `comment` or `none`; unset reads `none`.
    pub mode: EscalationMode,
    /// The label a `label` escalation adds (default `needs-human`).
    pub label: String,
    /// How long the reaction watches the pull request; 0 = no bound.
    pub watch_window_ms: u64,
}

impl Default for Escalation {
    fn default() -> Self {
        Escalation {
            mode: EscalationMode::None,
            label: "needs-human".into(),
            watch_window_ms: DEFAULT_WATCH_WINDOW_MS,
        }
    }
}

/// `reactions.ci_failure`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiFailureConfig {
    /// CI-fix runs before escalating (0 escalates at the first failure). Default 2.
    pub max_retries: u32,
    /// Lines of the failing job's log given to the run (0 = none). Default 50.
    pub max_log_lines: usize,
    pub triage: bool,
    pub escalation: Escalation,
}

/// `reactions.review_comments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewCommentsConfig {
    /// Review-fix runs before escalating. Default 3.
    pub max_continuation_turns: u32,
    /// Quiet time after the newest actionable comment before acting. Default 60000.
    pub debounce_ms: u64,
    /// Default 120000, at least 30000.
    pub poll_interval_ms: u64,
    pub triage: bool,
    pub escalation: Escalation,
}

/// `reactions.bot_review`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotReviewConfig {
    pub max_continuation_turns: u32,
    pub poll_interval_ms: u64,
    /// Logins whose comments are bot review (and not human review).
    pub bot_usernames: Vec<String>,
    pub triage: bool,
    pub escalation: Escalation,
}

/// `reactions.merge_conflicts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflictsConfig {
    /// Rebase runs per conflict episode (0 escalates at the first detection).
    pub max_retries: u32,
    pub poll_interval_ms: u64,
    pub triage: bool,
    pub escalation: Escalation,
}

/// `reactions.auto_merge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoMergeConfig {
    pub strategy: MergeStrategy,
    /// Merge only with a passing CI verdict.
    pub require_ci: bool,
    pub delete_branch: bool,
    pub poll_interval_ms: u64,
    /// Merge calls before escalating; 0 turns count-based escalation off (served as null).
    pub max_retries: u32,
    pub escalation: Escalation,
}

/// `reactions.merge_completion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeCompletionConfig {
    /// The tracker state a merged pull request moves its issue to.
    pub target_state: String,
    /// Failed transitions before escalating.
    pub max_retries: u32,
    pub poll_interval_ms: u64,
    pub escalation: Escalation,
}

/// `reactions.label_commands`: a person adds a label to the pull request to start a review or
/// a fix session; the label is consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelCommandsConfig {
    pub review_label: Option<String>,
    pub fix_label: Option<String>,
    pub poll_interval_ms: u64,
}

/// `reactions`: each kind's settings while the process applies it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReactionsConfig {
    /// The source-control provider the blocks agree on (`github`); `None` applies no reaction.
    pub provider: Option<String>,
    pub ci_failure: Option<CiFailureConfig>,
    pub review_comments: Option<ReviewCommentsConfig>,
    pub bot_review: Option<BotReviewConfig>,
    pub merge_conflicts: Option<MergeConflictsConfig>,
    pub auto_merge: Option<AutoMergeConfig>,
    pub merge_completion: Option<MergeCompletionConfig>,
    pub label_commands: Option<LabelCommandsConfig>,
}

impl ReactionsConfig {
    /// Whether any reaction is applied.
    pub fn any(&self) -> bool {
        self.provider.is_some()
            && (self.ci_failure.is_some()
                || self.review_comments.is_some()
                || self.bot_review.is_some()
                || self.merge_conflicts.is_some()
                || self.auto_merge.is_some()
                || self.merge_completion.is_some()
                || self.label_commands.is_some())
    }
}

impl ReactionsConfig {
    /// What the process applies after a reload, given what it captured at startup (`self`):
    /// every kind as at startup, except `ci_failure`, which follows the reload while the
    /// reload names the startup provider (the adapter built at startup is the only one).
    pub fn after_reload(&self, reloaded: &ReactionsConfig) -> ReactionsConfig {
        let mut out = self.clone();
        out.ci_failure = if self.provider.is_some() && reloaded.provider == self.provider {
            reloaded.ci_failure.clone()
        } else {
            None
        };
        out
    }
}

/// `self_review`: after its coding turns, the agent reviews its own diff, verification
/// commands run, and it fixes what they or it found, at most `max_iterations` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfReviewConfig {
    pub enabled: bool,
    /// 1–10, default 3.
    pub max_iterations: u32,
    /// Shell commands run in the workspace after each review; required when enabled.
    pub verification_commands: Vec<String>,
    /// Per command; default 120000.
    pub verification_timeout_ms: u64,
    /// The diff given to the review turn is cut to this many bytes; default 102400.
    pub max_diff_bytes: usize,
    /// Only `same` (the session's own agent reviews).
    pub reviewer: String,
}

impl Default for SelfReviewConfig {
    fn default() -> Self {
        SelfReviewConfig {
            enabled: false,
            max_iterations: 3,
            verification_commands: Vec::new(),
            verification_timeout_ms: 120_000,
            max_diff_bytes: 102_400,
            reviewer: "same".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ci(max_retries: u32) -> CiFailureConfig {
        CiFailureConfig {
            max_retries,
            max_log_lines: 50,
            triage: false,
            escalation: Escalation::default(),
        }
    }

    #[test]
    fn a_reload_changes_only_ci_failure() {
        let startup = ReactionsConfig {
            provider: Some("github".into()),
            ci_failure: Some(ci(2)),
            label_commands: Some(LabelCommandsConfig {
                review_label: Some("r".into()),
                fix_label: None,
                poll_interval_ms: DEFAULT_POLL_INTERVAL_MS,
            }),
            ..ReactionsConfig::default()
        };
        let reloaded = ReactionsConfig {
            provider: Some("github".into()),
            ci_failure: Some(ci(5)),
            merge_conflicts: Some(MergeConflictsConfig {
                max_retries: 1,
                poll_interval_ms: DEFAULT_POLL_INTERVAL_MS,
                triage: false,
                escalation: Escalation::default(),
            }),
            ..ReactionsConfig::default()
        };
        let applied = startup.after_reload(&reloaded);
        assert_eq!(applied.ci_failure, Some(ci(5)));
        assert!(applied.label_commands.is_some(), "kept until restart");
        assert!(applied.merge_conflicts.is_none(), "added only at restart");
        // A reload that names no provider removes the CI check.
        let removed = startup.after_reload(&ReactionsConfig::default());
        assert!(removed.ci_failure.is_none());
        assert!(removed.label_commands.is_some());
        // Without a provider at startup nothing can be added.
        assert_eq!(
            ReactionsConfig::default().after_reload(&reloaded),
            ReactionsConfig::default()
        );
    }
}
