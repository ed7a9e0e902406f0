//! sortie: turns issue-tracker tickets into autonomous coding-agent sessions.
//!
//! Layers, lowest first; a module names only modules of strictly lower layers
//! (`tests/layering.rs` checks it). See ARCHITECTURE.md for threads, channels and where each
//! concept lives.
//!
//! 0. `build_info`, `child_env`, `clock`, `domain`, `log_field`, `mask`, `process_signal`
//! 1. `http_client`, `sandbox`, `ssh`
//! 2. `agent`, `kube`, `prompt`, `scm`, `tracker`, `ui`, `workspace`
//! 3. `pricing`, `registry`
//! 4. `config`
//! 5. `logging`, `notify`, `store`
//! 6. `metrics`
//! 7. `orchestrator`
//! 8. `http`, `mcp`
//! 9. `cli`

pub mod agent;
pub mod build_info;
pub mod child_env;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod http_client;
pub mod kube;
pub mod log_field;
pub mod logging;
pub mod mask;
pub mod mcp;
pub mod metrics;
pub mod notify;
pub mod orchestrator;
pub mod pricing;
pub mod process_signal;
pub mod prompt;
pub mod registry;
pub mod sandbox;
pub mod scm;
pub mod ssh;
pub mod store;
pub mod tracker;
pub mod ui;
pub mod workspace;
