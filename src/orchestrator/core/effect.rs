//! The side effects a feature asks the loop for. A feature decides (from its own slice of
//! state and a read-only [`Cx`](crate::orchestrator::core::feature::Cx)) and returns effects;
//! only the loop applies them (`core/apply.rs`), so every durable write and every change to
//! the loop's own health goes through one place. Nearly a leaf: it names store rows, the run
//! records' error, the queued tracker writes and the reactions' plain row types, nothing that
//! decides.

use crate::orchestrator::core::run_record::PersistError;

/// One side effect a feature asks for.
#[derive(Debug)]
pub enum Effect {
    /// A durable write, queued on the writer thread in order (not awaited: a failure is
    /// logged).
    Write(Write),
    /// A read the feature's decision rests on failed: the database check fails with it, and
    /// nothing is dispatched until such a read succeeds (spend and budgets fail closed).
    ReadFailed(PersistError),
    /// The running session's self-review phase ended with this audit trail: its run record
    /// stores it (`review_metadata`).
    ReviewMetadata {
        dispatch_id: String,
        metadata: Option<serde_json::Value>,
    },
    /// A pull-request reactions check pass: run on a `work` thread (its forge and tracker
    /// calls have deadlines), its result applied by the loop to the rows still pending.
    CheckReactions(Box<crate::orchestrator::features::reactions::pass::ReactionPass>),
    /// A run-history row that no session's exit records (a CI verdict Sortie acts on, a
    /// triage run); `what` names it in the warning when it cannot be queued.
    RecordRun {
        run: Box<crate::store::RunRecord>,
        what: &'static str,
    },
    /// The issue's outcome as the loop keeps and stores it (`terminal` with its state).
    Outcome {
        issue_id: String,
        kind: crate::domain::OutcomeKind,
        state: String,
    },
    /// The issue's pull request merged by `merge_path`: a `merged` outcome, which replaces
    /// only the outcomes it outranks in memory and is always stored.
    Merged {
        issue_id: String,
        merge_path: &'static str,
        pr: crate::scm::PullRequestRef,
    },
    /// A best-effort tracker write, queued on `tracker-ops`.
    Tracker(crate::orchestrator::core::tracker_ops::TrackerOp),
    /// A counter the metrics keep.
    Count(Count),
    /// A reaction's fix run: queued as the issue's retry (replacing any), carrying the
    /// reaction and its context.
    DispatchReaction(Box<ReactionDispatch>),
    /// A reaction's triage run: the loop finds its agent and host and starts it on a thread
    /// of its own, then tells the feature whether it started.
    StartTriage(Box<TriageStart>),
}

/// A counter a feature asks the loop to count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// `sortie_ci_status_checks_total` with its result.
    CiStatusCheck(&'static str),
    /// `sortie_review_checks_total` with its result.
    ReviewCheck(&'static str),
    /// An estimated cost in US dollars.
    EstimatedCost(f64),
}

/// The continuation run a reaction's check asked for.
#[derive(Debug)]
pub struct ReactionDispatch {
    pub issue: crate::domain::Issue,
    pub attempt: u32,
    pub delay_ms: u64,
    pub trigger: crate::domain::RetryTrigger,
    pub session_id: Option<String>,
    pub dispatched_at_ms: i64,
    pub route: crate::domain::stage::Route,
    pub reaction: crate::orchestrator::features::reactions::row::RunReaction,
    pub context: Option<crate::prompt::ReactionContext>,
}

/// The triage run a reaction's check asked for.
#[derive(Debug)]
pub struct TriageStart {
    pub key: (String, crate::domain::ReactionKind),
    pub row: crate::orchestrator::features::reactions::row::ReactionRow,
    pub fingerprint: String,
    pub context: Option<crate::prompt::ReactionContext>,
}

/// A durable write a feature asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Stores a usage hold (`agent_usage_holds`), so a restart before the reset starts no
    /// session of the kind.
    SaveUsageHold(crate::store::UsageHoldRow),
    /// Deletes an ended usage hold's row.
    DeleteUsageHold(crate::store::UsageHoldRow),
    /// A stage hop, a run's hop result or stage event, or a live stage pass.
    StageHop(crate::store::StageHopWrite),
    /// A pull-request reaction's row (escalation, fingerprint, given comments, triage answer,
    /// `pr_loop` mark, an issue's clearing).
    Reaction(crate::store::ReactionWrite),
}
