//! Whether this host can hold `agent.max_concurrent_agents` sessions at once. Each session
//! costs the daemon open files (the agent's pipes and pidfd, the workspace lock, a hook's pipes
//! while it runs) and threads (the supervisor and its event forwarder), and its processes count
//! against the user's and the kernel's task limits. A cap the host cannot meet is refused at
//! load with the number it can hold, instead of surfacing as spawn failures under load.
//!
//! The per-session costs are measured from a running daemon (`ls /proc/<pid>/fd`, the
//! `Threads:` line of its status) with a margin; the reserves cover what the daemon holds
//! without sessions (database, logs, watcher, tracker calls, some HTTP connections).

use super::PreflightProblem;
use super::schema::ServiceConfig;

/// Open files one session holds in the daemon: stdout and stderr pipes, the agent's pidfd
/// (its exit is noticed through it) and the workspace lock (measured: 4), plus a hook's two
/// pipes while one runs (a hook never runs while the agent's pipes are open, so these also
/// cover the stdin pipe of a turn's prompt while it is written).
pub const FILES_PER_SESSION: u64 = 6;
/// Tasks one session costs: two daemon threads, the supervisor and its event forwarder
/// (measured; every agent's pipes and exit share one thread), plus the agent process and the
/// children it starts, counted as four.
pub const TASKS_PER_SESSION: u64 = 6;
/// Open files the daemon keeps for itself, HTTP connections included.
pub const RESERVED_FILES: u64 = 256;
/// Tasks the daemon keeps for itself (its fixed threads and HTTP connection threads).
pub const RESERVED_TASKS: u64 = 128;

/// The check id of [`ServiceConfig::host_capacity_problem`].
pub const HOST_CAPACITY_CHECK: &str = "host_capacity";

