//! Looking at processes from outside, as an operator would: which are alive in a directory.

use std::path::Path;

/// Pids of live processes whose working directory is inside `dir` (zombies have no readable
/// `cwd` link, so a process listed here is alive).
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

pub fn processes_in(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cwd) = std::fs::read_link(e.path().join("cwd"))
            && cwd.starts_with(dir)
        {
            found.push(name);
        }
    }
    found
}
