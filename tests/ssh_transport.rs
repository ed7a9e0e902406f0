//! The SSH transport against a real sshd on 127.0.0.1 (`common::sshd`): quoting through the
//! remote shell, remote scripts and file reads, agent turns over ssh (events, the remote
//! environment, cancellation leaving nothing on the host, connection failures), and hooks and
//! workspaces prepared on the host.

mod common;

use common::FAKE_AGENT;
use common::sshd::Sshd;
use crossbeam_channel::unbounded;
use sortie::agent::{
    AgentErrorKind, AgentEventKind, AgentSettings, CancelReason, CancelToken, StartSessionParams,
    TurnOutcome,
};
use sortie::registry::adapter_for;
use sortie::ssh::{SshErrorKind, SshHost, quote};
use std::path::PathBuf;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

macro_rules! sshd_or_skip {
    () => {
        match Sshd::start_or_skip() {
            Some(s) => s,
            None => return,
        }
    };
}

#[test]
fn hostile_strings_round_trip_through_the_remote_shell() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    for s in [
        "plain",
        "with spaces  and\ttabs",
        "it's 'quoted' \"twice\"",
        "$HOME ${PATH} $(id) `id` \\n \\",
        "line one\nline two\n",
        "; rm -rf / & | > < * ? [a] ~ #",
        "",
    ] {
        let out = host
            .run(&format!("printf '%s' {}", quote(s)), None, T)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.success(), "{s:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), s);
    }
}

#[test]
fn run_reports_exit_codes_output_and_stdin() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let out = host
        .run("cat; echo oops >&2; exit 3", Some(b"from stdin"), T)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.code, Some(3));
    assert_eq!(out.stdout, b"from stdin");
    assert_eq!(out.last_stderr_line().as_deref(), Some("oops"));
    // The remote side is a real sshd session.
    let out = host
        .run("printf %s \"$SSH_CONNECTION\"", None, T)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("127.0.0.1 "),
        "{out:?}"
    );
}

#[test]
fn run_kills_the_remote_group_at_its_deadline() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let pid_file = sshd.dir.path().join("bg.pid");
    let script = format!(
        "sleep 300 & echo $! > {}; wait",
        quote(&pid_file.to_string_lossy())
    );
    let err = host
        .run(&script, None, Duration::from_millis(1500))
        .unwrap_err();
    assert!(matches!(err.kind, SshErrorKind::Timeout(_)), "{err}");
    assert!(err.to_string().contains("sortie-test-host"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        common::poll(T, Duration::from_millis(20), || (!alive(pid)).then_some(())).is_some(),
        "remote background process {pid} outlived the deadline"
    );
}

#[test]
fn a_wrong_port_is_a_connection_failure_naming_the_host() {
    let sshd = sshd_or_skip!();
    let port = closed_port();
    let host = sshd.host_entry(&format!("127.0.0.1:{port}"));
    let err = host.run("true", None, T).unwrap_err();
    match &err.kind {
        SshErrorKind::Connection(line) => assert!(line.contains("refused"), "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

#[test]
fn read_file_present_absent_symlinked_and_capped() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let d = sshd.dir.path().join("ws");
    let dot = d.join(".sortie");
    std::fs::create_dir_all(&dot).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dot.join("status"), "blocked\nwhy\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        host.read_file(&dot.join("status"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        Some(b"blocked\nwhy\n".to_vec())
    );
    assert_eq!(
        host.read_file(&dot.join("missing"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        None
    );
    assert_eq!(
        host.read_file(&d.join("no-dir").join("f"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        None
    );
    // Over the cap.
    let err = host.read_file(&dot.join("status"), 4).unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("4-byte")),
        "{err}"
    );
    // A symlinked file.
    std::os::unix::fs::symlink("/etc/hostname", dot.join("link")).unwrap_or_else(|e| panic!("{e}"));
    let err = host.read_file(&dot.join("link"), 1024).unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("symlink")),
        "{err}"
    );
    // A symlinked `.sortie`.
    let other = sshd.dir.path().join("ws2");
    std::fs::create_dir_all(&other).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&dot, other.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    let err = host
        .read_file(&other.join(".sortie").join("status"), 1024)
        .unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("symlink")),
        "{err}"
    );
    // A directory is not a regular file.
    let err = host.read_file(&dot, 1024).unwrap_err();
    assert!(matches!(&err.kind, SshErrorKind::Refused(_)), "{err}");
}

/// A workspace, a scenario and logs for one fake-agent session on the test host.
struct Agent {
    dir: tempfile::TempDir,
}

