//! The claim/retry core: the dispatch pass that claims issues, the start of an attempt, its
//! events and exit, the retry queue, and reconciliation of running issues with the tracker.

pub(crate) mod attempt;
pub mod backoff;
pub(crate) mod dispatch;
pub mod dispatch_pass;
pub(crate) mod events;
pub(crate) mod exit;
pub(crate) mod exit_calls;
pub mod exit_step;
pub(crate) mod failure_breaker;
pub mod failure_holds;
pub mod handoff_evidence;
pub(crate) mod reconcile;
pub(crate) mod retry;
pub mod retry_queue;
pub mod run_error;
