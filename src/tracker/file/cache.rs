//! The parsed tracker file, kept between calls while the file is unchanged, so a tick, the
//! retries it fires and the workers' checks between turns share one read and one parse.
//!
//! **When a cached parse is reused.** Each call first `stat`s the path. The cached parse is
//! reused without reading the file when the stat matches the one taken from the descriptor
//! the cached bytes were read from — device, inode, size, modification and change times, with
//! nanoseconds — and the entry is *certain*.
//!
//! **Racy timestamps (as in git's racy-clean check).** A rewrite that keeps the size and lands
//! in the same timestamp granule as the read before it leaves every stat field as it was: the
//! kernel stamps files from a coarse clock, and some filesystems keep whole or even-numbered
//! seconds. So an entry is certain only when the file's last change (the later of its mtime
//! and ctime) was at least [`RACY_WINDOW`] before the moment the read began; any later change
//! then carries a newer timestamp and shows in the stat. An uncertain entry is re-read on
//! every call: when the bytes equal the cached ones the parse is kept (a `memcmp`, not a
//! parse) and the entry may become certain; otherwise the new bytes are parsed. Only an
//! uncertain entry keeps its bytes. A change time in the future (clock skew) keeps the entry
//! uncertain. A tool that rewrites the file in place with the same size and then forges both
//! timestamps back cannot be told apart; the ctime cannot be set from user space, so this
//! takes root.
//!
//! **Own writes.** The tracker's own rewrites (transitions, labels, comments) call
//! [`FileCache::invalidate`], so they are seen by the next call whatever the stat says.

use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::tracker::TrackerResult;

use super::document;
use super::heap;
use super::index::ParsedFile;
use super::parse::parse_issues;

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
    /// change by the stat alone (see the module docs).
    fn certain_at(&self, read_at: SystemTime) -> bool {
        let now_ns = match read_at.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(_) => return false,
        };
        now_ns - self.changed_ns() >= RACY_WINDOW.as_nanos() as i128
    }
}

/// How the cache looks at the filesystem and the time; tests replace them to play a coarse
/// filesystem without waiting on one.
#[derive(Clone, Copy)]
pub struct Probes {
    pub key: fn(&Metadata) -> FileKey,
    pub now: fn() -> SystemTime,
}

impl Default for Probes {
    fn default() -> Probes {
        Probes {
            key: FileKey::of,
            now: SystemTime::now,
        }
    }
}

struct Entry {
    key: FileKey,
    certain: bool,
    parsed: Arc<ParsedFile>,
    /// The bytes the parse came from, kept only while the entry is uncertain.
    bytes: Option<Vec<u8>>,
}

/// One file's cached parse. Calls are serialized: two threads asking at once share one read.
#[derive(Default)]
pub struct FileCache {
    slot: Mutex<Option<Entry>>,
    probes: Probes,
    reads: AtomicU64,
}

impl FileCache {
    #[cfg(test)]
    pub fn with_probes(probes: Probes) -> FileCache {
        FileCache {
            probes,
            ..FileCache::default()
        }
    }

