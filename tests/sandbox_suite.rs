//! Key fake-agent daemon scenarios with every session under `worker.sandbox: bubblewrap`:
//! the harness (`tests/common/sandbox_mode.rs`) turns its sandbox mode on for every daemon
//! this binary starts, binding what the test hands the agent outside its workspace.
//! `scripts/test-sandboxed.sh` runs the whole fake-agent daemon suite the same way. The first
//! test shows the mode is on (the agent cannot read the database, yet writes the argv log the
//! harness hands it); the others are the suite's backbone: a multi-turn handoff, a stall
//! cancelled and retried, and the codex kind's app-server sessions resuming their thread.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

#[test]
fn the_harness_runs_this_binarys_agents_sandboxed() {
    assert!(
        std::path::Path::new("/usr/bin/bwrap").exists(),
        "this suite needs bwrap: apt-get install -y bubblewrap"
    );
    assert!(common::sandbox_mode::enabled());
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "B-1", "title": "Boxed", "state": "To Do", "priority": 1}]));
    let db = p.db().display().to_string();
    p.scenario(
        "B-1",
        &[
            json!({"init": {}}),
            json!({"probe_access": {"read": [db], "report": "access.json"}}),
            json!({"result": {"text": "probed"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    let report = wait_for("the agent's access report", Duration::from_secs(60), || {
        let text = std::fs::read_to_string(p.path("ws/B-1/access.json")).ok()?;
        serde_json::from_str::<Value>(&text).ok()
    });
    let said = report["read"][&db].as_str().unwrap_or("missing");
    assert!(
        said.starts_with("error:"),
        "the database from inside: {said}"
    );
    d.wait_until("the argv log written", Duration::from_secs(30), || {
        std::fs::read_to_string(p.path("argv.log")).is_ok_and(|s| !s.is_empty())
    });
    assert!(
        std::fs::read_to_string(p.workflow())
            .unwrap_or_default()
            .contains("kind: bubblewrap")
    );
    d.stop();
}

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "B-1", "title": "Boxed", "state": "To Do", "priority": 1}]));
}

#[test]
fn two_turns_run_sandboxed_and_the_issue_is_handed_off() {
    let p = Project::new();
    one_issue(&p);
    let turn = |text: &str| {
        vec![
            json!({"init": {}}),
            json!({"assistant": {"text": text, "input_tokens": 100, "output_tokens": 10}}),
            json!({"result": {"text": text, "input_tokens": 100, "output_tokens": 10}}),
        ]
    };
    let mut steps = turn("one");
    steps.extend(turn("two"));
    p.scenario("default", &steps);
    p.fake_agent_workflow("  max_turns: 2", "");
    let d = p.start();
    d.wait_until("the handoff", Duration::from_secs(60), || {
        p.issue_state("1") == "Review"
    });
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);
    let spawns = std::fs::read_to_string(p.path("argv.log")).unwrap_or_default();
    assert_eq!(spawns.lines().count(), 2, "one process per turn: {spawns}");
    d.stop();
}

#[test]
fn a_stalled_sandboxed_agent_is_cancelled_and_retried() {
    let p = Project::new();
    one_issue(&p);
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("  stall_timeout_ms: 700", "");
    let d = p.start();
    let s = d.wait_state("a stall retry", Duration::from_secs(30), |s| {
        s["retrying"][0]["trigger"] == "stall"
    });
    let error = s["retrying"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("stall timeout"), "{s}");
    wait_for("the cancelled run", Duration::from_secs(20), || {
        (p.run_statuses("1") == vec!["cancelled".to_string()]).then_some(())
    });
    wait_for("no agent left", Duration::from_secs(20), || {
        common::procs::agent_processes_in(&p.path("ws"))
            .is_empty()
            .then_some(())
    });
    d.stop();
}

#[test]
fn codex_app_server_sessions_resume_their_thread_sandboxed() {
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: codex\n  command: {} app-server\n  env: [FAKE_AGENT_*]\n  read_timeout_ms: 2000\n  max_turns: 2\ncodex:\n  model: o3\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        common::FAKE_AGENT
    );
    let s = common::Setup::new(&wf, &common::issues(&[("1", "C-1", "To Do")]));
    let path = |rel: &str| s.path().join(rel).display().to_string();
    let script = [
        json!({"session": 1, "turn": 1, "started": true}),
        json!({"session": 1, "turn": 1, "token_usage": {"input": 1000, "cached": 0, "output": 100}}),
        json!({"session": 1, "turn": 2, "started": true}),
        json!({"session": 1, "turn": 2, "token_usage": {"input": 500, "cached": 0, "output": 50}}),
    ];
    let text: Vec<String> = script.iter().map(Value::to_string).collect();
    std::fs::write(path("scenario.jsonl"), text.join("\n") + "\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let (scenario, state, rpc) = (path("scenario.jsonl"), path("state"), path("rpc.log"));
    let d = s.start(&[
        ("FAKE_AGENT_KIND", "codex"),
        ("FAKE_AGENT_SCENARIO", &scenario),
        ("FAKE_AGENT_STATE_DIR", &state),
        ("FAKE_AGENT_RPC_LOG", &rpc),
    ]);
    let methods = || -> Vec<(u64, String)> {
        std::fs::read_to_string(&rpc)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|r| {
                Some((
                    r["session"].as_u64()?,
                    r["received"]["method"].as_str()?.to_string(),
                ))
            })
            .collect()
    };
    wait_for(
        "a second session resuming the thread",
        Duration::from_secs(60),
        || {
            methods()
                .contains(&(2, "thread/resume".to_string()))
                .then_some(())
        },
    );
    let first: Vec<String> = methods()
        .into_iter()
        .filter(|(n, _)| *n == 1)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(
        first,
        [
            "initialize",
            "initialized",
            "account/read",
            "thread/start",
            "turn/start",
            "turn/start"
        ],
        "two turns on one thread"
    );
    std::fs::write(
        s.path().join("issues.json"),
        common::issues(&[("1", "C-1", "Done")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    d.stop();
}
