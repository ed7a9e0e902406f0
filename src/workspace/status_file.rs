//! The agent-written `.sortie/status` file is per session: a leftover from an earlier session
//! must not be read as this session's verdict, so it is removed when a workspace is prepared.

use std::path::Path;

/// Removes `<workspace>/.sortie/status` if present; this is the one place a dispatch clears
/// it. A symlinked `.sortie` is never followed; a symlinked `status` is removed as a link (its
/// target is untouched), since the stop protocol refuses to read one anyway. Failures are only
/// logged.
pub(crate) fn remove_stale_status(workspace: &Path) {
    let dir = workspace.join(".sortie");
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {}
        _ => return,
    }
    let status = dir.join("status");
    match std::fs::symlink_metadata(&status) {
        Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => {
            if let Err(e) = std::fs::remove_file(&status) {
                log::warn!(path:% = status.display(), error:% = e; "stale status file not removed");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_status_but_not_other_files() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join(".sortie");
        std::fs::create_dir(&dir)?;
        std::fs::write(dir.join("status"), "blocked")?;
        std::fs::write(dir.join("state.json"), "{}")?;
        remove_stale_status(tmp.path());
        assert!(!dir.join("status").exists());
        assert!(dir.join("state.json").exists());
        Ok(())
    }

    #[test]
    fn a_symlinked_status_is_removed_as_a_link() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let target = tmp.path().join("target");
        std::fs::write(&target, "keep")?;
        let dir = tmp.path().join(".sortie");
        std::fs::create_dir(&dir)?;
        std::os::unix::fs::symlink(&target, dir.join("status"))?;
        remove_stale_status(tmp.path());
        assert!(std::fs::symlink_metadata(dir.join("status")).is_err());
        assert!(target.exists());
        Ok(())
    }

    #[test]
    fn symlinked_dot_sortie_is_not_followed() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside)?;
        std::fs::write(outside.join("status"), "keep")?;
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws)?;
        std::os::unix::fs::symlink(&outside, ws.join(".sortie"))?;
        remove_stale_status(&ws);
        assert!(outside.join("status").exists());
        Ok(())
    }
}
