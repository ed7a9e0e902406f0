//! The real GitHub Copilot CLI (installed by `scripts/agent-clis-install.sh`), offline and
//! without credentials: the command lines sortie builds are accepted by its own option parser
//! (it gets as far as looking for credentials, never to a usage error), its refusal is the one
//! the adapter recognises, and through the daemon a missing login ends in one clear
//! `agent_auth_failed` run naming what to do, with no retry loop.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::real_cli::real_cli;
use common::{Daemon, sortie_command, spawn, wait_for};
use serde_json::{Map, Value, json};
use sortie::agent::copilot::argv::{Continuity, PromptArg, build_args};
use sortie::agent::copilot::preflight::is_auth_failure_text;

const WAIT: Duration = Duration::from_secs(60);
const TOKEN_VARS: &[&str] = &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"];
/// What the CLI prints when its option parser refuses a command line.
const USAGE_ERRORS: &[&str] = &[
    "invalid command format",
    "unknown option",
    "error: unknown",
    "unexpected argument",
    "error: invalid value",
];

/// Keeps the test environment's credentials (and the home directory) away from the CLI.
fn isolate(cmd: &mut Command, home: &Path) {
    for v in TOKEN_VARS {
        cmd.env_remove(v);
    }
    cmd.env("HOME", home)
        .env("GH_CONFIG_DIR", home.join("gh-config"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"));
}

/// Runs the real CLI with `args` in `cwd` (prompt on stdin when given); combined output.
fn run_cli(cli: &Path, args: &[String], cwd: &Path, home: &Path, stdin: Option<&str>) -> String {
    let mut cmd = Command::new(cli);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    isolate(&mut cmd, home);
    let mut child = cmd.spawn().unwrap();
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        pipe.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "exit={:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_parsed(what: &str, out: &str, also_ok: &[&str]) {
    let lower = out.to_ascii_lowercase();
    for bad in USAGE_ERRORS {
        assert!(!lower.contains(bad), "{what}: usage error {bad:?}:\n{out}");
    }
    let reached = lower.contains("authentication")
        || also_ok
            .iter()
            .any(|t| lower.contains(&t.to_ascii_lowercase()));
    assert!(
        reached,
        "{what}: did not reach the credential check:\n{out}"
    );
}

#[test]
fn sortie_argv_is_accepted_by_the_real_cli() {
    let Some(cli) = real_cli("copilot") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mcp = ws.path().join("mcp.json");
    std::fs::write(&mcp, r#"{"mcpServers":{}}"#).unwrap();
    let every_key: Map<String, Value> = json!({
        "model": "gpt-5-mini", "max_autopilot_continues": 7, "agent": "reviewer",
        "allowed_tools": ["shell(git:*)", "write"], "denied_tools": ["shell(git push)"],
        "available_tools": ["view", "edit", "bash"], "excluded_tools": "web_fetch",
        "disable_builtin_mcps": true, "no_custom_instructions": true, "experimental": true
    })
    .as_object()
    .cloned()
    .unwrap();
    let wf = ws.path();

    // A first turn with every pass-through key and the worker's MCP file.
    let args = build_args(
        PromptArg::Flag("say hi"),
        &Continuity::New,
        &every_key,
        wf,
        Some(&mcp),
    );
    let out = run_cli(&cli, &args, ws.path(), home.path(), None);
    assert_parsed("turn 1, every key", &out, &[]);
    // The wording the adapter recognises as a missing login.
    assert!(
        out.lines().any(is_auth_failure_text),
        "the CLI's refusal is not recognised:\n{out}"
    );
    assert!(out.starts_with("exit=Some(1)"), "{out}");

    // Defaults, an operator's inline MCP JSON, `--continue`.
    let inline: Map<String, Value> = json!({"mcp_config": r#"{"mcpServers":{}}"#})
        .as_object()
        .cloned()
        .unwrap();
    let args = build_args(
        PromptArg::Flag("go on"),
        &Continuity::Continue,
        &inline,
        wf,
        None,
    );
    assert_parsed(
        "--continue",
        &run_cli(&cli, &args, ws.path(), home.path(), None),
        &[],
    );

    // `--resume <id>`: an id this home has never seen is refused by name, after parsing.
    let args = build_args(
        PromptArg::Flag("go on"),
        &Continuity::Resume("aa778ea0-6eab-4ce9-b87e-11d6d33dab4f".into()),
        &Map::new(),
        wf,
        None,
    );
    assert_parsed(
        "--resume",
        &run_cli(&cli, &args, ws.path(), home.path(), None),
        &["no session, task, or name matched"],
    );

    // A prompt that looks like an option, and one sent on stdin.
    let args = build_args(
        PromptArg::for_prompt("--help is not what I want"),
        &Continuity::New,
        &Map::new(),
        wf,
        None,
    );
    assert_parsed(
        "dash prompt",
        &run_cli(&cli, &args, ws.path(), home.path(), None),
        &[],
    );
    let args = build_args(PromptArg::Stdin, &Continuity::New, &Map::new(), wf, None);
    assert_parsed(
        "stdin prompt",
        &run_cli(&cli, &args, ws.path(), home.path(), Some("say hi")),
        &[],
    );
}

#[test]
fn without_a_login_the_daemon_records_agent_auth_failed_once() {
    let Some(cli) = real_cli("copilot") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: copilot-cli\n  command: {}\n  max_turns: 1\ncopilot-cli:\n  model: gpt-5-mini\n---\nSay hi for {{{{ .issue.identifier }}}}.\n",
        cli.display()
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
    let issues =
        json!([{"id": "1", "identifier": "R-1", "title": "Real copilot", "state": "To Do"}]);
    std::fs::write(root.join("issues.json"), issues.to_string()).unwrap();
    // The CLI's first run in a home unpacks itself into the cache (seconds, past the canary's
    // 5 s on a busy machine); warm this home first so the daemon's canary sees a ready CLI.
    let mut warm = Command::new(&cli);
    warm.arg("--version")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    isolate(&mut warm, &root.join("home"));
    assert!(warm.status().unwrap().success());
    let d: Daemon = spawn(&root.join("sortie.log"), None, |port| {
        let mut cmd = sortie_command();
        cmd.current_dir(root)
            .arg("--port")
            .arg(port.to_string())
            .arg(root.join("WORKFLOW.md"))
            .env_remove("RUST_LOG");
        isolate(&mut cmd, &root.join("home"));
        cmd
    });
    let runs = || {
        d.try_get("/api/v1/runs?issue=R-1")
            .filter(|r| r.status == 200)
            .and_then(|r| r.json()["runs"].as_array().cloned())
            .unwrap_or_default()
    };
    let run = wait_for("the failed run", WAIT, || runs().into_iter().next());
    assert_eq!(run["status"], "failed", "{run}");
    let db = rusqlite::Connection::open_with_flags(
        root.join(".sortie.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let stored: String = db
        .query_row(
            "SELECT COALESCE(error, '') FROM run_history WHERE issue_id = '1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(stored.starts_with("agent_auth_failed: "), "{stored}");
    assert!(
        stored.contains("/login") && stored.contains("COPILOT_GITHUB_TOKEN"),
        "{stored}"
    );
    let dispatch = run["dispatch_id"].as_str().unwrap_or_default();
    let events = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    assert_eq!(events["events"][0]["event"], "startup_failed", "{events}");

    // Several polls later the issue has not been started again.
    let mut seen: Vec<String> = Vec::new();
    d.wait_until("several more polls", WAIT, || {
        if let Some(at) = d.try_state().and_then(|s| {
            s["health"]["poll"]["checked_at"]
                .as_str()
                .map(str::to_string)
        }) && seen.last() != Some(&at)
        {
            seen.push(at);
        }
        seen.len() > 5
    });
    assert_eq!(runs().len(), 1, "a retry loop started sessions again");
}

/// Runs the daemon over one issue with `token` in `COPILOT_GITHUB_TOKEN` and waits for the
/// failure breaker's item on it; returns the item, after checking that several polls start no
/// second session.
fn held_with_token(token: &str) -> Option<Value> {
    let cli = real_cli("copilot")?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: copilot-cli\n  command: {}\n  max_turns: 1\n  max_retry_backoff_ms: 100\ncopilot-cli:\n  model: gpt-5-mini\n---\nSay hi for {{{{ .issue.identifier }}}}.\n",
        cli.display()
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
    let issues =
        json!([{"id": "1", "identifier": "R-1", "title": "Real copilot", "state": "To Do"}]);
    std::fs::write(root.join("issues.json"), issues.to_string()).unwrap();
    let mut warm = Command::new(&cli);
    warm.arg("--version")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    isolate(&mut warm, &root.join("home"));
    assert!(warm.status().unwrap().success());
    let d: Daemon = spawn(&root.join("sortie.log"), None, |port| {
        let mut cmd = sortie_command();
        cmd.current_dir(root)
            .arg("--port")
            .arg(port.to_string())
            .arg(root.join("WORKFLOW.md"))
            .env_remove("RUST_LOG");
        isolate(&mut cmd, &root.join("home"));
        cmd.env("COPILOT_GITHUB_TOKEN", token);
        cmd
    });
    let item = |s: &Value| {
        s["attention"].as_array().and_then(|a| {
            a.iter()
                .find(|i| i["kind"] == "failure_held" && i["issue_identifier"] == "R-1")
                .cloned()
        })
    };
    let s = d.wait_state("the failure hold", WAIT, |s| item(s).is_some());
    let held = s["held"].as_array().cloned().unwrap_or_default();
    assert!(
        held.iter()
            .any(|h| h["issue_identifier"] == "R-1" && h["hold"]["reason"] == "failure_held"),
        "{s}"
    );
    let mut seen: Vec<String> = Vec::new();
    d.wait_until("several more polls", WAIT, || {
        if let Some(at) = d.try_state().and_then(|s| {
            s["health"]["poll"]["checked_at"]
                .as_str()
                .map(str::to_string)
        }) && seen.last() != Some(&at)
        {
            seen.push(at);
        }
        seen.len() > 5
    });
    let runs = d.get("/api/v1/runs?issue=R-1").json()["runs"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(runs, 1, "held at the first run, never retried");
    item(&s)
}

#[test]
fn a_classic_token_is_held_at_once_with_the_cli_s_own_words() {
    // A made-up classic token: the CLI refuses its type before any network call.
    let Some(item) = held_with_token("ghp_abcdefghijklmnopqrstuvwxyz0123456789") else {
        return;
    };
    assert_eq!(item["evidence"]["cause"], "unsupported_token", "{item}");
    let why = item["why_text"].as_str().unwrap_or_default();
    assert!(
        why.contains("Classic Personal Access Tokens (ghp_) are not supported by Copilot"),
        "{why}"
    );
    assert!(
        !why.contains("abcdefghijklmnop"),
        "the token is masked: {why}"
    );
}

#[test]
fn a_token_without_network_is_held_at_once_as_an_unreachable_provider() {
    // A made-up fine-grained token: the CLI tries to validate it and cannot reach GitHub.
    let Some(item) = held_with_token("github_pat_abcdefghijklmnopqrstuvwxyz0123456789") else {
        return;
    };
    assert_eq!(item["evidence"]["cause"], "provider_unreachable", "{item}");
    let why = item["why_text"].as_str().unwrap_or_default();
    assert!(why.contains("network fetch failed"), "{why}");
}
