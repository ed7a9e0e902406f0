//! Crash safety, signals: a second SIGTERM cuts the agents' grace short but never abandons
//! them: their process groups are killed, their runs recorded, then sortie exits.

mod common;

use std::time::Duration;

use common::procs::{agent_processes_in, processes_in};
use common::{Project, poll, wait_for};
use serde_json::json;

fn sigterm(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

#[test]
fn a_second_sigterm_kills_agents_that_ignore_sigterm_and_records_their_runs() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "T-1", "title": "Stubborn", "state": "To Do", "priority": 1}
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"ignore_sigterm": true}),
            json!({"spawn_grandchild": true}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    d.wait_state("the session", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 1
    });
    let ws = p.path("ws");
    wait_for("agent and grandchild", Duration::from_secs(30), || {
        (agent_processes_in(&ws).len() >= 2).then_some(())
    });

    let pid = d.child.id();
    sigterm(pid);
    wait_for("the drain", Duration::from_secs(30), || {
        p.log().contains("draining").then_some(())
    });
    sigterm(pid);
    let status = poll(Duration::from_secs(40), Duration::from_millis(50), || {
        d.child.try_wait().ok().flatten()
    })
    .unwrap_or_else(|| panic!("sortie did not exit; log:\n{}", p.log()));

    assert!(status.success(), "exit status {status}");
    assert_eq!(p.run_statuses("1"), vec!["cancelled"]);
    // SIGKILLed processes leave /proc once the kernel has torn them down, a moment after the
    // signal: wait for that with a deadline.
    if poll(Duration::from_secs(5), Duration::from_millis(50), || {
        processes_in(&ws).is_empty().then_some(())
    })
    .is_none()
    {
        panic!("left behind: {:?}", processes_in(&ws));
    }
    let log = p.log();
    assert!(log.contains("second signal received"), "{log}");
    assert!(
        log.contains("grace cut short"),
        "the SIGTERM grace was not cut short: {log}"
    );
    assert!(log.contains("shutting down"));
}
