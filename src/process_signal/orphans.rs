//! Processes that escape their agent's process group (a grandchild that called `setsid`, or one
//! left behind when its parent died) and the zombies they become.
//!
//! - **Child subreaper.** [`become_subreaper`] makes sortie the parent every orphan of its
//!   descendants is re-parented to (instead of init), so sortie can reap it and knows about it.
//! - **Attribution by environment.** Each agent process is started with
//!   [`TOKEN_ENV`]`=<instance>-<n>` (`instance` = sortie's pid and start time), which every
//!   descendant inherits, `setsid` or not. When a turn ends, [`end_token`] kills every process
//!   still carrying that turn's token, so nothing outlives the turn even outside its group; a
//!   restart kills what carries a dead instance's tokens ([`kill_instance`]), and so does the
//!   keeper the moment sortie dies (`super::keeper`). Hooks, operator commands and short
//!   helpers carry a [`helper_token`], which no turn's end kills.
//! - **Reaping.** A thread ([`spawn_reaper`]) scans `/proc` for zombie children of sortie and
//!   reaps only those sortie did not start itself: `waitid(P_ALL, WNOWAIT)` would keep returning
//!   the first zombie, which may be a direct child its own waiter is about to reap, so instead a
//!   zombie counts as adopted when its session differs from sortie's (sortie never calls `setsid`
//!   for a child) or its group is neither its own pid nor sortie's group (every direct child is
//!   either a group leader or in sortie's group). Only such pids are passed to
//!   `waitpid(pid, WNOHANG)`, so no `Child::wait` of a direct child ever loses its status. A
//!   grandchild that made itself a group leader without a new session is indistinguishable from
//!   a direct child here; it is killed by its token and stays a zombie until sortie exits.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub use super::token::{TOKEN_ENV, instance_id};
use super::token::{pids, token_of};
use super::{Signal, proc_stat, signal_group};

/// Marks a [`helper_token`] (after the instance and its `-`).
const HELPER_MARK: char = 'h';

static NEXT: AtomicU64 = AtomicU64::new(1);
static LIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();

fn live() -> &'static Mutex<HashSet<String>> {
    LIVE.get_or_init(|| Mutex::new(HashSet::new()))
}

/// A fresh token for one agent process, registered as live until [`end_token`].
pub fn new_token() -> String {
    let token = format!("{}-{}", instance_id(), NEXT.fetch_add(1, Ordering::Relaxed));
    if let Ok(mut l) = live().lock() {
        l.insert(token.clone());
    }
    token
}

/// A token for a process that is not a turn's agent (a hook, an operator command, a short
/// helper such as a login check or an `ssh` call): the keeper and a restart stop its carriers,
/// a turn's end does not (a hook may leave a background process on purpose).
pub fn helper_token() -> String {
    format!(
        "{}-{HELPER_MARK}{}",
        instance_id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Sets a fresh [`helper_token`] on `cmd`.
pub fn tag_helper(cmd: &mut std::process::Command) {
    cmd.env(TOKEN_ENV, helper_token());
}

/// Ends a turn's token: kills every process still carrying it; returns how many were killed.
pub fn end_token(token: &str) -> usize {
    if let Ok(mut l) = live().lock() {
        l.remove(token);
    }
    super::keeper::forget_remote(token);
    kill_carriers(|t| t == token)
}

/// Kills every process carrying a token of the sortie instance `instance` (an earlier, killed
/// sortie); returns how many.
pub fn kill_instance(instance: &str) -> usize {
    if instance.is_empty() || instance == instance_id() {
        return 0;
    }
    let prefix = format!("{instance}-");
    kill_carriers(|t| t.starts_with(&prefix))
}

/// Whether `pid` is an agent process this sortie started (it carries one of its tokens), so a
/// pid an adapter reports is recorded for a later stop only when it really is ours.
pub fn is_our_agent(pid: u32) -> bool {
    let prefix = format!("{}-", instance_id());
    token_of(pid).is_some_and(|t| t.starts_with(&prefix))
}

fn kill_carriers(matches: impl Fn(&str) -> bool) -> usize {
    let me = std::process::id();
    let mut killed = 0;
    for pid in pids() {
        if pid == me {
            continue;
        }
        let Some(token) = token_of(pid) else { continue };
        if !matches(&token) {
            continue;
        }
        let Some(stat) = proc_stat(pid) else { continue };
        if stat.state == 'Z' {
            continue;
        }
        // An escapee that leads a group or session of its own takes that group with it.
        if stat.pgrp == pid {
            let _ = signal_group(pid, Signal::KILL);
        }
        if let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, Signal::KILL);
        }
        if sandbox_monitor(pid) {
            // bwrap's own process in the sandbox's PID namespace, still ending after the
            // bwrap it belongs to exited: part of the sandbox, not an escapee.
            log::debug!(pid:% = pid, token:% = token; "sandbox process stopped with its turn");
            continue;
        }
        log::warn!(pid:% = pid, token:% = token; "escaped agent process killed");
        killed += 1;
    }
    killed
}

/// Whether `pid` is `bwrap` itself (the sandbox's monitor, `crate::sandbox`): its forked
/// processes keep its command name, an agent's never do.
fn sandbox_monitor(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "bwrap")
}

/// Makes sortie the child subreaper of its descendants (Linux `PR_SET_CHILD_SUBREAPER`).
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(Into::into)
}

/// Whether `token` belongs to this sortie and its turn has ended.
fn ended_token_of_ours(token: &str) -> bool {
    let ours = token
        .strip_prefix(&instance_id())
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|n| !n.starts_with(HELPER_MARK));
    ours && live().lock().is_ok_and(|l| !l.contains(token))
}

/// Reaps zombie children sortie adopted (see the module comment), and kills adopted children
/// still carrying the token of a turn that has ended (one forked while [`end_token`] scanned);
/// returns how many zombies were reaped.
pub fn reap_adopted() -> usize {
    let me = std::process::id();
    let Some(mine) = proc_stat(me) else { return 0 };
    let mut reaped = 0;
    for pid in pids() {
        let Some(s) = proc_stat(pid) else { continue };
        if s.ppid != me {
            continue;
        }
        if s.state != 'Z' {
            if let Some(token) = token_of(pid)
                && ended_token_of_ours(&token)
            {
                kill_carriers(|t| t == token);
            }
            continue;
        }
        let adopted = s.session != mine.session || (s.pgrp != pid && s.pgrp != mine.pgrp);
        if !adopted {
            continue;
        }
        let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        if let Ok(Some(_)) = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG)
        {
            log::debug!(pid:% = pid; "adopted zombie reaped");
            reaped += 1;
        }
    }
    reaped
}

/// Starts the `reaper` thread: [`reap_adopted`] every `every`, for the life of the process.
pub fn spawn_reaper(every: Duration) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || {
            loop {
                std::thread::sleep(every);
                reap_adopted();
            }
        })
        .map(|_| ())
}
