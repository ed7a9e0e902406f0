//! Server configuration through the real binary: explicit busy port, port 0, `--host`,
//! the default port when busy, `server.port` from the workflow, and masking of served strings.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn run_to_exit(args: &[&str], dir: &std::path::Path, timeout: Duration) -> (Option<i32>, String) {
    let log = dir.join("exit.log");
    let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let mut child = common::sortie_command()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return (st.code(), std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, std::fs::read_to_string(&log).unwrap_or_default())
}

/// Starts sortie in `dir` with `args`, stderr to `log_name`, and waits (up to 20 s) until it
/// logs `sortie started`. Returns the child, still running, and the log so far.
fn start_logged(
    args: &[&str],
    dir: &std::path::Path,
    log_name: &str,
) -> (std::process::Child, String) {
    let log = dir.join(log_name);
    let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let child = common::sortie_command()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("sortie started") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, text)
}

#[test]
fn an_explicit_busy_port_exits_1() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = busy.local_addr().map(|a| a.port()).unwrap_or(0).to_string();
    let wf = s.path().join("WORKFLOW.md").display().to_string();
    let (code, log) = run_to_exit(&["--port", &port, &wf], s.path(), Duration::from_secs(20));
    assert_eq!(code, Some(1), "log:\n{log}");
    assert!(log.contains("cannot listen"), "log:\n{log}");
}

#[test]
fn host_must_be_an_ip_address() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let wf = s.path().join("WORKFLOW.md").display().to_string();
    let (code, log) = run_to_exit(
        &["--host", "localhost", "--port", "1", &wf],
        s.path(),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "log:\n{log}");
    assert!(log.contains("must be an IP address"), "log:\n{log}");
}

#[test]
fn port_0_disables_the_server() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let wf = s.path().join("WORKFLOW.md").display().to_string();
    let (mut child, text) = start_logged(&["--port", "0", &wf], s.path(), "p0.log");
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("http server disabled"), "log:\n{text}");
    assert!(!text.contains("http server listening"), "log:\n{text}");
}

#[test]
fn server_port_from_the_workflow_is_used() {
    let port = free_port();
    let wf = mock_workflow("", "").replacen(
        "agent:\n",
        &format!("server:\n  port: {port}\nagent:\n"),
        1,
    );
    let s = Setup::new(&wf, &issues(&[]));
    let log = s.path().join("wfport.log");
    let workflow = s.path().join("WORKFLOW.md");
    // No --port: the port reaches sortie only through the workflow (rewritten if it was taken).
    let d = spawn(&log, Some(port), |port| {
        set_server_port(&workflow, port);
        let mut cmd = common::sortie_command();
        cmd.arg(&workflow).current_dir(s.path());
        cmd
    });
    let port = d.port;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ok = false;
    while Instant::now() < deadline {
        if request(port, "GET", "/livez", &[]).is_some_and(|r| r.status == 200) {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(d);
    assert!(
        ok,
        "log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Runs only when the test can hold the default port itself (otherwise something else owns
/// it and the outcome would not be ours to assert).
#[test]
fn a_busy_default_port_runs_without_the_server() {
    let Ok(_busy) = std::net::TcpListener::bind("127.0.0.1:7678") else {
        eprintln!("skipped: 127.0.0.1:7678 is in use by another process");
        return;
    };
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let wf = s.path().join("WORKFLOW.md").display().to_string();
    let (mut child, text) = start_logged(&[&wf], s.path(), "default.log");
    let still_running = matches!(child.try_wait(), Ok(None));
    let _ = child.kill();
    let _ = child.wait();
    assert!(still_running, "log:\n{text}");
    assert!(text.contains("running without HTTP server"), "log:\n{text}");
}

#[test]
fn served_strings_are_masked() {
    let secret = "sekrit-token-4242";
    let wf = mock_workflow("  max_turns: 1\n", "  turn_delay_ms: 600000\n").replacen(
        "  kind: file\n",
        &format!("  kind: file\n  api_key: {secret}\n"),
        1,
    );
    let list =
        issues(&[("1", "M-1", "To Do")]).replace("Title of M-1", &format!("Title {secret} here"));
    let s = Setup::new(&wf, &list);
    let d = s.start(&[]);
    let st = d.wait_state("a running session", Duration::from_secs(30), |s| {
        s["counts"]["running"] == 1
    });
    assert_eq!(st["running"][0]["issue_title"], "Title [redacted] here");
    let body = d.get("/api/v1/state").body;
    assert!(!body.contains(secret));
    let detail = d.get("/api/v1/M-1").body;
    assert!(!detail.contains(secret));
    assert!(detail.contains("Title [redacted] here"));
}

#[test]
fn the_end_of_the_accept_loop_is_fatal() {
    // A low hard limit on open files makes accept() fail (EMFILE) once clients hold them all;
    // tiny_http's accept loop then ends for good and sortie must exit non-zero.
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let log = s.path().join("emfile.log");
    let mut d = spawn(&log, None, |port| {
        let script = format!(
            "ulimit -n 64 && exec '{}' --port {port} '{}'",
            SORTIE,
            s.path().join("WORKFLOW.md").display()
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]).current_dir(s.path());
        cmd
    });
    let (port, child) = (d.port, &mut d.child);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answered = false;
    while Instant::now() < deadline {
        if request(port, "GET", "/livez", &[]).is_some() {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut held = Vec::new();
    let mut code = None;
    while Instant::now() < deadline + Duration::from_secs(10) {
        if let Ok(Some(st)) = child.try_wait() {
            code = st.code();
            break;
        }
        if held.len() < 200
            && let Ok(c) = std::net::TcpStream::connect(("127.0.0.1", port))
        {
            held.push(c);
            continue;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if code.is_none() {
        let _ = child.kill();
    }
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(answered, "never answered; log:\n{text}");
    assert_eq!(code, Some(1), "log:\n{text}");
    assert!(text.contains("http server stopped"), "log:\n{text}");
}
