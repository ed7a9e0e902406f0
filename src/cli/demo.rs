//! `sortie demo`: the embedded credential-free demo (file tracker + mock agent). Writes the
//! demo's WORKFLOW.md and issues.json into a directory — keeping files that already exist, so
//! a restart resumes the same backlog and database — then runs it like `sortie DIR/WORKFLOW.md`.
//!
//! A finished demo would otherwise show nothing on its next run (every issue has been handed
//! off), so when a dispatch pass over the backlog would dispatch nothing the demo starts afresh: the
//! backlog is rewritten and the demo's database and workspaces are removed. `--reset` does the
//! same unconditionally and also restores the embedded WORKFLOW.md.
//!
//! Nothing is read for a reset, written or removed before the demo holds its database's lock
//! (`store::lock`): a second `sortie demo` in a directory whose demo is running stops at once,
//! naming the running one's pid, and leaves its database, workspaces and files as they are.
//! The lock it holds is the one the daemon then runs under, so no other process can slip in
//! between the reset and the start.
//!
//! `--speed N` divides the demo's waits by N (the polling interval and the retry backoff cap
//! through their `SORTIE_*` overrides, the mock agent's pauses through `SORTIE_MOCK_TIME_SCALE`),
//! for tests and for a quick look; the default shows the demo unfolding over about two minutes.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::clock::SystemClock;
use crate::config::{LoadOptions, load_workflow};
use crate::orchestrator::adapters;
use crate::orchestrator::dispatch_pass::{Decision, LiveClaims, PassInput, plan, sort_candidates};
use crate::store::lock::DbLock;

use super::args::DemoArgs;
use super::run::RunOptions;

/// The demo workflow, embedded at build time.
pub const DEMO_WORKFLOW: &str = include_str!("../../examples/demo/WORKFLOW.md");
/// The demo backlog, embedded at build time.
pub const DEMO_ISSUES: &str = include_str!("../../examples/demo/issues.json");

/// Writes the demo files into `dir` unless they exist; returns the workflow path.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let wf = dir.join("WORKFLOW.md");
    for (path, text) in [
        (&wf, DEMO_WORKFLOW),
        (&dir.join("issues.json"), DEMO_ISSUES),
    ] {
        if !path.exists() {
            std::fs::write(path, text)?;
        }
    }
    Ok(wf)
}

/// Whether the demo has nothing left to dispatch: its workflow loads, its tracker reads, and a
/// dispatch pass over the candidates dispatches nothing (the issues still in an active state
/// wait on blockers). Anything unreadable counts as "not settled", so the run reports it.
fn backlog_settled(wf: &Path) -> bool {
    let Ok(workflow) = load_workflow(wf, &LoadOptions::from_process(None)) else {
        return false;
    };
    let Ok(tracker) = adapters::build_tracker(&workflow, Arc::new(SystemClock)) else {
        return false;
    };
    let Ok(mut candidates) = tracker.fetch_candidate_issues() else {
        return false;
    };
    sort_candidates(&mut candidates);
    let input = PassInput::new(&workflow.config, LiveClaims::default());
    let mut read = crate::orchestrator::dispatch_pass::tracker_reader(tracker.as_ref());
    !plan(&candidates, &input, &mut read)
        .iter()
        .any(|d| matches!(d, Decision::Dispatch))
}

/// The database the demo in `dir` runs on: its workflow's `db_path`, or the default file
/// beside WORKFLOW.md while there is no loadable workflow.
pub fn database(dir: &Path) -> PathBuf {
    match load_workflow(&dir.join("WORKFLOW.md"), &LoadOptions::from_process(None)) {
        Ok(wf) => wf.config.db_path,
        Err(_) => std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .join(crate::config::DEFAULT_DB_FILE),
    }
}

/// Starts the demo in `dir` afresh: the embedded backlog (and, with `workflow`, the embedded
/// WORKFLOW.md) is written, and the demo's database and workspaces are removed when they lie
/// inside `dir`, so nothing outside the demo's own directory is ever touched. `lock` must be
/// the lock of the demo's database (see [`database`]): without it nothing is changed.
pub fn reset(dir: &Path, workflow: bool, lock: &DbLock) -> std::io::Result<()> {
    let loaded = load_workflow(&dir.join("WORKFLOW.md"), &LoadOptions::from_process(None)).ok();
    let db = loaded
        .as_ref()
        .map_or_else(|| database(dir), |wf| wf.config.db_path.clone());
    if !lock.guards(&db) {
        return Err(std::io::Error::other(format!(
            "the lock held is not the lock of {}; nothing was changed",
            db.display()
        )));
    }
    if workflow {
        std::fs::write(dir.join("WORKFLOW.md"), DEMO_WORKFLOW)?;
    }
    std::fs::write(dir.join("issues.json"), DEMO_ISSUES)?;
    let Some(wf) = loaded else {
        return Ok(());
    };
    let canonical_dir = dir.canonicalize()?;
    let inside = |p: &Path| {
        p.canonicalize()
            .is_ok_and(|c| c.starts_with(&canonical_dir))
    };
    let db = &wf.config.db_path;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = PathBuf::from(name);
        if path.is_file() && inside(&path) {
            std::fs::remove_file(&path)?;
        }
    }
    let root = &wf.config.workspace.root;
    if root.is_dir() && inside(root) && root.canonicalize()? != canonical_dir {
        std::fs::remove_dir_all(root)?;
    }
    Ok(())
}

