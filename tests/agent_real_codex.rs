//! The real Codex CLI (`codex app-server`, installed by `scripts/agent-clis-install.sh`), with
//! no credentials and no network: the JSON-RPC supervisor drives its handshake as far as it
//! goes offline, sortie ends the attempt with a clear `agent_auth_failed` outcome that says
//! what to do and does not retry it; the example workflow and the original project's codex
//! front matter validate cleanly.

mod common;

use common::real_cli::real_cli;
use common::{Daemon, Setup, wait_for};
use serde_json::{Value, json};
use sortie::agent::codex::handshake::{self, AccountNext};
use sortie::agent::jsonrpc::{Dialect, RpcPeer, RpcSpec};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

fn no_api_key() -> bool {
    if std::env::var_os("CODEX_API_KEY").is_some() {
        eprintln!("skipped: CODEX_API_KEY is set in the test environment");
        return false;
    }
    true
}

/// A private, empty codex home, so no login of this machine's user is seen.
fn home_env(dir: &Path) -> Vec<(String, String)> {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    vec![
        ("HOME".into(), home.display().to_string()),
        (
            "CODEX_HOME".into(),
            home.join(".codex").display().to_string(),
        ),
    ]
}

#[test]
fn the_real_app_server_answers_the_handshake_and_starts_a_thread_offline() {
    let Some(codex) = real_cli("codex") else {
        return;
    };
    if !no_api_key() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let spec = RpcSpec {
        base_env: None,
        program: codex.display().to_string(),
        args: vec!["app-server".into()],
        cwd: ws.clone(),
        env: home_env(dir.path()),
        max_line_bytes: 1 << 20,
        remote: None,
        sandbox: None,
    };
    let mut peer = RpcPeer::spawn(&spec, Dialect::Bare).unwrap();
    let refuse = &mut |_: &str, _: &Value| Ok(json!({}));
    let t = Duration::from_secs(30);
    let init = peer
        .request(
            "initialize",
            json!({"clientInfo": {"name": "sortie_orchestrator", "title": "Sortie Orchestrator", "version": "0.1.0"},
                "capabilities": {"experimentalApi": true}}),
            t,
            refuse,
        )
        .unwrap_or_else(|e| panic!("initialize: {e}; stderr: {}", peer.child().stderr_text()));
    assert!(init.get("userAgent").is_some(), "{init}");
    peer.notify("initialized", json!({})).unwrap();
    let account = peer
        .request("account/read", json!({"refreshToken": false}), t, refuse)
        .unwrap();
    assert_eq!(account["account"], Value::Null, "{account}");
    assert_eq!(account["requiresOpenaiAuth"], true, "{account}");
    let next = handshake::account_next(&account, None);
    assert!(next.is_err(), "no account and no key is an auth failure");
    assert_ne!(next, Ok(AccountNext::Ready));
    let thread = peer
        .request(
            "thread/start",
            json!({"cwd": ws.display().to_string(), "approvalPolicy": "never", "sandbox": "workspace-write"}),
            t,
            refuse,
        )
        .unwrap_or_else(|e| panic!("thread/start: {e}; stderr: {}", peer.child().stderr_text()));
    let id = handshake::thread_id(&thread);
    assert!(id.is_some_and(|i| !i.is_empty()), "{thread}");
    assert!(peer.stop(Duration::from_secs(5), None).is_some());
}

