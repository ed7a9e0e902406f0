//! The real `sortie` binary as a test daemon: spawned with its stderr in a log file, ready once
//! its own log says it listens on the port it was given and `/livez` answers, killed on drop.
//!
//! Ports: port 0 disables sortie's HTTP server, so a test cannot let the kernel choose. A
//! candidate port is taken from [`free_port`] instead, and when another process binds it first
//! sortie exits with "Address already in use"; [`spawn`] then starts it again on a fresh port
//! (bounded attempts). Readiness is read from the daemon's own log line, never from whoever
//! answers on the port, so a test cannot talk to another test's daemon by mistake.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::http::{Resp, get_ok, request};
use super::wait::{POLL, poll};

pub const SORTIE: &str = env!("CARGO_BIN_EXE_sortie");
pub const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");

/// Spawns before giving up when every candidate port turned out taken.
const ATTEMPTS: usize = 8;
/// How long a daemon may take to bind and answer.
const READY: Duration = Duration::from_secs(30);
/// How long a SIGTERM'd daemon may take to drain and exit.
const DRAIN: Duration = Duration::from_secs(60);

/// A candidate TCP port on 127.0.0.1: free a moment ago. Another process may bind it before
/// the daemon does; [`spawn`] handles that by retrying.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("bind an ephemeral port: {e}"))
}

/// Starts the daemon that `command(port)` describes (program, arguments, environment, working
/// directory; stdio is set here: stdin and stdout null, stderr appended to `log`), first on
/// `first_port` when given, and waits until it listens on that port. When the port is taken,
/// the daemon is started again on a fresh port (so `command` must write the port wherever it
/// goes). Panics, with the log, when the daemon exits for another reason or is not ready in
/// time.
pub fn spawn(
    log: &Path,
    first_port: Option<u16>,
    mut command: impl FnMut(u16) -> Command,
) -> Daemon {
    for attempt in 0..ATTEMPTS {
        let port = match first_port {
            Some(p) if attempt == 0 => p,
            _ => free_port(),
        };
        let offset = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        let mut cmd = command(port);
        super::sandbox_mode::apply(&cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn sortie: {e}"));
        let mut d = Daemon {
            child,
            port,
            log: log.to_path_buf(),
            graceful_drop: false,
        };
        if d.await_listening(offset) {
            d.wait_until("the server answers", READY, || {
                d.try_get("/livez").is_some()
            });
            return d;
        }
        // The port was taken: try another. The failed attempt's output stays in the log, since
        // what it did before binding (e.g. absorbing lost sessions) is not done again.
        let _ = d.child.wait();
    }
    panic!("sortie found no free port in {ATTEMPTS} attempts");
}

/// Whether `log` says the HTTP server listens on `port` (text or JSON log format).
pub fn listening_on(log: &str, port: u16) -> bool {
    let addr = format!(":{port}");
    log.lines()
        .filter(|l| l.contains("http server listening"))
        .any(|l| {
            l.match_indices(&addr).any(|(i, m)| {
                !l[i + m.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            })
        })
}

/// A running daemon; killed on drop (SIGKILL, or the graceful SIGTERM drain when
/// `graceful_drop` is set, so no agent is orphaned).
pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
    pub graceful_drop: bool,
}

impl Daemon {
    /// Waits until the log (from byte `offset`) says the server listens on our port: `true`.
    /// `false` when the daemon exited because the port was taken; panics otherwise.
    fn await_listening(&mut self, offset: u64) -> bool {
        let deadline = Instant::now() + READY;
        loop {
            let exited = self.child.try_wait().ok().flatten();
            let text = self.log_since(offset);
            if listening_on(&text, self.port) {
                return true;
            }
            if let Some(status) = exited {
                if text.contains("Address already in use") {
                    return false;
                }
                panic!(
                    "sortie exited ({status}) before listening on port {}; log:\n{text}",
                    self.port
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "sortie did not listen on port {} within {READY:?}; log:\n{text}",
                    self.port
                );
            }
            std::thread::sleep(POLL);
        }
    }

    fn log_since(&self, offset: u64) -> String {
        let bytes = std::fs::read(&self.log).unwrap_or_default();
        let from = (offset as usize).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }

    /// The whole log file (every life of the daemon that shares it).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Resp> {
        request(self.port, method, path, headers)
    }
    /// A GET with any status; `None` when nothing answers.
    pub fn try_get(&self, path: &str) -> Option<Resp> {
        self.request("GET", path, &[])
    }
    /// A GET's body when the answer is 2xx; `None` otherwise.
    pub fn get_ok(&self, path: &str) -> Option<String> {
        get_ok(self.port, path)
    }
    /// A GET that must be answered (any status).
    pub fn get(&self, path: &str) -> Resp {
        self.try_get(path)
            .unwrap_or_else(|| panic!("GET {path} failed; log:\n{}", self.log_text()))
    }
    /// A POST that must be answered (any status).
    pub fn post(&self, path: &str) -> Resp {
        self.request("POST", path, &[])
            .unwrap_or_else(|| panic!("POST {path} failed; log:\n{}", self.log_text()))
    }
    /// The state document; `None` when not answered or not JSON.
    pub fn try_state(&self) -> Option<Value> {
        self.get_ok("/api/v1/state")
            .and_then(|b| serde_json::from_str(&b).ok())
    }
    /// The state document, which must be served.
    pub fn state(&self) -> Value {
        self.get("/api/v1/state").json()
    }

    /// Polls `cond` until it holds or the deadline passes (then panics with `what` and the log).
    pub fn wait_until(&self, what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
        if poll(timeout, POLL, || cond().then_some(())).is_none() {
            panic!(
                "timed out after {timeout:?} waiting for {what}; log:\n{}",
                self.log_text()
            );
        }
    }

    /// Waits for a state document that satisfies `pred`, and returns it.
    pub fn wait_state(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut found = Value::Null;
        self.wait_until(what, timeout, || match self.try_state() {
            Some(s) if pred(&s) => {
                found = s;
                true
            }
            _ => false,
        });
        found
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for the exit (up to 60 s, then SIGKILL): the exit status, `None` when
    /// it had to be killed.
    pub fn terminate_status(&mut self) -> Option<ExitStatus> {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let status = poll(DRAIN, POLL, || self.child.try_wait().ok().flatten());
        if status.is_none() {
            self.kill9();
        }
        status
    }

    /// SIGTERM and wait: the exit code (`None` when killed by a signal or after the deadline).
    pub fn terminate(&mut self) -> Option<i32> {
        self.terminate_status().and_then(|s| s.code())
    }

    /// [`terminate`](Self::terminate), consuming the daemon.
    pub fn stop(mut self) -> Option<i32> {
        self.terminate()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            if self.graceful_drop {
                self.terminate_status();
            } else {
                self.kill9();
            }
        }
    }
}
