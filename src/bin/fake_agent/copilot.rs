//! The `copilot` mode of `fake-agent`.

/// Plays this mode's scenario.
pub fn run() {
    eprintln!("fake-agent: the copilot mode is not in this build");
    std::process::exit(2);
}
