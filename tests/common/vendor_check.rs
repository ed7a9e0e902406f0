//! Every exchange a vendor fake serves is checked against the vendor's own API description
//! (`tools/vendor-specs`), so the tracker, contract and reaction tests that drive the adapters
//! through the fakes are conformance checks too: a request the adapter sends that the
//! description does not accept, or an answer of the fake that the vendor would not give, fails
//! the test with the checker's words (see `tools/vendor-check/check.js`: Prism's validators for
//! the REST descriptions, graphql-js for Linear's SDL).
//!
//! The checker is installed pinned into `target/vendor-check` by
//! `scripts/vendor-check-install.sh`. One checker process serves every test process:
//! `target/vendor-check-run/server` records its pid, port and the fingerprint of the checker and
//! the descriptions, and it is reused while that process is alive and nothing changed. It is
//! left running after the tests; `.ci/run` stops it at its end and
//! `scripts/vendor-check-install.sh --stop` does so by hand. Without the checker the fakes skip
//! the check, unless `CI` is set: then they fail, since CI installs it.
//!
//! A violation the vendor's own documentation contradicts is excused by an entry of
//! `tools/vendor-specs/allowlist.yaml` naming the operation, the clause and the documentation.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fake_server::{Recorded, Reply};

/// How long the checker may take to start listening.
const START: Duration = Duration::from_secs(60);
/// How long one check may take (the first of a vendor loads its description).
pub const CHECK: Duration = Duration::from_secs(180);
/// What the checker prints once it serves.
const READY_LINE: &str = "vendor-check listening on 127.0.0.1:";

/// The vendors whose descriptions the checker has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    Gitea,
    Gitlab,
    Jira,
    Linear,
}

impl Vendor {
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Gitea => "gitea",
            Vendor::Gitlab => "gitlab",
            Vendor::Jira => "jira",
            Vendor::Linear => "linear",
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn modules() -> PathBuf {
    root().join("target/vendor-check/node_modules")
}

fn script() -> PathBuf {
    root().join("tools/vendor-check/check.js")
}

fn specs() -> PathBuf {
    root().join("tools/vendor-specs")
}

fn run_dir() -> PathBuf {
    root().join("target/vendor-check-run")
}

/// Whether the pinned install is there.
pub fn installed() -> bool {
    modules()
        .join("@stoplight/prism-http/package.json")
        .is_file()
        && modules().join("graphql/package.json").is_file()
}

/// The checker's address, started when none serves; `None` (after saying why once) when it is
/// not installed and `CI` is unset. Panics when `CI` is set and it is missing.
pub fn checker() -> Option<String> {
    static ADDR: OnceLock<Option<String>> = OnceLock::new();
    ADDR.get_or_init(|| {
        if !installed() {
            let why = "the vendor checker is not installed (run scripts/vendor-check-install.sh)";
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("SKIP vendor description check: {why}");
            return None;
        }
        let dir = run_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let _lock = lock_file(&dir.join("start.lock"));
        Some(format!("127.0.0.1:{}", ensure_server(&dir)))
    })
    .clone()
}

/// What the checker said about one exchange.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// The described operation the request matched, as `METHOD /path (operationId: summary)`.
    pub operation: Option<String>,
    pub request: Vec<String>,
    pub response: Vec<String>,
}

/// Checks one exchange (`reply` is `None` for an answer that is a deliberate fault). Identical
/// exchanges are checked once per process.
pub fn check(addr: &str, vendor: Vendor, req: &Recorded, reply: Option<&Reply>) -> Verdict {
    let payload = json!({
        "method": req.method,
        "path": req.path,
        "query": req.query,
        "headers": req.headers,
        "body": req.body,
        "response": reply.map(|r| json!({
            "status": r.status,
            "headers": r.headers,
            "body": String::from_utf8_lossy(&r.body),
        })),
    });
    let key = format!("{}\n{payload}", vendor.name());
    static SEEN: OnceLock<Mutex<HashMap<String, Verdict>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(v) = seen.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return v.clone();
    }
    // A checker that fails to answer is a violation of its own, so the test says so.
    let verdict = ask(addr, vendor, &payload).unwrap_or_else(|e| Verdict {
        operation: None,
        request: vec![format!(
            "the vendor checker did not check this exchange: {e}"
        )],
        response: Vec::new(),
    });
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, verdict.clone());
    verdict
}

