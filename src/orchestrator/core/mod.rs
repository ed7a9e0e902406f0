//! The orchestrator's core: the loop (select, timers, publishing) and its state, the message
//! enum, the run records every part speaks, persistence, and the threads the loop hands its
//! slow calls to.

pub mod adapters;
mod apply;
pub mod effect;
pub mod feature;
#[cfg(test)]
pub(crate) mod feature_world;
pub(crate) mod io;
mod io_calls;
pub mod io_pool;
pub mod msg;
pub(crate) mod orchestrator;
pub mod persist;
pub mod reload;
pub mod run_record;
pub mod slots;
pub mod snapshot;
pub mod state;
pub mod supervisor;
pub(crate) mod tick;
pub mod tracker_ops;
pub mod watch;
