//! Reading a file an agent (or a hook) leaves in `<workspace>/.sortie/`: never through a
//! symlink (neither `.sortie` nor the file), only a regular file, never more than a cap, so a
//! workspace cannot point the reader elsewhere or make it read without bound.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// `<workspace>/.sortie`.
pub fn sortie_dir(workspace: &Path) -> PathBuf {
    workspace.join(".sortie")
}

/// Reads `<workspace>/.sortie/<name>`: `Ok(None)` when it (or `.sortie`) is absent, `Err` with
/// the reason when it is present but refused (symlink, not a regular file, over `max_bytes`,
/// unreadable).
pub fn read(workspace: &Path, name: &str, max_bytes: u64) -> Result<Option<Vec<u8>>, String> {
    let dir = sortie_dir(workspace);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(format!("{} is a symlink", dir.display()));
        }
        Ok(m) if !m.is_dir() => return Err(format!("{} is not a directory", dir.display())),
        Ok(_) => {}
    }
    let path = dir.join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        return Err(format!("{} is a symlink", path.display()));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > max_bytes {
        return Err(format!(
            "{} is {} bytes, over the {max_bytes}-byte limit",
            path.display(),
            meta.len()
        ));
    }
    read_capped(&path, max_bytes)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
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