    /// The parsed file, read again only when it may have changed.
    pub fn get(&self, path: &Path) -> TrackerResult<Arc<ParsedFile>> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let read_at = (self.probes.now)();
        if let Some(entry) = slot.as_ref()
            && entry.certain
            && fs::metadata(path).ok().map(|m| (self.probes.key)(&m)) == Some(entry.key)
        {
            return Ok(entry.parsed.clone());
        }
        let previous = slot.take();
        let (bytes, meta) = document::read_bytes(path)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let key = (self.probes.key)(&meta);
        let certain = key.certain_at(read_at);
        let (parsed, fresh) = match previous {
            Some(e) if e.bytes.as_deref() == Some(bytes.as_slice()) => (e.parsed, false),
            previous => {
                // The previous parse goes first, so its memory counts as free for the trim.
                drop(previous);
                let parsed = Arc::new(ParsedFile::new(parse_issues(path, &bytes)?));
                (parsed, bytes.len() >= heap::LARGE_FILE)
            }
        };
        *slot = Some(Entry {
            key,
            certain,
            parsed: parsed.clone(),
            bytes: (!certain).then_some(bytes),
        });
        drop(slot);
        if fresh {
            heap::release_free_pages();
        }
        Ok(parsed)
    }

    /// Forgets the cached parse: the next call reads the file.
    pub fn invalidate(&self) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// How many times the file's bytes were read (a hit reads none).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(60)
    }

    /// A filesystem whose timestamps all fall in the granule that began at the epoch.
    fn coarse(meta: &Metadata) -> FileKey {
        FileKey {
            mtime: (0, 0),
            ctime: (0, 0),
            ..FileKey::of(meta)
        }
    }

    fn within_the_granule() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(500)
    }

    fn after_the_window() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(10)
    }

    fn states(cache: &FileCache, path: &Path) -> Vec<String> {
        match cache.get(path) {
            Ok(p) => p.issues().iter().map(|i| i.state.clone()).collect(),
            Err(e) => panic!("read failed: {e}"),
        }
    }

    fn setup(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("issues.json");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write: {e}"));
        (dir, path)
    }

    #[test]
    fn an_unchanged_file_is_read_once() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "To Do"}]"#);
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        let first = cache.get(&path).ok();
        let second = cache.get(&path).ok();
        assert_eq!(cache.reads(), 1);
        assert!(matches!((first, second), (Some(a), Some(b)) if Arc::ptr_eq(&a, &b)));
    }

    #[test]
    fn a_changed_file_is_read_again() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "To Do"}]"#);
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        assert_eq!(states(&cache, &path), ["To Do"]);
        std::fs::write(&path, r#"[{"id": "1", "state": "In Progress"}]"#).ok();
        assert_eq!(states(&cache, &path), ["In Progress"]);
        assert_eq!(cache.reads(), 2);
    }

    #[test]
    fn a_same_size_rewrite_in_the_same_granule_is_seen() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "AAAA"}]"#);
        let cache = FileCache::with_probes(Probes {
            key: coarse,
            now: within_the_granule,
        });
        assert_eq!(states(&cache, &path), ["AAAA"]);
        std::fs::write(&path, r#"[{"id": "1", "state": "BBBB"}]"#).ok();
        assert_eq!(states(&cache, &path), ["BBBB"]);
        assert_eq!(cache.reads(), 2);
    }

    #[test]
    fn an_uncertain_entry_with_equal_bytes_keeps_its_parse_until_certain() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "AAAA"}]"#);
        let cache = FileCache::with_probes(Probes {
            key: coarse,
            now: within_the_granule,
        });
        let first = cache.get(&path).ok();
        let second = cache.get(&path).ok();
        assert_eq!(cache.reads(), 2, "an uncertain entry is read again");
        assert!(matches!((&first, &second), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));

        let cache = FileCache::with_probes(Probes {
            key: coarse,
            now: after_the_window,
        });
        cache.get(&path).ok();
        cache.get(&path).ok();
        assert_eq!(cache.reads(), 1, "a certain entry is trusted");
    }

    #[test]
    fn invalidation_forces_a_read() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "AAAA"}]"#);
        let cache = FileCache::with_probes(Probes {
            key: |m| FileKey {
                dev: m.dev(),
                ..FileKey::default()
            },
            now: after_the_window,
        });
        assert_eq!(states(&cache, &path), ["AAAA"]);
        std::fs::write(&path, r#"[{"id": "1", "state": "B"}]"#).ok();
        assert_eq!(states(&cache, &path), ["AAAA"], "a stat that never changes");
        cache.invalidate();
        assert_eq!(states(&cache, &path), ["B"]);
    }

    #[test]
    fn a_large_file_is_parsed_again_after_a_change() {
        let doc = |state: &str| -> String {
            let issues: Vec<String> = (0..5_000)
                .map(|i| {
                    format!(
                        r#"{{"id": "{i}", "title": "{:0>200}", "state": "{state}"}}"#,
                        i
                    )
                })
                .collect();
            format!("[{}]", issues.join(","))
        };
        let first = doc("A");
        assert!(
            first.len() >= heap::LARGE_FILE,
            "the parse is followed by a trim"
        );
        let (_dir, path) = setup(&first);
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        assert!(states(&cache, &path).iter().all(|s| s == "A"));
        std::fs::write(&path, doc("B")).ok();
        cache.invalidate();
        let second = states(&cache, &path);
        assert_eq!(second.len(), 5_000);
        assert!(second.iter().all(|s| s == "B"));
    }

    #[test]
    fn a_failed_read_is_not_cached() {
        let (_dir, path) = setup("[{]");
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        assert!(cache.get(&path).is_err());
        std::fs::write(&path, r#"[{"id": "1"}]"#).ok();
        assert!(cache.get(&path).is_ok());
    }
}
