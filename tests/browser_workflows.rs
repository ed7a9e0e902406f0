//! The dashboard with several workflows under one daemon, in headless Chromium through the real
//! binary (tests/browser/workflows.py, DevTools over a pipe, standard library only):
//!
//! - `sortie --workflows DIR` with two file-tracker workflows (mock agents whose sessions keep
//!   running) and one that does not load: the header's switcher lists the three with their
//!   status; the "all" screen lists every workflow's row (the broken one with its problem) and
//!   every running session marked with its workflow; choosing a workflow shows its issues and
//!   not the other's, every API call and the event stream name it, and the choice survives a
//!   move to another screen; a click on a workflow in the "all" screen switches to it.
//! - a daemon serving one workflow shows no switcher and names no workflow in any call.
//!
//! Screenshots go to `target/tmp/browser-artifacts/workflows/` (`CARGO_TARGET_TMPDIR`). Skips
//! with a printed reason when Chromium or python3 is missing; under CI (`CI` set) a missing
//! tool fails instead.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Daemon, spawn};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium and python3, or `None` after saying why the test skips.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let found = which("chromium")
        .or_else(|| which("chromium-browser"))
        .zip(which("python3"));
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the workflows browser test needs chromium and python3 under CI"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIP workflows browser test: chromium or python3 is missing"
        );
    }
    found
}

/// A file-tracker workflow whose mock sessions run until the daemon stops them.
fn workflow(issues: &str, workspaces: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Review\nfile:\n  path: ./{issues}\npolling:\n  interval_ms: 500\nworkspace:\n  root: ./{workspaces}\nagent:\n  kind: mock\n  max_concurrent_agents: 2\n  max_turns: 1\nmock:\n  model_name: mock-model\n  turn_delay_ms: 600000\n---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

fn issues(prefix: &str, titles: &[&str]) -> String {
    let items: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(i, title)| {
            serde_json::json!({
                "id": format!("{prefix}{}", i + 1), "identifier": format!("{prefix}-{}", i + 1),
                "title": title, "state": "To Do", "priority": 1,
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            })
        })
        .collect();
    serde_json::to_string_pretty(&items).unwrap_or_default()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
}

fn start(dir: &Path, args: &[&str]) -> Daemon {
    let mut d = spawn(&dir.join("sortie.log"), None, |port| {
        let mut cmd = common::sortie_command();
        cmd.arg("--port")
            .arg(port.to_string())
            .args(args)
            .current_dir(dir)
            .env_remove("RUST_LOG");
        cmd
    });
    // SIGTERM when the test ends, so the daemon stops its sessions first.
    d.graceful_drop = true;
    d
}

/// The identifiers running in one workflow's state document (`None`: no such document).
fn running(d: &Daemon, query: &str) -> Option<Vec<String>> {
    let body = d.get_ok(&format!("/api/v1/state{query}"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    let mut ids: Vec<String> = v["running"]
        .as_array()?
        .iter()
        .filter_map(|r| r["issue_identifier"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    Some(ids)
}

/// Runs the driver's `scene`; panics with its output and the daemon log's tail.
fn drive(scene: &str, d: &Daemon) {
    let Some((chromium, python)) = tools() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts/workflows");
    let out = Command::new(python)
        .arg(root.join("tests/browser/workflows.py"))
        .args(["--scene", scene])
        .args(["--base", &format!("http://127.0.0.1:{}", d.port)])
        .arg("--out")
        .arg(&out_dir)
        .arg("--chromium")
        .arg(chromium)
        .output()
        .unwrap_or_else(|e| panic!("run the browser driver: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    if !out.status.success() {
        let log = d.log_text();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "browser scene {scene} failed:\n{stdout}\n{}\n--- sortie.log (last lines) ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

#[test]
fn the_switcher_the_all_screen_and_switching_between_workflows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = dir.path();
    write(p, "alpha.md", &workflow("alpha.json", "ws-alpha"));
    write(p, "beta.md", &workflow("beta.json", "ws-beta"));
    write(
        p,
        "broken.md",
        "---\ntracker:\n  kind: nosuch\n  active_states: [To Do]\n  terminal_states: [Done]\n---\nx\n",
    );
    write(
        p,
        "alpha.json",
        &issues("ALPHA", &["Alpha first", "Alpha second"]),
    );
    write(p, "beta.json", &issues("BETA", &["Beta only"]));
    let d = start(p, &["--workflows", &p.display().to_string()]);
    d.wait_until("both workflows' sessions running", WAIT, || {
        running(&d, "?workflow=alpha").is_some_and(|r| r == ["ALPHA-1", "ALPHA-2"])
            && running(&d, "?workflow=beta").is_some_and(|r| r == ["BETA-1"])
    });
    drive("several", &d);
}

#[test]
fn one_workflow_shows_no_switcher() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = dir.path();
    write(p, "WORKFLOW.md", &workflow("alpha.json", "ws-alpha"));
    write(p, "alpha.json", &issues("ALPHA", &["Alpha first"]));
    let d = start(p, &["WORKFLOW.md"]);
    d.wait_until("the session running", WAIT, || {
        running(&d, "").is_some_and(|r| r == ["ALPHA-1"])
    });
    let listed: Value = d.get("/api/v1/workflows").json();
    assert_eq!(
        listed["workflows"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    drive("single", &d);
}
