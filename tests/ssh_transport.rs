//! The SSH transport against a real sshd on 127.0.0.1 (`common::sshd`): quoting through the
//! remote shell, remote scripts and file reads, agent turns over ssh (events, the remote
//! environment, cancellation leaving nothing on the host, connection failures), and hooks and
//! workspaces prepared on the host.

mod common;

use common::FAKE_AGENT;
use common::procs::{alive, group_members};
use common::sshd::Sshd;
use crossbeam_channel::unbounded;
use sortie::agent::{
    AgentErrorKind, AgentEventKind, AgentSettings, CancelReason, CancelToken, StartSessionParams,
    TurnOutcome,
};
use sortie::agent::{pr_record, status_file};
use sortie::domain::Issue;
use sortie::registry::adapter_for;
use sortie::ssh::{SshErrorKind, SshHost, quote};
use sortie::workspace::{HookEnv, HookKind, HookScripts, WorkspaceError, WorkspaceManager};
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
            env: Default::default(),
            sandbox: None,
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
            attempt: None,
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

#[test]
fn a_persistent_json_rpc_agent_runs_over_ssh_and_stops_without_leftovers() {
    let sshd = sshd_or_skip!();
    let agent = Agent::new("");
    let settings = AgentSettings {
        kind: "codex".into(),
        command: Some(format!(
            "env FAKE_AGENT_KIND=codex FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} FAKE_AGENT_ARGV_LOG={} FAKE_AGENT_ENV_LOG={} {FAKE_AGENT} app-server",
            agent.path("scenario.jsonl").display(),
            agent.path("state").display(),
            agent.path("argv.log").display(),
            agent.path("env.log").display(),
        )),
        read_timeout_ms: 5000,
        stop_grace_ms: 500,
        workflow_dir: agent.dir.path().to_path_buf(),
        ..AgentSettings::default()
    };
    let adapter = adapter_for(&settings).unwrap_or_else(|e| panic!("{e}"));
    let mut session = adapter
        .start_session(agent.params(&sshd.host()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = unbounded();
    let result = session.run_turn("do it", &tx, &CancelToken::new());
    assert!(result.outcome.is_completed(), "{:?}", result.outcome);
    assert_eq!(rx.try_iter().filter(|e| e.kind.is_terminal()).count(), 1);
    let inv = agent.log_lines("argv.log");
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0]["cwd"].as_str(), agent.ws().to_str());
    let pgid: i32 = std::fs::read_to_string(agent.ws().join(".sortie/agent.pgid"))
        .unwrap_or_else(|e| panic!("the server's group is recorded while it runs: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(alive(pgid));
    session.stop().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        common::poll(T, Duration::from_millis(20), || group_members(pgid)
            .is_empty()
            .then_some(()))
        .is_some(),
        "the remote server's group outlived stop"
    );
    assert!(common::procs::processes_in(&agent.ws()).is_empty());
}

fn issue(identifier: &str) -> Issue {
    Issue {
        id: format!("id-{identifier}"),
        identifier: identifier.to_string(),
        title: "t".into(),
        state: "To Do".into(),
        ..Issue::default()
    }
}

fn read_env_file(path: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn hooks_on_a_host_run_in_the_remote_workspace_with_the_host_named() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let root = sshd.dir.path().join("root");
    let out_file = sshd.dir.path().join("hook.env");
    let mgr = WorkspaceManager::new(
        root.clone(),
        HookScripts {
            before_run: Some(format!(
                "echo \"it's here\"; echo to-stderr >&2; {{ echo PWD=$(pwd); env | grep '^SORTIE_'; }} > {}",
                quote(&out_file.to_string_lossy())
            )),
            after_run: Some("echo failing; exit 4".into()),
            before_remove: Some("sleep 30".into()),
            timeout_ms: 1500,
            ..HookScripts::default()
        },
    );
    let ws = root.join("PROJ-7");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    let env = HookEnv {
        issue_id: "id-PROJ-7".into(),
        issue_identifier: "PROJ-7".into(),
        attempt: 2,
        extra: vec![("SORTIE_SELF_REVIEW_STATUS".into(), "passed".into())],
    };
    let out = mgr
        .run_hook_on(HookKind::BeforeRun, &ws, &env, Some(&host))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.ran);
    assert_eq!(out.output, "it's here\nto-stderr\n");
    let vars = read_env_file(&out_file);
    assert_eq!(vars.get("PWD").map(String::as_str), ws.to_str());
    assert_eq!(
        vars.get("SORTIE_SSH_HOST").map(String::as_str),
        Some("sortie-test-host")
    );
    assert_eq!(
        vars.get("SORTIE_WORKSPACE").map(String::as_str),
        ws.to_str()
    );
    assert_eq!(
        vars.get("SORTIE_ISSUE_IDENTIFIER").map(String::as_str),
        Some("PROJ-7")
    );
    assert_eq!(vars.get("SORTIE_ATTEMPT").map(String::as_str), Some("2"));
    assert_eq!(
        vars.get("SORTIE_SELF_REVIEW_STATUS").map(String::as_str),
        Some("passed")
    );

    match mgr.run_hook_on(HookKind::AfterRun, &ws, &env, Some(&host)) {
        Err(WorkspaceError::HookFailed {
            exit_code, output, ..
        }) => {
            assert_eq!(exit_code, Some(4));
            assert_eq!(output, "failing\n");
        }
        other => panic!("{other:?}"),
    }
    match mgr.run_hook_on(HookKind::BeforeRemove, &ws, &env, Some(&host)) {
        Err(WorkspaceError::HookTimeout { timeout_ms, .. }) => assert_eq!(timeout_ms, 1500),
        other => panic!("{other:?}"),
    }
    // No host configured for the hook: nothing runs.
    assert!(
        !mgr.run_hook_on(HookKind::AfterCreate, &ws, &env, Some(&host))
            .unwrap_or_else(|e| panic!("{e}"))
            .ran
    );
    // A host that cannot be reached fails the hook with ssh's status.
    let gone = sshd.host_entry(&format!("127.0.0.1:{}", closed_port()));
    match mgr.run_hook_on(HookKind::BeforeRun, &ws, &env, Some(&gone)) {
        Err(WorkspaceError::HookFailed {
            exit_code, output, ..
        }) => {
            assert_eq!(exit_code, Some(255));
            assert!(output.contains("refused"), "{output}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn prepare_on_creates_the_remote_workspace_and_runs_after_create_there() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let root = sshd.dir.path().join("deep").join("root");
    let mgr = WorkspaceManager::new(
        root.clone(),
        HookScripts {
            after_create: Some(
                "ls -A > ../after_create.ls; echo \"$SORTIE_SSH_HOST\" > marker".into(),
            ),
            before_remove: Some("echo bye > ../before_remove.ran".into()),
            ..HookScripts::default()
        },
    );
    let (ws, lock) = mgr
        .prepare_on(&issue("PROJ-9"), 0, Some(&host))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ws.created_now);
    assert_eq!(ws.path, root.join("PROJ-9"));
    // after_create ran on the host, in the new (empty) workspace.
    assert_eq!(
        std::fs::read_to_string(ws.path.join("marker")).unwrap_or_default(),
        "sortie-test-host\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("after_create.ls")).unwrap_or_default(),
        ""
    );
    // The local lock is held: a second prepare is refused while it is.
    assert!(matches!(
        mgr.prepare_on(&issue("PROJ-9"), 1, Some(&host)),
        Err(WorkspaceError::Locked { .. })
    ));
    drop(lock);

    // The agent's files are read through the host.
    let dot = ws.path.join(".sortie");
    std::fs::write(dot.join("status"), "blocked\nneeds a token\n")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dot.join("scm.json"),
        r#"{"branch":"b","pr_number":3,"owner":"o","repo":"r"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let st = status_file::read_on(&ws.path, Some(&host));
    assert_eq!(st, status_file::read(&ws.path));
    assert_eq!(st.outcome, Some(status_file::DeclaredOutcome::Blocked));
    assert_eq!(st.statement.as_deref(), Some("needs a token"));
    let rec = pr_record::read_on(&ws.path, Some(&host));
    assert_eq!(rec, pr_record::read(&ws.path));
    assert_eq!(
        rec.record.as_ref().and_then(|r| r.pull_request()),
        Some(("o", "r", 3))
    );

    // Reused: not created again, after_create not run again, the stale status removed.
    std::fs::remove_file(ws.path.join("marker")).unwrap_or_else(|e| panic!("{e}"));
    let (again, lock) = mgr
        .prepare_on(&issue("PROJ-9"), 1, Some(&host))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!again.created_now);
    assert!(!again.path.join("marker").exists());
    assert!(!dot.join("status").exists());
    assert_eq!(
        status_file::read_on(&ws.path, Some(&host)),
        Default::default()
    );
    drop(lock);

    // Terminal cleanup: before_remove on the host, then the directory is gone.
    assert!(
        mgr.remove_on("id-PROJ-9", "PROJ-9", Some(&host))
            .unwrap_or_else(|e| panic!("{e}"))
    );
    assert!(root.join("before_remove.ran").exists());
    assert!(!ws.path.exists());
    assert!(
        !mgr.remove_on("id-PROJ-9", "PROJ-9", Some(&host))
            .unwrap_or_else(|e| panic!("{e}"))
    );
}

#[test]
fn a_failed_after_create_on_the_host_removes_the_remote_workspace() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let root = sshd.dir.path().join("root");
    let mgr = WorkspaceManager::new(
        root.clone(),
        HookScripts {
            after_create: Some("touch half-done; exit 9".into()),
            ..HookScripts::default()
        },
    );
    match mgr.prepare_on(&issue("PROJ-3"), 0, Some(&host)) {
        Err(WorkspaceError::HookFailed { exit_code, .. }) => assert_eq!(exit_code, Some(9)),
        other => panic!("{other:?}"),
    }
    assert!(!root.join("PROJ-3").exists());
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}
