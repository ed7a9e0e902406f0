//! The real Claude Code CLI (installed by `scripts/agent-clis-install.sh`) under
//! `worker.sandbox: bubblewrap`, offline and without credentials: it starts in the sandbox and
//! reaches its "not logged in" outcome exactly as it does without one (the same recorded
//! error, the same hold). Skipped (with the reason printed) when the CLI is not installed and
//! `CI` is unset.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Project, real_cli::real_cli};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// Environment variables that could give the CLI credentials or another configuration.
const CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CONFIG_DIR",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
];

fn start_daemon(p: &Project, home: &Path) -> common::Daemon {
    common::spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        common::set_server_port(&p.workflow(), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.dir.path())
            .arg(p.workflow())
            .env("HOME", home)
            .env_remove("RUST_LOG");
        for k in CREDENTIALS {
            cmd.env_remove(k);
        }
        cmd
    })
}

/// The recorded error and the hold of one logged-out session of the real CLI.
fn logged_out_outcome(cli: &Path, worker_yaml: &str) -> (String, Value) {
    let home = tempfile::tempdir().expect("home");
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "R-1", "title": "Hi", "state": "To Do"}]));
    p.write(
        "WORKFLOW.md",
        &format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: {}\n\
             agent:\n  kind: claude-code\n  command: {}\n  max_turns: 1\n\
             claude-code:\n  permission_mode: acceptEdits\n{worker_yaml}\
             server:\n  port: {}\n---\nSay hi for {{{{ .issue.identifier }}}}\n",
            p.path("ws").display(),
            cli.display(),
            p.port()
        ),
    );
    let d = start_daemon(&p, home.path());
    let s = d.wait_state("the login hold", T, |s| {
        s["held"][0]["hold"]["reason"] == "agent_auth_failed"
    });
    let error: String = p
        .db_conn()
        .query_row(
            "SELECT error FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default();
    assert_eq!(p.run_statuses("1"), vec!["failed"], "{}", p.log());
    d.stop();
    (error, s["held"][0]["hold"]["reason"].clone())
}

#[test]
fn the_real_claude_code_reaches_not_logged_in_in_the_sandbox_as_without() {
    let Some(cli) = real_cli("claude") else {
        return;
    };
    assert!(
        Path::new("/usr/bin/bwrap").exists(),
        "this test needs bwrap: apt-get install -y bubblewrap"
    );
    let open = logged_out_outcome(&cli, "");
    let boxed = logged_out_outcome(
        &cli,
        "worker:\n  sandbox:\n    kind: bubblewrap\n    network: none\n",
    );
    assert!(
        open.0
            .starts_with("agent_auth_failed: Claude Code is not logged in"),
        "{open:?}"
    );
    assert_eq!(boxed, open);
}
