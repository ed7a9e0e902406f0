//! The dashboard's pages against the API they read, in headless Chromium through the real
//! binary (tests/browser/issue_pages.py, DevTools over a pipe, standard library only):
//!
//! - every issue the Overview links opens a page without an error, for an issue in each list
//!   of the state document: running (in the state sortie moved it to, with its live cost),
//!   waiting for a retry (its sentence and due time agree; "retry N", "next attempt N+1"),
//!   budget-held, parked, held by a blocker (the hold and what releases it), finished (its
//!   runs' costs with their cost_status words);
//! - issues held because the agent's CLI is not logged in, one that ran and one that never
//!   did, answer with the hold, what releases it and the critical attention item;
//! - a backlog that finishes ends the Overview with a summary of what was done and what it cost,
//!   the charts draw the stats buckets, and the Prices screen says the embedded table is in use
//!   (nothing downloaded).
//!
//! Screenshots at phone and desktop width, light and dark, go to `test-artifacts/browser/`.
//! Skips with a printed reason when Chromium or python3 is missing; under CI (`CI` set) a
//! missing tool fails instead.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Daemon, Project, set_server_port, spawn};
use serde_json::{Value, json};

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
            "the issue pages browser test needs chromium and python3 under CI"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIP issue pages browser test: chromium or python3 is missing"
        );
    }
    found
}

fn artifacts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test-artifacts/browser")
}

/// Runs the driver's `scene` against the daemon; panics with its output and the log's tail.
fn drive(scene: &str, port: u16, p: &Project) {
    let Some((chromium, python)) = tools() else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/issue_pages.py");
    let out = Command::new(python)
        .arg(script)
        .args(["--scene", scene])
        .args(["--base", &format!("http://127.0.0.1:{port}")])
        .arg("--out")
        .arg(artifacts())
        .arg("--chromium")
        .arg(chromium)
        .output()
        .unwrap_or_else(|e| panic!("run the browser driver: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    if !out.status.success() {
        let log = p.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "browser scene {scene} failed:\n{stdout}\n{}\n--- sortie.log (last lines) ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

fn scenario(p: &Project, identifier: &str, lines: &[Value]) {
    p.scenario(identifier, lines);
}

/// Starts the daemon as `Project::start` does, with the shared price download on (its
/// address a closed port on 127.0.0.1), so the Prices screen shows whether it was needed.
fn start_with_download_on(p: &Project) -> Daemon {
    std::fs::create_dir_all(p.path("markers")).unwrap_or_else(|e| panic!("{e}"));
    spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        set_server_port(&p.workflow(), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.path(""))
            .arg(p.workflow())
            .env("FAKE_AGENT_SCENARIO", ".scenario")
            .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
            .env("SORTIE_TEST_MARKERS", p.path("markers"))
            .env("SORTIE_PRICE_TABLE_FETCH", "on")
            .env_remove("RUST_LOG");
        cmd
    })
}

fn works(ms: u64) -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "Reading the code.", "input_tokens": 1800, "output_tokens": 220, "model": "fake-model-1"}}),
        json!({"sleep_ms": ms}),
        json!({"assistant": {"text": "Change made; tests pass.", "input_tokens": 900, "output_tokens": 140}}),
        json!({"result": {"subtype": "success", "text": "done", "input_tokens": 10, "output_tokens": 5}}),
    ]
}

const TRACKER: &str = "  in_progress_state: In Progress\n  handoff_state: Review";
const RATES: &str = "token_rates:\n  claude-code: {input_per_mtok: 3, output_per_mtok: 15, cache_read_per_mtok: 0.3}\n  mock: {input_per_mtok: 1, output_per_mtok: 2}\n";

fn issue(id: &str, ident: &str, pri: i64, extra: Value) -> Value {
    let mut v = json!({"id": id, "identifier": ident, "title": format!("Issue {ident}"),
        "state": "To Do", "priority": pri, "url": format!("https://tracker.example/{ident}")});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

#[test]
fn every_issue_the_overview_links_opens_a_page_that_agrees_with_the_api() {
    if tools().is_none() {
        return;
    }
    let p = Project::new();
    p.issues(json!([
        issue("1", "L-1", 1, json!({})),
        issue("2", "L-2", 2, json!({})),
        issue("3", "L-3", 2, json!({})),
        issue(
            "4",
            "L-4",
            2,
            json!({"blocked_by": [{"id": "9", "identifier": "L-9", "state": "Backlog"}]})
        ),
        issue("6", "L-6", 3, json!({})),
        issue("9", "L-9", 4, json!({"state": "Backlog"})),
    ]));
    scenario(
        &p,
        "L-1",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "Mapping the modules.", "input_tokens": 2400, "output_tokens": 310, "model": "fake-model-1"}}),
            json!({"hang": true}),
        ],
    );
    scenario(
        &p,
        "L-2",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "Reproducing.", "input_tokens": 700, "output_tokens": 90, "model": "fake-model-1"}}),
            json!({"stderr": "fatal: the reproduction script crashed"}),
            json!({"exit": 1}),
        ],
    );
    scenario(&p, "L-3", &works(10));
    scenario(
        &p,
        "L-6",
        &[
            json!({"init": {}}),
            json!({"write_file": {"path": ".sortie/status", "content": "blocked\nNeeds the API credentials.\n"}}),
            json!({"assistant": {"text": "Stopping: blocked.", "input_tokens": 300, "output_tokens": 40, "model": "fake-model-1"}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow_full(
        TRACKER,
        "  max_sessions: 3\n  max_retry_backoff_ms: 8000\n  max_concurrent_agents: 8",
        RATES,
    );
    let mut d = p.start();
    d.graceful_drop = true;
    drive("lists", d.port, &p);
}

#[test]
fn issues_held_for_a_cli_that_is_not_logged_in_say_so_with_the_critical_item() {
    if tools().is_none() {
        return;
    }
    let p = Project::new();
    p.issues(json!([
        issue("1", "A-1", 1, json!({})),
        issue("2", "A-2", 2, json!({})),
    ]));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude/real_not_logged_in.jsonl");
    scenario(
        &p,
        "A-1",
        &[json!({"cat_file": fixture}), json!({"exit": 1})],
    );
    // A-2 starts only after A-1 failed to log in, and so is held without ever running.
    p.fake_agent_workflow_full(TRACKER, "  max_concurrent_agents: 1", RATES);
    let d = p.start();
    drive("login", d.port, &p);
}

#[test]
fn a_finished_backlog_ends_the_overview_with_what_was_done_and_what_it_cost() {
    if tools().is_none() {
        return;
    }
    let p = Project::new();
    p.issues(json!([
        issue("1", "I-1", 1, json!({})),
        issue("2", "I-2", 2, json!({})),
        issue("3", "I-3", 3, json!({})),
        issue(
            "4",
            "I-4",
            3,
            json!({"blocked_by": [{"id": "9", "identifier": "I-9", "state": "Backlog"}]})
        ),
        issue("9", "I-9", 4, json!({"state": "Backlog"})),
    ]));
    scenario(&p, "default", &works(300));
    // The kind entry prices every model, so the shared table is never downloaded (a closed
    // port would show as a failure if it were).
    p.fake_agent_workflow_full(
        TRACKER,
        "",
        &format!("{RATES}price_table:\n  fetch_url: http://127.0.0.1:9/prices.json\n"),
    );
    let d = start_with_download_on(&p);
    drive("idle", d.port, &p);
    assert!(
        !p.log().contains("price table download failed"),
        "a download was tried"
    );
}
