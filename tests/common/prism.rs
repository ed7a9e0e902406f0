//! Prism (`@stoplight/prism-cli`) serving GitHub's own OpenAPI description
//! (`@octokit/openapi`), both installed pinned into `target/prism` by
//! `scripts/prism-install.sh`. Prism validates every request against the description and logs
//! each violation; tests read the log lines their requests produced.
//!
//! Loading the 13 MB document takes Prism a while, and nextest runs each test in its own
//! process, so one Prism serves every test process: `target/prism-run/server` records its pid,
//! port and the document's fingerprint, and is reused while that process is alive and the
//! document unchanged. Prism is left running after the tests (in its own process group, so
//! nothing waits on it); `.ci/run` stops it at its end and `scripts/prism-install.sh --stop`
//! does so by hand.
//!
//! A [`Session`] holds `target/prism-run/session.lock` for its whole life, so tests using
//! Prism run one at a time and the log between a session's start and end is its own.

mod proxy;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use proxy::Answer;

/// How long Prism may take to load the document (it is slower while cargo builds).
const LOAD: Duration = Duration::from_secs(300);
/// How long Prism may take to log a request the relay has already been answered.
const LOG_FLUSH: Duration = Duration::from_secs(30);
/// What Prism prints once it serves.
const READY_LINE: &str = "Prism is listening on";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn prism_bin() -> PathBuf {
    root().join("target/prism/node_modules/.bin/prism")
}

/// GitHub's REST API description for api.github.com.
pub fn document() -> PathBuf {
    root().join("target/prism/node_modules/@octokit/openapi/generated/api.github.com.json")
}

fn run_dir() -> PathBuf {
    root().join("target/prism-run")
}

/// Whether the pinned install is there.
pub fn installed() -> bool {
    prism_bin().is_file() && document().is_file()
}

/// `None` (after printing why) when Prism is not installed and `CI` is unset; panics when
/// `CI` is set, since CI installs it.
pub fn session_or_skip(answer: Answer) -> Option<Session> {
    if installed() {
        return Some(Session::start(answer));
    }
    let why = "Prism not installed (run scripts/prism-install.sh)";
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("SKIP OpenAPI check: {why}");
    None
}

/// One test's use of the shared Prism, through a relay (see `proxy`).
pub struct Session {
    /// Base URL to give sortie as `tracker.endpoint`.
    pub url: String,
    prism_addr: String,
    log: PathBuf,
    start: u64,
    relay_errors: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _lock: File,
}

/// What Prism logged during a session.
#[derive(Debug)]
pub struct Report {
    /// `"<method> <path>"` of each request Prism received, in order (method lowercased).
    pub requests: Vec<String>,
    /// Request violations and rejected requests, as Prism worded them, plus relay failures.
    pub violations: Vec<String>,
    /// The session's log, for failure messages.
    pub log: String,
}

impl Session {
    /// The relay's port (what [`Session::url`] names).
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("relay url {}", self.url))
    }

    fn start(answer: Answer) -> Session {
        let dir = run_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let lock = lock_file(&dir.join("session.lock"));
        let port = ensure_server(&dir);
        let log = dir.join("prism.log");
        let start = file_len(&log);
        let prism_addr = format!("127.0.0.1:{port}");
        let relay = proxy::start(prism_addr.clone(), answer);
        Session {
            url: relay.url,
            prism_addr,
            log,
            start,
            relay_errors: relay.errors,
            _lock: lock,
        }
    }

    /// Everything Prism logged since the session started, once it has logged a marker request
    /// sent after all of the test's requests.
    pub fn report(&self) -> Report {
        let marker = format!(
            "/repos/sortie-log-marker/r{}-{}/issues",
            std::process::id(),
            self.start
        );
        send_marker(&self.prism_addr, &marker);
        let want = format!("get {marker} ");
        let deadline = Instant::now() + LOG_FLUSH;
        let text = loop {
            let text = read_from(&self.log, self.start);
            if text.contains(&want) {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "Prism did not log the marker request within {LOG_FLUSH:?}:\n{text}"
            );
            std::thread::sleep(super::wait::POLL);
        };
        let mut report = parse_log(&text, &want);
        if let Ok(errs) = self.relay_errors.lock() {
            report.violations.extend(errs.iter().cloned());
        }
        report
    }
}

