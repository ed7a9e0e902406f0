//! Shared helpers of the HTTP integration tests: a temp workflow, the real `sortie` binary on a
//! free 127.0.0.1 port, and a tiny HTTP/1.1 client (raw sockets, so tests control every header).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    l.local_addr()
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("addr: {e}"))
}

/// A mock-agent workflow over the file tracker; `agent_extra` and `mock_extra` are YAML lines
/// appended to the `agent:` and `mock:` blocks.
pub fn mock_workflow(agent_extra: &str, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_concurrent_agents: 4\n  max_retry_backoff_ms: 600000\n{agent_extra}mock:\n  model_name: mock-model\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

pub fn issues(list: &[(&str, &str, &str)]) -> String {
    let items: Vec<Value> = list
        .iter()
        .map(|(id, ident, state)| {
            serde_json::json!({
                "id": id, "identifier": ident, "title": format!("Title of {ident}"),
                "state": state, "priority": 1, "labels": ["Bug"], "issue_type": "Bug",
                "url": format!("https://tracker.example/{ident}"),
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            })
        })
        .collect();
    serde_json::to_string_pretty(&items).unwrap_or_default()
}

/// A running daemon; killed on drop.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    pub log: PathBuf,
}

pub struct Setup {
    pub dir: tempfile::TempDir,
}

impl Setup {
    pub fn new(workflow: &str, issues_json: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::write(dir.path().join("WORKFLOW.md"), workflow).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("issues.json"), issues_json)
            .unwrap_or_else(|e| panic!("{e}"));
        Setup { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn start(&self, env: &[(&str, &str)]) -> Daemon {
        self.start_on(free_port(), env)
    }

    pub fn start_on(&self, port: u16, env: &[(&str, &str)]) -> Daemon {
        let log = self.path().join(format!("sortie-{port}.log"));
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sortie"));
        cmd.arg("--port")
            .arg(port.to_string())
            .arg(self.path().join("WORKFLOW.md"))
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn sortie: {e}"));
        let d = Daemon {
            child,
            port,
            dir: self.path().to_path_buf(),
            log,
        };
        d.wait_until("the server answers", Duration::from_secs(20), || {
            d.try_get("/livez").is_some()
        });
        d
    }
}

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One request with `Connection: close`; `headers` are added as given (a `Host` header is
/// added unless one is given).
pub fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (h, body) = text.split_once("\r\n\r\n")?;
    let mut lines = h.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Some(Resp {
        status,
        headers,
        body: body.to_string(),
    })
}

impl Daemon {
    pub fn try_get(&self, path: &str) -> Option<Resp> {
        request(self.port, "GET", path, &[])
    }
    pub fn get(&self, path: &str) -> Resp {
        self.try_get(path)
            .unwrap_or_else(|| panic!("GET {path} failed; log:\n{}", self.log_text()))
    }
    pub fn post(&self, path: &str) -> Resp {
        request(self.port, "POST", path, &[])
            .unwrap_or_else(|| panic!("POST {path} failed; log:\n{}", self.log_text()))
    }
    pub fn state(&self) -> Value {
        self.get("/api/v1/state").json()
    }
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `cond` until it holds or the deadline passes (then panics with `what`).
    pub fn wait_until(&self, what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for {what}; log:\n{}", self.log_text());
    }

    /// Waits for a state document that satisfies `pred`, and returns it.
    pub fn wait_state(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut found = Value::Null;
        self.wait_until(what, timeout, || {
            let s = self.state();
            let ok = pred(&s);
            if ok {
                found = s;
            }
            ok
        });
        found
    }

    /// SIGTERM and wait for the exit.
    pub fn stop(mut self) -> Option<i32> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: String,
    pub event: String,
    pub data: Value,
    pub at: Instant,
}

/// A reader of an open event stream.
pub struct Stream {
    pub reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<String>,
}

pub fn open_stream(port: u16, path_and_query: &str, headers: &[(&str, &str)]) -> Stream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut head = format!("GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut w = s.try_clone().unwrap_or_else(|e| panic!("{e}"));
    w.write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader
        .read_line(&mut status_line)
        .unwrap_or_else(|e| panic!("{e}"));
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
        }
        headers.push(l.trim().to_string());
    }
    Stream {
        reader,
        status,
        headers,
    }
}

impl Stream {
    /// The next frame, or `None` at end of stream or timeout.
    pub fn next_frame(&mut self, timeout: Duration) -> Option<Frame> {
        self.reader.get_ref().set_read_timeout(Some(timeout)).ok()?;
        let (mut id, mut event, mut data) = (String::new(), String::new(), String::new());
        loop {
            let mut l = String::new();
            let n = self.reader.read_line(&mut l).ok()?;
            if n == 0 {
                return None;
            }
            let l = l.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if event.is_empty() && data.is_empty() {
                    continue;
                }
                return Some(Frame {
                    id,
                    event,
                    data: serde_json::from_str(&data).unwrap_or(Value::Null),
                    at: Instant::now(),
                });
            }
            if let Some(v) = l.strip_prefix("id: ") {
                id = v.to_string();
            } else if let Some(v) = l.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data = v.to_string();
            }
        }
    }

    /// Frames until one matches `pred` (returned last) or the deadline passes.
    pub fn until(&mut self, timeout: Duration, pred: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_frame(left.max(Duration::from_millis(1))) {
                Some(f) => {
                    let done = pred(&f);
                    out.push(f);
                    if done {
                        return out;
                    }
                }
                None => return out,
            }
        }
        out
    }
}
