//! The keeper: a small process sortie starts at boot that stops what sortie started once sortie
//! itself is gone, however it went (SIGKILL included).
//!
//! Why a process: `PR_SET_PDEATHSIG` fires when the *thread* that forked a child ends, and
//! sortie forks from supervisor threads that come and go; it also reaches only the direct
//! child, not its group, an escaped grandchild or a hook, and sends one signal with no grace.
//! The keeper instead holds the read end of a pipe whose only write end sortie holds (close on
//! exec, so no child inherits it). The kernel closes that end when sortie's process ends, the
//! keeper's read returns end-of-file, and the keeper stops every process that carries one of
//! sortie's tokens ([`super::orphans::TOKEN_ENV`], inherited by every descendant even after
//! `setsid`): SIGTERM to each process group and process, up to the grace for them to end, then
//! SIGKILL, repeated until none is left (bounded). A restart's own cleanup stays as a second
//! line (`orphans::kill_instance`).
//!
//! The keeper runs in a process group of its own, so a terminal's Ctrl-C (SIGINT to the
//! foreground group) reaches sortie, which drains, and not the keeper; with nothing left to
//! stop it exits at once.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Signal, orphans, proc_stat, signal_group};

/// The hidden first argument that makes the sortie binary run as a keeper.
pub const ARG: &str = "__sortie-keeper";
/// How long the SIGKILL rounds may take before the keeper gives up on a process stuck in the
/// kernel.
const KILL_ROUNDS: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(50);

/// A running keeper: its process and the pipe end whose closing (sortie's end) it waits for.
pub struct Keeper {
    child: Child,
    /// Never written; its closing is the message.
    _alive: std::io::PipeWriter,
}

impl Keeper {
    /// Starts a keeper for this sortie (`/proc/self/exe`, so an upgraded binary on disk plays
    /// no part) with the grace between SIGTERM and SIGKILL and the log format words it logs
    /// with (`text` or `json`).
    pub fn spawn(grace: Duration, log_format: &str) -> std::io::Result<Keeper> {
        use std::os::unix::process::CommandExt;
        let (reader, writer) = std::io::pipe()?;
        let child = Command::new("/proc/self/exe")
            .arg0("sortie-keeper")
            .arg(ARG)
            .arg(orphans::instance_id())
            .arg(grace.as_millis().to_string())
            .arg(log_format)
            .env_clear()
            .current_dir("/")
            .process_group(0)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Keeper {
            child,
            _alive: writer,
        })
    }

    /// The keeper's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the keeper to end (it should not while sortie runs); reaps it.
    pub fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }
}

/// Starts a keeper and a `keeper` thread that starts a new one (at most once a second) if it
/// ever ends while sortie runs; the thread ends with the process.
pub fn spawn_watched(grace: Duration, log_format: &'static str) -> std::io::Result<u32> {
    let first = Keeper::spawn(grace, log_format)?;
    let pid = first.pid();
    std::thread::Builder::new()
        .name("keeper".into())
        .spawn(move || {
            let mut keeper = first;
            loop {
                let pid = keeper.pid();
                let status = keeper.wait();
                log::warn!(
                    "keeper process ended while sortie runs; starting another pid={pid} status={:?}",
                    status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
                );
                std::thread::sleep(Duration::from_secs(1));
                keeper = match Keeper::spawn(grace, log_format) {
                    Ok(k) => k,
                    Err(e) => {
                        log::error!(
                            "keeper not restarted; agents may outlive a killed sortie error={:?}",
                            e.to_string()
                        );
                        return;
                    }
                };
            }
        })?;
    Ok(pid)
}

/// The keeper's life: waits until sortie's end of the pipe on stdin closes, then stops every
/// process carrying a token of `instance`. Returns how many processes it found.
pub fn run(instance: &str, grace: Duration) -> usize {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 64];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // The pid sortie had; its group is never signalled as a whole (a carrier in it, which sortie
    // never makes, is signalled alone).
    let sortie_pid: u32 = instance
        .split('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    stop_instance(instance, sortie_pid, grace)
}

