//! Private files. The database, its WAL and shared-memory files and its lock file hold issue
//! text and agent output, so they are readable by their owner only: created 0600 (SQLite gives
//! the WAL and shared-memory files the database file's mode), and a directory sortie creates
//! for them 0700. A file an older build left readable by others is tightened when opened, with
//! an INFO line naming it; a directory that already exists is the operator's and left alone.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the files sortie creates for its database.
pub const FILE_MODE: u32 = 0o600;
/// Mode of a directory sortie creates to hold them.
pub const DIR_MODE: u32 = 0o700;

/// Creates the parent directory of `path` (and missing ancestors) with [`DIR_MODE`].
pub fn create_parent_dir(path: &Path) -> io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir),
        None => Ok(()),
    }
}

/// Opens options that create a missing file with [`FILE_MODE`].
pub fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Makes sure the database file exists with [`FILE_MODE`] before SQLite opens it (an empty
/// file is an empty database), and tightens it and its WAL and shared-memory files when an
/// older build left them readable by others.
pub fn prepare_database_file(db: &Path) -> io::Result<()> {
    create_parent_dir(db)?;
    private_options()
        .write(true)
        .create(true)
        .truncate(false)
        .open(db)?;
    for p in database_files(db) {
        tighten(&p)?;
    }
    Ok(())
}

/// The database file and the files SQLite keeps beside it.
pub fn database_files(db: &Path) -> [PathBuf; 3] {
    [db.to_path_buf(), suffixed(db, "-wal"), suffixed(db, "-shm")]
}

fn suffixed(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes the group and other bits of an existing file (INFO line when it changed anything);
/// a missing file is fine. Returns whether the mode changed.
pub fn tighten(path: &Path) -> io::Result<bool> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(false);
    }
    let tight = mode & 0o700;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(tight))?;
    log::info!(
        path:% = path.display().to_string(),
        from:% = format!("{:04o}", mode),
        to:% = format!("{:04o}", tight);
        "database file permissions tightened"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).expect("metadata").permissions().mode() & 0o7777
    }

    #[test]
    fn created_private_and_existing_files_tightened() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("new").join("sub").join("sortie.db");
        prepare_database_file(&db).expect("prepare");
        assert_eq!(mode(&db), FILE_MODE);
        assert_eq!(mode(db.parent().expect("parent")), DIR_MODE);
        assert_eq!(mode(&dir.path().join("new")), DIR_MODE);

        let before = mode(dir.path());
        let old = dir.path().join("old.db");
        let wal = suffixed(&old, "-wal");
        for p in [&old, &wal] {
            std::fs::write(p, b"").expect("write");
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        prepare_database_file(&old).expect("prepare old");
        assert_eq!(mode(&old), 0o600);
        assert_eq!(mode(&wal), 0o600);
        // An existing directory is the operator's.
        assert_eq!(mode(dir.path()), before);
    }
}
