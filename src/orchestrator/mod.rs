//! The orchestrator: one thread owns all scheduling state (DESIGN.md §1).

pub mod backoff;
pub mod dispatch_pass;
pub mod retry_queue;
