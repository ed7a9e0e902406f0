//! Browser test of the dashboard: starts the real daemon on the demo backlog with the scripted
//! fake agent, then drives headless Chromium (tests/browser/dashboard.py, DevTools protocol over
//! a pipe, no third-party packages): a running session appears, "Run now" on a retry and
//! "Acknowledge" on an attention item take effect (checked through the JSON API), and every
//! screen is captured to `target/tmp/browser-artifacts/` (`CARGO_TARGET_TMPDIR`).
//!
//! Skips with a printed reason when Chromium or python3 is missing; under CI (`CI` set) a
//! missing tool fails instead.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{FAKE_AGENT, free_port, request, spawn};

/// Status and body of a GET, `None` while nothing listens.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    request(port, "GET", path, &[]).map(|r| (r.status, r.body))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn skip_or_fail(reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("browser test cannot run under CI: {reason}");
    }
    say(&format!("SKIP browser test: {reason}"));
}

/// Printed past the test harness's output capture, so a skip is visible in a passing run.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn write(dir: &Path, rel: &str, text: &str) {
    std::fs::write(dir.join(rel), text).expect("write test file");
}

/// Demo workflow with the fake agent: DEMO-3 works for a long time (a running session with
/// live events), DEMO-2 fails every session (a retry to run now, then after its third session a
/// session-budget hold to acknowledge; the second retry waits 20 s, so a slow browser start
/// still finds a retry with time left on it),
/// everything else finishes a turn and is handed off. DEMO-4 stays held by its blocker.
fn prepare(dir: &Path, port: u16) {
    let scenarios = dir.join("scenarios");
    std::fs::create_dir_all(&scenarios).expect("scenarios dir");
    write(
        &scenarios,
        "default.jsonl",
        concat!(
            "{\"init\": {}}\n",
            "{\"assistant\": {\"text\": \"Reading the issue and the code it names.\", \"input_tokens\": 1800, \"output_tokens\": 220, \"model\": \"fake-model-1\"}}\n",
            "{\"sleep_ms\": 1500}\n",
            "{\"assistant\": {\"text\": \"Change made; tests pass.\", \"input_tokens\": 900, \"output_tokens\": 140}}\n",
            "{\"result\": {\"subtype\": \"success\", \"text\": \"done\", \"input_tokens\": 10, \"output_tokens\": 5}}\n",
        ),
    );
    write(
        &scenarios,
        "DEMO-3.jsonl",
        concat!(
            "{\"init\": {}}\n",
            "{\"assistant\": {\"text\": \"Mapping the module boundaries before the refactor.\", \"input_tokens\": 2400, \"output_tokens\": 310, \"model\": \"fake-model-1\"}}\n",
            "{\"sleep_ms\": 800}\n",
            "{\"assistant\": {\"text\": \"Running the test suite.\", \"input_tokens\": 600, \"output_tokens\": 80, \"tool\": {\"name\": \"Bash\", \"input\": {\"command\": \"cargo test\"}}}}\n",
            "{\"hang\": true}\n",
        ),
    );
    write(
        &scenarios,
        "DEMO-2.jsonl",
        concat!(
            "{\"init\": {}}\n",
            "{\"assistant\": {\"text\": \"Trying to reproduce the off-by-one.\", \"input_tokens\": 700, \"output_tokens\": 90}}\n",
            "{\"stderr\": \"fatal: the reproduction script crashed\"}\n",
            "{\"exit\": 1}\n",
        ),
    );
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  in_progress_state: In Progress
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 1000
workspace:
  root: ./workspaces
hooks:
  after_create: |
    cp "{scenarios}/$SORTIE_ISSUE_IDENTIFIER.jsonl" .scenario 2>/dev/null || cp "{scenarios}/default.jsonl" .scenario
agent:
  kind: claude-code
  command: {agent}
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_sessions: 3
  # More slots than dispatchable demo issues, so "Run now" always finds a free slot (with
  # every slot taken sortie puts the retry back unchanged, which the test cannot tell
  # from a click that did nothing).
  max_concurrent_agents: 8
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}: {{{{ .issue.title }}}}
"#,
        scenarios = scenarios.display(),
        agent = FAKE_AGENT,
    );
    write(dir, "WORKFLOW.md", &wf);
}

#[test]
fn dashboard_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    prepare(dir.path(), free_port());
    // The --port flag wins over the workflow's port.
    let mut daemon = spawn(&dir.path().join("sortie.log"), None, |port| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(dir.path())
            .args(["demo", "--dir"])
            .arg(dir.path())
            .args(["--port", &port.to_string()])
            .env("FAKE_AGENT_SCENARIO", ".scenario")
            .env_remove("RUST_LOG");
        cmd
    });
    // SIGTERM first when the test ends, so the daemon stops its agents (a SIGKILL would orphan
    // them), then SIGKILL if it has not exited in time.
    daemon.graceful_drop = true;
    let port = daemon.port;
    let deadline = Instant::now() + Duration::from_secs(30);
    let ui = loop {
        if let Some(r) = get(port, "/ui/") {
            break r;
        }
        assert!(Instant::now() < deadline, "the daemon never answered HTTP");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ui.0, 200, "GET /ui/: {}", ui.1);
    assert_eq!(ui.0, 200, "GET /ui/: {}", ui.1);
    let Some(chromium) = which("chromium").or_else(|| which("chromium-browser")) else {
        return skip_or_fail("chromium is not installed (apt-get install chromium)");
    };
    let Some(python) = which("python3") else {
        return skip_or_fail("python3 is not installed");
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.py");
    let result = Command::new(python)
        .arg(script)
        .args(["--base", &format!("http://127.0.0.1:{port}")])
        .arg("--out")
        .arg(&out)
        .arg("--chromium")
        .arg(chromium)
        .output()
        .expect("run the browser driver");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    println!("{stdout}");
    if !result.status.success() {
        let log = std::fs::read_to_string(dir.path().join("sortie.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "browser test failed:\n{stdout}\n{stderr}\n--- sortie.log (last lines) ---\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    for shot in [
        "overview.png",
        "issue.png",
        "runs.png",
        "prices.png",
        "health.png",
    ] {
        let len = std::fs::metadata(out.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "screenshot {shot} missing or empty");
    }
}
