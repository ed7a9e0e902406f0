//! Running things on an SSH worker host through the local OpenSSH client (`ssh` from `PATH`):
//! the destination and its options, the argument vector every remote command is started with,
//! and the POSIX quoting of the remote command line. Agents, hooks and workspace file reads go
//! through here when a run is placed on a host; nothing else in the crate builds `ssh` argv.

mod command;
mod run;
mod target;

pub use command::{AGENT_PGID_FILE, env_assignments, quote, remote_agent_command};
pub use run::{MAX_RUN_OUTPUT_BYTES, RemoteOutput, SSH_CONNECTION_FAILED, SshError, SshErrorKind};
pub use target::{SshTarget, TargetError};

use std::path::PathBuf;
use std::sync::Arc;

/// `worker.ssh_strict_host_key_checking`: passed as `-o StrictHostKeyChecking=<v>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StrictHostKeyChecking {
    /// Trust a host seen for the first time, refuse a changed key (the default).
    #[default]
    AcceptNew,
    Yes,
    No,
}

impl StrictHostKeyChecking {
    pub fn parse(s: &str) -> Option<StrictHostKeyChecking> {
        match s.trim().to_ascii_lowercase().as_str() {
            "accept-new" => Some(StrictHostKeyChecking::AcceptNew),
            "yes" => Some(StrictHostKeyChecking::Yes),
            "no" => Some(StrictHostKeyChecking::No),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StrictHostKeyChecking::AcceptNew => "accept-new",
            StrictHostKeyChecking::Yes => "yes",
            StrictHostKeyChecking::No => "no",
        }
    }
}

/// The options every connection to every host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshOptions {
    pub strict_host_key_checking: StrictHostKeyChecking,
    /// `worker.ssh_config_file`: an OpenSSH client configuration passed as `-F` (keys, users,
    /// known-hosts file for these hosts); `None` uses the user's own `~/.ssh/config`.
    pub config_file: Option<PathBuf>,
    /// `ConnectTimeout`, seconds.
    pub connect_timeout_s: u32,
    /// `ServerAliveInterval`, seconds; with [`SshOptions::server_alive_count_max`] unanswered
    /// probes the client gives up on a dead host.
    pub server_alive_interval_s: u32,
    pub server_alive_count_max: u32,
}

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            strict_host_key_checking: StrictHostKeyChecking::AcceptNew,
            config_file: None,
            connect_timeout_s: 30,
            server_alive_interval_s: 15,
            server_alive_count_max: 3,
        }
    }
}

/// One host a run is placed on: where, and how to connect. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    pub target: SshTarget,
    pub options: Arc<SshOptions>,
}

impl SshHost {
    /// The host as configured (`worker.ssh_hosts` entry), the name served as `ssh_host`.
    pub fn name(&self) -> &str {
        self.target.as_written()
    }
}
