//! `worker.sandbox.network` through the real binary (issue 40): with `allowlist` an agent
//! reaches an allowed local HTTP server through sortie's proxy (plain and `CONNECT`), a
//! server the workflow does not allow is refused, logged, counted in `/metrics` and on the
//! running row, and nothing is reachable without the proxy; with `none` neither server
//! answers, with `host` both do. `validate` accepts `allowlist` and refuses a malformed
//! `allow_hosts` entry. Needs `bwrap` (Debian's `bubblewrap` package).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
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

/// An HTTP server on 127.0.0.1 that answers every request with `name`; returns its port.
fn server(name: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    match c.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => return,
                    }
                }
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                    name.len()
                );
            });
        }
    });
    port
}

fn read_json(p: &Project, rel: &str) -> Option<Value> {
    let text = std::fs::read_to_string(p.path(rel)).ok()?;
    serde_json::from_str(&text).ok()
}

struct Run {
    p: Project,
    d: common::Daemon,
    allowed: String,
    denied: String,
    denied_port: u16,
    session_id: String,
}

/// Starts a session of `N-1` that fetches both servers (plainly, then through `CONNECT`),
/// tries the allowed one directly, and waits for `ws/N-1/release`. `network` is the
/// `worker.sandbox` map's `network` line; `{allowed}` in it is replaced by the allowed port.
fn start(network: &str) -> Run {
    let (ok_port, denied_port) = (server("allowed-server"), server("other-server"));
    let allowed = format!("http://127.0.0.1:{ok_port}/hello");
    let denied = format!("http://127.0.0.1:{denied_port}/hello");
    let p = Project::new();
    p.issues(
        json!([{"id": "1", "identifier": "N-1", "title": "Net", "state": "To Do", "priority": 1}]),
    );
    let release = p.path("ws/N-1/release").display().to_string();
    let go = p.path("ws/N-1/go").display().to_string();
    p.scenario(
        "N-1",
        &[
            json!({"init": {}}),
            json!({"wait_file": go}),
            json!({"http_get": {"urls": [allowed, denied], "report": "plain.json"}}),
            json!({"http_get": {"urls": [allowed, denied], "tunnel": true, "report": "tunnel.json"}}),
            json!({"probe_access": {"connect": [format!("127.0.0.1:{ok_port}")], "report": "direct.json"}}),
            json!({"wait_file": release}),
            json!({"result": {"text": "fetched"}}),
        ],
    );
    let worker = format!(
        "worker:\n  sandbox:\n    kind: bubblewrap\n{}",
        network.replace("{allowed}", &ok_port.to_string())
    );
    p.fake_agent_workflow("  env: [FAKE_AGENT_SCENARIO]\n", &worker);
    let d = p.start();
    // The requests wait until the daemon has taken the session's start, so a refusal's log
    // line can name the session.
    let session_id = wait_for("the session's id", Duration::from_secs(60), || {
        let id = d.state()["running"][0]["session_id"].as_str()?.to_string();
        (!id.is_empty()).then_some(id)
    });
    p.write("ws/N-1/go", "");
    wait_for("the agent's reports", Duration::from_secs(60), || {
        read_json(&p, "ws/N-1/direct.json")
    });
    Run {
        p,
        d,
        allowed,
        denied,
        denied_port,
        session_id,
    }
}

impl Run {
    fn said(&self, report: &str, url: &str) -> String {
        read_json(&self.p, &format!("ws/N-1/{report}")).unwrap_or_default()[url]
            .as_str()
            .unwrap_or("missing")
            .to_string()
    }

    fn finish(self) {
        self.p.write("ws/N-1/release", "");
        self.d.stop();
    }
}