/// The limits read from this host; `None` where there is no limit (or it cannot be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// The hard `RLIMIT_NOFILE` (the daemon raises its soft limit to it at start).
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`, counted per user; `None` for root, which the kernel does not hold to it.
    pub user_tasks: Option<u64>,
    /// Tasks the kernel can still start: `min(threads-max, pid_max)` less the tasks running now.
    pub kernel_tasks: Option<u64>,
}

/// Which limit binds, with the sessions it leaves room for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    pub sessions: u64,
    pub limit: String,
}

impl HostLimits {
    /// Reads the limits of this process and, with `kernel`, the host's free task slots (three
    /// `/proc` files, read only when asked).
    pub fn read(kernel: bool) -> HostLimits {
        use rustix::process::{Resource, getrlimit};
        let root = rustix::process::geteuid().is_root();
        HostLimits {
            open_files: getrlimit(Resource::Nofile).maximum,
            user_tasks: if root {
                None
            } else {
                getrlimit(Resource::Nproc).current
            },
            kernel_tasks: if kernel { kernel_tasks_left() } else { None },
        }
    }

    /// The sessions these limits leave room for, and the limit that binds (`None`: no limit
    /// known).
    pub fn capacity(&self) -> Option<Capacity> {
        let by_files = self.open_files.map(|n| Capacity {
            sessions: n.saturating_sub(RESERVED_FILES) / FILES_PER_SESSION,
            limit: format!(
                "the open-file limit ({n}; {FILES_PER_SESSION} per session, {RESERVED_FILES} kept for the daemon)"
            ),
        });
        let by_user = self.user_tasks.map(|n| Capacity {
            sessions: n.saturating_sub(RESERVED_TASKS) / TASKS_PER_SESSION,
            limit: format!(
                "the user's process limit (RLIMIT_NPROC {n}; {TASKS_PER_SESSION} tasks per session, {RESERVED_TASKS} kept for the daemon)"
            ),
        });
        let by_kernel = self.kernel_tasks.map(|n| Capacity {
            sessions: n.saturating_sub(RESERVED_TASKS) / TASKS_PER_SESSION,
            limit: format!(
                "the kernel's free task slots ({n} left under threads-max and pid_max; {TASKS_PER_SESSION} tasks per session)"
            ),
        });
        [by_files, by_user, by_kernel]
            .into_iter()
            .flatten()
            .min_by_key(|c| c.sessions)
    }
}

/// `min(threads-max, pid_max)` less the tasks that exist now (the fourth field of
/// `/proc/loadavg`, `running/total`).
fn kernel_tasks_left() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let number = |s: Option<String>| s.and_then(|s| s.trim().parse::<u64>().ok());
    let ceiling = [
        number(read("/proc/sys/kernel/threads-max")),
        number(read("/proc/sys/kernel/pid_max")),
    ]
    .into_iter()
    .flatten()
    .min()?;
    let total = read("/proc/loadavg")
        .and_then(|s| s.split_whitespace().nth(3).map(str::to_string))
        .and_then(|f| f.split('/').nth(1).and_then(|t| t.parse::<u64>().ok()))
        .unwrap_or(0);
    Some(ceiling.saturating_sub(total))
}

/// The problem when `wanted` sessions exceed what `limits` leave room for.
pub fn capacity_problem(wanted: u64, limits: &HostLimits) -> Option<PreflightProblem> {
    let cap = limits.capacity()?;
    (wanted > cap.sessions).then(|| {
        PreflightProblem::new(
            HOST_CAPACITY_CHECK,
            format!(
                "agent.max_concurrent_agents is {wanted}, but this host can hold {} sessions at once, bound by {}; lower agent.max_concurrent_agents or raise that limit",
                cap.sessions, cap.limit
            ),
        )
    })
}

impl ServiceConfig {
    /// Whether this host can hold `agent.max_concurrent_agents` sessions at once; see the
    /// module doc. Reads the process's limits and `/proc`, so not part of the pure preflight.
    /// `at_load`: also count the kernel's free task slots, which the daemon's own sessions use
    /// up once running, so only a check before any session runs (startup, `sortie validate`)
    /// reads them. Kinds that start no process (the in-process mock) hold no such resources.
    pub fn host_capacity_problem(&self, at_load: bool) -> Option<PreflightProblem> {
        let runs_processes =
            crate::registry::agent(&self.agent.kind).is_some_and(|d| d.caps.requires_command);
        if !runs_processes {
            return None;
        }
        let limits = HostLimits::read(at_load);
        capacity_problem(u64::from(self.agent.max_concurrent_agents), &limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(files: Option<u64>, user: Option<u64>, kernel: Option<u64>) -> HostLimits {
        HostLimits {
            open_files: files,
            user_tasks: user,
            kernel_tasks: kernel,
        }
    }

    #[test]
    fn the_tightest_limit_binds_and_names_itself() {
        let l = limits(Some(1024), Some(100_000), Some(30_000));
        let cap = l.capacity().unwrap_or_else(|| panic!("a capacity"));
        assert_eq!(cap.sessions, (1024 - RESERVED_FILES) / FILES_PER_SESSION);
        assert!(cap.limit.contains("open-file limit (1024"), "{}", cap.limit);
        let l = limits(Some(1_000_000), Some(1_000), None);
        let cap = l.capacity().unwrap_or_else(|| panic!("a capacity"));
        assert_eq!(cap.sessions, (1_000 - RESERVED_TASKS) / TASKS_PER_SESSION);
        assert!(cap.limit.contains("RLIMIT_NPROC 1000"), "{}", cap.limit);
    }

    #[test]
    fn a_cap_within_the_limits_passes_and_one_beyond_is_refused_with_the_number() {
        let l = limits(Some(1024), None, None);
        let fits = (1024 - RESERVED_FILES) / FILES_PER_SESSION;
        assert_eq!(capacity_problem(fits, &l), None);
        let p = capacity_problem(fits + 1, &l).unwrap_or_else(|| panic!("refused"));
        assert_eq!(p.check, HOST_CAPACITY_CHECK);
        assert!(
            p.message
                .contains(&format!("this host can hold {fits} sessions")),
            "{}",
            p.message
        );
    }

    #[test]
    fn no_known_limit_refuses_nothing() {
        assert_eq!(capacity_problem(1_000_000, &limits(None, None, None)), None);
    }

    #[test]
    fn a_limit_below_the_reserve_holds_no_session() {
        let l = limits(Some(100), None, None);
        assert_eq!(l.capacity().map(|c| c.sessions), Some(0));
    }
}
