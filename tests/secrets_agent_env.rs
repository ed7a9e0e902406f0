//! An agent gets what it needs and no more (issue 34, point 3), through the real binary: the
//! agent process's environment is an allowlist (system basics, its kind's variables, what
//! `agent.env` names, the session's `SORTIE_*`), sortie's own secrets never reach it, its
//! command line carries no issue text, and the session's `.sortie/mcp.json` holds no secret it
//! does not use and is gone once the session ends. `agent.inherit_env: true` gives the whole
//! environment back with a warning that names (never shows) the secrets it exposes.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

const TRACKER_KEY: &str = "sk-tracker-5e1f0b7a9c";
const WEBHOOK_SECRET: &str = "whsec-77aa19c3e2";
const DB_PASSWORD: &str = "pw-unrelated-4d8e2f";
const ANTHROPIC_KEY: &str = "ak-needed-by-claude-31c9";
const TITLE_TOKEN: &str = "ghp_TITLETOKEN0123456789abcdef";

fn daemon_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("SORTIE_TRACKER_API_KEY", TRACKER_KEY),
        ("SORTIE_WEBHOOK_SECRET_GITHUB", WEBHOOK_SECRET),
        ("DB_PASSWORD", DB_PASSWORD),
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
        // Listed by pattern in agent.env, but it holds the tracker token: withheld.
        ("TEAM_TRACKER_TOKEN", TRACKER_KEY),
        ("TEAM_NAME", "platform"),
    ]
}

