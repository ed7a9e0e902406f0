//! The one support module of the integration tests (`mod common;` in each test file; each test
//! binary uses a subset, hence `dead_code` allowed).
//!
//! - [`app`]: an HTTP `AppState` over a real store and a hand-built snapshot;
//! - [`daemon`]: the real `sortie` binary on a port it is known to have bound, killed on drop;
//! - [`http`]: a raw-socket HTTP/1.1 client and an event-stream reader;
//! - [`workflow`]: temp projects (workflow, file-tracker backlog, fake-agent scenarios);
//! - [`wait`]: condition polls with deadlines;
//! - [`in_process`]: an orchestrator stepped by the test with a manual clock;
//! - [`poll_health`]: a tracker fault failing the poll health, then its recovery;
//! - [`procs`]: live processes seen through `/proc`;
//! - [`store`]: builders of store records and raw SQLite access;
//! - [`fake_gitea`]: a fake Gitea REST API on the fake-server framework;
//! - [`fake_github`]: a fake GitHub REST API on the fake-server framework;
//! - [`fake_jira`]: a fake Jira Cloud REST API on the fake-server framework;
//! - [`fake_kube`]: a fake Kubernetes API (Jobs, pods and their logs, Secrets) validating what it gets;
//! - [`fake_linear`]: a fake Linear GraphQL API on the fake-server framework;
//! - [`fake_server`]: a fake HTTP API with a fault queue and a request journal;
//! - [`receiver`]: notification receivers (a Slack incoming webhook, a signed generic webhook);
//! - [`promtool`]: `promtool check metrics` on an exposition text;
//! - [`real_cli`]: the real agent CLIs installed from the npm registry;
//! - [`schema_check`]: the strict OpenAPI validator;
//! - [`stages`]: a constructed state with stage chains and an issue between stages;
//! - [`vendor_check`]: every exchange of a vendor fake checked against the vendor's API description;
//! - [`sshd`]: a real OpenSSH server on 127.0.0.1 with throwaway keys.
#![allow(dead_code)]

pub mod app;
pub mod daemon;
pub mod fake_gitea;
pub mod fake_github;
pub mod fake_gitlab;
pub mod fake_jira;
pub mod fake_kube;
pub mod fake_linear;
pub mod fake_server;
pub mod http;
pub mod in_process;
pub mod poll_health;
pub mod prism;
pub mod procs;
pub mod promtool;
pub mod reactions;
pub mod real_cli;
pub mod receiver;
pub mod sandbox_mode;
pub mod schema_check;
pub mod sshd;
pub mod stages;
pub mod store;
pub mod vendor_check;
pub mod wait;
pub mod workflow;

// A test binary that needs only `store` or `promtool` leaves these unused.
#[allow(unused_imports)]
pub use daemon::*;
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use wait::*;
#[allow(unused_imports)]
pub use workflow::*;

/// The `sortie` binary as the tests run it. The test machines run as root, and Claude Code
/// refuses to bypass permissions as root unless `IS_SANDBOX=1` declares a sandbox; sortie's
/// preflight applies the same rule, so the fake agent standing in for Claude Code needs the
/// declaration too. The tests of that rule remove it.
pub fn sortie_command() -> std::process::Command {
    // `SORTIE_BIN` runs another build (the release binary, for scripts/reliability).
    let bin = std::env::var("SORTIE_BIN").unwrap_or_else(|_| SORTIE.to_string());
    let mut cmd = std::process::Command::new(bin);
    cmd.env("IS_SANDBOX", "1");
    // Tests never reach the internet: the shared price table's download is off unless a test
    // sets the variable itself (a later `env` call wins).
    cmd.env("SORTIE_PRICE_TABLE_FETCH", "off");
    cmd
}
