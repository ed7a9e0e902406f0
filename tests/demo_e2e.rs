//! The credential-free demo (`sortie demo`) end to end: dispatches the backlog with the mock
//! agent, runs turns, hands issues off in the file, retries the scripted failure until it
//! recovers, holds the blocked issue until a person releases it; a second `sortie demo` in the
//! directory of a running one changes nothing. The demo runs with `--speed` (its documented
//! option) so its two minutes take a few seconds here.

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
        cmd.args(["demo", "--speed", "10", "--dir"])
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

/// The demo's runs of `ident`, oldest first.
fn runs_of(d: &Daemon, ident: &str) -> Vec<serde_json::Value> {
    let body = d
        .get(&format!("/api/v1/runs?issue={ident}&limit=50"))
        .json();
    let mut runs = body["runs"].as_array().cloned().unwrap_or_default();
    runs.reverse();
    runs
}

/// Every issue an agent works on is in Review, DEMO-4 still waits, nothing runs or waits.
fn settled(d: &Daemon, dir: &std::path::Path) -> bool {
    ["DEMO-1", "DEMO-2", "DEMO-3", "DEMO-5", "DEMO-6"]
        .iter()
        .all(|i| file_state(dir, i) == "Review")
        && d.try_state().is_some_and(|s| {
            s["running"].as_array().is_some_and(|r| r.is_empty())
                && s["retrying"].as_array().is_some_and(|r| r.is_empty())
        })
}

/// Plays the person of the demo's script: sets `ident`'s state in the demo's issues.json.
fn set_state(dir: &std::path::Path, ident: &str, state: &str) {
    let path = dir.join("issues.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for i in v.as_array_mut().unwrap() {
        if i["identifier"] == ident {
            i["state"] = state.into();
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn the_demo_runs_its_course_failure_recovery_and_a_person_releasing_the_blocked_issue() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = start_demo(&dir, &["--speed", "20"]);
    // The speed divides the workflow's waits: 5000 ms polling reads 250 ms.
    assert_eq!(
        d.state()["config"]["polling"]["interval_ms"],
        250,
        "{}",
        d.state()["config"]
    );

    // Sessions unfold over several turns with the scripted messages and a tool call.
    let run = wait_for("DEMO-3's run recorded", Duration::from_secs(60), || {
        runs_of(&d, "DEMO-3").into_iter().next()
    });
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["turns_completed"], 3, "{run}");
    let events = d
        .get(&format!(
            "/api/v1/runs/{}/events",
            run["dispatch_id"].as_str().unwrap()
        ))
        .json()
        .to_string();
    for said in [
        "Reading the issue and the code it names",
        "Running the test suite",
        "Bash",
    ] {
        assert!(events.contains(said), "{said}: {events}");
    }

    // The failing issue fails once, with its own words, then recovers on the retry.
    wait_for("DEMO-5 recovered", Duration::from_secs(90), || {
        (file_state(&dir, "DEMO-5") == "Review").then_some(())
    });
    let runs = runs_of(&d, "DEMO-5");
    let statuses: Vec<&str> = runs.iter().filter_map(|r| r["status"].as_str()).collect();
    assert_eq!(statuses, ["failed", "succeeded"], "{runs:?}");
    assert!(
        runs[0]["error"]
            .to_string()
            .contains("test_cleanup_races_hook"),
        "{}",
        runs[0]
    );

    // Everything else is handed off; DEMO-4 waits for a person, undispatched.
    d.wait_until("the backlog settled", Duration::from_secs(90), || {
        settled(&d, &dir)
    });
    assert_eq!(file_state(&dir, "DEMO-4"), "To Do");
    assert!(runs_of(&d, "DEMO-4").is_empty());
    let held = d.state()["held"].to_string();
    assert!(held.contains("DEMO-4") && held.contains("DEMO-7"), "{held}");

    // The person does what DEMO-4's text says: DEMO-7 to Done releases it.
    let demo4 =
        serde_json::from_str::<serde_json::Value>(include_str!("../examples/demo/issues.json"))
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["identifier"] == "DEMO-4")
            .unwrap()["description"]
            .to_string();
    assert!(
        demo4.contains("DEMO-7") && demo4.contains("Done"),
        "{demo4}"
    );
    set_state(&dir, "DEMO-7", "Done");
    wait_for("DEMO-4 handed off", Duration::from_secs(90), || {
        (file_state(&dir, "DEMO-4") == "Review").then_some(())
    });

    // Every run shows what it cost.
    let all = d.get("/api/v1/runs?limit=50").json();
    let all = all["runs"].as_array().unwrap();
    assert_eq!(all.len(), 7, "{all:?}");
    for r in all {
        assert_eq!(r["cost_status"], "estimated", "{r}");
        assert!(r["estimated_cost_usd"].as_f64().unwrap() > 0.0, "{r}");
    }
    drop(d);
}

