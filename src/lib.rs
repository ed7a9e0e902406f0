//! sortie: turns issue-tracker tickets into autonomous coding-agent sessions.
//!
//! Layers, lowest first; a module names only modules of strictly lower layers
//! (`tests/layering.rs` checks it). See ARCHITECTURE.md for threads, channels and where each
//! concept lives.
//!
//! 0. `build_info`, `clock`, `domain`, `mask`
//! 1. `agent`, `config`, `prompt`, `tracker`, `ui`, `workspace`
//! 2. `logging`, `store`
//! 3. `metrics`
//! 4. `orchestrator`
//! 5. `http`
//! 6. `cli`

pub mod agent;
pub mod build_info;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod logging;
pub mod mask;
pub mod metrics;
pub mod orchestrator;
pub mod prompt;
pub mod store;
pub mod tracker;
pub mod ui;
pub mod workspace;