fn setup(p: &Project, agent_yaml: &str) -> std::path::PathBuf {
    p.issues(
        json!([{"id": "1", "identifier": "E-1", "priority": 1, "state": "To Do",
        "title": format!("Rotate {TITLE_TOKEN} before friday")}]),
    );
    let release = p.path("release");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working", "input_tokens": 5, "output_tokens": 1}}),
            json!({"wait_file": release.display().to_string()}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow(agent_yaml, "");
    release
}

/// The running agent's pid, from its live session row.
fn agent_pid(p: &Project) -> u32 {
    wait_for("the agent's pid", Duration::from_secs(30), || {
        let pid: String = p
            .db_conn()
            .query_row(
                "SELECT agent_pid FROM session_metadata WHERE dispatch_id IS NOT NULL AND agent_pid IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .ok()?;
        pid.parse().ok()
    })
}

/// `/proc/<pid>/environ` as `NAME=value` lines, and the command line with spaces.
fn proc_view(pid: u32) -> (String, String) {
    let read = |f: &str| {
        let bytes = std::fs::read(format!("/proc/{pid}/{f}")).unwrap_or_default();
        String::from_utf8_lossy(&bytes).replace('\0', "\n")
    };
    (read("environ"), read("cmdline"))
}

/// Every file's text under `dir`.
fn tree_text(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.push_str(&tree_text(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    out
}

#[test]
fn an_agent_gets_the_allowlist_and_never_sortie_secrets_or_issue_text_on_its_command_line() {
    let p = Project::new();
    let release = setup(
        &p,
        "  env: [FAKE_AGENT_*, TEAM_*, {EXTRA: fixed-$TEAM_NAME}]\n",
    );
    let mut d = p.start_with_env(&daemon_env());
    let pid = agent_pid(&p);
    let (environ, cmdline) = proc_view(pid);
    let mcp = std::fs::read_to_string(p.workspace("E-1").join(".sortie/mcp.json"))
        .expect("the session's MCP file while it runs");

    // The kind's variable, the basics, the listed and set ones, the session's own.
    assert!(
        environ.contains(&format!("ANTHROPIC_API_KEY={ANTHROPIC_KEY}")),
        "{environ}"
    );
    assert!(environ.lines().any(|l| l.starts_with("PATH=")));
    assert!(environ.contains("TEAM_NAME=platform"));
    assert!(environ.contains("EXTRA=fixed-platform"));
    assert!(environ.contains("SORTIE_ISSUE_IDENTIFIER=E-1"));
    assert!(environ.contains("SORTIE_ISSUE_ID=1"));
    assert!(environ.contains("SORTIE_ATTEMPT=0"));
    assert!(environ.contains("SORTIE_AGENT_TOKEN="));
    // Nothing else of sortie's.
    for secret in [TRACKER_KEY, WEBHOOK_SECRET, DB_PASSWORD] {
        assert_eq!(environ.matches(secret).count(), 0, "{secret} in environ");
        assert_eq!(cmdline.matches(secret).count(), 0, "{secret} in cmdline");
        assert_eq!(mcp.matches(secret).count(), 0, "{secret} in mcp.json");
    }
    for name in [
        "SORTIE_TRACKER_API_KEY",
        "SORTIE_WEBHOOK_SECRET_GITHUB",
        "DB_PASSWORD",
        "TEAM_TRACKER_TOKEN",
        "SORTIE_TEST_MARKERS",
    ] {
        assert!(!environ.contains(&format!("{name}=")), "{name} passed");
    }
    // The prompt travels on stdin: `ps` shows no issue text.
    assert_eq!(cmdline.matches(TITLE_TOKEN).count(), 0, "{cmdline}");
    assert!(!cmdline.contains("Rotate"), "{cmdline}");
    assert_eq!(environ.matches(TITLE_TOKEN).count(), 0);

    std::fs::write(&release, "").unwrap();
    wait_for("the run recorded", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    assert_eq!(p.run_statuses("1"), ["succeeded"]);
    assert!(
        !p.workspace("E-1").join(".sortie/mcp.json").exists(),
        "the MCP file outlived its session"
    );
    let workspace = tree_text(&p.workspace("E-1"));
    assert_eq!(d.terminate(), Some(0));
    let log = p.log();
    for secret in [TRACKER_KEY, WEBHOOK_SECRET, DB_PASSWORD, ANTHROPIC_KEY] {
        assert_eq!(
            workspace.matches(secret).count(),
            0,
            "{secret} in workspace"
        );
        assert_eq!(log.matches(secret).count(), 0, "{secret} in the log");
    }
    // The kind needs nothing that holds a sortie secret here; the pattern-listed copy of the
    // tracker token is withheld silently (it is not the kind's).
    assert!(!log.contains("agent.inherit_env is true"), "{log}");
}

#[test]
fn inherit_env_gives_the_whole_environment_back_and_names_the_secrets_it_exposes() {
    let p = Project::new();
    let release = setup(&p, "  inherit_env: true\n");
    let mut d = p.start_with_env(&daemon_env());
    let pid = agent_pid(&p);
    let (environ, cmdline) = proc_view(pid);
    assert!(environ.contains(&format!("SORTIE_TRACKER_API_KEY={TRACKER_KEY}")));
    assert!(environ.contains(&format!("SORTIE_WEBHOOK_SECRET_GITHUB={WEBHOOK_SECRET}")));
    assert!(environ.contains(&format!("DB_PASSWORD={DB_PASSWORD}")));
    assert!(environ.contains("SORTIE_TEST_MARKERS="));
    assert_eq!(cmdline.matches(TITLE_TOKEN).count(), 0, "{cmdline}");
    let line = p
        .log()
        .lines()
        .find(|l| l.contains("agent.inherit_env is true"))
        .map(str::to_string)
        .expect("the startup warning");
    for name in [
        "DB_PASSWORD",
        "SORTIE_TRACKER_API_KEY",
        "SORTIE_WEBHOOK_SECRET_GITHUB",
        "TEAM_TRACKER_TOKEN",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(line.contains(name), "{name} not named: {line}");
    }
    for secret in [TRACKER_KEY, WEBHOOK_SECRET, DB_PASSWORD, ANTHROPIC_KEY] {
        assert!(!line.contains(secret), "a value in the warning: {line}");
    }
    std::fs::write(&release, "").unwrap();
    wait_for("the run recorded", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    assert_eq!(d.terminate(), Some(0));
}

#[test]
fn a_kind_variable_holding_the_tracker_token_is_withheld_with_a_warning_unless_named() {
    let p = Project::new();
    let release = setup(&p, "");
    let mut vars = daemon_env();
    vars.push(("ANTHROPIC_AUTH_TOKEN", TRACKER_KEY));
    let mut d = p.start_with_env(&vars);
    let pid = agent_pid(&p);
    let (environ, _) = proc_view(pid);
    assert!(!environ.contains("ANTHROPIC_AUTH_TOKEN="), "{environ}");
    assert!(environ.contains("ANTHROPIC_API_KEY="));
    let log = p.log();
    let line = log
        .lines()
        .find(|l| l.contains("agent variables withheld"))
        .expect("the warning");
    assert!(line.contains("ANTHROPIC_AUTH_TOKEN"), "{line}");
    assert!(!line.contains(TRACKER_KEY), "{line}");
    std::fs::write(&release, "").unwrap();
    wait_for("the run recorded", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    assert_eq!(d.terminate(), Some(0));
}
