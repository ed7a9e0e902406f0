//! SSH workers end to end, through the real binary against a real `sshd` on 127.0.0.1: the
//! workspace is prepared and its hooks run on the host, the agent runs there (its environment
//! shows the SSH connection), its `.sortie/status` is read back from the host, a stall kills its whole process group on the host, a full host
//! holds the next issue with `ssh_hosts_full`, and the run rows, running rows, config and
//! metrics name the host.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::sshd::{HOST_ALIAS, Sshd};
use common::{FAKE_AGENT, Project, wait_for};
use serde_json::{Value, json};

fn workflow(p: &Project, sshd: &Sshd) {
    let markers = p.path("markers");
    let scenarios = p.path("scenarios");
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  after_create: |
    cp '{scenarios}/'"$SORTIE_ISSUE_IDENTIFIER".jsonl .scenario
    printf '%s|%s\n' "$SORTIE_SSH_HOST" "${{SSH_CONNECTION:-}}" > .hook-env
agent:
  kind: claude-code
  command: env FAKE_AGENT_SCENARIO=.scenario FAKE_AGENT_ENV_LOG={markers}/env.log {agent}
  max_turns: 1
  max_concurrent_agents: 4
  stall_timeout_ms: 8000
worker:
  ssh_hosts: [{host}]
  max_concurrent_agents_per_host: 1
  ssh_config_file: {config}
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}.
"#,
        root = p.path("ws").display(),
        scenarios = scenarios.display(),
        markers = markers.display(),
        agent = FAKE_AGENT,
        host = HOST_ALIAS,
        config = sshd.client_config.display(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    std::fs::create_dir_all(markers).expect("markers dir");
}

/// Pids of processes whose working directory is inside `dir`.
fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(canon) = dir.canonicalize() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&canon))
        })
        .collect()
}

