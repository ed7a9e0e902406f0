//! Agents die with the daemon (issue 33, point 7), through the real binary: when sortie is
//! SIGKILLed, its keeper process gives the agent's process group SIGTERM, then SIGKILL after the
//! stop grace, and stops what escaped the group with `setsid` and a hook that was running, with
//! no restart needed.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "K-1", "title": "Keep me", "state": "To Do", "priority": 1}]));
}

/// `(state, group, start ticks)` of a live process; `None` once it is gone or a zombie.
fn live(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = text
        .get(text.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let state = rest.first()?.chars().next()?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    Some((rest.get(2)?.parse().ok()?, rest.get(19)?.parse().ok()?))
}

/// Live processes in process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| live(*pid).is_some_and(|(g, _)| g == pgid))
                .collect()
        })
        .unwrap_or_default()
}

fn read_pid(path: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn a_sigkilled_sortie_takes_its_agent_group_and_the_escaped_grandchild_down() {
    let p = Project::new();
    one_issue(&p);
    let pid_file = p.path("grandchild.pid");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"spawn_setsid_grandchild": {"pid_file": pid_file.display().to_string()}}),
            // A group member that ignores SIGTERM: only the SIGKILL after the grace ends it.
            json!({"spawn_grandchild": true}),
            json!({"assistant": {"text": "working", "input_tokens": 5, "output_tokens": 1}}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow("  stop_grace_ms: 500\n", "");
    let mut d = p.start();
    let pgid: i64 = wait_for(
        "the agent's group on the live session row",
        Duration::from_secs(30),
        || {
            p.db_conn()
                .query_row(
                    "SELECT agent_pgid FROM session_metadata
                     WHERE dispatch_id IS NOT NULL AND agent_pgid IS NOT NULL",
                    [],
                    |r| r.get(0),
                )
                .ok()
        },
    );
    let pgid = pgid as u32;
    let grandchild = wait_for("the setsid grandchild", Duration::from_secs(10), || {
        read_pid(&pid_file)
    });
    wait_for(
        "the group's SIGTERM-proof member",
        Duration::from_secs(10),
        || (group_members(pgid).len() >= 2).then_some(()),
    );
    assert!(live(grandchild).is_some());

    d.kill9();
    wait_for(
        "the agent's group and its escaped grandchild gone with no sortie running",
        Duration::from_secs(15),
        || (group_members(pgid).is_empty() && live(grandchild).is_none()).then_some(()),
    );
    // The keeper says what it did, in sortie's log format.
    let line = wait_for("the keeper's report", Duration::from_secs(5), || {
        let log = p.log();
        let line = log
            .lines()
            .find(|l| l.contains("processes of the ended sortie stopped"))?
            .to_string();
        Some(line)
    });
    assert!(
        p.log()
            .contains("sortie ended; stopping the processes it started")
    );
    // The SIGTERM-proof member needed the SIGKILL after the grace.
    assert!(!line.contains("killed_after_grace=0"), "{line}");
}

#[test]
fn a_sigkilled_sortie_takes_a_running_hook_down() {
    let p = Project::new();
    one_issue(&p);
    let hook_pid = p.path("hook.pid");
    p.fake_agent_workflow(
        "",
        &format!(
            "hooks:\n  timeout_ms: 600000\n  before_run: echo $$ > {} && sleep 600\n",
            hook_pid.display()
        ),
    );
    // The workflow's own `hooks:` block comes first; the one above replaces it.
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    let first = wf.find("hooks:\n").unwrap();
    let end = wf[first..].find("agent:\n").unwrap() + first;
    p.write("WORKFLOW.md", &format!("{}{}", &wf[..first], &wf[end..]));
    let mut d = p.start();
    let hook = wait_for("the hook's pid", Duration::from_secs(30), || {
        read_pid(&hook_pid)
    });
    // The shell leads its own group; its `sleep` is in it.
    wait_for("the hook's sleep", Duration::from_secs(10), || {
        (group_members(hook).len() >= 2).then_some(())
    });
    d.kill9();
    wait_for(
        "the hook's group gone with no sortie running",
        Duration::from_secs(15),
        || group_members(hook).is_empty().then_some(()),
    );
}

/// Pids of live processes whose working directory is inside `dir`.
fn processes_in(dir: &std::path::Path) -> Vec<u32> {
    let Ok(canon) = dir.canonicalize() else {
        return Vec::new();
    };
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| live(*pid).is_some())
                .filter(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/cwd"))
                        .is_ok_and(|cwd| cwd.starts_with(&canon))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The remote agent shares nothing with sortie but an `ssh` connection (no token, no group):
/// the keeper signals its recorded group on the host, as sortie would have.
#[test]
fn a_sigkilled_sortie_stops_its_agent_on_an_ssh_host() {
    let Some(sshd) = common::sshd::Sshd::start_or_skip() else {
        return;
    };
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "K-1",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working", "input_tokens": 5, "output_tokens": 1}}),
            // Writes nothing more: a lost connection alone would never end it.
            json!({"hang": true}),
        ],
    );
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  after_create: cp '{scenarios}/K-1.jsonl' .scenario
agent:
  kind: claude-code
  command: env FAKE_AGENT_SCENARIO=.scenario {agent}
  max_turns: 1
  stop_grace_ms: 500
worker:
  ssh_hosts: [{host}]
  ssh_config_file: {config}
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}.
"#,
        root = p.path("ws").display(),
        scenarios = p.path("scenarios").display(),
        agent = common::FAKE_AGENT,
        host = common::sshd::HOST_ALIAS,
        config = sshd.client_config.display(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    let mut d = p.start();
    let ws = p.workspace("K-1");
    d.wait_state("K-1 running on the host", Duration::from_secs(30), |s| {
        s["running"][0]["tokens"]["input_tokens"] == 5
    });
    let remote = processes_in(&ws);
    assert!(!remote.is_empty(), "no agent in the host's workspace");
    d.kill9();
    wait_for(
        "the agent on the host gone with no sortie running",
        Duration::from_secs(30),
        || processes_in(&ws).is_empty().then_some(()),
    );
    wait_for("the keeper's report", Duration::from_secs(10), || {
        p.log()
            .lines()
            .any(|l| l.contains("agents on SSH hosts signalled") && l.contains("term_ok=1"))
            .then_some(())
    });
}
