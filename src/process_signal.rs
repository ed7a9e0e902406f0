//! Signalling a whole process group. Agents and hooks each run as the leader of a group of
//! their own, so grandchildren (MCP sidecars, background jobs a hook left behind) are reached
//! too; one helper keeps the "a group that is already gone is fine" rule in one place.
//!
//! It also reads `/proc/<pid>/stat` (parent, group, session, start time), so a group recorded
//! by an earlier sortie is stopped only while its leader is the very process that was recorded
//! (same pid AND same start time: a reused pid never matches), and hosts the orphan handling
//! of [`orphans`] (child subreaper, reaping and killing processes that escaped their group) and
//! the [`keeper`] process that stops everything sortie started when sortie dies.

pub mod keeper;
pub mod orphans;
mod token;

use std::io;
use std::time::{Duration, Instant};

pub use rustix::process::Signal;

/// Sends `signal` to the process group led by `pid`. A group that no longer exists is not an
/// error; a pid outside the kernel's range is reported as invalid input.
pub fn signal_group(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    match rustix::process::kill_process_group(pid, signal) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The fields of `/proc/<pid>/stat` sortie reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    /// `R`, `S`, `Z` (zombie), …
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    /// Field 22: clock ticks after boot at which the process started.
    pub start_ticks: u64,
}

/// The stat line of `pid`; `None` when the process does not exist (or the line is unreadable).
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so the fields after it are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text.get(..open)?.trim().parse().ok()?;
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state), so field N is rest[N - 3].
    let field = |n: usize| rest.get(n - 3).copied();
    Some(ProcStat {
        pid,
        state: field(3)?.chars().next()?,
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        start_ticks: field(22)?.parse().ok()?,
    })
}

/// What [`stop_recorded_group`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStop {
    /// The recorded leader is gone (or its pid now belongs to another process): nothing sent.
    NotRunning,
    /// SIGTERM was enough: the leader ended within the grace.
    Terminated,
    /// The leader outlived the grace; the group got SIGKILL.
    Killed,
}

/// Stops the process group led by `pgid` if its leader is still the process that started at
/// `start_ticks`: SIGTERM to the group, up to `grace` for the leader to end, then SIGKILL to
/// the group (always, so members that ignored SIGTERM go too; a gone group is fine).
pub fn stop_recorded_group(pgid: u32, start_ticks: u64, grace: Duration) -> io::Result<GroupStop> {
    let same = |s: &ProcStat| s.start_ticks == start_ticks && s.state != 'Z' && s.state != 'X';
    if !proc_stat(pgid).is_some_and(|s| same(&s)) {
        return Ok(GroupStop::NotRunning);
    }
    signal_group(pgid, Signal::TERM)?;
    let deadline = Instant::now() + grace;
    let mut ended = false;
    while Instant::now() < deadline {
        if !proc_stat(pgid).is_some_and(|s| same(&s)) {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The group id cannot be handed out again while any member lives, so this reaches only
    // what is left of the recorded group.
    signal_group(pgid, Signal::KILL)?;
    Ok(if ended {
        GroupStop::Terminated
    } else {
        GroupStop::Killed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let line =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            (s.pid, s.state, s.ppid, s.pgrp, s.session, s.start_ticks),
            (4242, 'S', 1, 4242, 4242, 987654)
        );
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("12 (x) S 1 2").is_none());
    }

    #[test]
    fn this_process_reads_back_and_a_wrong_start_time_stops_nothing() {
        let me = std::process::id();
        let s = proc_stat(me).unwrap();
        assert_eq!(s.pid, me);
        assert_eq!(
            stop_recorded_group(me, s.start_ticks + 1, Duration::from_millis(10)).unwrap(),
            GroupStop::NotRunning
        );
    }

    #[test]
    fn a_gone_group_is_not_an_error() {
        // Pids this high are never handed out (the kernel's maximum is 2^22).
        assert!(signal_group(i32::MAX as u32, Signal::KILL).is_ok());
    }

    #[test]
    fn zero_and_out_of_range_pids_are_refused() {
        assert!(signal_group(0, Signal::TERM).is_err());
        assert!(signal_group(u32::MAX, Signal::TERM).is_err());
    }
}
