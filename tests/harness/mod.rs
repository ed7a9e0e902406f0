//! Shared helpers for integration tests that run the real `sortie` binary against a temp
//! directory: a workflow file, the file tracker's issues.json, the scripted fake agent, a free
//! port, SQLite reads, and condition waits with deadlines (never fixed sleeps).
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SORTIE: &str = env!("CARGO_BIN_EXE_sortie");
pub const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A test project: temp dir with WORKFLOW.md, issues.json, per-issue fake-agent scenarios.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Project {
    pub fn new() -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("scenarios")).expect("scenarios dir");
        Project {
            dir,
            port: free_port(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn workflow(&self) -> PathBuf {
        self.path("WORKFLOW.md")
    }

    pub fn db(&self) -> PathBuf {
        self.path(".sortie.db")
    }

    pub fn workspace(&self, identifier: &str) -> PathBuf {
        self.path("ws").join(identifier)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("parent dir");
        }
        std::fs::write(p, text).expect("write file");
    }

    /// Writes the issues file (a JSON array).
    pub fn issues(&self, issues: serde_json::Value) {
        self.write(
            "issues.json",
            &serde_json::to_string_pretty(&issues).expect("json"),
        );
    }

    pub fn read_issues(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path("issues.json")).expect("read issues");
        serde_json::from_str(&text).expect("issues json")
    }

    /// The state of one issue in the issues file.
    pub fn issue_state(&self, id: &str) -> String {
        self.read_issues()
            .as_array()
            .and_then(|a| a.iter().find(|i| i["id"] == id))
            .and_then(|i| i["state"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Sets an issue's state in the file (as a person would).
    pub fn set_issue_state(&self, id: &str, state: &str) {
        let mut v = self.read_issues();
        if let Some(arr) = v.as_array_mut() {
            for i in arr.iter_mut() {
                if i["id"] == id {
                    i["state"] = serde_json::Value::String(state.into());
                }
            }
        }
        self.issues(v);
    }

    /// The fake-agent scenario for one issue identifier (or `default`).
    pub fn scenario(&self, identifier: &str, lines: &[serde_json::Value]) {
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        self.write(
            &format!("scenarios/{identifier}.jsonl"),
            &(text.join("\n") + "\n"),
        );
    }

    /// A workflow using the file tracker and the fake agent (claude-code kind). `extra_yaml`
    /// is appended to the front matter; `agent_yaml` lines go under `agent:`.
    pub fn fake_agent_workflow(&self, agent_yaml: &str, extra_yaml: &str) {
        self.fake_agent_workflow_full("  handoff_state: Review", agent_yaml, extra_yaml)
    }

    /// Like [`fake_agent_workflow`] with `tracker_yaml` lines (e.g. `handoff_state`) under `tracker:`.
    pub fn fake_agent_workflow_full(&self, tracker_yaml: &str, agent_yaml: &str, extra_yaml: &str) {
        let wf = format!(
            r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
{tracker_yaml}
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  after_create: |
    cp "$SORTIE_TEST_SCENARIOS/$SORTIE_ISSUE_IDENTIFIER.jsonl" .scenario 2>/dev/null || cp "$SORTIE_TEST_SCENARIOS/default.jsonl" .scenario 2>/dev/null || true
  before_remove: echo "$SORTIE_ISSUE_IDENTIFIER" >> "$SORTIE_TEST_MARKERS/removed.log"
agent:
  kind: claude-code
  command: {agent}
{max_turns}{agent_yaml}
server:
  port: {port}
{extra_yaml}
---
Work on {{{{ .issue.identifier }}}}: {{{{ .issue.title }}}}
"#,
            root = self.path("ws").display(),
            max_turns = if agent_yaml.contains("max_turns") {
                ""
            } else {
                "  max_turns: 1\n"
            },
            agent = FAKE_AGENT,
            port = self.port,
        );
        self.write("WORKFLOW.md", &wf);
    }

    /// Starts the daemon in this project (stderr captured to `sortie.log`).
    pub fn start(&self) -> Daemon {
        self.start_with(&[])
    }

    pub fn start_with(&self, extra_args: &[&str]) -> Daemon {
        std::fs::create_dir_all(self.path("markers")).expect("markers dir");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("sortie.log"))
            .expect("log file");
        let mut cmd = Command::new(SORTIE);
        cmd.current_dir(self.dir.path())
            .args(extra_args)
            .arg(self.workflow())
            .env("FAKE_AGENT_SCENARIO", ".scenario")
            .env("FAKE_AGENT_ARGV_LOG", self.path("argv.log"))
            .env("SORTIE_TEST_SCENARIOS", self.path("scenarios"))
            .env("SORTIE_TEST_MARKERS", self.path("markers"))
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().expect("spawn sortie");
        let d = Daemon {
            child,
            port: self.port,
        };
        wait_for("the HTTP server", Duration::from_secs(20), || {
            d.get("/livez").map(|_| ())
        });
        d
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("sortie.log")).unwrap_or_default()
    }

    /// Opens the database read-only.
    pub fn db_conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.db(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .expect("open db")
    }

    /// Runs a query returning one i64 (0 on error, e.g. before the table exists).
    pub fn db_i64(&self, sql: &str) -> i64 {
        if !self.db().exists() {
            return 0;
        }
        self.db_conn()
            .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Run statuses of an issue, oldest first.
    pub fn run_statuses(&self, issue_id: &str) -> Vec<String> {
        if !self.db().exists() {
            return Vec::new();
        }
        let conn = self.db_conn();
        let mut st = conn
            .prepare("SELECT status FROM run_history WHERE issue_id = ?1 ORDER BY id")
            .expect("prepare");
        st.query_map([issue_id], |r| r.get::<_, String>(0))
            .expect("query")
            .filter_map(Result::ok)
            .collect()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- sortie.log ----\n{}", self.log());
        }
    }
}

/// A running daemon; killed on drop.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
}

impl Daemon {
    /// A GET returning the body on 2xx, `None` otherwise (or when not listening).
    pub fn get(&self, path: &str) -> Option<String> {
        let resp = ureq::get(&format!("http://127.0.0.1:{}{}", self.port, path))
            .call()
            .ok()?;
        let mut body = String::new();
        resp.into_body()
            .into_reader()
            .read_to_string(&mut body)
            .ok()?;
        Some(body)
    }

    pub fn state(&self) -> Option<serde_json::Value> {
        self.get("/api/v1/state")
            .and_then(|b| serde_json::from_str(&b).ok())
    }

    /// Waits until the state document satisfies `pred`.
    pub fn wait_state(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        wait_for(what, timeout, || self.state().filter(|s| pred(s)))
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32)?;
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                self.kill9();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill9();
        }
    }
}

/// Does any file under `dir` exist?
pub fn exists(p: &Path) -> bool {
    p.exists()
}
