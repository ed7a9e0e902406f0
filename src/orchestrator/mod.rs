//! The orchestrator: one thread owns all scheduling state (ARCHITECTURE.md, "Threads"). Supervisor threads
//! run the agents; the store's writer thread persists; HTTP reads published snapshots.
//!
//! `core/` holds the loop, its state, its messages and run records; `claim/` the claim/retry
//! core (dispatch, exit, retry, reconcile, events); `features/<name>/` each feature. The
//! re-exports below keep the paths the rest of the crate uses.

pub mod claim;
pub mod core;
pub mod features;

pub use self::claim::{
    backoff, dispatch_pass, exit_step, failure_holds, handoff_evidence, retry_queue, run_error,
};
pub use self::core::{
    adapters, io_pool, msg, persist, reload, run_record, snapshot, state, supervisor, tracker_ops,
    watch,
};
pub use self::features::agent_holds::{self, rate_limits};
pub use self::features::hosts::pool as host_pool;
pub use self::features::spend::{ceiling as spend_ceiling, money_budget, session_cost};
pub use self::features::stages::{self, routing};
pub use self::features::{reactions, self_review};

pub use self::core::msg::{
    AckError, CheckNowOutcome, DueReaction, OrchMsg, RefreshOutcome, RetryNowOutcome,
    SupervisorExit, SupervisorResult, Unanswered,
};
pub use self::core::orchestrator::{
    Orchestrator, OrchestratorDeps, OrchestratorHandle, new_dispatch_id, spawn_shutdown_watchdog,
};
