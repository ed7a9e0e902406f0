//! sortie: turns issue-tracker tickets into autonomous coding-agent sessions.
//!
//! Layers, lowest first (a module never imports from a layer above it):
//! `clock`, `domain`, `mask` → `config`, `prompt`, `workspace`, `tracker`, `agent` →
//! `store` → `orchestrator` → `http` → `cli`.

pub mod agent;
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