#[test]
fn allowlist_lets_through_only_the_allowed_server() {
    bwrap_present();
    let run = start("    network: allowlist\n    allow_hosts: [\"127.0.0.1:{allowed}\"]\n");
    for report in ["plain.json", "tunnel.json"] {
        assert_eq!(
            run.said(report, &run.allowed),
            "200 allowed-server",
            "{report}"
        );
        // A plain request reads the refusal's status; a tunnel, the proxy's status line.
        let refused = run.said(report, &run.denied);
        assert!(
            refused.starts_with("403 sortie sandbox: 127.0.0.1:")
                || refused == "HTTP/1.1 403 Forbidden",
            "{report}: {refused}"
        );
    }
    // The proxy is the only way out: a direct connection finds nothing.
    let direct = read_json(&run.p, "ws/N-1/direct.json").unwrap_or_default();
    let direct = direct["connect"].as_object().cloned().unwrap_or_default();
    assert!(
        direct
            .values()
            .all(|v| v.as_str().is_some_and(|s| s.starts_with("error:"))),
        "{direct:?}"
    );

    // Both refusals are logged with the session's fields, counted, and on the running row.
    let log = run.p.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sandbox denied a connection"))
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    for l in &lines {
        for field in [
            "issue_id=1",
            "issue_identifier=N-1",
            &format!("session_id={}", run.session_id),
            "host=127.0.0.1",
            &format!("port={}", run.denied_port),
        ] {
            assert!(l.contains(field), "{field} in {l}");
        }
    }
    let metrics = run.d.get("/metrics").body;
    assert!(
        metrics.contains("\nsortie_sandbox_denied_connections_total 2\n"),
        "{metrics}"
    );
    // The state document may be one build behind the agent's events (readers are served the
    // previous document while the next is built), so wait for one built after the denials.
    let state = run.d.wait_state(
        "the denials on the running row",
        Duration::from_secs(30),
        |s| s["running"][0]["sandbox_denied_connections"] == 2,
    );
    assert_eq!(
        state["running"][0]["sandbox_denied_connections"], 2,
        "{state}"
    );
    // The session's proxy ends with its sandbox and removes its socket.
    let prefix = format!("sortie-proxy-{}-", run.d.child.id());
    let proxies = || -> usize {
        std::fs::read_dir(std::env::temp_dir())
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(proxies(), 1);
    run.p.write("ws/N-1/release", "");
    wait_for(
        "the proxy gone with its sandbox",
        Duration::from_secs(30),
        || (proxies() == 0).then_some(()),
    );
    // The turn's end finds the sandbox's own processes on their way out: not escapees.
    run.d
        .wait_until("the turn completed", Duration::from_secs(30), || {
            run.p.log().contains("turn completed")
        });
    let log = run.p.log();
    assert!(!log.contains("escaped agent process killed"), "{log}");
    run.finish();
}

#[test]
fn network_none_reaches_neither_server_and_host_reaches_both() {
    bwrap_present();
    let none = start("    network: none\n");
    for url in [&none.allowed, &none.denied] {
        let said = none.said("plain.json", url);
        assert!(said.starts_with("error:"), "{url}: {said}");
    }
    let state = none.d.state();
    assert!(
        state["running"][0]
            .get("sandbox_denied_connections")
            .is_none(),
        "{state}"
    );
    none.finish();

    let host = start("    network: host\n");
    assert_eq!(host.said("plain.json", &host.allowed), "200 allowed-server");
    assert_eq!(host.said("plain.json", &host.denied), "200 other-server");
    host.finish();
}

fn validate(p: &Project) -> (Option<i32>, String) {
    let out = common::sortie_command()
        .current_dir(p.path(""))
        .arg("validate")
        .arg(p.workflow())
        .output()
        .expect("run sortie validate");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

#[test]
fn validate_accepts_allowlist_and_names_a_bad_entry() {
    bwrap_present();
    let p = Project::new();
    p.issues(json!([]));
    let sandbox = |hosts: &str| {
        format!(
            "worker:\n  sandbox:\n    kind: bubblewrap\n    network: allowlist\n    allow_hosts: {hosts}\n"
        )
    };
    p.fake_agent_workflow("", &sandbox("[api.example.com, \"*.example.org:443\"]"));
    let (code, said) = validate(&p);
    assert_eq!(code, Some(0), "{said}");

    p.fake_agent_workflow(
        "",
        &sandbox("[api.example.com, \"https://x.example.org/v1\"]"),
    );
    let (code, said) = validate(&p);
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("worker.sandbox.allow_hosts[1]"), "{said}");
    assert!(said.contains("without a scheme or path"), "{said}");

    // The daemon refuses to start on it too (a load error, so /readyz is never up).
    let out = common::sortie_command()
        .current_dir(p.path(""))
        .arg(p.workflow())
        .output()
        .expect("run sortie");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("worker.sandbox.allow_hosts[1]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