/// SIGTERM to every carrier of `instance`'s tokens (and its group), up to `grace` for them to
/// end, then SIGKILL rounds until none is left. Returns how many carriers there were.
pub fn stop_instance(instance: &str, sortie_pid: u32, grace: Duration) -> usize {
    if instance.is_empty() {
        return 0;
    }
    let prefix = format!("{instance}-");
    let first = carriers(&prefix);
    if first.is_empty() {
        return 0;
    }
    let groups: BTreeSet<u32> = first.iter().map(|c| c.1).collect();
    log::warn!(
        "sortie ended; stopping the processes it started instance={instance} processes={} groups={} grace_ms={}",
        first.len(),
        groups.len(),
        grace.as_millis()
    );
    signal_all(&first, Signal::TERM, sortie_pid);
    let deadline = Instant::now() + grace;
    let mut left = carriers(&prefix);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
        left = carriers(&prefix);
    }
    let after_term = left.len();
    let kill_deadline = Instant::now() + KILL_ROUNDS;
    while !left.is_empty() && Instant::now() < kill_deadline {
        signal_all(&left, Signal::KILL, sortie_pid);
        std::thread::sleep(POLL);
        left = carriers(&prefix);
    }
    if left.is_empty() {
        log::warn!(
            "processes of the ended sortie stopped instance={instance} processes={} killed_after_grace={after_term}",
            first.len()
        );
    } else {
        log::error!(
            "processes of the ended sortie still alive instance={instance} pids={:?}",
            left.iter().map(|c| c.0).collect::<Vec<_>>()
        );
    }
    first.len()
}

/// `(pid, group)` of every live process carrying a token that starts with `prefix`.
fn carriers(prefix: &str) -> Vec<(u32, u32)> {
    let me = std::process::id();
    orphans::pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| orphans::token_of(*pid).is_some_and(|t| t.starts_with(prefix)))
        .filter_map(|pid| proc_stat(pid).filter(|s| s.state != 'Z' && s.state != 'X'))
        .map(|s| (s.pid, s.pgrp))
        .collect()
}

/// Sends `signal` to each carrier's group (never the keeper's own or sortie's) and to each
/// carrier; gone ones are fine.
fn signal_all(found: &[(u32, u32)], signal: Signal, sortie_pid: u32) {
    let own_group = proc_stat(std::process::id()).map(|s| s.pgrp);
    let sortie_group = proc_stat(sortie_pid).map(|s| s.pgrp);
    let mut done = BTreeSet::new();
    for &(pid, pgrp) in found {
        let shared = Some(pgrp) == own_group || Some(pgrp) == sortie_group || pgrp <= 1;
        if !shared && done.insert(pgrp) {
            let _ = signal_group(pgrp, signal);
        }
        if let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_without_carriers_stops_nothing() {
        assert_eq!(stop_instance("1-2", 0, Duration::from_millis(10)), 0);
        assert_eq!(stop_instance("", 0, Duration::from_millis(10)), 0);
    }

    #[test]
    fn carriers_get_sigterm_and_a_process_ignoring_it_gets_sigkill_after_the_grace() {
        use std::os::unix::process::CommandExt;
        let instance = format!("test{}-{}", std::process::id(), line!());
        let spawn = |script: &str, n: u32| {
            Command::new("sh")
                .args(["-c", script])
                .env(orphans::TOKEN_ENV, format!("{instance}-{n}"))
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut polite = spawn("exec sleep 60", 1);
        let mut stubborn = spawn("trap '' TERM; sleep 60 & wait; sleep 60", 2);
        let deadline = Instant::now() + Duration::from_secs(10);
        while carriers(&format!("{instance}-")).len() < 2 {
            assert!(Instant::now() < deadline, "carriers not seen");
            std::thread::sleep(POLL);
        }
        let started = Instant::now();
        assert!(stop_instance(&instance, 0, Duration::from_millis(300)) >= 2);
        assert!(started.elapsed() >= Duration::from_millis(300), "no grace");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(polite.wait().unwrap().signal(), Some(15));
        assert_eq!(stubborn.wait().unwrap().signal(), Some(9));
        assert!(carriers(&format!("{instance}-")).is_empty());
    }
}
