//! Whether a sandbox can start here: `true` runs under the very command line an agent gets
//! from this configuration ([`super::wrap_command`]: the same namespaces, system view,
//! `read_only`/`read_write` mounts, masks, and with `network: allowlist` the proxy and the
//! forwarder), in a scratch workspace. `sortie validate` and startup run the check at once
//! ([`probe_now`]); the dispatch preflight reads the last result ([`cached_problem`]), which a
//! background thread refreshes every [`REFRESH`], so the orchestrator never waits on a
//! process.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Sandbox;
use super::error::SandboxError;

/// How long one check may take before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How old the cached result may get before a refresh starts.
const REFRESH: Duration = Duration::from_secs(30);
/// Bytes of `bwrap`'s stderr kept for the message.
const STDERR_CAP: u64 = 2048;

struct Cached {
    /// The configuration checked ([`profile`]).
    profile: Sandbox,
    at: Instant,
    result: Result<(), SandboxError>,
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
pub fn probe_now(sb: &Sandbox) -> Result<(), SandboxError> {
    let profile = profile(sb);
    let result = run_probe(&profile);
    if let Ok(mut s) = STATE.lock() {
        s.last = Some(Cached {
            profile,
            at: Instant::now(),
            result: result.clone(),
        });
    }
    result
}

/// What the check runs with: `sb` without its home seeds, which are copied, not mounted (the
/// check does not copy them every [`REFRESH`]).
fn profile(sb: &Sandbox) -> Sandbox {
    Sandbox {
        home_seed: Vec::new(),
        ..sb.clone()
    }
}

/// The last check's problem for `sb`; a check older than [`REFRESH`] is re-run on a thread of
/// its own. With no result for this configuration yet the sandbox counts as not ready
/// ([`SandboxError::Checking`]) until the check ends.
pub fn cached_problem(sb: &Sandbox) -> Option<SandboxError> {
    let Ok(mut s) = STATE.lock() else {
        return Some(SandboxError::setup(
            "the sandbox check",
            "its state is unavailable",
        ));
    };
    let wanted = profile(sb);
    let fresh = s.last.as_ref().filter(|c| c.profile == wanted);
    let stale = fresh.is_none_or(|c| c.at.elapsed() >= REFRESH);
    let answer = match fresh {
        Some(c) => c.result.clone().err(),
        None => Some(SandboxError::Checking),
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

fn run_probe(sb: &Sandbox) -> Result<(), SandboxError> {
    let bwrap = super::find_bwrap().ok_or(SandboxError::NotInstalled)?;
    let scratch = super::temp_dir::private_temp_dir("sortie-sandbox-check")?;
    let result = probe_in(sb, &bwrap, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// A fresh owner-only directory under the temporary directory, standing for a workspace.
fn probe_in(sb: &Sandbox, bwrap: &Path, workspace: &Path) -> Result<(), SandboxError> {
    let mut cmd = super::wrap_command(sb, "true", &[], workspace, None)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| SandboxError::CannotStart {
            bwrap: bwrap.to_path_buf(),
            detail: e.to_string(),
        })?;
    let (tx, rx) = crossbeam_channel::bounded(1);
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.take(STDERR_CAP).read_to_end(&mut buf);
            let _ = tx.send(String::from_utf8_lossy(&buf).trim().to_string());
        });
    }
    let status = wait_deadline(&mut child, bwrap)?;
    if status.success() {
        return Ok(());
    }
    let said = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
    Err(SandboxError::CannotStart {
        bwrap: bwrap.to_path_buf(),
        detail: format!("{status}: {said}"),
    })
}

fn wait_deadline(
    child: &mut std::process::Child,
    bwrap: &Path,
) -> Result<std::process::ExitStatus, SandboxError> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SandboxError::Timeout {
                    bwrap: bwrap.to_path_buf(),
                    secs: PROBE_TIMEOUT.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(SandboxError::io(bwrap, e)),
        }
    }
}
