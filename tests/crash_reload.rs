//! Crash safety, reload: tracker and agent settings reach the adapters, and a running issue's
//! workspace is cleaned up under the root it was created in.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{FAKE_AGENT, Project, wait_for};
use serde_json::json;

fn edit_workflow(p: &Project, from: &str, to: &str) {
    let text = std::fs::read_to_string(p.workflow()).unwrap_or_default();
    assert!(text.contains(from), "no {from:?} in the workflow:\n{text}");
    p.write("WORKFLOW.md", &text.replace(from, to));
}

#[test]
fn a_reloaded_active_state_reaches_the_tracker_and_is_dispatched() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "S-1", "title": "Ready one", "state": "Ready", "priority": 1}
    ]));
    p.fake_agent_workflow("", "");
    edit_workflow(
        &p,
        "active_states: [To Do, In Progress]",
        "active_states: [To Do]",
    );
    let d = p.start();
    d.wait_state("a completed poll", Duration::from_secs(20), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert!(p.run_statuses("1").is_empty());

    edit_workflow(
        &p,
        "active_states: [To Do]",
        "active_states: [To Do, Ready]",
    );
    d.wait_state("the reloaded states", Duration::from_secs(20), |s| {
        s["config"]["tracker"]["active_states"] == json!(["To Do", "Ready"])
    });
    wait_for("a run of the Ready issue", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
}

#[test]
fn a_terminal_issue_is_cleaned_up_under_the_root_it_was_created_in() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "W-1", "title": "Long", "state": "To Do", "priority": 1}
    ]));
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("the session", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 1
    });
    // The worker makes the workspace and starts the agent after the session is listed.
    wait_for(
        "the agent started in its workspace",
        Duration::from_secs(30),
        || (p.workspace("W-1").is_dir() && p.path("argv.log").exists()).then_some(()),
    );

    let old_root = p.path("ws").display().to_string();
    let new_root = p.path("ws2").display().to_string();
    edit_workflow(
        &p,
        &format!("root: {old_root}\n"),
        &format!("root: {new_root}\n"),
    );
    wait_for("the reload", Duration::from_secs(20), || {
        p.log().contains("workflow reloaded").then_some(())
    });

    p.set_issue_state("1", "Done");
    wait_for("the workspace removed", Duration::from_secs(30), || {
        (!p.workspace("W-1").exists()).then_some(())
    });
    let removed = std::fs::read_to_string(p.path("markers/removed.log")).unwrap_or_default();
    assert!(removed.contains("W-1"), "before_remove ran: {removed:?}");
    assert!(!p.log().contains("workspace cleanup failed"));
    d.wait_state("no session", Duration::from_secs(10), |s| {
        s["counts"]["running"] == 0
    });
}

/// A wrapper that logs `name` to `markers/cmd.log`, then runs the fake agent.
fn wrapper(p: &Project, name: &str) -> String {
    let path = p.path(&format!("{name}.sh"));
    // The path is written out: an agent does not get the test's `SORTIE_TEST_MARKERS`.
    let script = format!(
        "#!/bin/sh\necho {name} >> '{}'\nexec {FAKE_AGENT} \"$@\"\n",
        p.path("markers/cmd.log").display()
    );
    std::fs::write(&path, script).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
    path.display().to_string()
}

fn commands_run(p: &Project) -> Vec<String> {
    std::fs::read_to_string(p.path("markers/cmd.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_reloaded_agent_command_is_used_by_the_next_dispatch_and_served() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "C-1", "title": "First", "state": "To Do", "priority": 1}
    ]));
    let a = wrapper(&p, "first");
    let b = wrapper(&p, "second");
    p.fake_agent_workflow("", "");
    edit_workflow(
        &p,
        &format!("command: {FAKE_AGENT}\n"),
        &format!("command: {a}\n"),
    );
    let d = p.start();
    wait_for("the first run", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    assert_eq!(commands_run(&p), vec!["first"]);
    assert_eq!(d.state()["config"]["agent"]["command"], a.as_str());

    edit_workflow(&p, &format!("command: {a}\n"), &format!("command: {b}\n"));
    d.wait_state("the reloaded command", Duration::from_secs(20), |s| {
        s["config"]["agent"]["command"] == b.as_str()
    });
    let mut v = p.read_issues();
    if let Some(list) = v.as_array_mut() {
        list.push(json!({"id": "2", "identifier": "C-2", "title": "Second", "state": "To Do", "priority": 1}));
    }
    p.issues(v);
    wait_for("the second run", Duration::from_secs(30), || {
        (!p.run_statuses("2").is_empty()).then_some(())
    });
    assert_eq!(commands_run(&p), vec!["first", "second"]);
}
