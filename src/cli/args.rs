//! Argument parsing. argh does the parsing; [`normalize`] first rewrites
//! the Go `flag` spellings existing Sortie users type (`-port 9090`, `--port=9090`, `-help`)
//! into argh's, so their scripts keep working.

use argh::FromArgs;

/// Run the orchestrator on a workflow file.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(
    description = "sortie: turns issue-tracker tickets into coding-agent sessions",
    example = "sortie --port 9090 WORKFLOW.md",
    example = "sortie --workflows ./workflows --port 9090",
    note = "Subcommands: `sortie validate [--format text|json] [WORKFLOW.md]`, `sortie demo [--dir DIR]`, `sortie stats [--since X] [--until Y] [--format table|json] [WORKFLOW.md]`, `sortie mcp-server --workflow WORKFLOW.md`, `sortie scrub [WORKFLOW.md]`, `sortie version`."
)]
pub struct RunArgs {
    /// HTTP port (0 disables the server; default 7678 or server.port)
    #[argh(option)]
    pub port: Option<String>,
    /// HTTP bind address, an IP literal (default 127.0.0.1 or server.host)
    #[argh(option)]
    pub host: Option<String>,
    /// log level: debug, info, warn, error (default info or logging.level)
    #[argh(option)]
    pub log_level: Option<String>,
    /// log format: text or json (default text or logging.format)
    #[argh(option)]
    pub log_format: Option<String>,
    /// load SORTIE_* overrides from this .env file
    #[argh(option)]
    pub env_file: Option<String>,
    /// validate, poll the tracker once and print what would be dispatched; start no agent
    #[argh(switch)]
    pub dry_run: bool,
    /// print the version banner and exit
    #[argh(switch, short = 'V')]
    pub version: bool,
    /// serve every workflow file (*.md with front matter) in this folder; its sortie.yaml, if any, holds the shared settings
    #[argh(option)]
    pub workflows: Option<String>,
    /// the shared settings of several workflows (max_concurrent_agents, spend ceilings, server, logging, db_path)
    #[argh(option)]
    pub config: Option<String>,
    /// path of the workflow file (default ./WORKFLOW.md); several serve several workflows under one daemon
    #[argh(positional)]
    pub workflow: Vec<String>,
}

/// Check a workflow file without running anything.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(description = "validate a WORKFLOW.md: errors and warnings; exit 1 on an error")]
pub struct ValidateArgs {
    /// output format: text (diagnostics on stderr) or json (one line on stdout)
    #[argh(option, default = "String::from(\"text\")")]
    pub format: String,
    /// load SORTIE_* overrides from this .env file
    #[argh(option)]
    pub env_file: Option<String>,
    /// path of the workflow file (default ./WORKFLOW.md)
    #[argh(positional)]
    pub workflow: Option<String>,
}

/// Print run statistics from the database a workflow names.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(
    description = "print run statistics (counts, durations, tokens, recorded cost) from the workflow's database; needs no running daemon",
    note = "A bound is an RFC 3339 timestamp with an offset, a date such as 2026-07-01 (midnight UTC), or a positive duration such as 24h or 1h30m counted back from now."
)]
pub struct StatsArgs {
    /// runs completed at or after this bound
    #[argh(option)]
    pub since: Option<String>,
    /// runs completed before this bound
    #[argh(option)]
    pub until: Option<String>,
    /// output format: table (default) or json (the body of GET /api/v1/stats)
    #[argh(option, default = "String::from(\"table\")")]
    pub format: String,
    /// load SORTIE_* overrides from this .env file
    #[argh(option)]
    pub env_file: Option<String>,
    /// path of the workflow file (default ./WORKFLOW.md)
    #[argh(positional)]
    pub workflow: Option<String>,
}

