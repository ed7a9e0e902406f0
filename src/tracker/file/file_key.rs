//! What identifies one version of a file without reading it, and when that identity can be
//! trusted to reveal the next change (the racy window; see [`super::cache`]). The read cache
//! keys its parse on it, and a rewrite checks with it that the file is still what it read.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long after its last change a file's stat is trusted to reveal the next change. Two
/// seconds covers filesystems with two-second timestamps (FAT) as well as the kernel's coarse
/// file clock.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// What identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    /// Seconds and nanoseconds since the epoch.
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileKey {
    pub fn of(meta: &Metadata) -> FileKey {
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The later of the two timestamps, in nanoseconds since the epoch.
    fn changed_ns(&self) -> i128 {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime).max(ns(self.ctime))
    }

    /// Whether a read that began at `read_at` can be trusted to be told apart from any later
    /// change by the stat alone (see [`super::cache`]).
    pub fn certain_at(&self, read_at: SystemTime) -> bool {
        let now_ns = match read_at.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(_) => return false,
        };
        now_ns - self.changed_ns() >= RACY_WINDOW.as_nanos() as i128
    }
}
