//! The real Claude Code CLI (installed by `scripts/agent-clis-install.sh`) through sortie,
//! offline and without credentials: its own option parser takes every argv sortie builds; a
//! daemon over it records a failed login as `agent_auth_failed` and holds the kind without a
//! retry loop; and as root without a sandbox declaration sortie refuses before ever starting
//! it. Skipped (with the reason printed) when the CLI is not installed and `CI` is unset.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Project, real_cli::real_cli};
use serde_json::{Map, Value, json};
use sortie::agent::claude::argv::{SessionFlag, build_args};

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

fn without_credentials(cmd: &mut Command, home: &Path) {
    for k in CREDENTIALS {
        cmd.env_remove(k);
    }
    cmd.env("HOME", home);
}

/// Every `claude-code:` pass-through key, so every flag sortie maps is on the command line.
fn every_key(mcp: &Path) -> Map<String, Value> {
    let v = json!({
        "permission_mode": "acceptEdits",
        "model": "sonnet",
        "fallback_model": "haiku",
        "max_turns": 3,
        "max_budget_usd": 1.5,
        "effort": "low",
        "allowed_tools": "Read,Grep",
        "disallowed_tools": "Bash",
        "system_prompt": "Answer briefly.",
        "mcp_config": mcp.display().to_string(),
    });
    v.as_object().cloned().unwrap_or_default()
}

/// Runs the real CLI with `args` in `cwd` (bounded by a deadline) and returns its output.
fn run_cli(cli: &Path, args: &[String], cwd: &Path, home: &Path) -> (Option<i32>, String) {
    let mut cmd = Command::new(cli);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    without_credentials(&mut cmd, home);
    let mut child = cmd.spawn().expect("spawn the real claude");
    let status = common::poll(T, Duration::from_millis(50), || {
        child.try_wait().ok().flatten()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("claude output");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.is_some(), "the real claude did not exit: {text}");
    (out.status.code(), text)
}

#[test]
fn the_real_parser_takes_every_argv_sortie_builds() {
    let Some(cli) = real_cli("claude") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mcp = dir.path().join("mcp.json");
    std::fs::write(&mcp, r#"{"mcpServers": {}}"#).unwrap();
    let sid = "3f0c9a4e-1111-4222-8333-444455556670".to_string();
    let mut block = every_key(&mcp);
    let turns = [
        (SessionFlag::New(sid.clone()), block.clone()),
        (SessionFlag::Resume(sid.clone()), block.clone()),
    ];
    block.insert("session_persistence".into(), Value::Bool(false));
    let no_persistence = (SessionFlag::New(sid), block);
    for (session, block) in turns.iter().chain(std::iter::once(&no_persistence)) {
        let args = build_args(Some("say hi"), session, block, dir.path(), None);
        let (code, text) = run_cli(&cli, &args, dir.path(), home.path());
        let lower = text.to_lowercase();
        assert!(
            !lower.contains("unknown option") && !lower.contains("unknown argument"),
            "argv {args:?} rejected: {text}"
        );
        assert!(
            !lower.contains("error: option") && !lower.contains("invalid value"),
            "argv {args:?} rejected: {text}"
        );
        // Offline and logged out, every turn ends in a failure the CLI reports, never a hang.
        assert_ne!(code, Some(0), "{text}");
    }
}

fn start_daemon(p: &Project, home: &Path, sandbox: bool) -> common::Daemon {
    std::fs::create_dir_all(p.path("markers")).unwrap();
    common::spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        common::set_server_port(&p.workflow(), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.dir.path())
            .arg(p.workflow())
            .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
            .env("SORTIE_TEST_MARKERS", p.path("markers"))
            .env_remove("RUST_LOG");
        if !sandbox {
            cmd.env_remove("IS_SANDBOX");
        }
        without_credentials(&mut cmd, home);
        cmd
    })
}

