//! `worker.sandbox: bubblewrap` through the real binary (issue 40): what an agent can reach
//! with and without the sandbox, `network: none`, the availability check in `validate` and
//! `/readyz`, and no sandboxed process left after a stall, a cancel, SIGTERM or SIGKILL of the
//! daemon. Needs `bwrap` (Debian's `bubblewrap` package); without it the tests say so and fail.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

fn bwrap_present() {
    assert!(
        Path::new("/usr/bin/bwrap").exists(),
        "these tests need bwrap: apt-get install -y bubblewrap"
    );
}

fn one_issue(p: &Project, id: &str) {
    p.issues(json!([{"id": "1", "identifier": id, "title": "Sandboxed", "state": "To Do", "priority": 1}]));
}

/// A fake-agent workflow passing only the scenario variable (the argv log lives outside the
/// workspace), with `worker:` lines when given.
fn workflow(p: &Project, agent_yaml: &str, worker_yaml: &str) {
    let worker = if worker_yaml.is_empty() {
        String::new()
    } else {
        format!("worker:\n{worker_yaml}")
    };
    p.fake_agent_workflow(
        &format!("  env: [FAKE_AGENT_SCENARIO]\n{agent_yaml}"),
        &worker,
    );
}

struct Targets {
    reads: Vec<String>,
    writes: Vec<String>,
}

/// Another issue's workspace, the database, the workflow's `.env`, the daemon's `~/.ssh`
/// (and `/root/.ssh` when this machine has one); writes into another workspace and into the
/// project directory.
fn targets(p: &Project) -> Targets {
    p.write("ws/OTHER-9/secret.txt", "another issue's work");
    p.write(".env", "SORTIE_SOMETHING=1\n");
    p.write("home/.ssh/id_test", "private key");
    let s = |rel: &str| p.path(rel).display().to_string();
    let mut reads = vec![
        s("ws/OTHER-9"),
        s("ws/OTHER-9/secret.txt"),
        s(".sortie.db"),
        s(".env"),
        s("home/.ssh"),
        s("home/.ssh/id_test"),
    ];
    if Path::new("/root/.ssh").exists() {
        reads.push("/root/.ssh".into());
    }
    Targets {
        reads,
        writes: vec![s("ws/OTHER-9/escaped.txt"), s("scenarios/escaped.txt")],
    }
}

/// Runs one session of `A-1` that tries every target and returns its report.
fn run_access_probe(sandbox: bool) -> (Project, Targets, Value) {
    let p = Project::new();
    one_issue(&p, "A-1");
    let t = targets(&p);
    p.scenario(
        "A-1",
        &[
            json!({"init": {}}),
            json!({"probe_access": {"read": t.reads, "write": t.writes, "report": "access.json"}}),
            json!({"result": {"text": "probed"}}),
        ],
    );
    workflow(
        &p,
        "",
        if sandbox {
            "  sandbox: bubblewrap\n"
        } else {
            ""
        },
    );
    let home = p.path("home").display().to_string();
    let d = p.start_with_env(&[("HOME", &home)]);
    let report = wait_for("the agent's access report", Duration::from_secs(60), || {
        let text = std::fs::read_to_string(p.path("ws/A-1/access.json")).ok()?;
        serde_json::from_str::<Value>(&text).ok()
    });
    d.stop();
    (p, t, report)
}

fn results<'a>(report: &'a Value, kind: &str, paths: &'a [String]) -> Vec<(&'a str, &'a str)> {
    paths
        .iter()
        .map(|p| (p.as_str(), report[kind][p].as_str().unwrap_or("missing")))
        .collect()
}

#[test]
fn an_agent_in_the_sandbox_reaches_nothing_it_could_reach_without() {
    bwrap_present();
    let (open, t, report) = run_access_probe(false);
    for (path, said) in results(&report, "read", &t.reads)
        .into_iter()
        .chain(results(&report, "write", &t.writes))
    {
        assert_eq!(said, "ok", "without a sandbox {path}: {report}");
    }
    assert!(open.path("ws/OTHER-9/escaped.txt").exists());
    assert!(open.path("scenarios/escaped.txt").exists());

    let (boxed, t, report) = run_access_probe(true);
    for (path, said) in results(&report, "read", &t.reads)
        .into_iter()
        .chain(results(&report, "write", &t.writes))
    {
        assert!(
            said.starts_with("error:"),
            "in the sandbox {path}: {said}; {report}"
        );
    }
    assert!(!boxed.path("ws/OTHER-9/escaped.txt").exists());
    assert!(!boxed.path("scenarios/escaped.txt").exists());
    // The private home lives in the workspace.
    assert!(boxed.path("ws/A-1/.sortie/home").is_dir());
}

