//! Whether a sandbox can start here: `bwrap` runs `true` with the same namespaces and system
//! mounts a session gets. `sortie validate` and startup run the check at once
//! ([`probe_now`]); the dispatch preflight reads the last result ([`cached_problem`]), which a
//! background thread refreshes every [`REFRESH`], so the orchestrator never waits on a
//! process.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Network, PACKAGE_HINT, Sandbox};

/// How long one check may take before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How old the cached result may get before a refresh starts.
const REFRESH: Duration = Duration::from_secs(30);
/// Bytes of `bwrap`'s stderr kept for the message.
const STDERR_CAP: u64 = 2048;

struct Cached {
    network: Network,
    at: Instant,
    result: Result<(), String>,
}

struct State {
    last: Option<Cached>,
    refreshing: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    last: None,
    refreshing: false,
});

/// `bwrap` on `PATH` (then `/usr/bin/bwrap`).
pub fn find_bwrap() -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|d| d.join("bwrap"))
        .chain(std::iter::once(PathBuf::from("/usr/bin/bwrap")))
        .find(|p| p.is_file())
}

/// Runs the check now and records its result for [`cached_problem`].
pub fn probe_now(sb: &Sandbox) -> Result<(), String> {
    let result = run_probe(sb.network);
    if let Ok(mut s) = STATE.lock() {
        s.last = Some(Cached {
            network: sb.network,
            at: Instant::now(),
            result: result.clone(),
        });
    }
    result
}

/// The last check's problem for `sb`'s network mode; a check older than [`REFRESH`] is
/// re-run on a thread of its own. With no result for this mode yet the sandbox counts as not
/// ready ("still being checked") until the check ends.
pub fn cached_problem(sb: &Sandbox) -> Option<String> {
    let Ok(mut s) = STATE.lock() else {
        return Some("the sandbox check state is unavailable".into());
    };
    let fresh = s.last.as_ref().filter(|c| c.network == sb.network);
    let stale = fresh.is_none_or(|c| c.at.elapsed() >= REFRESH);
    let answer = match fresh {
        Some(c) => c.result.clone().err(),
        None => Some("the sandbox is still being checked".into()),
    };
    if stale && !s.refreshing {
        s.refreshing = true;
        let sb = sb.clone();
        let started = std::thread::Builder::new()
            .name("sandbox-probe".into())
            .spawn(move || {
                let _ = probe_now(&sb);
                if let Ok(mut s) = STATE.lock() {
                    s.refreshing = false;
                }
            });
        if started.is_err() {
            s.refreshing = false;
        }
    }
    answer
}

fn run_probe(network: Network) -> Result<(), String> {
    let bwrap =
        find_bwrap().ok_or_else(|| format!("bwrap was not found in PATH; {PACKAGE_HINT}"))?;
    let sb = Sandbox {
        network,
        ..Sandbox::default()
    };
    let mut child = Command::new(&bwrap)
        .args(super::bwrap_argv(&sb, None, "true", &[]))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{}: {e}; {PACKAGE_HINT}", bwrap.display()))?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.take(STDERR_CAP).read_to_end(&mut buf);
            let _ = tx.send(String::from_utf8_lossy(&buf).trim().to_string());
        });
    }
    let status = wait_deadline(&mut child, &bwrap)?;
    if status.success() {
        return Ok(());
    }
    let said = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
    Err(format!(
        "{} cannot start a sandbox ({status}): {said}; {PACKAGE_HINT}, and allow unprivileged user namespaces or run as root",
        bwrap.display()
    ))
}

fn wait_deadline(
    child: &mut std::process::Child,
    bwrap: &Path,
) -> Result<std::process::ExitStatus, String> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not finish a trivial sandbox within {} s",
                    bwrap.display(),
                    PROBE_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{}: {e}", bwrap.display())),
        }
    }
}
