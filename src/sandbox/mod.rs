//! `worker.sandbox`: running agent processes (and, optionally, hooks) under bubblewrap.
//!
//! A sandboxed process sees a read-only system (`/usr`, the `/lib*` and `/bin` links, `/etc`
//! with its secret files masked), the agent program's own directory read-only, its workspace
//! read-write, a private `/tmp`, and a private `$HOME` kept in the workspace
//! (`.sortie/home`, seeded from `home_seed`). Nothing else of the machine is mounted: other
//! workspaces, the database, the workflow's `.env` and the daemon's home do not exist inside.
//! Paths sortie must hide that happen to lie under a mounted directory are masked
//! ([`Sandbox::hide`]).
//!
//! New PID, IPC and UTS namespaces (and a network namespace with `network: none` or
//! `allowlist`; with `allowlist` the only way out of it is sortie's filtering proxy, see
//! [`proxy`] and [`forward`]); the
//! process stays in sortie's process group (no `--new-session`), so the group signals sortie
//! sends on stall, cancel and shutdown reach the agent itself, gracefully, and the keeper's
//! token scan still finds every sandboxed process; `--die-with-parent` ends the sandbox when
//! its `bwrap` parent dies.

mod allow;
mod argv;
mod denials;
mod error;
pub mod forward;
mod home;
mod probe;
pub mod proxy;
mod temp_dir;

use std::path::{Path, PathBuf};

pub use allow::HostPattern;
pub use argv::{bwrap_argv, wrap_command};
pub use denials::{denied_for, denied_total, note_session};
pub use error::{HostPatternError, PatternFault, RequestError, SandboxError};
pub use probe::{PROBE_TIMEOUT, cached_problem, find_bwrap, probe_now};

/// What runs sessions' processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Processes run as the daemon's user with its whole view of the machine.
    #[default]
    None,
    /// Processes run under `bwrap`.
    Bubblewrap,
}

/// What a sandboxed process may reach on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// The machine's network, unfiltered.
    #[default]
    Host,
    /// A network namespace of its own with only a loopback device.
    None,
    /// A network namespace of its own whose only way out is sortie's proxy, which lets
    /// through connections to the hosts `allow_hosts` matches.
    Allowlist,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Host => "host",
            Network::None => "none",
            Network::Allowlist => "allowlist",
        }
    }
}

/// `worker.sandbox` as built, plus the paths the daemon itself must keep from agents.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sandbox {
    pub mode: SandboxMode,
    pub network: Network,
    /// What `network: allowlist` lets through (the workflow's entries, then the defaults).
    pub allow_hosts: Vec<HostPattern>,
    /// Files and directories copied into the private home, at the same place relative to it
    /// as they have relative to the daemon's home (elsewhere: under their file name).
    pub home_seed: Vec<PathBuf>,
    /// Extra directories mounted read-only at the same path (an interpreter the agent CLI
    /// needs outside `/usr`, for instance).
    pub read_only: Vec<PathBuf>,
    /// Directories and files mounted read-write at the same path (a shared cache, a log the
    /// operator collects); absolute, existing, and never the daemon's own files or another
    /// workspace (`config::sandbox` checks).
    pub read_write: Vec<PathBuf>,
    /// Whether hooks run in the sandbox too.
    pub hooks: bool,
    /// The daemon's home, for `home_seed`'s relative placement; never mounted.
    pub daemon_home: Option<PathBuf>,
    /// Paths masked when a mounted directory contains them: the database and its companion
    /// files, the workflow's `.env`, the workspace root (the session's own workspace is
    /// mounted back over it), the daemon's home.
    pub hide: Vec<PathBuf>,
}

impl Sandbox {
    pub fn enabled(&self) -> bool {
        self.mode == SandboxMode::Bubblewrap
    }

    /// The private home of a session in `workspace`.
    pub fn home_in(workspace: &Path) -> PathBuf {
        workspace.join(".sortie").join("home")
    }
}

/// The Debian package that provides `bwrap`, named in every "cannot start" message.
pub const PACKAGE_HINT: &str =
    "install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap)";