/// The length of the embedded demo at speed 1, from its script: two slots, three turns per
/// session, DEMO-5's first session failing after one turn and waiting its 10 s backoff, DEMO-4
/// after the release. The default a user sees stays near two minutes.
#[test]
fn the_embedded_demo_is_scripted_for_about_two_minutes() {
    let wf = include_str!("../examples/demo/WORKFLOW.md");
    let num = |key: &str| -> f64 {
        wf.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("{key} missing"))
            .trim()
            .parse()
            .unwrap()
    };
    let tools = wf.lines().filter(|l| l.contains("tool_name:")).count() as f64;
    let turn_s = ((num("events_per_turn") + tools) * num("event_interval_ms")
        + num("turn_delay_ms"))
        / 1000.0;
    let session_s = num("max_turns") * turn_s;
    let slots = num("max_concurrent_agents");
    // Five full sessions, one failed turn, one backoff, and DEMO-4 alone after the release.
    let total_s = (5.0 * session_s + turn_s) / slots + 10.0 + session_s;
    assert!((90.0..=150.0).contains(&total_s), "{total_s} s");
}

#[test]
fn a_second_demo_in_the_directory_of_a_running_demo_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let first = start_demo(&dir, &["--speed", "20"]);
    // Worked through, so a second plain `sortie demo` would start afresh if it could.
    first.wait_until("the backlog settled", Duration::from_secs(120), || {
        settled(&first, &dir)
    });
    let runs_before = first.get("/api/v1/runs?limit=50").json()["runs"]
        .as_array()
        .unwrap()
        .len();
    let inode = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map(|m| m.ino()).ok()
    };
    let db = dir.join(".sortie.db");
    let db_inode = inode(&db);
    let issues = std::fs::read(dir.join("issues.json")).unwrap();
    let workflow = std::fs::read(dir.join("WORKFLOW.md")).unwrap();
    let listing = |p: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(p)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let workspaces = listing(&dir.join("workspaces"));
    assert_eq!(workspaces.len(), 5, "{workspaces:?}");

    for extra in [&[][..], &["--reset"][..]] {
        let out = common::sortie_command()
            .args(["demo", "--port", "0", "--dir"])
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(inode(&db), db_inode, "the database file was replaced");
        assert!(dir.join(".sortie.db-wal").exists(), "the WAL was removed");
        assert_eq!(listing(&dir.join("workspaces")), workspaces);
        for w in &workspaces {
            assert!(
                dir.join("workspaces").join(w).join("NOTES.md").exists(),
                "{w}"
            );
        }
        assert_eq!(std::fs::read(dir.join("issues.json")).unwrap(), issues);
        assert_eq!(std::fs::read(dir.join("WORKFLOW.md")).unwrap(), workflow);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "in use by another sortie (pid {})",
                first.child.id()
            )),
            "{extra:?}: {stderr}"
        );
        assert!(stderr.contains("nothing was changed"), "{stderr}");
        assert!(!stderr.contains("afresh"), "{stderr}");
    }
    // The first demo never noticed: its history is whole and it still answers.
    let runs_after = first.get("/api/v1/runs?limit=50").json()["runs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(runs_after, runs_before);
    drop(first);
}
