//! Looking at processes from outside, as an operator would: which are alive in a directory.

use std::path::Path;

/// Pids of live processes whose working directory is inside `dir` (zombies have no readable
/// `cwd` link, so a process listed here is alive).
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