/// A workflow over the file tracker whose agent is the real CLI.
fn real_workflow(p: &Project, cli: &Path, claude_block: &str) {
    p.write(
        "WORKFLOW.md",
        &format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: {}\n\
             agent:\n  kind: claude-code\n  command: {}\n  max_turns: 1\n{claude_block}\
             server:\n  port: {}\n---\nSay hi for {{{{ .issue.identifier }}}}\n",
            p.path("ws").display(),
            cli.display(),
            p.port()
        ),
    );
}

fn attention_of<'a>(s: &'a Value, kind: &str) -> Option<&'a Value> {
    s["attention"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["kind"] == kind))
}

#[test]
fn a_logged_out_claude_code_ends_in_an_auth_hold_without_a_retry_loop() {
    let Some(cli) = real_cli("claude") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "R-1", "title": "Hi", "state": "To Do"}]));
    real_workflow(&p, &cli, "claude-code:\n  permission_mode: acceptEdits\n");
    let d = start_daemon(&p, home.path(), true);
    let s = d.wait_state("the login hold", T, |s| {
        attention_of(s, "agent_auth_failed").is_some()
    });
    assert_eq!(s["retrying"], json!([]), "{s}");
    assert_eq!(p.run_statuses("1"), vec!["failed"]);
    let error: String = p
        .db_conn()
        .query_row(
            "SELECT error FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        error.starts_with("agent_auth_failed: Claude Code is not logged in"),
        "{error}"
    );
    let item = attention_of(&s, "agent_auth_failed").unwrap();
    assert_eq!(item["severity"], "critical");
    assert_eq!(item["evidence"]["agent_kind"], "claude-code");
    let s = d.wait_state("the issue held", T, |s| {
        s["held"][0]["hold"]["reason"] == "agent_auth_failed"
    });
    assert_eq!(s["held"][0]["issue_identifier"], "R-1");
    // Several polls later there is still one run: nothing loops.
    let mut seen = std::collections::BTreeSet::new();
    d.wait_until("several poll ticks", T, || {
        if let Some(s) = d.try_state() {
            seen.insert(s["health"]["poll"]["checked_at"].to_string());
        }
        seen.len() > 5
    });
    assert_eq!(p.run_statuses("1"), vec!["failed"]);
}

#[test]
fn as_root_without_a_sandbox_sortie_refuses_before_starting_the_real_cli() {
    let Some(cli) = real_cli("claude") else {
        return;
    };
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: Claude Code's root rule applies to root only");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "R-1", "title": "Hi", "state": "To Do"}]));
    // A wrapper that records every start, so "never spawned" is observed, not assumed.
    let marker = p.path("markers/started");
    let wrapper = p.path("claude-wrapper.sh");
    p.write(
        "claude-wrapper.sh",
        &format!(
            "#!/bin/sh\necho started >> {}\nexec {} \"$@\"\n",
            marker.display(),
            cli.display()
        ),
    );
    make_executable(&wrapper);
    real_workflow(&p, &wrapper, "");

    let mut validate = common::sortie_command();
    validate
        .current_dir(p.dir.path())
        .env_remove("IS_SANDBOX")
        .arg("validate")
        .arg(p.workflow());
    without_credentials(&mut validate, home.path());
    let out = validate.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("claude-code.permission_mode"), "{stderr}");

    let mut daemon = common::sortie_command();
    daemon
        .current_dir(p.dir.path())
        .env_remove("IS_SANDBOX")
        .arg(p.workflow())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    without_credentials(&mut daemon, home.path());
    let mut child = daemon.spawn().unwrap();
    let status = common::poll(T, Duration::from_millis(50), || {
        child.try_wait().ok().flatten()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("dispatch preflight failed"), "{stderr}");
    assert!(stderr.contains("claude-code.permission_mode"), "{stderr}");
    assert!(!marker.exists(), "the real CLI was started");
}

fn make_executable(path: &PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).unwrap();
}