/// Runs one session that connects to a listener on the loopback address and returns what it
/// saw.
fn connect_probe(worker_yaml: &str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let p = Project::new();
    one_issue(&p, "N-1");
    p.scenario(
        "N-1",
        &[
            json!({"init": {}}),
            json!({"probe_access": {"connect": [addr], "report": "access.json"}}),
            json!({"result": {"text": "probed"}}),
        ],
    );
    workflow(&p, "", worker_yaml);
    let d = p.start();
    let report = wait_for(
        "the agent's connect report",
        Duration::from_secs(60),
        || {
            let text = std::fs::read_to_string(p.path("ws/N-1/access.json")).ok()?;
            serde_json::from_str::<Value>(&text).ok()
        },
    );
    d.stop();
    report["connect"][&addr]
        .as_str()
        .unwrap_or("missing")
        .to_string()
}

#[test]
fn network_none_leaves_the_agent_only_its_own_loopback() {
    bwrap_present();
    assert_eq!(connect_probe("  sandbox: bubblewrap\n"), "ok");
    let cut = connect_probe("  sandbox:\n    kind: bubblewrap\n    network: none\n");
    assert!(cut.starts_with("error:"), "{cut}");
}

/// A `bwrap` on `PATH` that cannot start anything, as on a machine without user namespaces.
fn broken_bwrap(p: &Project) -> String {
    p.write(
        "fakebin/bwrap",
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    );
    let bin = p.path("fakebin");
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(bin.join("bwrap"))
        .status();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn validate_and_readyz_fail_while_the_sandbox_cannot_start() {
    bwrap_present();
    let p = Project::new();
    one_issue(&p, "R-1");
    workflow(&p, "", "  sandbox: bubblewrap\n");
    let validate = |path: &str| {
        common::sortie_command()
            .current_dir(p.path(""))
            .env("PATH", path)
            .arg("validate")
            .arg(p.workflow())
            .output()
            .expect("run sortie validate")
    };
    let ok = validate(&std::env::var("PATH").unwrap_or_default());
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let path = broken_bwrap(&p);
    let bad = validate(&path);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&bad.stdout),
        String::from_utf8_lossy(&bad.stderr)
    );
    assert_ne!(bad.status.code(), Some(0), "{said}");
    assert!(said.contains("bubblewrap"), "{said}");
    assert!(said.contains("No permissions"), "{said}");

    let d = p.start_with_env(&[("PATH", &path)]);
    let checks = wait_for("/readyz failing", Duration::from_secs(30), || {
        let r = d.get("/readyz");
        let v: Value = serde_json::from_str(&r.body).ok()?;
        (r.status == 503).then(|| v["checks"].clone())
    });
    assert_eq!(checks["preflight"], "fail", "{checks}");
    assert!(
        p.log()
            .contains("the sandbox cannot start; nothing is dispatched until it can"),
        "{}",
        p.log()
    );
    // Nothing was dispatched meanwhile.
    assert!(!p.path("ws/R-1").exists());
    d.stop();
}

/// A `bwrap` on `PATH` that refuses to bind `refused` and runs the real one otherwise.
fn picky_bwrap(p: &Project, refused: &Path) -> String {
    p.write(
        "fakebin/bwrap",
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = '{}' ]; then echo \"bwrap: Can't bind mount $a: Operation not permitted\" >&2; exit 1; fi\ndone\nexec /usr/bin/bwrap \"$@\"\n",
            refused.display()
        ),
    );
    let bin = p.path("fakebin");
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(bin.join("bwrap"))
        .status();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_check_starts_the_configured_profile_not_only_the_namespaces() {
    bwrap_present();
    let p = Project::new();
    one_issue(&p, "R-2");
    let shared = p.path("shared");
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("{e}"));
    let path = picky_bwrap(&p, &shared);
    let validate = || {
        common::sortie_command()
            .current_dir(p.path(""))
            .env("PATH", &path)
            .arg("validate")
            .arg(p.workflow())
            .output()
            .expect("run sortie validate")
    };
    // The same bwrap starts a profile without the mount.
    workflow(&p, "", "  sandbox: bubblewrap\n");
    let ok = validate();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let sandbox = format!(
        "  sandbox:\n    kind: bubblewrap\n    read_write: [{:?}]\n",
        shared.display().to_string()
    );
    workflow(&p, "", &sandbox);
    let bad = validate();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&bad.stdout),
        String::from_utf8_lossy(&bad.stderr)
    );
    assert_ne!(bad.status.code(), Some(0), "{said}");
    assert!(said.contains("Can't bind mount"), "{said}");

    let d = p.start_with_env(&[("PATH", &path)]);
    let checks = wait_for("/readyz failing", Duration::from_secs(30), || {
        let r = d.get("/readyz");
        let v: Value = serde_json::from_str(&r.body).ok()?;
        (r.status == 503).then(|| v["checks"].clone())
    });
    assert_eq!(checks["preflight"], "fail", "{checks}");
    assert!(!p.path("ws/R-2").exists());
    d.stop();
}