fn env_records(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.path("markers/env.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn run_host(p: &Project, issue_id: &str) -> Vec<(String, String)> {
    let conn = p.db_conn();
    let mut st = conn
        .prepare("SELECT status, COALESCE(ssh_host, '') FROM run_history WHERE issue_id = ?1 ORDER BY id")
        .expect("prepare");
    st.query_map([issue_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .flatten()
        .collect()
}

#[test]
fn an_issue_runs_on_the_ssh_host_and_a_full_host_holds_the_next() {
    let Some(sshd) = Sshd::start_or_skip() else {
        return;
    };
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "Stalls on the host", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "A-2", "title": "Waits for the host", "state": "To Do", "priority": 2}
    ]));
    p.scenario(
        "A-1",
        &[
            json!({"init": {}}),
            json!({"spawn_grandchild": true}),
            json!({"hang": true}),
        ],
    );
    p.scenario(
        "A-2",
        &[
            json!({"init": {}}),
            json!({"write_file": {"path": ".sortie/status", "content": "needs-human-review\nDone on the host.\n"}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(&p, &sshd);
    let d = p.start();

    // A-1 runs on the host; the host's cap holds A-2.
    let s = d.wait_state(
        "A-1 running on the host, A-2 held",
        Duration::from_secs(30),
        |s| {
            s["running"][0]["issue_identifier"] == "A-1"
                && s["held"]
                    .as_array()
                    .is_some_and(|h| h.iter().any(|e| e["issue_identifier"] == "A-2"))
        },
    );
    assert_eq!(s["running"][0]["ssh_host"], HOST_ALIAS, "{s}");
    let held = s["held"]
        .as_array()
        .and_then(|h| h.iter().find(|e| e["issue_identifier"] == "A-2"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(held["hold"]["reason"], "ssh_hosts_full", "{held}");
    assert_eq!(held["status_text"], held["hold"]["reason_text"]);
    assert!(
        held["hold"]["release_text"]
            .as_str()
            .is_some_and(|t| t.ends_with('.')),
        "{held}"
    );
    assert_eq!(s["config"]["worker"]["ssh_hosts"], json!([HOST_ALIAS]));
    assert_eq!(s["config"]["worker"]["max_concurrent_agents_per_host"], 1);
    assert_eq!(
        s["health"]["ssh_hosts"],
        json!([{"host": HOST_ALIAS, "running": 1, "status": "in_service"}]),
        "{s}"
    );

    // The hook and the agent ran through sshd, in the workspace.
    let ws: PathBuf = p.workspace("A-1");
    let hook_env = wait_for("the after_create hook", Duration::from_secs(20), || {
        std::fs::read_to_string(ws.join(".hook-env"))
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    let (host, connection) = hook_env.trim().split_once('|').unwrap_or(("", ""));
    assert_eq!(host, HOST_ALIAS, "{hook_env}");
    assert!(connection.starts_with("127.0.0.1 "), "{hook_env}");
    let env = wait_for("the agent's environment", Duration::from_secs(10), || {
        env_records(&p).into_iter().next()
    });
    assert!(
        env["SSH_CONNECTION"]
            .as_str()
            .is_some_and(|c| c.starts_with("127.0.0.1 ")),
        "the agent did not run through sshd: {env}"
    );
    assert_ne!(env["PWD"], Value::Null);
    let metrics = d.get("/metrics").body;
    assert!(
        metrics.contains(&format!("sortie_ssh_host_usage{{host=\"{HOST_ALIAS}\"}} 1")),
        "{metrics}"
    );

    // The stall kills the agent and its grandchild on the host: nothing is left there.
    assert!(
        !processes_in(&ws).is_empty(),
        "the agent runs in {}",
        ws.display()
    );
    wait_for("A-1's stall retry", Duration::from_secs(40), || {
        p.db_conn()
            .query_row(
                "SELECT retry_trigger FROM retry_entries WHERE issue_id = '1'",
                [],
                |r| r.get::<_, String>(0),
            )
            .ok()
            .filter(|t| t == "stall")
    });
    wait_for(
        "no process left in A-1's workspace",
        Duration::from_secs(20),
        || processes_in(&ws).is_empty().then_some(()),
    );

    // The freed host takes A-2, which runs there to the end.
    wait_for("A-2's run on the host", Duration::from_secs(30), || {
        let runs = run_host(&p, "2");
        (!runs.is_empty()).then_some(runs)
    });
    assert_eq!(
        run_host(&p, "2"),
        vec![("succeeded".to_string(), HOST_ALIAS.to_string())]
    );
    assert_eq!(
        run_host(&p, "1"),
        vec![("cancelled".to_string(), HOST_ALIAS.to_string())]
    );
    // The status file was read back from the host: the declared outcome handed the issue off.
    let (declared, text): (String, String) = p
        .db_conn()
        .query_row(
            "SELECT COALESCE(declared_outcome, ''), COALESCE(agent_text, '') FROM run_history WHERE issue_id = '2'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or_default();
    assert_eq!(declared, "needs-human-review");
    assert_eq!(text, "Done on the host.");
    wait_for("A-2 handed off", Duration::from_secs(20), || {
        let issues = p.read_issues();
        let a2 = issues.as_array()?.iter().find(|i| i["id"] == "2")?.clone();
        (a2["state"] == "Review").then_some(())
    });
    let runs: Value = d.get("/api/v1/runs?issue=A-2").json();
    let row = runs["runs"]
        .as_array()
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(row["ssh_host"], HOST_ALIAS, "{runs}");
}

#[test]
fn an_unreachable_host_is_taken_out_of_service_after_repeated_failures() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "No host to run on", "state": "To Do", "priority": 1}
    ]));
    // Port 1 on 127.0.0.1 refuses at once: ssh exits 255 while preparing the workspace.
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
agent:
  kind: claude-code
  command: {agent}
  max_turns: 1
  max_retry_backoff_ms: 200
worker:
  ssh_hosts: ['127.0.0.1:1']
server:
  port: {port}
---
Work.
"#,
        root = p.path("ws").display(),
        agent = FAKE_AGENT,
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    let d = p.start();
    let s = d.wait_state("the host out of service", Duration::from_secs(60), |s| {
        s["retrying"][0]["error"] == "no available SSH hosts"
    });
    let log = d.log_text();
    assert!(
        log.contains("msg=\"ssh host out of service\" ssh_host=127.0.0.1:1"),
        "{log}"
    );
    let runs = run_host(&p, "1");
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(
        runs.iter()
            .all(|(status, host)| status == "failed" && host == "127.0.0.1:1"),
        "{runs:?}"
    );
    let error: String = p
        .db_conn()
        .query_row(
            "SELECT COALESCE(error, '') FROM run_history WHERE issue_id = '1' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default();
    assert!(error.contains("127.0.0.1:1"), "{error}");
    assert_eq!(s["retrying"][0]["issue_identifier"], "A-1");
    let host = &s["health"]["ssh_hosts"][0];
    assert_eq!(host["host"], "127.0.0.1:1", "{host}");
    assert_eq!(host["status"], "out_of_service", "{host}");
    assert_eq!(host["running"], 0, "{host}");
    assert!(host["out_of_service_until"].is_string(), "{host}");
    // While the host is out, no further session is tried.
    d.wait_state("later polls", Duration::from_secs(10), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
            && s["retrying"][0]["error"] == "no available SSH hosts"
    });
    assert_eq!(run_host(&p, "1").len(), 3);
}