/// Why the demo could not be prepared; `dir` names the demo directory.
#[derive(Debug)]
enum PrepareError {
    /// Another demo holds the database lock.
    Locked(PathBuf, crate::store::StoreError),
    Reset(PathBuf, std::io::Error),
    Write(PathBuf, std::io::Error),
}

impl std::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepareError::Locked(dir, e) => write!(
                f,
                "{e}\nsortie demo: a demo is running in {}; nothing was changed (stop it first, or use another --dir)",
                dir.display()
            ),
            PrepareError::Reset(dir, e) => {
                write!(f, "cannot reset the demo in {}: {e}", dir.display())
            }
            PrepareError::Write(dir, e) => {
                write!(f, "cannot write the demo into {}: {e}", dir.display())
            }
        }
    }
}

/// Takes the demo's database lock, then starts afresh when asked (`reset`) or when nothing is
/// left to dispatch, and writes the missing demo files. Returns the workflow and the held lock.
/// A demo running in `here` holds the lock, so nothing is read for a reset, written or removed
/// beside it. `dir` names the directory in messages.
fn prepare(here: &Path, reset_asked: bool, dir: &Path) -> Result<(PathBuf, DbLock), PrepareError> {
    let lock = crate::store::lock::acquire(&database(here))
        .map_err(|e| PrepareError::Locked(dir.to_path_buf(), e))?;
    let settled = here.join("WORKFLOW.md").is_file() && backlog_settled(&here.join("WORKFLOW.md"));
    if settled {
        eprintln!(
            "sortie demo: nothing in {} is left to dispatch; starting the demo afresh",
            dir.join("issues.json").display()
        );
    }
    if reset_asked || settled {
        reset(here, reset_asked, &lock).map_err(|e| PrepareError::Reset(dir.to_path_buf(), e))?;
    }
    let wf = materialize(here).map_err(|e| PrepareError::Write(dir.to_path_buf(), e))?;
    Ok((wf, lock))
}

pub fn run(args: DemoArgs) -> i32 {
    let speed = match parse_speed(args.speed.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("sortie demo: {e}");
            return 1;
        }
    };
    let dir = PathBuf::from(&args.dir);
    let shown = dir.join("issues.json");
    // The demo's relative paths (database, workspaces) belong inside its directory, so
    // everything from here on, resets included, happens from there.
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::env::set_current_dir(&dir)) {
        eprintln!(
            "sortie demo: cannot enter the demo directory {}: {e}",
            dir.display()
        );
        return 1;
    }
    let here = Path::new(".");
    let (wf, lock) = match prepare(here, args.reset, &dir) {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("sortie demo: {msg}");
            return 1;
        }
    };
    eprintln!(
        "sortie demo: running {} (edit {} to drive it; --reset starts over)",
        dir.join("WORKFLOW.md").display(),
        shown.display()
    );
    eprintln!(
        "sortie demo: DEMO-4 waits for DEMO-7, which no agent works on; release it by setting DEMO-7's \"state\" to \"Done\" in {}",
        shown.display()
    );
    super::run::run(RunOptions {
        workflow: wf.clone(),
        port: args.port,
        host: args.host,
        log_level: args.log_level,
        log_format: args.log_format,
        env_file: None,
        dry_run: false,
        env_overlay: speed_overlay(&wf, speed),
        db_lock: Some(lock),
    })
}

/// The most `--speed` accepts: beyond it the demo's waits round to nothing.
const MAX_SPEED: u32 = 100;

/// A `--speed` value that is not a whole number from 1 to [`MAX_SPEED`], as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BadSpeed(String);

impl std::fmt::Display for BadSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid --speed value {:?}: a whole number from 1 to {MAX_SPEED}",
            self.0
        )
    }
}

/// `--speed`: a whole number from 1 to [`MAX_SPEED`]; absent reads 1.
fn parse_speed(value: Option<&str>) -> Result<u32, BadSpeed> {
    let Some(v) = value else { return Ok(1) };
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SPEED).contains(&n) => Ok(n),
        _ => Err(BadSpeed(v.to_string())),
    }
}

/// The `SORTIE_*` values that run the demo `speed` times faster: its polling interval and
/// retry backoff cap divided (read from its workflow as it is at start), and the mock agent's
/// pauses scaled. Nothing at speed 1.
fn speed_overlay(workflow: &Path, speed: u32) -> Vec<(String, String)> {
    if speed <= 1 {
        return Vec::new();
    }
    let Ok(wf) = load_workflow(workflow, &LoadOptions::from_process(None)) else {
        return Vec::new();
    };
    let div = |ms: u64| (ms / u64::from(speed)).max(1).to_string();
    vec![
        (
            "SORTIE_POLLING_INTERVAL_MS".into(),
            div(wf.config.polling.interval_ms),
        ),
        (
            "SORTIE_AGENT_MAX_RETRY_BACKOFF_MS".into(),
            div(wf.config.agent.max_retry_backoff_ms),
        ),
        (
            "SORTIE_MOCK_TIME_SCALE".into(),
            (1.0 / f64::from(speed)).to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materialize_keeps_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("issues.json"), "[]").unwrap();
        let wf = materialize(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&wf).unwrap(), DEMO_WORKFLOW);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("issues.json")).unwrap(),
            "[]"
        );
    }
}
