//! The per-workspace lock: `<workspace>/.sortie/lock`, held with `flock(LOCK_EX|LOCK_NB)` by
//! the supervisor for a whole session (hooks included) and holding its pid. No second
//! session — of this sortie or of another process sharing the workspace root — ever runs in
//! a workspace whose lock is held. The kernel releases it when the holder exits; the file is
//! left in place and reused. A symlinked `.sortie` or `lock` is never followed.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use super::error::WorkspaceError;

/// The lock file of a workspace.
pub fn lock_path(workspace: &Path) -> PathBuf {
    workspace.join(".sortie").join("lock")
}

/// A held workspace lock; dropping it releases the lock.
#[derive(Debug)]
pub struct WorkspaceLock {
    _file: File,
    path: PathBuf,
}

impl WorkspaceLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn lock_err(path: &Path) -> impl Fn(io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Lock {
        path: path.to_path_buf(),
        source,
    }
}

/// `.sortie` under `workspace`, created if missing; a symlink there is refused.
fn sortie_dir(workspace: &Path) -> Result<PathBuf, WorkspaceError> {
    let dir = workspace.join(".sortie");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(WorkspaceError::Lock {
            path: dir,
            source: io::Error::other("not a real directory"),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match std::fs::DirBuilder::new().mode(0o750).create(&dir) {
                Ok(()) => Ok(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => sortie_dir(workspace),
                Err(source) => Err(WorkspaceError::Lock { path: dir, source }),
            }
        }
        Err(source) => Err(WorkspaceError::Lock { path: dir, source }),
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Takes the workspace's lock without waiting and writes this process's pid into it.
/// [`WorkspaceError::Locked`] when someone else holds it.
pub fn acquire(workspace: &Path) -> Result<WorkspaceLock, WorkspaceError> {
    let dir = sortie_dir(workspace)?;
    let path = dir.join("lock");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .map_err(lock_err(&path))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            return Err(WorkspaceError::Locked {
                holder_pid: read_pid(&mut file),
                path,
            });
        }
        Err(e) => return Err(lock_err(&path)(e.into())),
    }
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(lock_err(&path))?;
    Ok(WorkspaceLock { _file: file, path })
}

/// Whether another holder has the workspace's lock right now: `Some(pid)` (the pid it wrote,
/// when readable), `None` when it is free or there is no lock file. Creates nothing; the probe
/// takes a shared lock for an instant, so it never excludes another prober.
pub fn held_by_other(workspace: &Path) -> Option<Option<u32>> {
    let path = lock_path(workspace);
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .ok()?;
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Err(rustix::io::Errno::WOULDBLOCK) => Some(read_pid(&mut file)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_and_refused_until_dropped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path();
        assert_eq!(held_by_other(ws), None, "no lock file yet");
        let held = acquire(ws).expect("first");
        assert_eq!(held.path(), lock_path(ws));
        assert_eq!(held_by_other(ws), Some(Some(std::process::id())));
        match acquire(ws) {
            Err(WorkspaceError::Locked { holder_pid, .. }) => {
                assert_eq!(holder_pid, Some(std::process::id()))
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(held);
        assert_eq!(held_by_other(ws), None);
        acquire(ws).expect("free again");
    }

    #[test]
    fn a_symlinked_dot_sortie_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join(".sortie")).expect("link");
        assert!(matches!(
            acquire(tmp.path()),
            Err(WorkspaceError::Lock { .. })
        ));
        assert!(!elsewhere.path().join("lock").exists());
    }
}
