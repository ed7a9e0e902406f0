//! The credential-free demo (`sortie demo`) end to end: dispatches the backlog with the mock
//! agent, runs turns, hands issues off in the file, retries the scripted failure, respects the
//! blocked issue.

mod common;

use std::time::Duration;

use common::{Daemon, spawn, wait_for};

fn file_state(dir: &std::path::Path, ident: &str) -> String {
    let text = std::fs::read_to_string(dir.join("issues.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v.as_array()
        .and_then(|a| a.iter().find(|i| i["identifier"] == ident))
        .and_then(|i| i["state"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn the_demo_hands_off_retries_and_respects_the_blocked_issue() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = spawn(&tmp.path().join("sortie.log"), None, |port| {
        let mut cmd = common::sortie_command();
        cmd.args(["demo", "--dir"])
            .arg(&dir)
            .args(["--port", &port.to_string()]);
        cmd
    });

    // The scripted failure of DEMO-5's first session is retried with backoff.
    let s = wait_for("DEMO-5 in the retry queue", Duration::from_secs(60), || {
        d.try_state().filter(|s| {
            s["retrying"]
                .as_array()
                .is_some_and(|r| r.iter().any(|e| e["issue_identifier"] == "DEMO-5"))
        })
    });
    let retry = s["retrying"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["issue_identifier"] == "DEMO-5")
        .unwrap()
        .clone();
    assert_eq!(retry["attempt"], 1, "{retry}");

    // Issues are handed off in the file (Review), turns ran in the workspaces.
    for ident in ["DEMO-3", "DEMO-2", "DEMO-1"] {
        wait_for(
            &format!("{ident} handed off"),
            Duration::from_secs(60),
            || (file_state(&dir, ident) == "Review").then_some(()),
        );
        assert!(dir.join("workspaces").join(ident).join("NOTES.md").exists());
    }
    // The demo's illustrative token_rates price every run: its frozen cost is its tokens at
    // $3 / $15 / $0.30 per million (input without cache reads, output, cache reads).
    let run = wait_for("DEMO-1's run recorded", Duration::from_secs(30), || {
        let body = d.get_ok("/api/v1/runs?issue=DEMO-1")?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["runs"].as_array()?.first().cloned()
    });
    assert_eq!(run["cost_status"], "estimated", "{run}");
    let t = &run["tokens"];
    let n = |k: &str| t[k].as_f64().unwrap();
    let expected = ((n("input_tokens") - n("cache_read_tokens")) * 3.0
        + n("cache_read_tokens") * 0.3
        + n("output_tokens") * 15.0)
        / 1e6;
    let cost = run["estimated_cost_usd"].as_f64().unwrap();
    assert!(
        expected > 0.0 && (cost - expected).abs() < 1e-9,
        "{cost} vs {expected}"
    );
    // DEMO-4 stays blocked by DEMO-7 and is never dispatched.
    assert_eq!(file_state(&dir, "DEMO-4"), "To Do");
    assert!(!dir.join("workspaces/DEMO-4").exists());
    drop(d);
}

/// Starts `sortie demo --dir <dir> --port <port>` plus `extra`, logging to `<dir>.log` (a
/// fresh log each time); killed when dropped.
fn start_demo(dir: &std::path::Path, extra: &[&str]) -> Daemon {
    let log = dir.with_extension("log");
    std::fs::File::create(&log).unwrap();
    spawn(&log, None, |port| {
        let mut cmd = common::sortie_command();
        cmd.args(["demo", "--dir"])
            .arg(dir)
            .args(["--port", &port.to_string()])
            .args(extra);
        cmd
    })
}

/// Writes a demo directory whose backlog was worked through: every issue a pass would dispatch
/// is in Review, a database that is not SQLite (so a run that kept it would fail to open it)
/// and a leftover workspace.
fn settled_demo(dir: &std::path::Path) {
    std::fs::create_dir_all(dir.join("workspaces/DEMO-1")).unwrap();
    std::fs::write(dir.join("workspaces/DEMO-1/left-over"), "x").unwrap();
    std::fs::write(dir.join(".sortie.db"), "not a database").unwrap();
    let embedded: serde_json::Value =
        serde_json::from_str(include_str!("../examples/demo/issues.json")).unwrap();
    let worked: Vec<serde_json::Value> = embedded
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let mut i = i.clone();
            if i["state"] == "To Do" && i.get("blocked_by").is_none() {
                i["state"] = "Review".into();
            }
            i
        })
        .collect();
    std::fs::write(
        dir.join("issues.json"),
        serde_json::to_string(&worked).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("WORKFLOW.md"),
        include_str!("../examples/demo/WORKFLOW.md"),
    )
    .unwrap();
}

#[test]
fn a_worked_through_demo_starts_afresh_on_its_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    settled_demo(&dir);
    let d = start_demo(&dir, &[]);
    wait_for("a fresh dispatch", Duration::from_secs(60), || {
        d.try_state()
            .filter(|s| s["running"].as_array().is_some_and(|r| !r.is_empty()))
    });
    assert!(!dir.join("workspaces/DEMO-1/left-over").exists());
    drop(d);
    let log = std::fs::read_to_string(dir.with_extension("log")).unwrap();
    assert!(log.contains("starting the demo afresh"), "{log}");
}

#[test]
fn reset_restores_the_embedded_workflow_and_an_unfinished_demo_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    std::fs::create_dir_all(&dir).unwrap();
    // An unfinished demo (DEMO-1 still to do) with an edited workflow is resumed as it is.
    let edited =
        include_str!("../examples/demo/WORKFLOW.md").replace("max_turns: 3", "max_turns: 2");
    std::fs::write(dir.join("WORKFLOW.md"), &edited).unwrap();
    let d = start_demo(&dir, &[]);
    wait_for("the demo serving", Duration::from_secs(60), || {
        d.try_state()
    });
    drop(d);
    assert_eq!(
        std::fs::read_to_string(dir.join("WORKFLOW.md")).unwrap(),
        edited
    );
    let log = std::fs::read_to_string(dir.with_extension("log")).unwrap();
    assert!(!log.contains("starting the demo afresh"), "{log}");

    // --reset restores the embedded workflow and backlog even though work is left.
    let d = start_demo(&dir, &["--reset"]);
    wait_for("the reset demo serving", Duration::from_secs(60), || {
        d.try_state()
    });
    drop(d);
    assert_eq!(
        std::fs::read_to_string(dir.join("WORKFLOW.md")).unwrap(),
        include_str!("../examples/demo/WORKFLOW.md")
    );
}
