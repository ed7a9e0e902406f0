//! Graceful shutdown through the real binary: SIGTERM stops agents, records their runs,
//! leaves no agent process behind and exits 0.

mod common;

use std::time::Duration;

use common::procs::processes_in;
use common::{Project, wait_for};
use serde_json::json;

#[test]
fn sigterm_cancels_running_agents_records_them_and_exits_0() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "Q-1", "title": "Long", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "Q-2", "title": "Stubborn", "state": "To Do", "priority": 2}
    ]));
    p.scenario("Q-1", &[json!({"init": {}}), json!({"hang": true})]);
    p.scenario(
        "Q-2",
        &[
            json!({"init": {}}),
            json!({"ignore_sigterm": true}),
            json!({"spawn_grandchild": true}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    d.wait_state("both running", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 2
    });
    let ws = p.path("ws");
    wait_for(
        "agent processes in the workspaces",
        Duration::from_secs(10),
        || (processes_in(&ws).len() >= 3).then_some(()),
    );

    assert_eq!(d.terminate(), Some(0));
    assert_eq!(p.run_statuses("1"), vec!["cancelled"]);
    assert_eq!(p.run_statuses("2"), vec!["cancelled"]);
    assert!(
        processes_in(&ws).is_empty(),
        "left behind: {:?}",
        processes_in(&ws)
    );
    let log = p.log();
    assert!(log.contains("signal received, initiating shutdown"));
    assert!(log.contains("shutting down"));
}
