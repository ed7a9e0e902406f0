//! The database lock: one sortie per database. `<db_path>.lock` beside the database is locked
//! with `flock(LOCK_EX|LOCK_NB)` for the life of the daemon and holds its pid, so a second
//! daemon on the same database stops at once and names the process that holds it. The lock is
//! released by the kernel when the process ends (even on `kill -9`); the file itself stays and
//! is reused, created 0600 (tightened if an older build left it readable by others).
//! `sortie validate` and `--dry-run` never take it; a command that deletes or resets a
//! database's data (`sortie demo`'s reset) takes it first, so it refuses, touching nothing,
//! while a daemon uses that database.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use super::error::StoreError;

/// Held for the process lifetime; dropping it releases the lock.
#[derive(Debug)]
pub struct DbLock {
    _file: File,
    path: PathBuf,
}

impl DbLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is the lock of `db_path`: the lock file at [`lock_path`] is the very file
    /// held (same device and inode), however either path is spelled.
    pub fn guards(&self, db_path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self._file.metadata(), std::fs::metadata(lock_path(db_path))) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        }
    }
}

/// The lock file for a database: `<db_path>.lock`.
pub fn lock_path(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the database's lock without waiting and writes this process's pid into it.
/// [`StoreError::Locked`] names the database and the pid written by the holder.
pub fn acquire(db_path: &Path) -> Result<DbLock, StoreError> {
    let path = lock_path(db_path);
    let open_err = |e: std::io::Error| StoreError::Open {
        path: path.clone(),
        source: Box::new(e),
    };
    super::files::create_parent_dir(&path).map_err(open_err)?;
    let mut file = super::files::private_options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(open_err)?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {
            super::files::tighten(&path).map_err(open_err)?;
        }
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let mut text = String::new();
            let holder_pid = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse::<u32>().ok());
            return Err(StoreError::Locked {
                db_path: db_path.to_path_buf(),
                lock_path: path,
                holder_pid,
            });
        }
        Err(e) => return Err(open_err(e.into())),
    }
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.sync_all())
        .map_err(open_err)?;
    Ok(DbLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_names_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("sub").join("sortie.db");
        let held = acquire(&db).expect("first lock");
        assert_eq!(held.path(), lock_path(&db));
        match acquire(&db) {
            Err(StoreError::Locked { holder_pid, .. }) => {
                assert_eq!(holder_pid, Some(std::process::id()))
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(held);
        acquire(&db).expect("free again after drop");
    }

    #[test]
    fn guards_recognises_its_database_however_spelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("sortie.db");
        let held = acquire(&db).expect("lock");
        assert!(held.guards(&dir.path().join(".").join("sortie.db")));
        assert!(!held.guards(&dir.path().join("other.db")));
    }
}
