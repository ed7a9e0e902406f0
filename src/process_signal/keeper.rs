//! The keeper: a small process sortie starts at boot that stops what sortie started once sortie
//! itself is gone, however it went (SIGKILL included).
//!
//! Why a process: `PR_SET_PDEATHSIG` fires when the *thread* that forked a child ends, and
//! sortie forks from supervisor threads that come and go; it also reaches only the direct
//! child, not its group, an escaped grandchild or a hook, and sends one signal with no grace.
//! The keeper instead holds the read end of a pipe whose only write end sortie holds (close on
//! exec, so no child inherits it). The kernel closes that end when sortie's process ends, the
//! keeper's read returns end-of-file, and the keeper stops every process that carries one of
//! sortie's tokens ([`super::token::TOKEN_ENV`], inherited by every descendant even after
//! `setsid`): SIGTERM to each process group and process, up to the grace for them to end, then
//! SIGKILL, repeated until none is left (bounded). A restart's own cleanup stays as a second
//! line (`orphans::kill_instance`).
//!
//! Agents on SSH hosts are reached too, as far as a connection allows: while a remote agent
//! runs, sortie sends the keeper the two `ssh` command lines that signal its remote process
//! group ([`register_remote`]); when sortie dies the keeper runs the SIGTERM one, waits the
//! grace, then runs the SIGKILL one (each bounded), besides stopping the local `ssh` client
//! like any other carrier. A host that cannot be reached keeps its agent until the agent
//! notices its lost connection (its next write fails) or a later session there cleans up.
//!
//! The keeper runs in a process group of its own, so a terminal's Ctrl-C (SIGINT to the
//! foreground group) reaches sortie, which drains, and not the keeper; with nothing left to
//! stop it exits at once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Signal, proc_stat, signal_group, token};

/// The hidden first argument that makes the sortie binary run as a keeper.
pub const ARG: &str = "__sortie-keeper";
/// How long the SIGKILL rounds may take before the keeper gives up on a process stuck in the
/// kernel.
const KILL_ROUNDS: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(50);
/// Each remote signal command (an `ssh` call) gets this long.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest message line the keeper reads, and most remote agents it tracks.
const MAX_LINE: usize = 256 * 1024;
const MAX_REMOTES: usize = 4096;

/// The two command lines (program first) that signal one remote agent's process group.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RemoteStop {
    term: Vec<String>,
    kill: Vec<String>,
}

/// Sortie's side of the keeper: the pipe to the current keeper and the remote agents it must
/// know about (sent again to a keeper started after the first one ended).
#[derive(Default)]
struct Link {
    writer: Option<std::io::PipeWriter>,
    remotes: BTreeMap<String, RemoteStop>,
}

static LINK: Mutex<Link> = Mutex::new(Link {
    writer: None,
    remotes: BTreeMap::new(),
});

fn link() -> std::sync::MutexGuard<'static, Link> {
    LINK.lock().unwrap_or_else(|p| p.into_inner())
}

/// One message line: `R <token> <term json> <kill json>` or `F <token>`, tab-separated.
fn remote_line(token: &str, stop: &RemoteStop) -> String {
    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    format!("R\t{token}\t{}\t{}\n", json(&stop.term), json(&stop.kill))
}

fn send(link: &mut Link, line: &str) {
    if let Some(w) = link.writer.as_mut()
        && w.write_all(line.as_bytes()).is_err()
    {
        // The keeper is gone; the watching thread starts another and sends the list again.
        link.writer = None;
    }
}

/// Tells the keeper how to stop the remote agent of the turn `token` (each a command line,
/// program first, that signals its remote process group), until [`forget_remote`].
pub fn register_remote(token: &str, term: Vec<String>, kill: Vec<String>) {
    let mut l = link();
    if l.remotes.len() >= MAX_REMOTES {
        log::warn!(token:% = token; "keeper tracks too many remote agents; not adding");
        return;
    }
    let stop = RemoteStop { term, kill };
    let line = remote_line(token, &stop);
    l.remotes.insert(token.to_string(), stop);
    send(&mut l, &line);
}

