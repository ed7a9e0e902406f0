//! Workspace names are injective: identifiers that sanitize alike (`c/x`, `c_x`) get distinct
//! directories, and two issues with one identifier never share one (the second is held).

mod common;

use std::time::Duration;

use common::Project;
use serde_json::json;

fn hang() -> Vec<serde_json::Value> {
    vec![json!({"init": {}}), json!({"hang": true})]
}

fn issue(id: &str, identifier: &str) -> serde_json::Value {
    json!({"id": id, "identifier": identifier, "title": format!("Issue {identifier}"), "state": "To Do"})
}

fn running_count(s: &serde_json::Value) -> usize {
    s["running"].as_array().map(Vec::len).unwrap_or(0)
}

/// The directory names under the workspace root.
fn workspace_names(p: &Project) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(p.path("ws"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn identifiers_that_sanitize_alike_run_in_different_directories() {
    let p = Project::new();
    p.issues(json!([issue("a", "c/x"), issue("b", "c_x")]));
    p.scenario("default", &hang());
    p.fake_agent_workflow("  max_concurrent_agents: 4", "");
    let d = p.start();

    d.wait_state("both running", Duration::from_secs(30), |s| {
        running_count(s) == 2
    });
    d.wait_until("two workspaces", Duration::from_secs(30), || {
        workspace_names(&p).len() == 2
    });
    let names = workspace_names(&p);
    // The safe identifier keeps its plain name; the sanitized one carries a hash suffix.
    assert_eq!(names[0], "c_x", "{names:?}");
    assert!(
        names[1].starts_with("c_x-") && names[1].len() == "c_x-".len() + 8,
        "{names:?}"
    );
    let (a, b) = (p.path("ws").join(&names[1]), p.path("ws").join(&names[0]));
    // The supervisor logs the prepared workspace after its hooks: wait for the line.
    let prepared = format!(
        "issue_id=a issue_identifier=c/x workspace={}",
        std::fs::canonicalize(&a)
            .map(|c| c.display().to_string())
            .unwrap_or_default()
    );
    d.wait_until(
        &format!("c/x to run in {}", a.display()),
        Duration::from_secs(30),
        || p.log().contains(&prepared),
    );

    // c/x turns terminal: its run is stopped and its workspace removed; c_x's stays.
    p.set_issue_state("a", "Done");
    d.wait_until("c/x's workspace removed", Duration::from_secs(30), || {
        !a.exists()
    });
    assert!(b.is_dir(), "c_x's workspace went with c/x's");
    let s = d.state();
    assert_eq!(running_count(&s), 1, "{s}");
}

#[test]
fn a_second_issue_with_the_same_identifier_is_held_while_the_first_runs() {
    let p = Project::new();
    p.issues(json!([issue("d1", "D-1"), issue("d2", "D-1")]));
    p.scenario("default", &hang());
    p.fake_agent_workflow("  max_concurrent_agents: 4", "");
    let d = p.start();

    let s = d.wait_state("one running, the twin held", Duration::from_secs(30), |s| {
        s["running"].as_array().is_some_and(|r| r.len() == 1)
            && s["held"]
                .as_array()
                .is_some_and(|h| h.iter().any(|r| r["hold"]["reason"] == "identifier_in_use"))
    });
    let runner = s["running"][0]["issue_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let held = s["held"]
        .as_array()
        .and_then(|h| {
            h.iter()
                .find(|r| r["hold"]["reason"] == "identifier_in_use")
        })
        .cloned()
        .unwrap_or_default();
    assert_ne!(held["issue_id"], runner.as_str());
    assert!(
        held["hold"]["reason_text"]
            .as_str()
            .is_some_and(|t| t.contains(&runner)),
        "{held}"
    );
    // Over several ticks (200 ms each), the twin never starts while the first one runs.
    let twin_started = common::holds_within(Duration::from_millis(1500), || {
        d.try_state().is_some_and(|s| running_count(&s) != 1)
    });
    assert!(!twin_started, "{}", d.state());
}
