//! `sortie demo`: the embedded credential-free demo (file tracker + mock agent). Writes the
//! demo's WORKFLOW.md and issues.json into a directory — keeping files that already exist, so
//! a restart resumes the same backlog and database — then runs it like `sortie DIR/WORKFLOW.md`.

use std::path::{Path, PathBuf};

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

pub fn run(args: DemoArgs) -> i32 {
    let dir = PathBuf::from(&args.dir);
    let wf = match materialize(&dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sortie: cannot write the demo into {}: {e}", dir.display());
            return 1;
        }
    };
    let Some(wf_name) = wf.file_name().map(PathBuf::from) else {
        eprintln!("sortie: {} has no file name", wf.display());
        return 1;
    };
    eprintln!(
        "sortie demo: running {} (edit {} to drive it)",
        wf.display(),
        dir.join("issues.json").display()
    );
    // The demo's relative paths (workspaces) belong inside its directory, so run from there.
    if let Err(e) = std::env::set_current_dir(&dir) {
        eprintln!("sortie: cannot enter {}: {e}", dir.display());
        return 1;
    }
    super::run::run(RunOptions {
        workflow: wf_name,
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
