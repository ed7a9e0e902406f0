//! The `kiro` agent kind: Kiro CLI over the Agent Client Protocol. The Kiro-shaped turn
//! fixture replayed through the ACP parser, the real binary driving the fake agent under the
//! `kiro-cli` name (command line, environment, recorded kind, config view), and `sortie
//! validate` over the original project's `kiro` front matter.

mod common;

use common::{FAKE_AGENT, Setup, wait_for};
use serde_json::{Value, json};
use sortie::agent::acp::parser::{AcpParser, PromptContext};
use sortie::agent::stream::{StreamParser, TurnEnd};
use sortie::agent::{AgentEventKind, TurnOutcome};
use sortie::clock::{Clock, ManualClock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(40);
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/acp/kiro_turn.jsonl"
);

#[test]
fn the_kiro_turn_fixture_maps_messages_and_tools_and_passes_kiro_extensions_on() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut p = AcpParser::new(
        clock.clone() as Arc<dyn Clock>,
        PromptContext {
            session_id: "kiro-sess-1".into(),
            pid: Some(7),
            first_turn: true,
            workspace: PathBuf::from("/ws"),
            reject_permissions: false,
            prompt_id: 3,
        },
    );
    let mut events = Vec::new();
    for line in text.lines() {
        clock.advance(Duration::from_millis(5));
        events.extend(p.on_line(line.as_bytes()));
    }
    let answer = json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}});
    events.extend(p.on_line(answer.to_string().as_bytes()));
    let (outcome, tail) = p.finish(&TurnEnd::default());
    events.extend(tail);
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            message: "Fixed; the tests pass.".into()
        }
    );
    let tools: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AgentEventKind::ToolResult {
                tool_name,
                tool_argument,
                tool_error,
                ..
            } => Some((tool_name.clone(), tool_argument.clone(), *tool_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        [(
            Some("Running: cargo test".to_string()),
            Some("cargo test".to_string()),
            false
        )]
    );
    let messages: Vec<_> = events
        .iter()
        .map(|e| e.kind.message())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(
        messages.contains(&"Reading the failing test first."),
        "{messages:?}"
    );
    let extensions: Vec<_> = events
        .iter()
        .filter(|e| e.kind.message().starts_with("_kiro.dev/"))
        .map(|e| (e.kind.type_name(), e.kind.message()))
        .collect();
    assert_eq!(
        extensions,
        [
            ("other_message", "_kiro.dev/commands/available"),
            ("other_message", "_kiro.dev/metadata")
        ],
        "Kiro's extension notifications are passed on as other messages, nothing more"
    );
    assert_eq!(
        p.usage(),
        None,
        "Kiro reports no usage: unmeasured, not zero"
    );
}

/// A project whose `bin/kiro-cli` is the fake agent.
fn kiro_project(block: &str) -> (Setup, PathBuf) {
    let setup = Setup::new(
        &format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: kiro\n  command: __BIN__/kiro-cli\n  env: [FAKE_AGENT_*]\n  max_turns: 1\n  read_timeout_ms: 30000\n{block}---\nWork on {{{{ .issue.identifier }}}}.\n"
        ),
        &common::issues(&[("1", "K-1", "To Do")]),
    );
    let bin = setup.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, bin.join("kiro-cli")).unwrap();
    let workflow = setup.path().join("WORKFLOW.md");
    let text = std::fs::read_to_string(&workflow).unwrap();
    std::fs::write(
        &workflow,
        text.replace("__BIN__", &bin.display().to_string()),
    )
    .unwrap();
    (setup, bin)
}

fn first_line(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null)
}

