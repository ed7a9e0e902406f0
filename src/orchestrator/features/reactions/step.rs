//! What one check of a pending reaction decided; the scheduler applies it.

use serde::{Deserialize, Serialize};

use crate::domain::{EscalationTrigger, ReactionWait};

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Keep watching; check again at `next_poll_at_ms`.
    Wait {
        wait: ReactionWait,
        next_poll_at_ms: i64,
    },
    /// Dispatch a continuation run carrying `context`; `fingerprint` is what it acts on and
    /// `given` the review comments it is given.
    Dispatch {
        context: Option<FixContext>,
        fingerprint: Option<String>,
        given: Vec<String>,
        /// The kind counts the run (`used_attempts` rises).
        counts: bool,
    },
    /// Triage first (the kind's `triage` is on and `fingerprint` has no verdict yet): a
    /// triage run decides whether the fix `context` describes is dispatched.
    Triage {
        fingerprint: String,
        context: Option<FixContext>,
    },
    /// Begin a standing escalation.
    Escalate { trigger: EscalationTrigger },
    /// Stop watching: the row leaves the pending set.
    End { why: &'static str },
    /// The pull request merged (`merge_path`): record the outcome and end the rows.
    Merged {
        merge_path: &'static str,
        /// Move the issue to this state first (merge completion).
        transition_to: Option<String>,
        /// Sortie's own merge call merged it (`false`: it was found merged).
        merged_here: bool,
    },
}

/// The context a continuation's prompt carries (`.ci_failure` or `.review_comments`).
pub use crate::prompt::ReactionContext as FixContext;

/// A queued reaction retry's reaction and context as stored (`retry_entries.reaction_context`).
/// The CI log excerpt is not stored: logs are never persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRetryReaction {
    pub kind: crate::domain::ReactionKind,
    pub attempt: Option<u32>,
    pub owner: String,
    pub repo: String,
    pub number: u64,
    pub context: Option<FixContext>,
}

impl StoredRetryReaction {
    pub fn new(r: &super::row::RunReaction, context: Option<&FixContext>) -> Self {
        let context = context.cloned().map(|c| match c {
            FixContext::CiFailure(mut f) => {
                f.log_excerpt.clear();
                FixContext::CiFailure(f)
            }
            other => other,
        });
        StoredRetryReaction {
            kind: r.kind,
            attempt: r.attempt,
            owner: r.pr.owner.clone(),
            repo: r.pr.repo.clone(),
            number: r.pr.number,
            context,
        }
    }

    pub fn reaction(&self) -> super::row::RunReaction {
        super::row::RunReaction {
            kind: self.kind,
            attempt: self.attempt,
            pr: crate::scm::PullRequestRef {
                owner: self.owner.clone(),
                repo: self.repo.clone(),
                number: self.number,
            },
        }
    }
}