/// The remote agent of `token` has been stopped by sortie itself.
pub fn forget_remote(token: &str) {
    let mut l = link();
    if l.remotes.remove(token).is_some() {
        send(&mut l, &format!("F\t{token}\n"));
    }
}

/// The keeper's environment.
type Env = [(std::ffi::OsString, std::ffi::OsString)];

/// A running keeper process.
pub struct Keeper {
    child: Child,
}

impl Keeper {
    /// Starts a keeper for this sortie (`/proc/self/exe`, so an upgraded binary on disk plays
    /// no part) with the grace between SIGTERM and SIGKILL and the log format words it logs
    /// with (`text` or `json`).
    ///
    /// Its stdin is a pipe whose only write end sortie keeps (close on exec); it carries the
    /// remote agents to stop, and its end of file says that sortie has ended. Its environment
    /// is `env`: the system basics (for `ssh`), no secret.
    pub fn spawn(grace: Duration, log_format: &str, env: &Env) -> std::io::Result<Keeper> {
        use std::os::unix::process::CommandExt;
        let (reader, writer) = std::io::pipe()?;
        let child = Command::new("/proc/self/exe")
            .arg0("sortie-keeper")
            .arg(ARG)
            .arg(token::instance_id())
            .arg(grace.as_millis().to_string())
            .arg(log_format)
            .env_clear()
            .envs(env.iter().cloned())
            .current_dir("/")
            .process_group(0)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut l = link();
        l.writer = Some(writer);
        let lines: Vec<String> = l
            .remotes
            .iter()
            .map(|(token, stop)| remote_line(token, stop))
            .collect();
        for line in lines {
            send(&mut l, &line);
        }
        Ok(Keeper { child })
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
pub fn spawn_watched(
    grace: Duration,
    log_format: &'static str,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> std::io::Result<u32> {
    let first = Keeper::spawn(grace, log_format, &env)?;
    let pid = first.pid();
    std::thread::Builder::new()
        .name("keeper".into())
        .spawn(move || {
            let mut keeper = first;
            loop {
                let pid = keeper.pid();
                let status = keeper.wait();
                log::warn!(
                    pid:% = pid,
                    status:% = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    "keeper process ended while sortie runs; starting another"
                );
                std::thread::sleep(Duration::from_secs(1));
                keeper = match Keeper::spawn(grace, log_format, &env) {
                    Ok(k) => k,
                    Err(e) => {
                        log::error!(
                            error:% = e.to_string();
                            "keeper not restarted; agents may outlive a killed sortie"
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
    let remotes = read_until_end(&mut std::io::stdin().lock());
    // The pid sortie had; its group is never signalled as a whole (a carrier in it, which sortie
    // never makes, is signalled alone).
    let sortie_pid: u32 = instance
        .split('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let remote = std::thread::spawn(move || stop_remotes(remotes, grace));
    let found = stop_instance(instance, sortie_pid, grace);
    let _ = remote.join();
    found
}

/// Reads sortie's messages until end of file: the remote agents still running then.
fn read_until_end<R: BufRead>(input: &mut R) -> BTreeMap<String, RemoteStop> {
    let mut remotes = BTreeMap::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match std::io::Read::take(&mut *input, MAX_LINE as u64).read_until(b'\n', &mut line) {
            Ok(0) => return remotes,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return remotes,
        }
        let text = String::from_utf8_lossy(&line);
        let mut parts = text.trim_end_matches('\n').split('\t');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("R"), Some(token), Some(term), Some(kill)) if remotes.len() < MAX_REMOTES => {
                let parse = |j: &str| serde_json::from_str::<Vec<String>>(j).unwrap_or_default();
                remotes.insert(
                    token.to_string(),
                    RemoteStop {
                        term: parse(term),
                        kill: parse(kill),
                    },
                );
            }
            (Some("F"), Some(token), None, None) => {
                remotes.remove(token);
            }
            _ => {}
        }
    }
}

/// Signals each remote agent's group: SIGTERM, the grace, SIGKILL; every command bounded.
fn stop_remotes(remotes: BTreeMap<String, RemoteStop>, grace: Duration) {
    if remotes.is_empty() {
        return;
    }
    log::warn!(count:% = remotes.len(); "sortie ended; stopping its agents on SSH hosts");
    let run_all = |pick: fn(&RemoteStop) -> &Vec<String>| {
        let handles: Vec<_> = remotes
            .values()
            .map(|r| {
                let argv = pick(r).clone();
                std::thread::spawn(move || run_bounded(&argv))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .filter(|ok| *ok)
            .count()
    };
    let termed = run_all(|r| &r.term);
    std::thread::sleep(grace);
    let killed = run_all(|r| &r.kill);
    log::warn!(
        count:% = remotes.len(),
        term_ok:% = termed,
        kill_ok:% = killed;
        "agents on SSH hosts signalled"
    );
}

/// Runs `argv` (program first) with null stdio for at most [`REMOTE_TIMEOUT`]; whether it
/// exited 0.
fn run_bounded(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    let Ok(mut child) = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let deadline = Instant::now() + REMOTE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
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
        instance:% = instance,
        processes:% = first.len(),
        groups:% = groups.len(),
        grace_ms:% = grace.as_millis();
        "sortie ended; stopping the processes it started"
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
            instance:% = instance,
            processes:% = first.len(),
            killed_after_grace:% = after_term;
            "processes of the ended sortie stopped"
        );
    } else {
        log::error!(
            instance:% = instance,
            pids:% = left.iter().map(|c| c.0.to_string()).collect::<Vec<_>>().join(",");
            "processes of the ended sortie still alive"
        );
    }
    first.len()
}

/// `(pid, group)` of every live process carrying a token that starts with `prefix`.
fn carriers(prefix: &str) -> Vec<(u32, u32)> {
    let me = std::process::id();
    token::pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| token::token_of(*pid).is_some_and(|t| t.starts_with(prefix)))
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
    fn messages_name_the_remote_agents_still_running_at_end_of_file() {
        let stop = |n: &str| RemoteStop {
            term: vec!["ssh".into(), format!("term {n}")],
            kill: vec!["ssh".into(), format!("kill\t{n}")],
        };
        let mut text = remote_line("t-1", &stop("a"));
        text.push_str(&remote_line("t-2", &stop("b")));
        text.push_str("F\tt-1\n");
        text.push_str("garbage line\n");
        let got = read_until_end(&mut std::io::Cursor::new(text.into_bytes()));
        assert_eq!(got.len(), 1);
        assert_eq!(got["t-2"], stop("b"));
    }

    #[test]
    fn a_remote_command_past_its_deadline_is_not_waited_on_forever() {
        assert!(run_bounded(&["true".to_string()]));
        assert!(!run_bounded(&["false".to_string()]));
        assert!(!run_bounded(&[]));
    }

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
                .env(token::TOKEN_ENV, format!("{instance}-{n}"))
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut polite = spawn("exec sleep 60", 1);
        let mut stubborn = spawn("trap '' TERM; sleep 60 & wait; sleep 60", 2);
        // Three carriers: the polite sleep, the stubborn shell and its background sleep, which
        // exists only once the shell has passed its `trap` (a TERM before it would end the shell).
        let deadline = Instant::now() + Duration::from_secs(10);
        while carriers(&format!("{instance}-")).len() < 3 {
            assert!(Instant::now() < deadline, "carriers not seen");
            std::thread::sleep(POLL);
        }
        let started = Instant::now();
        assert!(stop_instance(&instance, 0, Duration::from_millis(300)) >= 3);
        assert!(started.elapsed() >= Duration::from_millis(300), "no grace");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(polite.wait().unwrap().signal(), Some(15));
        assert_eq!(stubborn.wait().unwrap().signal(), Some(9));
        assert!(carriers(&format!("{instance}-")).is_empty());
    }
}
