//! Reading a file an agent (or a hook) leaves in `<workspace>/.sortie/`: never through a
//! symlink (neither `.sortie` nor the file), only a regular file, never more than a cap, so a
//! workspace cannot point the reader elsewhere or make it read without bound.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::path_error::{PathError, PathProblem};

/// `<workspace>/.sortie`.
pub fn sortie_dir(workspace: &Path) -> PathBuf {
    workspace.join(".sortie")
}

/// Reads `<workspace>/.sortie/<name>`: `Ok(None)` when it (or `.sortie`) is absent, `Err` with
/// the reason when it is present but refused (symlink, not a regular file, over `max_bytes`,
/// unreadable).
pub fn read(workspace: &Path, name: &str, max_bytes: u64) -> Result<Option<Vec<u8>>, PathError> {
    let dir = sortie_dir(workspace);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PathError::io(&dir, &e)),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(PathError::new(dir, PathProblem::Symlink));
        }
        Ok(m) if !m.is_dir() => return Err(PathError::new(dir, PathProblem::NotDirectory)),
        Ok(_) => {}
    }
    let path = dir.join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PathError::io(&path, &e)),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        return Err(PathError::new(path, PathProblem::Symlink));
    }
    if !meta.is_file() {
        return Err(PathError::new(path, PathProblem::NotRegularFile));
    }
    if meta.len() > max_bytes {
        let problem = PathProblem::TooLarge {
            len: meta.len(),
            max: max_bytes,
        };
        return Err(PathError::new(path, problem));
    }
    read_capped(&path, max_bytes)
        .map(Some)
        .map_err(|e| PathError::io(&path, &e))
}

/// [`read`] of a workspace on `host` (`None` reads here): the bytes come through
/// [`crate::ssh::SshHost::read_file`], which applies the same rules on the host (no symlinked
/// `.sortie` or file, a regular file only, at most `max_bytes`).
pub fn read_on(
    workspace: &Path,
    name: &str,
    max_bytes: u64,
    host: Option<&crate::ssh::SshHost>,
) -> Result<Option<Vec<u8>>, PathError> {
    match host {
        None => read(workspace, name, max_bytes),
        Some(host) => {
            let path = sortie_dir(workspace).join(name);
            host.read_file(&path, max_bytes)
                .map_err(|e| PathError::new(path, PathProblem::Host(e.to_string())))
        }
    }
}

/// O_NOFOLLOW closes the gap between the lstat above and the open.
fn read_capped(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)?;
    let mut buf = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max_bytes {
        return Err(io::Error::other("file grew over the size limit"));
    }
    Ok(buf)
}

/// The `.sortie` directory, created when missing; `Err` when it is a symlink or not a directory.
fn own_dir(workspace: &Path) -> io::Result<PathBuf> {
    let dir = sortie_dir(workspace);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(io::Error::other(format!("{} is a symlink", dir.display())))
        }
        Ok(m) if !m.is_dir() => Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Ok(_) => Ok(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&dir)?;
            Ok(dir)
        }
        Err(e) => Err(e),
    }
}

/// Writes `<workspace>/.sortie/<name>` whole (a temporary file renamed over it, mode 0600),
/// never through a symlinked `.sortie`; a symlink at the name is replaced, not followed.
pub fn write(workspace: &Path, name: &str, body: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = own_dir(workspace)?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes `<workspace>/.sortie/<name>` (a symlink is removed as a link); a missing file or
/// `.sortie` is fine. Never touches anything through a symlinked `.sortie`.
pub fn remove(workspace: &Path, name: &str) -> io::Result<()> {
    let dir = sortie_dir(workspace);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(io::Error::other(format!("{} is a symlink", dir.display())));
        }
        Ok(_) => {}
    }
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Whether `<workspace>/.sortie/<name>` is a regular file reached without a symlink.
pub fn is_plain_file(workspace: &Path, name: &str) -> bool {
    let dir = sortie_dir(workspace);
    let plain_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
    plain_dir && std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod write_tests {
    use super::*;

    #[test]
    fn written_files_read_back_and_symlinked_dirs_are_refused() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(d.path(), "note.md", b"hello").unwrap_or_else(|e| panic!("{e}"));
        assert!(is_plain_file(d.path(), "note.md"));
        assert_eq!(read(d.path(), "note.md", 64), Ok(Some(b"hello".to_vec())));
        remove(d.path(), "note.md").unwrap_or_else(|e| panic!("{e}"));
        remove(d.path(), "note.md").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(d.path(), "note.md", 64), Ok(None));

        let linked = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let elsewhere = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(elsewhere.path(), linked.path().join(".sortie"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(write(linked.path(), "note.md", b"x").is_err());
        assert!(remove(linked.path(), "note.md").is_err());
        assert!(!is_plain_file(linked.path(), "note.md"));
        assert!(!elsewhere.path().join("note.md").exists());
    }
}