/// `(pid, turn token)` of the live processes of `p`'s sessions (their environment names the
/// project's workspace root).
fn session_processes(p: &Project) -> Vec<(u32, String)> {
    let marker = p.path("ws").display().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rfind(')')
                        .and_then(|i| s.get(i + 2..i + 3).map(|c| c != "Z" && c != "X"))
                })
                .unwrap_or(false)
        })
        .filter_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let vars: Vec<String> = env
                .split(|b| *b == 0)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            if !vars.iter().any(|v| v.contains(&marker)) {
                return None;
            }
            let token = vars
                .iter()
                .find_map(|v| v.strip_prefix("SORTIE_AGENT_TOKEN="))?;
            Some((pid, token.to_string()))
        })
        .collect()
}

fn in_other_pid_namespace(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    ns(&pid.to_string()).is_some_and(|n| Some(n) != ns("self"))
}

/// Starts a sandboxed session of `S-1` whose agent leaves a SIGTERM-proof group member and a
/// `setsid` grandchild, then hangs silently; returns the daemon and the session's tokens once
/// at least four of its processes run (`bwrap`, the namespace's init, the agent, its
/// children).
fn hanging_sandboxed_session(p: &Project, agent_yaml: &str) -> (common::Daemon, BTreeSet<String>) {
    one_issue(p, "S-1");
    p.scenario(
        "S-1",
        &[
            json!({"init": {}}),
            json!({"spawn_grandchild": true}),
            json!({"spawn_setsid_grandchild": {"pid_file": "grandchild.pid"}}),
            json!({"assistant": {"text": "working", "input_tokens": 5, "output_tokens": 1}}),
            json!({"hang": true}),
        ],
    );
    workflow(
        p,
        &format!("  stop_grace_ms: 500\n{agent_yaml}"),
        "  sandbox: bubblewrap\n",
    );
    let d = p.start();
    let procs = wait_for(
        "the sandboxed session's processes",
        Duration::from_secs(60),
        || {
            let procs = session_processes(p);
            (procs.len() >= 4 && p.path("ws/S-1/grandchild.pid").exists()).then_some(procs)
        },
    );
    assert!(
        procs.iter().any(|(pid, _)| in_other_pid_namespace(*pid)),
        "the agent runs in a PID namespace of its own: {procs:?}"
    );
    let tokens = procs.into_iter().map(|(_, t)| t).collect();
    (d, tokens)
}

fn wait_gone(p: &Project, tokens: &BTreeSet<String>, what: &str) {
    wait_for(what, Duration::from_secs(30), || {
        let left: Vec<(u32, String)> = session_processes(p)
            .into_iter()
            .filter(|(_, t)| tokens.contains(t))
            .collect();
        left.is_empty().then_some(())
    });
}

#[test]
fn no_sandboxed_process_survives_sigkill_of_the_daemon() {
    bwrap_present();
    let p = Project::new();
    let (mut d, tokens) = hanging_sandboxed_session(&p, "");
    d.kill9();
    wait_gone(&p, &tokens, "every sandboxed process gone after SIGKILL");
}

#[test]
fn no_sandboxed_process_survives_sigterm_of_the_daemon() {
    bwrap_present();
    let p = Project::new();
    let (mut d, tokens) = hanging_sandboxed_session(&p, "");
    assert_eq!(d.terminate(), Some(0));
    wait_gone(&p, &tokens, "every sandboxed process gone after SIGTERM");
}

#[test]
fn no_sandboxed_process_survives_a_stall() {
    bwrap_present();
    let p = Project::new();
    let (d, tokens) = hanging_sandboxed_session(&p, "  stall_timeout_ms: 1500\n");
    wait_gone(&p, &tokens, "the stalled session's sandbox gone");
    d.stop();
}

#[test]
fn no_sandboxed_process_survives_a_cancel() {
    bwrap_present();
    let p = Project::new();
    let (d, tokens) = hanging_sandboxed_session(&p, "");
    // The issue leaves the active states: reconciliation cancels the session.
    p.issues(json!([{"id": "1", "identifier": "S-1", "title": "Sandboxed", "state": "Done", "priority": 1}]));
    wait_gone(&p, &tokens, "the cancelled session's sandbox gone");
    d.stop();
}