/// Splits a Prism log into requests and violations, up to the line holding `end`.
pub fn parse_log(text: &str, end: &str) -> Report {
    let mut requests = Vec::new();
    let mut violations = Vec::new();
    let mut log = String::new();
    for line in text.lines() {
        if line.contains(end) {
            break;
        }
        log.push_str(line);
        log.push('\n');
        if let Some(rest) = line.split("[HTTP SERVER] ").nth(1) {
            if let Some(req) = rest
                .split(" ℹ")
                .next()
                .filter(|_| rest.contains("Request received"))
            {
                requests.push(req.trim().to_string());
            }
            if rest.contains('✖') {
                violations.push(rest.trim().to_string());
            }
        } else if let Some(rest) = line.split("[VALIDATOR] ").nth(1)
            && (rest.contains('✖') || rest.contains('⚠'))
        {
            violations.push(rest.trim().to_string());
        }
    }
    Report {
        requests,
        violations,
        log,
    }
}

fn lock_file(path: &Path) -> File {
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    f
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path)
        && f.seek(SeekFrom::Start(offset)).is_ok()
    {
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

/// The document's size and modification time: a changed install restarts Prism.
fn fingerprint() -> String {
    let m = std::fs::metadata(document()).unwrap_or_else(|e| panic!("document: {e}"));
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}:{mtime}", m.len())
}

/// The port of a live Prism serving the current document, started when there is none.
/// Called with the session lock held.
fn ensure_server(dir: &Path) -> u16 {
    let record = dir.join("server");
    let want = fingerprint();
    let previous = std::fs::read_to_string(&record).unwrap_or_default();
    let fields: Vec<&str> = previous.split_whitespace().collect();
    if let [pid, port, print] = fields[..]
        && let (Ok(pid), Ok(port)) = (pid.parse::<u32>(), port.parse::<u16>())
    {
        if print == want && is_prism(pid) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return port;
        }
        if is_prism(pid) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    let (pid, port) = launch(dir);
    std::fs::write(&record, format!("{pid} {port} {want}\n"))
        .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
    port
}

/// Whether `pid` is a live (not zombie) Prism process.
fn is_prism(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(") ")
        .is_some_and(|(_, r)| r.starts_with('Z'));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    !stat.is_empty() && !zombie && String::from_utf8_lossy(&cmdline).contains("prism")
}

/// Starts Prism on a free port, logging to a fresh `prism.log`, and waits until it serves. The child is deliberately not waited on:
/// it outlives this test process to serve the next ones.
#[allow(clippy::zombie_processes)]
fn launch(dir: &Path) -> (u32, u16) {
    let port = super::daemon::free_port();
    let log_path = dir.join("prism.log");
    // A new Prism starts a new log (no session is reading: the caller holds the lock).
    File::create(&log_path).unwrap_or_else(|e| panic!("{}: {e}", log_path.display()));
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .unwrap_or_else(|e| panic!("{}: {e}", log_path.display()));
    let _ = writeln!(log, "--- starting Prism on port {port}");
    let err = log.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
    let mut child = Command::new(prism_bin())
        .args([
            "mock",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--errors",
        ])
        .arg(document())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", prism_bin().display()));
    let deadline = Instant::now() + LOAD;
    let want = format!("{READY_LINE} http://127.0.0.1:{port}");
    loop {
        let text = read_from(&log_path, 0);
        if text.contains(&want) {
            return (child.id(), port);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("Prism exited ({status}) while loading:\n{text}");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("Prism not serving after {LOAD:?}:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A valid request straight to Prism whose log line marks the end of a session.
fn send_marker(addr: &str, path: &str) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect Prism: {e}"));
    s.set_read_timeout(Some(LOG_FLUSH)).ok();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("marker request: {e}"));
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
}
