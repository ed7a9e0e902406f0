//! The command line: `sortie [flags] [WORKFLOW.md]`, `sortie validate`, `sortie demo`,
//! `sortie version`.

pub mod args;

use args::{Command, Parsed};

/// The version string.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `--version` banner.
pub fn version_banner() -> String {
    format!(
        "sortie {} ({}/{})",
        VERSION,
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match args::parse(&argv) {
        Parsed::Exit {
            stdout,
            stderr,
            code,
        } => {
            print!("{stdout}");
            eprint!("{stderr}");
            code
        }
        Parsed::Command(Command::Version) => {
            println!("{}", version_banner());
            0
        }
        Parsed::Command(Command::DumpVersion) => {
            println!("{VERSION}");
            0
        }
        Parsed::Command(_) => {
            eprintln!("sortie: not yet: this build cannot run workflows");
            1
        }
    }
}
