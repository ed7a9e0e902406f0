//! The environment token that ties a process to this sortie instance and to one turn: the
//! leaf both the orphan handling ([`super::orphans`]) and the keeper ([`super::keeper`]) read,
//! so neither imports the other for it.

use std::sync::OnceLock;

use super::proc_stat;

/// The environment variable that ties an agent process and its descendants to one turn.
pub const TOKEN_ENV: &str = "SORTIE_AGENT_TOKEN";

/// This sortie process: `<pid>-<start ticks>`, unique on the host across pid reuse.
pub fn instance_id() -> String {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let pid = std::process::id();
        let start = proc_stat(pid).map(|s| s.start_ticks).unwrap_or(0);
        format!("{pid}-{start}")
    })
    .clone()
}

/// The token in `/proc/<pid>/environ`, if any (unreadable for other users' processes).
pub(super) fn token_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let key = format!("{TOKEN_ENV}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(key.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Every pid listed under `/proc` (empty when it cannot be read).
pub(super) fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}