#[test]
fn through_the_daemon_a_kiro_workflow_runs_kiro_cli_acp_with_its_flags_and_environment() {
    let (setup, _) = kiro_project("kiro:\n  model: claude-sonnet-4.6\n  agent: sortie-dev\n");
    let dir = setup.path();
    let scenario = dir.join("scenario.jsonl");
    std::fs::write(
        &scenario,
        [
            json!({"config": {"session_id": "kiro-sess-1"}}),
            json!({"turn": 1, "cat_file": FIXTURE}),
            json!({"turn": 1, "stop_reason": "end_turn"}),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>(),
    )
    .unwrap();
    let (argv_log, env_log, state) = (
        dir.join("argv.jsonl"),
        dir.join("env.jsonl"),
        dir.join("state"),
    );
    std::fs::create_dir_all(&state).unwrap();
    let s = |p: &Path| p.display().to_string();
    let d = setup.start(&[
        ("FAKE_AGENT_SCENARIO", &s(&scenario)),
        ("FAKE_AGENT_STATE_DIR", &s(&state)),
        ("FAKE_AGENT_ARGV_LOG", &s(&argv_log)),
        ("FAKE_AGENT_ENV_LOG", &s(&env_log)),
        ("KIRO_LOG_LEVEL", "debug"),
        ("GEMINI_API_KEY", "not-for-kiro"),
    ]);
    let run = wait_for("the kiro run", WAIT, || {
        d.get_ok("/api/v1/runs")
            .and_then(|b| serde_json::from_str::<Value>(&b).ok())
            .and_then(|v| v["runs"].as_array().and_then(|r| r.first().cloned()))
    });
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["agent_kind"], "kiro", "{run}");
    assert_eq!(run["session_id"], "kiro-sess-1", "{run}");

    let argv: Vec<String> = first_line(&argv_log)["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        argv.get(1..).map(<[String]>::to_vec),
        Some(
            [
                "acp",
                "-a",
                "--model",
                "claude-sonnet-4.6",
                "--agent",
                "sortie-dev"
            ]
            .map(String::from)
            .to_vec()
        ),
        "{argv:?}"
    );
    assert!(argv[0].ends_with("bin/kiro-cli"), "{argv:?}");

    let env = first_line(&env_log);
    assert_eq!(env["KIRO_LOG_LEVEL"], "debug", "Kiro's own variables pass");
    assert!(env["HOME"].is_string(), "HOME (Kiro's stored login) passes");
    assert_eq!(
        env["GEMINI_API_KEY"],
        Value::Null,
        "another agent's key does not"
    );

    let state = d.state();
    assert_eq!(state["config"]["agent"]["kind"], "kiro", "{state}");
    assert_eq!(state["config"]["agent"]["usage_arrival"], "turn_end");
}

/// `sortie validate --format json` in `dir`, whose `bin/kiro-cli` is the fake agent.
fn validate(setup: &Setup) -> Value {
    let path = format!(
        "{}:{}",
        setup.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = common::sortie_command()
        .current_dir(setup.path())
        .env("PATH", path)
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn the_original_kiro_front_matter_validates_and_untrusted_tools_are_refused() {
    // The original project's `kiro` example (model pinned, every tool trusted), its tracker
    // swapped for the file tracker.
    let (setup, _) = kiro_project("kiro:\n  model: claude-sonnet-4.6\n  trust_all_tools: true\n");
    let v = validate(&setup);
    assert_eq!(v["errors"], json!([]), "{v}");
    let warnings = v["warnings"].as_array().cloned().unwrap_or_default();
    assert!(!warnings.iter().any(|w| w["check"] == "unknown_key"), "{v}");

    // This project's example, with `kiro-cli` found on PATH.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kiro/WORKFLOW.md");
    std::fs::copy(example, setup.path().join("WORKFLOW.md")).unwrap();
    let v = validate(&setup);
    assert_eq!(v["errors"], json!([]), "{v}");
    assert_eq!(v["warnings"], json!([]), "{v}");

    let (setup, _) = kiro_project("kiro:\n  trust_tools: [read, grep, glob]\n");
    let v = validate(&setup);
    let errors = v["errors"].to_string();
    assert!(
        errors.contains("kiro.trust_tools") && errors.contains("does not resolve to true"),
        "{v}"
    );
}
