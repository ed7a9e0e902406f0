//! `sortie demo`: the embedded credential-free demo (file tracker + mock agent). Writes the
//! demo's WORKFLOW.md and issues.json into a directory — keeping files that already exist, so
//! a restart resumes the same backlog and database — then runs it like `sortie DIR/WORKFLOW.md`.
//!
//! A finished demo would otherwise show nothing on its next run (every issue has been handed
//! off), so when a dispatch pass over the backlog would dispatch nothing the demo starts afresh: the
//! backlog is rewritten and the demo's database and workspaces are removed. `--reset` does the
//! same unconditionally and also restores the embedded WORKFLOW.md.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::clock::SystemClock;
use crate::config::{LoadOptions, load_workflow};
use crate::orchestrator::adapters;
use crate::orchestrator::dispatch_pass::{Decision, LiveClaims, PassInput, plan, sort_candidates};

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

/// Starts the demo in `dir` afresh: the embedded backlog (and, with `workflow`, the embedded
/// WORKFLOW.md) is written, and the demo's database and workspaces are removed when they lie
/// inside `dir`, so nothing outside the demo's own directory is ever touched.
pub fn reset(dir: &Path, workflow: bool) -> std::io::Result<()> {
    if workflow {
        std::fs::write(dir.join("WORKFLOW.md"), DEMO_WORKFLOW)?;
    }
    let loaded = load_workflow(&dir.join("WORKFLOW.md"), &LoadOptions::from_process(None)).ok();
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

pub fn run(args: DemoArgs) -> i32 {
    let dir = PathBuf::from(&args.dir);
    let shown = dir.join("issues.json");
    // The demo's relative paths (database, workspaces) belong inside its directory, so
    // everything from here on, resets included, happens from there.
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::env::set_current_dir(&dir)) {
        eprintln!(
            "sortie: cannot enter the demo directory {}: {e}",
            dir.display()
        );
        return 1;
    }
    let here = Path::new(".");
    let settled = here.join("WORKFLOW.md").is_file() && backlog_settled(&here.join("WORKFLOW.md"));
    if settled {
        eprintln!(
            "sortie demo: nothing in {} is left to dispatch; starting the demo afresh",
            shown.display()
        );
    }
    if (args.reset || settled)
        && let Err(e) = reset(here, args.reset)
    {
        eprintln!("sortie: cannot reset the demo in {}: {e}", dir.display());
        return 1;
    }
    let wf = match materialize(here) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sortie: cannot write the demo into {}: {e}", dir.display());
            return 1;
        }
    };
    eprintln!(
        "sortie demo: running {} (edit {} to drive it; --reset starts over)",
        dir.join("WORKFLOW.md").display(),
        shown.display()
    );
    super::run::run(RunOptions {
        workflow: wf,
        port: args.port,
        host: args.host,
        log_level: args.log_level,
        log_format: args.log_format,
        env_file: None,
        dry_run: false,
    })
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
