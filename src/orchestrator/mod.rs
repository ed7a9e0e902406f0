//! The orchestrator: one thread owns all scheduling state (ARCHITECTURE.md, "Threads"). Supervisor threads
//! run the agents; the store's writer thread persists; HTTP reads published snapshots.

pub mod adapters;
pub mod agent_holds;
pub mod backoff;
pub mod core;
pub mod dispatch_pass;
pub mod exit_step;
pub mod failure_holds;
pub mod handoff_evidence;
pub mod host_pool;
pub mod io_pool;
pub mod money_budget;
pub mod msg;
pub mod persist;
pub mod rate_limits;
pub mod reactions;
pub mod reload;
pub mod retry_queue;
pub mod routing;
pub mod run_error;
mod scheduler;
pub mod self_review;
pub mod session_cost;
pub mod snapshot;
pub mod spend_ceiling;
pub mod stages;
pub mod state;
pub mod supervisor;
pub mod tracker_ops;
pub mod watch;

pub use self::scheduler::{
    Orchestrator, OrchestratorDeps, OrchestratorHandle, new_dispatch_id, spawn_shutdown_watchdog,
};
pub use msg::{
    AckError, CheckNowOutcome, DueReaction, OrchMsg, RefreshOutcome, RetryNowOutcome,
    SupervisorExit, SupervisorResult, Unanswered,
};
