//! Looking at processes from outside, as an operator would: which are alive in a directory or
//! a process group, read from `/proc`.

use std::path::Path;

/// The processes under `dir` that run the fake agent (its own or a descendant's command
/// line names it), leaving out hooks that run there too.
#[allow(dead_code)]
pub fn agent_processes_in(dir: &Path) -> Vec<String> {
    processes_in(dir)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("fake-agent"))
                .unwrap_or(false)
        })
        .collect()
}

/// Pids of live processes whose working directory is inside `dir` (zombies have no readable
/// `cwd` link, so a process listed here is alive).
pub fn processes_in(dir: &Path) -> Vec<String> {
    pids()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .map(|pid| pid.to_string())
        .collect()
}

/// Live (neither zombie nor dead) members of process group `pgid`.
#[allow(dead_code)]
pub fn group_members(pgid: i32) -> Vec<i32> {
    pids()
        .filter(|pid| {
            stat_after_name(*pid).is_some_and(|rest| {
                let fields: Vec<&str> = rest.split_whitespace().collect();
                live_state(&rest) && fields.get(2).and_then(|g| g.parse().ok()) == Some(pgid)
            })
        })
        .collect()
}

/// Whether `pid` is a process that has not ended (a zombie has).
#[allow(dead_code)]
pub fn alive(pid: i32) -> bool {
    stat_after_name(pid).is_some_and(|rest| live_state(&rest))
}

/// Every pid in `/proc` now.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
}

/// `/proc/<pid>/stat` after the parenthesised command name: the state, then the parent, the
/// process group and the rest.
fn stat_after_name(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit_once(')')?.1.to_string())
}

fn live_state(after_name: &str) -> bool {
    !after_name.trim_start().starts_with(['Z', 'X'])
}
