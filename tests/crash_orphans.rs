//! Crash safety, agents and their processes (issue 11, point 1), through the real binary: a
//! SIGKILLed sortie leaves its agent running; the restart stops that agent's group (and what
//! escaped it with `setsid`) before a new agent starts for the issue, records the run as
//! interrupted and resumes the agent session. A `setsid` grandchild of a live session is
//! re-parented to sortie (child subreaper), killed with its turn and reaped.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "C-1", "title": "Crash me", "state": "To Do", "priority": 1}]));
}

/// `(state, start ticks)` of a process, `None` once it is gone.
fn stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    Some((rest.first()?.chars().next()?, rest.get(19)?.parse().ok()?))
}

/// Whether the process that started at `ticks` still runs (a zombie has ended).
fn alive(pid: u32, ticks: u64) -> bool {
    stat(pid).is_some_and(|(state, t)| t == ticks && state != 'Z' && state != 'X')
}

fn argv_lines(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn read_pid(path: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn a_restart_stops_the_agent_a_killed_sortie_left_running_before_dispatching_again() {
    let p = Project::new();
    one_issue(&p);
    let pid_file = p.path("grandchild.pid");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"spawn_setsid_grandchild": {"pid_file": pid_file.display().to_string()}}),
            json!({"assistant": {"text": "working", "input_tokens": 500, "output_tokens": 40}}),
            json!({"hang": true, "turn": 1}),
            json!({"init": {}, "turn": 2}),
            json!({"hang": true, "turn": 2}),
        ],
    );
    // The turn counter lets the resumed process play turn 2 (it hangs without a grandchild).
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    let (pgid, ticks): (i64, i64) = wait_for(
        "the agent's group on the live session row",
        Duration::from_secs(30),
        || {
            p.db_conn()
                .query_row(
                    "SELECT agent_pgid, agent_start_ticks FROM session_metadata
                     WHERE dispatch_id IS NOT NULL AND agent_pgid IS NOT NULL
                       AND input_tokens = 500",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .ok()
        },
    );
    let (pgid, ticks) = (pgid as u32, ticks as u64);
    let grandchild = wait_for("the grandchild's pid", Duration::from_secs(10), || {
        read_pid(&pid_file)
    });
    let grandchild_ticks = stat(grandchild).map(|s| s.1).unwrap();
    let session_id = argv_lines(&p)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The keeper would stop the agent as soon as sortie dies (tests/crash_keeper.rs); held
    // stopped, it leaves the agent to the restart's own cleanup, the second line tested here.
    let keeper = keeper_pid(&p);
    signal(keeper, rustix::process::Signal::STOP);
    d.kill9();
    assert!(
        alive(pgid, ticks),
        "the agent should outlive a SIGKILLed sortie whose keeper is held"
    );
    assert!(alive(grandchild, grandchild_ticks));
    assert_eq!(argv_lines(&p).len(), 1);

    let d = p.start();
    let lines = wait_for(
        "a second agent for the issue",
        Duration::from_secs(30),
        || {
            let l = argv_lines(&p);
            (l.len() >= 2).then_some(l)
        },
    );
    assert_eq!(lines.len(), 2, "one new agent only");
    // The old group was stopped during the warm start, before the first dispatch.
    let log = p.log();
    let stopped = log
        .find("session interrupted by a restart")
        .expect("interrupted session logged");
    let line = log[stopped..].lines().next().unwrap_or("");
    assert!(line.contains("issue_identifier=C-1"), "{line}");
    assert!(line.contains("agent_group=terminated"), "{line}");
    let first_dispatch_after_start = log
        .rfind("sortie starting")
        .and_then(|start| {
            log[start..]
                .find("dispatching issue_id=1")
                .map(|i| start + i)
        })
        .expect("a dispatch after the restart");
    assert!(stopped < first_dispatch_after_start, "{log}");
    assert!(!alive(pgid, ticks), "the old agent still runs");
    assert!(
        !alive(grandchild, grandchild_ticks),
        "the old agent's setsid grandchild still runs"
    );
    // The new agent resumes the interrupted conversation.
    assert_eq!(lines[1]["resume"], true, "{}", lines[1]);
    assert_eq!(lines[1]["session_id"], session_id.as_str());

    let runs = d.get("/api/v1/runs?issue=C-1").json();
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "cancelled", "{runs}");
    assert_eq!(run["error"], "interrupted: sortie restarted");
    assert_eq!(run["tokens"]["input_tokens"], 500);
    // The live row now names the new agent's group.
    let new_pgid: i64 = wait_for("the new agent's group", Duration::from_secs(30), || {
        p.db_conn()
            .query_row(
                "SELECT agent_pgid FROM session_metadata
                 WHERE dispatch_id IS NOT NULL AND agent_pgid IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .ok()
    });
    assert_ne!(new_pgid, i64::from(pgid));
    let mut d = d;
    assert_eq!(d.terminate(), Some(0));
    signal(keeper, rustix::process::Signal::KILL);
}

/// The pid of the keeper the last started sortie logged.
fn keeper_pid(p: &Project) -> u32 {
    wait_for(
        "the keeper's pid in the log",
        Duration::from_secs(10),
        || {
            let log = p.log();
            let line = log.lines().rev().find(|l| l.contains("keeper started"))?;
            let rest = &line[line.find("pid=")? + 4..];
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        },
    )
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

#[test]
fn a_grandchild_that_left_the_group_is_killed_with_its_turn_and_reaped() {
    let p = Project::new();
    one_issue(&p);
    let pid_file = p.path("grandchild.pid");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"spawn_setsid_grandchild": {"pid_file": pid_file.display().to_string()}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let mut d = p.start();
    wait_for("a recorded run", Duration::from_secs(30), || {
        (!p.run_statuses("1").is_empty()).then_some(())
    });
    let grandchild = read_pid(&pid_file).expect("grandchild pid");
    // Killed at the turn's end and reaped by sortie (its subreaper): no zombie is left either.
    wait_for(
        "the escaped grandchild gone and reaped",
        Duration::from_secs(10),
        || stat(grandchild).is_none().then_some(()),
    );
    assert!(
        p.log().contains("escaped agent process killed"),
        "{}",
        p.log()
    );
    assert_eq!(d.terminate(), Some(0));
}
