//! The command line: `sortie [flags] [WORKFLOW.md]`, `sortie validate`, `sortie demo`,
//! `sortie stats`, `sortie scrub`, `sortie mcp-server`, `sortie version`.

pub mod args;
pub mod demo;
pub mod dry_run;
pub mod run;
pub mod run_many;
pub mod scrub;
pub mod stats;
pub mod stats_table;
pub mod validate;
pub mod workflow_dir;
pub mod workflow_set;

use crate::build_info::VERSION;
use args::{Command, Parsed};

/// The `--version` banner.
pub fn version_banner() -> String {
    format!(
        "sortie {} ({}/{})",
        VERSION,
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The keeper process (`process_signal::keeper`): `<instance> <grace ms> <log format>`, as the
/// daemon starts it; not a command for people.
fn keeper(args: &[String]) -> i32 {
    let (Some(instance), Some(grace)) = (args.first(), args.get(1).and_then(|g| g.parse().ok()))
    else {
        eprintln!("sortie: the keeper is started by sortie itself");
        return 2;
    };
    let format = args
        .get(2)
        .and_then(|f| crate::config::LogFormat::parse(f))
        .unwrap_or(crate::config::LogFormat::Text);
    crate::logging::init(crate::config::LogLevel::Info, format);
    crate::process_signal::keeper::run(instance, std::time::Duration::from_millis(grace));
    0
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    // Non-UTF-8 arguments are replaced rather than panicking.
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if argv.first().map(String::as_str) == Some(crate::process_signal::keeper::ARG) {
        return keeper(&argv[1..]);
    }
    // Every command (run, validate, demo, --dry-run) masks the values of secret-looking
    // environment variables, referenced by WORKFLOW.md or not, before it can log anything.
    crate::mask::register_env_secrets(std::env::vars_os());
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
        Parsed::Command(Command::Validate(v)) => validate::run(v),
        Parsed::Command(Command::Demo(d)) => demo::run(d),
        Parsed::Command(Command::Stats(a)) => stats::run(a),
        Parsed::Command(Command::Scrub(a)) => scrub::run(a),
        Parsed::Command(Command::McpServer(a)) => {
            crate::mcp::run(std::path::Path::new(&a.workflow))
        }
        Parsed::Command(Command::Run(r))
            if r.workflow.len() > 1 || r.workflows.is_some() || r.config.is_some() =>
        {
            run_many::run(run_many::ManyOptions {
                files: r.workflow.iter().map(std::path::PathBuf::from).collect(),
                dir: r.workflows.map(std::path::PathBuf::from),
                config: r.config.map(std::path::PathBuf::from),
                port: r.port,
                host: r.host,
                log_level: r.log_level,
                log_format: r.log_format,
                env_file: r.env_file.map(std::path::PathBuf::from),
                dry_run: r.dry_run,
            })
        }
        Parsed::Command(Command::Run(r)) => run::run(run::RunOptions {
            workflow: r
                .workflow
                .into_iter()
                .next()
                .map(std::path::PathBuf::from)
                .unwrap_or_else(run::default_workflow),
            port: r.port,
            host: r.host,
            log_level: r.log_level,
            log_format: r.log_format,
            env_file: r.env_file.map(std::path::PathBuf::from),
            dry_run: r.dry_run,
            env_overlay: Vec::new(),
            db_lock: None,
        }),
    }
}
