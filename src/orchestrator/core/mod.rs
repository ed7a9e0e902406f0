//! The orchestrator's core: the words every part of it speaks.

pub mod run_record;
