//! Temp projects for the real binary: a workflow file, the file tracker's `issues.json`, the
//! scripted fake agent's per-issue scenarios. [`Project`] writes a fake-agent workflow with the
//! port in its `server:` block; [`Setup`] takes a workflow text and passes the port as `--port`.

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use serde_json::Value;

use super::daemon::{Daemon, FAKE_AGENT, free_port, spawn};

/// Rewrites the `server:` block's `port:` line of the workflow at `path` to `port`.
pub fn set_server_port(path: &Path, port: u16) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let key = "\nserver:\n  port: ";
    let start = text
        .find(key)
        .map(|i| i + key.len())
        .unwrap_or_else(|| panic!("no `server: port:` in {}:\n{text}", path.display()));
    let end = start
        + text[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len() - start);
    let new = format!("{}{port}{}", &text[..start], &text[end..]);
    std::fs::write(path, new).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A test project: temp dir with WORKFLOW.md, issues.json, per-issue fake-agent scenarios.
pub struct Project {
    pub dir: tempfile::TempDir,
    port: AtomicU16,
}

impl Project {
    pub fn new() -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("scenarios")).expect("scenarios dir");
        Project {
            dir,
            port: AtomicU16::new(free_port()),
        }
    }

    /// The port the workflow names (the one the last started daemon listens on).
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::SeqCst)
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
    pub fn issues(&self, issues: Value) {
        self.write(
            "issues.json",
            &serde_json::to_string_pretty(&issues).expect("json"),
        );
    }

    pub fn read_issues(&self) -> Value {
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
                    i["state"] = Value::String(state.into());
                }
            }
        }
        self.issues(v);
    }

    /// The fake-agent scenario for one issue identifier (or `default`).
    pub fn scenario(&self, identifier: &str, lines: &[Value]) {
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

    /// Like [`fake_agent_workflow`](Self::fake_agent_workflow) with `tracker_yaml` lines (e.g.
    /// `handoff_state`) under `tracker:`.
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
{agent_env}{max_turns}{agent_yaml}
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
            port = self.port(),
            // The fake agent reads its script from `FAKE_AGENT_*` variables, which an agent
            // gets only when `agent.env` names them.
            agent_env = if agent_yaml.contains("  env:") {
                ""
            } else {
                "  env: [FAKE_AGENT_*]\n"
            },
        );
        self.write("WORKFLOW.md", &wf);
    }

    /// Starts the daemon in this project (stderr appended to `sortie.log`).
    pub fn start(&self) -> Daemon {
        self.start_with(&[])
    }

    /// Starts the daemon with these variables added to its environment.
    pub fn start_with_env(&self, vars: &[(&str, &str)]) -> Daemon {
        self.start_inner(&[], vars)
    }

    /// Starts the daemon with `extra_args` before the workflow path. When the workflow's port
    /// is taken, the workflow is rewritten with a fresh one (see [`spawn`]).
    pub fn start_with(&self, extra_args: &[&str]) -> Daemon {
        self.start_inner(extra_args, &[])
    }

    fn start_inner(&self, extra_args: &[&str], vars: &[(&str, &str)]) -> Daemon {
        std::fs::create_dir_all(self.path("markers")).expect("markers dir");
        spawn(&self.path("sortie.log"), Some(self.port()), |port| {
            if port != self.port() {
                set_server_port(&self.workflow(), port);
                self.port.store(port, Ordering::SeqCst);
            }
            let mut cmd = super::sortie_command();
            cmd.current_dir(self.dir.path())
                .args(extra_args)
                .arg(self.workflow())
                .env("FAKE_AGENT_SCENARIO", ".scenario")
                .env("FAKE_AGENT_ARGV_LOG", self.path("argv.log"))
                .env("SORTIE_TEST_SCENARIOS", self.path("scenarios"))
                .env("SORTIE_TEST_MARKERS", self.path("markers"))
                .envs(vars.iter().copied())
                .env_remove("RUST_LOG");
            cmd
        })
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

/// A mock-agent workflow over the file tracker; `agent_extra` and `mock_extra` are YAML lines
/// appended to the `agent:` and `mock:` blocks.
pub fn mock_workflow(agent_extra: &str, mock_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_concurrent_agents: 4\n  max_retry_backoff_ms: 600000\n{agent_extra}mock:\n  model_name: mock-model\n{mock_extra}---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

/// An issues file: `(id, identifier, state)` each, with a title, labels and timestamps.
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

/// A temp dir holding a given workflow and issues file; each daemon started from it gets the
/// port as `--port` and its own log file.
pub struct Setup {
    pub dir: tempfile::TempDir,
    starts: AtomicU32,
}

impl Setup {
    pub fn new(workflow: &str, issues_json: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::write(dir.path().join("WORKFLOW.md"), workflow).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("issues.json"), issues_json)
            .unwrap_or_else(|e| panic!("{e}"));
        Setup {
            dir,
            starts: AtomicU32::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts a daemon with `env` added, on a free port, logging to `sortie-<n>.log`.
    pub fn start(&self, env: &[(&str, &str)]) -> Daemon {
        let n = self.starts.fetch_add(1, Ordering::SeqCst) + 1;
        let log = self.path().join(format!("sortie-{n}.log"));
        spawn(&log, None, |port| {
            let mut cmd = super::sortie_command();
            cmd.arg("--port")
                .arg(port.to_string())
                .arg(self.path().join("WORKFLOW.md"))
                .current_dir(self.path());
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd
        })
    }
}

/// A mock-agent daemon whose one issue `T-1` stays running (a turn of ten minutes, three events
/// per turn), so the live lists and the run's events are populated. `agent_extra` as in
/// [`mock_workflow`] (it must keep `max_turns`).
pub fn running_mock_daemon(agent_extra: &str) -> (Setup, Daemon) {
    let s = Setup::new(
        &mock_workflow(
            agent_extra,
            "  turn_delay_ms: 600000\n  events_per_turn: 3\n",
        ),
        &issues(&[("1", "T-1", "To Do")]),
    );
    let d = s.start(&[]);
    d.wait_state(
        "a running session",
        std::time::Duration::from_secs(30),
        |s| {
            s["running"][0]["issue_identifier"] == "T-1"
                && s["running"][0]["last_event_at"].is_string()
        },
    );
    (s, d)
}
