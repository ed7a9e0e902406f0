//! Remote hosts: the pool of SSH workers a run may be placed on, and the orchestrator's
//! placement, failure counting and release of a host around each run.

pub mod feature;
pub(crate) mod hooks;
pub mod pool;
