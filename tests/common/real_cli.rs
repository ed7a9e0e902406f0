//! The real agent CLIs that `scripts/agent-clis-install.sh` installs from the npm registry into
//! `target/agent-clis`, for the tests that run them through sortie offline.

use std::path::PathBuf;

/// The installed CLI named `name` (`claude`, `codex`, `copilot`, `opencode`, `gemini`).
/// `None` (after printing why) when it is not installed and `CI` is unset; panics when `CI` is
/// set, since CI installs them.
pub fn real_cli(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/agent-clis/node_modules/.bin")
        .join(name);
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: run scripts/agent-clis-install.sh to test against the real {name} CLI",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}