fn ask(addr: &str, vendor: Vendor, payload: &Value) -> Result<Verdict, String> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(CHECK))
            .http_status_as_error(false)
            .build(),
    );
    let url = format!("http://{addr}/check/{}", vendor.name());
    let mut resp = agent
        .post(&url)
        .send_json(payload)
        .map_err(|e| format!("{url}: {e}"))?;
    let text = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("{url}: answer: {e}"))?;
    if resp.status().as_u16() != 200 {
        return Err(format!("{url}: status {}: {text}", resp.status()));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}: {text}"))?;
    let list = |k: &str| -> Vec<String> {
        v[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    Ok(Verdict {
        operation: v["operation"].as_str().map(String::from),
        request: list("request"),
        response: list("response"),
    })
}

/// One excused contradiction: the vendor's documentation says otherwise than its description.
#[derive(Debug, serde::Deserialize)]
pub struct Allowed {
    pub vendor: String,
    /// The requests it covers, as `METHOD /path` with `{name}` standing for one path segment.
    pub requests: Vec<String>,
    /// Texts of the violations it excuses (one of them is contained in the violation).
    pub clauses: Vec<String>,
    /// Where the vendor's documentation says otherwise, and what it says.
    pub docs: String,
}

impl Allowed {
    fn covers(&self, vendor: Vendor, req: &Recorded, text: &str) -> bool {
        self.vendor == vendor.name()
            && self
                .requests
                .iter()
                .any(|r| template_matches(r, &req.method, &req.path))
            && self.clauses.iter().any(|c| text.contains(c.as_str()))
    }
}

/// Whether `METHOD /a/{x}/b` names this request (`{x}` is one non-empty segment).
fn template_matches(template: &str, method: &str, path: &str) -> bool {
    let Some((m, t)) = template.split_once(' ') else {
        return false;
    };
    let (want, got): (Vec<&str>, Vec<&str>) = (t.split('/').collect(), path.split('/').collect());
    m.eq_ignore_ascii_case(method)
        && want.len() == got.len()
        && want.iter().zip(&got).all(|(w, g)| {
            if w.starts_with('{') && w.ends_with('}') {
                !g.is_empty()
            } else {
                w == g
            }
        })
}

/// The allowlist (`tools/vendor-specs/allowlist.yaml`).
pub fn allowlist() -> &'static [Allowed] {
    static LIST: OnceLock<Vec<Allowed>> = OnceLock::new();
    LIST.get_or_init(|| {
        let path = specs().join("allowlist.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let list: Vec<Allowed> =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for a in &list {
            assert!(
                !a.requests.is_empty() && !a.clauses.is_empty() && a.docs.contains("https://"),
                "{}: every entry names the requests, the clauses and the vendor's documentation: {a:?}",
                path.display()
            );
        }
        list
    })
}

/// The violations of a verdict that no allowlist entry excuses, each naming the exchange, with
/// a key that is the same for the same violation of another exchange of the operation.
pub fn unexcused(vendor: Vendor, req: &Recorded, v: &Verdict) -> Vec<(String, String)> {
    let excused = |text: &str| allowlist().iter().any(|a| a.covers(vendor, req, text));
    let target = if req.query.is_empty() {
        format!("{} {}", req.method, req.path)
    } else {
        format!("{} {}?{}", req.method, req.path, req.query)
    };
    let mut out = Vec::new();
    for (side, list) in [("request", &v.request), ("answer", &v.response)] {
        for text in list.iter().filter(|t| !excused(t)) {
            let key = match &v.operation {
                Some(op) => format!("{op} [{side}] {text}"),
                None => format!("{target} [{side}] {text}"),
            };
            let message = format!(
                "{target} [{side}] {text}\n    operation: {}",
                v.operation.as_deref().unwrap_or("none matched")
            );
            out.push((key, message));
        }
    }
    out
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

/// Sizes and modification times of the checker, its install and the descriptions: a change
/// restarts the checker.
fn fingerprint() -> String {
    let mut files = vec![
        script(),
        root().join("target/vendor-check/package-lock.json"),
    ];
    if let Ok(entries) = std::fs::read_dir(specs()) {
        let mut specs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        specs.sort();
        files.extend(specs);
    }
    let mut out = String::new();
    for f in files {
        if let Ok(m) = std::fs::metadata(&f) {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            out.push_str(&format!("{}:{mtime};", m.len()));
        }
    }
    format!("{:x}", fnv(out.as_bytes()))
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The port of a live checker of the current fingerprint, started when there is none. Called
/// with the start lock held.
fn ensure_server(dir: &Path) -> u16 {
    let record = dir.join("server");
    let want = fingerprint();
    let previous = std::fs::read_to_string(&record).unwrap_or_default();
    let fields: Vec<&str> = previous.split_whitespace().collect();
    if let [pid, port, print] = fields[..]
        && let (Ok(pid), Ok(port)) = (pid.parse::<u32>(), port.parse::<u16>())
    {
        if print == want
            && is_checker(pid)
            && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
        if is_checker(pid) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    let (pid, port) = launch(dir);
    std::fs::write(&record, format!("{pid} {port} {want}\n"))
        .unwrap_or_else(|e| panic!("{}: {e}", record.display()));
    port
}

/// Whether `pid` is a live (not zombie) checker process.
fn is_checker(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(") ")
        .is_some_and(|(_, r)| r.starts_with('Z'));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    !stat.is_empty() && !zombie && String::from_utf8_lossy(&cmdline).contains("check.js")
}

/// Starts the checker on a port of its choosing, logging to `checker.log`, and waits until it
/// serves. The child is deliberately not waited on: it outlives this test process to serve the
/// next ones.
#[allow(clippy::zombie_processes)]
fn launch(dir: &Path) -> (u32, u16) {
    let log_path = dir.join("checker.log");
    let log = File::create(&log_path).unwrap_or_else(|e| panic!("{}: {e}", log_path.display()));
    let err = log.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
    let mut child = Command::new("node")
        .arg(script())
        .arg(specs())
        .arg("0")
        .env("NODE_PATH", modules())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start node {}: {e}", script().display()));
    let deadline = Instant::now() + START;
    loop {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&log_path) {
            let _ = f.read_to_string(&mut text);
        }
        if let Some(port) = text
            .split(READY_LINE)
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .and_then(|p| p.trim().parse().ok())
        {
            return (child.id(), port);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the vendor checker exited ({status}) while starting:\n{text}");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the vendor checker is not serving after {START:?}:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
