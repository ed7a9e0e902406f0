//! The side effects a feature asks the loop for. A feature decides (from its own slice of
//! state and a read-only [`Cx`](crate::orchestrator::core::feature::Cx)) and returns effects;
//! only the loop applies them (`core/apply.rs`), so every durable write and every change to
//! the loop's own health goes through one place. A leaf: it names store rows and the run
//! records' error, nothing else of the orchestrator.

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
}