/// Rewrite the stored text of a workflow's database through the secret masker.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(
    description = "mask every secret this process knows in the text stored in the workflow's database, then rebuild the file and empty its WAL; the daemon must be stopped",
    note = "Known secrets: the values of environment variables whose names contain TOKEN, KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL, the workflow's credentials and $VAR values, and such entries of the .env file. Run it with the environment the daemon had when the secret was printed."
)]
pub struct ScrubArgs {
    /// load SORTIE_* overrides from this .env file
    #[argh(option)]
    pub env_file: Option<String>,
    /// path of the workflow file (default ./WORKFLOW.md)
    #[argh(positional)]
    pub workflow: Option<String>,
}

/// Run the embedded credential-free demo.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(
    description = "write the embedded demo (file tracker, mock agent) into a directory and run it",
    note = "Existing files in the directory are kept, so a restart resumes the same demo; once nothing is left to dispatch, the next run starts afresh (backlog, database and workspaces reset)."
)]
pub struct DemoArgs {
    /// directory for the demo's WORKFLOW.md, issues.json, database and workspaces (default ./sortie-demo)
    #[argh(option, default = "String::from(\"sortie-demo\")")]
    pub dir: String,
    /// HTTP port (0 disables the server; default 7678)
    #[argh(option)]
    pub port: Option<String>,
    /// HTTP bind address, an IP literal (default 127.0.0.1)
    #[argh(option)]
    pub host: Option<String>,
    /// log level: debug, info, warn, error
    #[argh(option)]
    pub log_level: Option<String>,
    /// log format: text or json
    #[argh(option)]
    pub log_format: Option<String>,
    /// start afresh: restore the embedded WORKFLOW.md and backlog, remove the demo's database and workspaces
    #[argh(switch)]
    pub reset: bool,
    /// run N times faster (1 to 100; default 1, about two minutes): divides the polling interval, the retry backoff cap and the mock agent's pauses
    #[argh(option)]
    pub speed: Option<String>,
}

/// Serve the session tools over MCP on stdin/stdout.
#[derive(FromArgs, Debug, Default, PartialEq)]
#[argh(
    description = "serve sortie's session tools (tracker_api, sortie_status, workspace_history, cost_budget) as a stdio MCP server; agents start it from .sortie/mcp.json",
    note = "Reads SORTIE_WORKSPACE, SORTIE_ISSUE_ID, SORTIE_ISSUE_IDENTIFIER, SORTIE_DB_PATH and SORTIE_API_URL from the environment; never writes the database."
)]
pub struct McpServerArgs {
    /// path of the workflow file (absolute, or relative to the current directory)
    #[argh(option)]
    pub workflow: String,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Run(RunArgs),
    Validate(ValidateArgs),
    Demo(DemoArgs),
    Stats(StatsArgs),
    McpServer(McpServerArgs),
    Scrub(ScrubArgs),
    Version,
    /// `-dumpversion`: the bare version.
    DumpVersion,
}

/// The outcome of parsing: a command, or text to print and an exit code (help, errors).
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Command(Command),
    Exit {
        stdout: String,
        stderr: String,
        code: i32,
    },
}

const LONG_FLAGS: &[&str] = &[
    "port",
    "host",
    "log-level",
    "log-format",
    "env-file",
    "dry-run",
    "version",
    "format",
    "dir",
    "reset",
    "speed",
    "since",
    "until",
    "workflow",
    "workflows",
    "config",
    "help",
];

/// Flags that take no value. Go's `flag` also accepts `-name=true`/`-name=false` for them.
const SWITCHES: &[&str] = &["dry-run", "version", "reset", "help"];

/// The subcommands, recognised in first position only.
const SUBCOMMANDS: &[&str] = &[
    "validate",
    "demo",
    "stats",
    "scrub",
    "version",
    "mcp-server",
];

