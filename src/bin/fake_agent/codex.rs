//! The `codex` mode of `fake-agent`.

/// Plays this mode's scenario.
pub fn run() {
    eprintln!("fake-agent: the codex mode is not in this build");
    std::process::exit(2);
}