impl Agent {
    fn new(scenario: &str) -> Agent {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        for d in ["ws", "state"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dir.path().join("scenario.jsonl"), scenario)
            .unwrap_or_else(|e| panic!("{e}"));
        Agent { dir }
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `env VAR=… fake-agent`: the scenario travels on the remote command line.
    fn settings(&self, program: &str) -> AgentSettings {
        AgentSettings {
            kind: "claude-code".into(),
            command: Some(format!(
                "env FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} FAKE_AGENT_ARGV_LOG={} FAKE_AGENT_ENV_LOG={} {program}",
                self.path("scenario.jsonl").display(),
                self.path("state").display(),
                self.path("argv.log").display(),
                self.path("env.log").display(),
            )),
            turn_timeout_ms: 0,
            read_timeout_ms: 5000,
            stop_grace_ms: 500,
            block: serde_json::Map::new(),
            workflow_dir: self.dir.path().to_path_buf(),
        }
    }
    fn params(&self, host: &SshHost) -> StartSessionParams {
        StartSessionParams {
            workspace: self.ws(),
            resume_session_id: None,
            issue_id: "id-PROJ-1".into(),
            issue_identifier: "PROJ-1".into(),
            mcp_config_path: Some(self.path("mcp.json")),
            remote: Some(host.clone()),
        }
    }
    fn log_lines(&self, name: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path(name))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

#[test]
fn a_fake_agent_turn_runs_over_ssh_in_the_remote_workspace() {
    let sshd = sshd_or_skip!();
    let agent = Agent::new("");
    let adapter = adapter_for(&agent.settings(FAKE_AGENT)).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(agent.params(&sshd.host()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = unbounded();
    let result = session.run_turn("fix the bug", &tx, &CancelToken::new());
    assert!(result.outcome.is_completed(), "{:?}", result.outcome);
    assert_eq!(
        result.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((100, 20))
    );
    let events: Vec<_> = rx.try_iter().collect();
    assert!(matches!(
        events[0].kind,
        AgentEventKind::SessionStarted { .. }
    ));
    assert_eq!(events.iter().filter(|e| e.kind.is_terminal()).count(), 1);

    // It ran through sshd, in the remote workspace, with the prompt intact.
    let env = agent.log_lines("env.log");
    assert_eq!(env.len(), 1);
    let conn = env[0]["SSH_CONNECTION"].as_str().unwrap_or("");
    assert!(conn.starts_with("127.0.0.1 "), "{:?}", env[0]);
    let inv = agent.log_lines("argv.log");
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0]["cwd"].as_str(), agent.ws().to_str());
    assert_eq!(inv[0]["prompt"].as_str(), Some("fix the bug"));
    // The worker's MCP file is local: not passed to an agent on a host.
    let argv = inv[0]["argv"].to_string();
    assert!(!argv.contains("--mcp-config"), "{argv}");
    // The remote group was recorded, then forgotten once the turn was over.
    assert!(!agent.ws().join(".sortie/agent.pgid").exists());
}

#[test]
fn a_cancelled_remote_turn_leaves_nothing_on_the_host() {
    let sshd = sshd_or_skip!();
    let agent = Agent::new(
        "{\"ignore_sigterm\":true}\n{\"spawn_grandchild\":true}\n{\"init\":{}}\n{\"hang\":true}\n",
    );
    let adapter = adapter_for(&agent.settings(FAKE_AGENT)).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(agent.params(&sshd.host()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = unbounded();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let handle = std::thread::spawn(move || session.run_turn("hang", &tx, &c2));
    let pgid: i32 = common::poll(T, Duration::from_millis(20), || {
        std::fs::read_to_string(agent.ws().join(".sortie/agent.pgid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
    .unwrap_or_else(|| panic!("no remote pgid recorded"));
    let members = common::poll(T, Duration::from_millis(20), || {
        let m = group_members(pgid);
        (m.len() >= 2).then_some(m)
    })
    .unwrap_or_else(|| panic!("agent and grandchild should both run in group {pgid}"));
    assert!(
        members.contains(&pgid),
        "the agent leads its group: {members:?}"
    );
    cancel.cancel(CancelReason::Reconcile);
    let result = handle.join().unwrap_or_else(|_| panic!("turn panicked"));
    assert_eq!(
        result.outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::Reconcile
        }
    );
    assert!(
        common::poll(T, Duration::from_millis(20), || members
            .iter()
            .all(|p| !alive(*p))
            .then_some(()))
        .is_some(),
        "remote processes left running: {members:?}"
    );
    assert!(group_members(pgid).is_empty());
    // The init line came over the wire before the cancel.
    assert!(
        rx.try_iter()
            .any(|e| matches!(e.kind, AgentEventKind::TurnCancelled { .. })),
        "a terminal cancelled event"
    );
}

#[test]
fn a_connection_failure_fails_the_turn_as_port_exit() {
    let sshd = sshd_or_skip!();
    let agent = Agent::new("");
    let host = sshd.host_entry(&format!("127.0.0.1:{}", closed_port()));
    let adapter = adapter_for(&agent.settings(FAKE_AGENT)).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(agent.params(&host))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = unbounded();
    let result = session.run_turn("go", &tx, &CancelToken::new());
    assert_eq!(result.outcome.error_kind(), Some(AgentErrorKind::PortExit));
    let msg = result.outcome.message();
    assert!(msg.contains(host.name()) && msg.contains("255"), "{msg}");
    assert!(
        msg.contains("refused"),
        "ssh's own reason is carried: {msg}"
    );
    let terminal: Vec<_> = rx.try_iter().filter(|e| e.kind.is_terminal()).collect();
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].kind.message(), msg);
    assert!(agent.log_lines("argv.log").is_empty());
}

#[test]
fn a_missing_remote_agent_is_agent_not_found() {
    let sshd = sshd_or_skip!();
    let agent = Agent::new("");
    let adapter =
        adapter_for(&agent.settings("/nonexistent/agent-cli")).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(agent.params(&sshd.host()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = unbounded();
    let result = session.run_turn("go", &tx, &CancelToken::new());
    assert_eq!(
        result.outcome.error_kind(),
        Some(AgentErrorKind::AgentNotFound),
        "{:?}",
        result.outcome
    );
}

/// Live (not zombie) members of process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.split_whitespace().collect::<Vec<_>>();
                    Some(rest.first() != Some(&"Z") && rest.get(2)?.parse::<i32>().ok()? == pgid)
                })
                .unwrap_or(false)
        })
        .collect()
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only a running process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}