fn runs(d: &Daemon) -> Vec<Value> {
    d.get_ok("/api/v1/runs")
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|v| v["runs"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn sortie_without_credentials_ends_in_a_clear_auth_failure_and_does_not_retry() {
    let Some(codex) = real_cli("codex") else {
        return;
    };
    if !no_api_key() {
        return;
    }
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 300\nworkspace:\n  root: ./ws\nagent:\n  kind: codex\n  command: {} app-server\n  max_turns: 1\n  read_timeout_ms: 30000\ncodex:\n  approval_policy: never\n  thread_sandbox: workspaceWrite\n---\nSay hello.\n",
        codex.display()
    );
    let setup = Setup::new(&wf, &common::issues(&[("1", "A-1", "To Do")]));
    let env = home_env(setup.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let d = setup.start(&env);
    let run = wait_for("the failed run", WAIT, || runs(&d).into_iter().next());
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("codex login") && error.contains("CODEX_API_KEY"),
        "{run}"
    );
    let completed = run["completed_at"].as_str().unwrap_or_default().to_string();
    let mut polls = std::collections::BTreeSet::new();
    d.wait_until("three polls after the failure", WAIT, || {
        if let Some(s) = d.try_state()
            && let Some(at) = s["health"]["poll"]["checked_at"].as_str()
            && at > completed.as_str()
        {
            polls.insert(at.to_string());
        }
        polls.len() >= 3
    });
    assert_eq!(runs(&d).len(), 1, "no retry loop");
    let starts = d
        .log_text()
        .lines()
        .filter(|l| l.contains("codex session start failed"))
        .count();
    assert_eq!(starts, 1, "one app-server start: {}", d.log_text());
}

/// `sortie validate --format json` in `dir`, with a `codex` on PATH (the fake stands in for
/// it: the command preflight only needs it to resolve).
fn validate(dir: &Path) -> (Option<i32>, String) {
    let bin = dir.join("bin");
    if !bin.join("codex").exists() {
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(common::FAKE_AGENT, bin.join("codex")).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = common::sortie_command()
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("SORTIE_AGENT_COMMAND")
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// No error and no warning about the `codex:` block (an unknown key, a bad value); with
/// `strict`, no unknown_key warning at all.
fn assert_clean(dir: &Path, strict: bool) {
    let (code, text) = validate(dir);
    assert_eq!(code, Some(0), "{text}");
    let json_text = text.lines().next().unwrap_or_default();
    let v: Value = serde_json::from_str(json_text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["errors"], json!([]), "{text}");
    let warnings = v["warnings"].as_array().cloned().unwrap_or_default();
    assert!(
        !warnings.iter().any(|w| w["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("codex."))
            || strict && w["check"] == "unknown_key"),
        "{text}"
    );
}

#[test]
fn the_example_workflow_and_the_original_codex_front_matter_validate_cleanly() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/codex/WORKFLOW.md"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("WORKFLOW.md"), &example).unwrap();
    std::fs::write(dir.path().join("issues.json"), "[]").unwrap();
    assert_clean(dir.path(), true);

    // The original project's codex example, its tracker swapped for the file tracker.
    let original = "---\ntracker:\n  kind: file\n  active_states:\n    - To Do\n    - In Progress\n  in_progress_state: In Progress\n  handoff_state: Human Review\n  terminal_states:\n    - Done\n    - Won't Do\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 45000\nworkspace:\n  root: ./ws\nagent:\n  kind: codex\n  command: codex app-server\n  max_turns: 15\n  max_concurrent_agents: 4\n  turn_timeout_ms: 3600000\n  read_timeout_ms: 5000\n  stall_timeout_ms: 300000\n  stop_grace_ms: 5000\n  max_retry_backoff_ms: 300000\ncodex:\n  model: o3\n  effort: medium\n  approval_policy: never\n  thread_sandbox: workspaceWrite\nserver:\n  port: 8642\n---\nWork on {{ .issue.identifier }}.\n";
    std::fs::write(dir.path().join("WORKFLOW.md"), original).unwrap();
    // Every key of it is one sortie reads, `agent.stop_grace_ms` included.
    assert_clean(dir.path(), true);

    // An unknown approval policy is an error naming the allowed values.
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        original.replace("approval_policy: never", "approval_policy: sometimes"),
    )
    .unwrap();
    let (code, text) = validate(dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("untrusted, on-failure, on-request, never"),
        "{text}"
    );
}

#[test]
fn with_a_key_but_no_network_the_failure_breaker_holds_the_issue() {
    let Some(codex) = real_cli("codex") else {
        return;
    };
    if !no_api_key() {
        return;
    }
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 300\nworkspace:\n  root: ./ws\nagent:\n  kind: codex\n  command: {} app-server\n  max_turns: 1\n  read_timeout_ms: 30000\n  stall_timeout_ms: 5000\n  max_retry_backoff_ms: 100\n  max_same_failures: 2\ncodex:\n  approval_policy: never\n  thread_sandbox: workspaceWrite\n---\nSay hello.\n",
        codex.display()
    );
    let setup = Setup::new(&wf, &common::issues(&[("1", "A-1", "To Do")]));
    let mut env = home_env(setup.path());
    // A made-up key: the CLI gets past its login check and then cannot reach the API.
    env.push((
        "CODEX_API_KEY".into(),
        "sk-not-a-real-key-0123456789".into(),
    ));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let d = setup.start(&env);
    let item = |s: &Value| {
        s["attention"].as_array().and_then(|a| {
            a.iter()
                .find(|i| i["kind"] == "failure_held" && i["issue_identifier"] == "A-1")
                .cloned()
        })
    };
    let s = d.wait_state("the failure hold", Duration::from_secs(150), |s| {
        item(s).is_some()
    });
    let item = item(&s).unwrap_or_default();
    // Offline the app-server sends nothing once the turn starts: two stalls in a row.
    assert_eq!(item["evidence"]["cause"], "stall", "{item}");
    assert_eq!(item["evidence"]["runs"], 2, "{item}");
    assert!(
        s["held"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["hold"]["reason"] == "failure_held")),
        "{s}"
    );
    let mut polls = std::collections::BTreeSet::new();
    d.wait_until("three more polls", WAIT, || {
        if let Some(s) = d.try_state()
            && let Some(at) = s["health"]["poll"]["checked_at"].as_str()
        {
            polls.insert(at.to_string());
        }
        polls.len() >= 4
    });
    assert_eq!(runs(&d).len(), 2, "held, not retried");
}
