//! The private home of a sandboxed session: `<workspace>/.sortie/home`, owner-only, kept for
//! the workspace's life (an agent's conversation files stay there between turns and retries),
//! seeded before each process start from `home_seed`: a file missing there or older than its
//! source is copied; the agent's own changes to the others stay.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::Sandbox;
use super::error::SandboxError;

/// At most this many files are copied from `home_seed` per start.
const MAX_FILES: usize = 4096;
/// And at most this many bytes.
const MAX_BYTES: u64 = 256 << 20;
/// Directories deeper than this under a seed are skipped.
const MAX_DEPTH: usize = 16;

struct Budget {
    files: usize,
    bytes: u64,
}

/// Creates the private home of `workspace` and seeds it.
pub(super) fn prepare(sb: &Sandbox, workspace: &Path) -> Result<(), SandboxError> {
    let home = Sandbox::home_in(workspace);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&home)
        .map_err(|e| SandboxError::io(&home, e))?;
    let mut budget = Budget {
        files: MAX_FILES,
        bytes: MAX_BYTES,
    };
    for seed in &sb.home_seed {
        let Some(dest) = seed_dest(sb.daemon_home.as_deref(), seed, &home) else {
            continue;
        };
        if let Err(e) = copy_tree(seed, &dest, 0, &mut budget) {
            log::warn!(
                seed:% = seed.display(),
                workspace:% = workspace.display(),
                error:% = e;
                "sandbox home seed not copied"
            );
        }
    }
    Ok(())
}

/// Where `seed` lands in `home`: at its place relative to the daemon's home, or under its
/// file name.
fn seed_dest(daemon_home: Option<&Path>, seed: &Path, home: &Path) -> Option<PathBuf> {
    let rel = daemon_home
        .and_then(|h| seed.strip_prefix(h).ok())
        .filter(|r| !r.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| seed.file_name().map(PathBuf::from))?;
    Some(home.join(rel))
}

fn copy_tree(
    src: &Path,
    dest: &Path,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), SandboxError> {
    let meta = match std::fs::symlink_metadata(src) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(SandboxError::io(src, e)),
    };
    if meta.is_dir() {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dest)
            .map_err(|e| SandboxError::io(dest, e))?;
        let entries = std::fs::read_dir(src).map_err(|e| SandboxError::io(src, e))?;
        for entry in entries.flatten() {
            copy_tree(
                &entry.path(),
                &dest.join(entry.file_name()),
                depth + 1,
                budget,
            )?;
        }
        Ok(())
    } else if meta.is_file() {
        copy_file(src, dest, &meta, budget)
    } else {
        // Symlinks, sockets and devices are not copied: a link could point the agent back
        // at the daemon's files.
        Ok(())
    }
}

fn copy_file(
    src: &Path,
    dest: &Path,
    meta: &std::fs::Metadata,
    budget: &mut Budget,
) -> Result<(), SandboxError> {
    let newer = match (std::fs::metadata(dest), meta.modified()) {
        (Ok(d), Ok(s)) => d.modified().is_ok_and(|dm| s > dm),
        (Err(_), _) => true,
        (Ok(_), Err(_)) => false,
    };
    if !newer {
        return Ok(());
    }
    if budget.files == 0 || budget.bytes < meta.len() {
        return Err(SandboxError::setup(
            "home_seed",
            format!(
                "the seed budget ({MAX_FILES} files, {} MiB) is spent",
                MAX_BYTES >> 20
            ),
        ));
    }
    budget.files -= 1;
    budget.bytes -= meta.len();
    std::fs::copy(src, dest).map_err(|e| SandboxError::io(src, e))?;
    let mode = meta.permissions().mode() & 0o700;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(mode.max(0o400)))
        .map_err(|e| SandboxError::io(dest, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_land_relative_to_the_daemon_home_and_are_refreshed_only_when_older() {
        let base = std::env::temp_dir().join(format!("sortie-sb-home-{}", std::process::id()));
        let daemon_home = base.join("daemon");
        let ws = base.join("ws");
        let _ = std::fs::create_dir_all(daemon_home.join(".cfg/sub"));
        let _ = std::fs::create_dir_all(&ws);
        let _ = std::fs::write(daemon_home.join(".cfg/sub/a.json"), "one");
        let sb = Sandbox {
            home_seed: vec![daemon_home.join(".cfg"), base.join("missing")],
            daemon_home: Some(daemon_home.clone()),
            ..Sandbox::default()
        };
        assert_eq!(prepare(&sb, &ws), Ok(()));
        let copied = Sandbox::home_in(&ws).join(".cfg/sub/a.json");
        assert_eq!(
            std::fs::read_to_string(&copied).ok().as_deref(),
            Some("one")
        );
        // The agent's own change is kept while the source is not newer.
        let _ = std::fs::write(&copied, "agent");
        assert_eq!(prepare(&sb, &ws), Ok(()));
        assert_eq!(
            std::fs::read_to_string(&copied).ok().as_deref(),
            Some("agent")
        );
        let home_mode = std::fs::metadata(Sandbox::home_in(&ws))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(home_mode, 0o700);
        let _ = std::fs::remove_dir_all(&base);
    }
}