/// Go `strconv.ParseBool`, the values `-dry-run=…` accepts.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Rewrites Go-style flags into argh's: `-port` → `--port`, `--port=1` → `--port 1`,
/// `-h`/`-help` → `--help`, `--dry-run=true` → `--dry-run`, `--dry-run=false` → nothing.
/// A switch given a value that is not a boolean is left as typed, so argh reports it.
/// Stops at `--`.
pub fn normalize(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = false;
    for a in args {
        if rest || !a.starts_with('-') || a == "-" {
            out.push(a.clone());
            continue;
        }
        if a == "--" {
            rest = true;
            out.push(a.clone());
            continue;
        }
        let body = a.trim_start_matches('-');
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let name = name.replace('_', "-");
        let name = if name == "h" && value.is_none() {
            "help".to_string()
        } else {
            name
        };
        if SWITCHES.contains(&name.as_str())
            && let Some(v) = value
        {
            match parse_go_bool(v) {
                Some(true) => out.push(format!("--{name}")),
                Some(false) => {}
                None => out.push(a.clone()),
            }
        } else if LONG_FLAGS.contains(&name.as_str()) {
            out.push(format!("--{name}"));
            if let Some(v) = value {
                out.push(v.to_string());
            }
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Parsed {
    if args
        .iter()
        .any(|a| a == "-dumpversion" || a == "--dumpversion")
    {
        return Parsed::Command(Command::DumpVersion);
    }
    let (sub, rest): (Option<&str>, &[String]) = match args.first().map(String::as_str) {
        Some(s) if SUBCOMMANDS.contains(&s) => (Some(s), &args[1..]),
        _ => (None, args),
    };
    // Several workflow files are accepted, so a subcommand typed after one would be read as
    // another workflow: it is refused as the misplaced subcommand it is.
    if let Some(misplaced) = rest
        .iter()
        .skip(1)
        .find(|a| SUBCOMMANDS.contains(&a.as_str()))
        && sub.is_none()
    {
        return Parsed::Exit {
            stdout: String::new(),
            stderr: format!(
                "Unrecognized argument: {misplaced}\nsortie: a subcommand comes first (sortie {misplaced} …)\n"
            ),
            code: 1,
        };
    }
    let norm = normalize(rest);
    let strs: Vec<&str> = norm.iter().map(String::as_str).collect();
    let parsed = match sub {
        Some("version") => {
            if strs == ["--help"] {
                return Parsed::Exit {
                    stdout: "Usage: sortie version\n\nprint the version banner and exit\n".into(),
                    stderr: String::new(),
                    code: 0,
                };
            }
            if strs.is_empty() {
                Ok(Command::Version)
            } else {
                return Parsed::Exit {
                    stdout: String::new(),
                    stderr: "sortie version: takes no arguments\n".into(),
                    code: 1,
                };
            }
        }
        Some("validate") => {
            ValidateArgs::from_args(&["sortie validate"], &strs).map(Command::Validate)
        }
        Some("stats") => StatsArgs::from_args(&["sortie stats"], &strs).map(Command::Stats),
        Some("scrub") => ScrubArgs::from_args(&["sortie scrub"], &strs).map(Command::Scrub),
        Some("mcp-server") => {
            McpServerArgs::from_args(&["sortie mcp-server"], &strs).map(Command::McpServer)
        }
        Some(_) => DemoArgs::from_args(&["sortie demo"], &strs).map(Command::Demo),
        None => RunArgs::from_args(&["sortie"], &strs).map(|r| {
            if r.version {
                Command::Version
            } else {
                Command::Run(r)
            }
        }),
    };
    match parsed {
        Ok(c) => Parsed::Command(c),
        Err(e) => match e.status {
            Ok(()) => Parsed::Exit {
                stdout: e.output,
                stderr: String::new(),
                code: 0,
            },
            Err(()) => Parsed::Exit {
                stdout: String::new(),
                stderr: format!("sortie: {}", e.output.trim_end()) + "\n",
                code: 1,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn go_style_flags_are_accepted() {
        assert_eq!(
            normalize(&s(&[
                "-port",
                "9090",
                "--log-level=debug",
                "-dry-run",
                "W.md"
            ])),
            s(&[
                "--port",
                "9090",
                "--log-level",
                "debug",
                "--dry-run",
                "W.md"
            ])
        );
    }

    #[test]
    fn run_is_the_default_command() {
        match parse(&s(&["--port", "9090", "WORKFLOW.md"])) {
            Parsed::Command(Command::Run(r)) => {
                assert_eq!(r.port.as_deref(), Some("9090"));
                assert_eq!(r.workflow.first().map(String::as_str), Some("WORKFLOW.md"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subcommands_only_in_first_position() {
        assert!(matches!(
            parse(&s(&["validate", "--format", "json", "W.md"])),
            Parsed::Command(Command::Validate(ValidateArgs { ref format, .. })) if format == "json"
        ));
        assert!(matches!(
            parse(&s(&["W.md", "validate"])),
            Parsed::Exit { code: 1, .. }
        ));
    }

    #[test]
    fn help_exits_zero_on_stdout_and_unknown_flags_exit_one() {
        match parse(&s(&["--help"])) {
            Parsed::Exit { stdout, code, .. } => {
                assert_eq!(code, 0);
                assert!(stdout.contains("--port"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&s(&["--bogus"])) {
            Parsed::Exit { stderr, code, .. } => {
                assert_eq!(code, 1);
                assert!(stderr.starts_with("sortie: "));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_help_spelling_exits_zero_for_every_command() {
        for sub in [None, Some("validate"), Some("demo"), Some("version")] {
            for flag in ["-h", "--help", "-help", "--h"] {
                let mut argv: Vec<String> = sub.iter().map(|s| s.to_string()).collect();
                argv.push(flag.to_string());
                match parse(&argv) {
                    Parsed::Exit { stdout, code, .. } => {
                        assert_eq!(code, 0, "{argv:?}");
                        assert!(stdout.contains("Usage"), "{argv:?}: {stdout}");
                    }
                    other => panic!("{argv:?}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn switches_take_go_boolean_values() {
        let dry = |a: &[&str]| match parse(&s(a)) {
            Parsed::Command(Command::Run(r)) => Some((r.dry_run, r.workflow.first().cloned())),
            _ => None,
        };
        assert_eq!(
            dry(&["--dry-run=true", "W.md"]),
            Some((true, Some("W.md".into())))
        );
        assert_eq!(
            dry(&["-dry-run=1", "W.md"]),
            Some((true, Some("W.md".into())))
        );
        assert_eq!(
            dry(&["-dry-run", "W.md"]),
            Some((true, Some("W.md".into())))
        );
        assert_eq!(
            dry(&["--dry-run=false", "W.md"]),
            Some((false, Some("W.md".into())))
        );
        assert_eq!(dry(&["--dry-run=maybe", "W.md"]), None);
        assert!(matches!(
            parse(&s(&["demo", "-reset=true"])),
            Parsed::Command(Command::Demo(DemoArgs { reset: true, .. }))
        ));
    }

    #[test]
    fn mcp_server_needs_its_workflow() {
        assert_eq!(
            parse(&s(&["mcp-server", "--workflow", "/w/WORKFLOW.md"])),
            Parsed::Command(Command::McpServer(McpServerArgs {
                workflow: "/w/WORKFLOW.md".into()
            }))
        );
        assert_eq!(
            parse(&s(&["mcp-server", "-workflow=/w.md"])),
            Parsed::Command(Command::McpServer(McpServerArgs {
                workflow: "/w.md".into()
            }))
        );
        assert!(matches!(
            parse(&s(&["mcp-server"])),
            Parsed::Exit { code: 1, .. }
        ));
    }

    #[test]
    fn version_spellings() {
        assert_eq!(parse(&s(&["-V"])), Parsed::Command(Command::Version));
        assert_eq!(parse(&s(&["version"])), Parsed::Command(Command::Version));
        assert_eq!(
            parse(&s(&["-dumpversion"])),
            Parsed::Command(Command::DumpVersion)
        );
    }
}
