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
//! and ctime) was at least [`RACY_WINDOW`](super::file_key::RACY_WINDOW) before the moment the read began; any later change
//! then carries a newer timestamp and shows in the stat. An uncertain entry is re-read on
//! every call: when the bytes equal the cached ones the parse is kept (a `memcmp`, not a
//! parse) and the entry may become certain; otherwise the new bytes are parsed.
//!
//! **A changed file parses only what changed.** The entry keeps the bytes it was parsed from
//! (one copy of the file) and where each array element lies in them. New bytes are split into
//! their elements without parsing (`elements`); an element whose bytes are those of a previous
//! element takes over that element's issue (shared, not copied), and only the others are
//! parsed. Blockers are resolved again over the whole file. So an edit to one issue of a
//! 10,000-issue file costs a split, a `memcmp` and one element's parse, and the issues a poll
//! hands out stay the same issues (a pass tells them unchanged by pointer). Anything the split
//! or a lone element's parse does not take is parsed whole, as before. A change time in the future (clock skew) keeps the entry
//! uncertain. A tool that rewrites the file in place with the same size and then forges both
//! timestamps back cannot be told apart; the ctime cannot be set from user space, so this
//! takes root.
//!
//! **Own writes.** The tracker's own rewrites (transitions, labels, comments) call
//! [`FileCache::invalidate`], so they are seen by the next call whatever the stat says.

use std::fs::{self, Metadata};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::tracker::TrackerResult;

use super::document;
use super::file_key::FileKey;
use super::heap;
use super::index::ParsedFile;
use super::parse::{changed_elements, element_spans, parse_issues};

/// The version of the file in `bytes` built from `previous`, parsing only the elements whose
/// bytes changed; `None` when the whole file must be parsed.
fn changed(
    previous: &Entry,
    bytes: &[u8],
    spans: Option<&[std::ops::Range<usize>]>,
) -> Option<ParsedFile> {
    let old_spans = previous.spans.as_deref()?;
    let elements = changed_elements(bytes, spans?, &previous.bytes, old_spans)?;
    Some(ParsedFile::rebuild(elements, &previous.parsed))
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
    /// The bytes the parse came from.
    bytes: Vec<u8>,
    /// Where each element of `parsed` lies in `bytes`; `None` when they do not split cleanly.
    spans: Option<Vec<std::ops::Range<usize>>>,
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
        let (parsed, spans, fresh) = match previous {
            Some(e) if e.bytes == bytes => (e.parsed, e.spans, false),
            previous => {
                let spans = element_spans(&bytes);
                let reused = previous
                    .as_ref()
                    .and_then(|e| changed(e, &bytes, spans.as_deref()));
                // The previous parse goes first, so its memory counts as free for the trim.
                drop(previous);
                let parsed = match reused {
                    Some(p) => Arc::new(p),
                    None => Arc::new(ParsedFile::new(parse_issues(path, &bytes)?)),
                };
                let spans = spans.filter(|s| s.len() == parsed.issues().len());
                (parsed, spans, bytes.len() >= heap::LARGE_FILE)
            }
        };
        *slot = Some(Entry {
            key,
            certain,
            parsed: parsed.clone(),
            bytes,
            spans,
        });
        drop(slot);
        if fresh {
            heap::release_free_pages();
        }
        Ok(parsed)
    }

    /// Makes the next call read the file whatever its stat says (it then parses only what
    /// changed).
    pub fn invalidate(&self) {
        if let Some(e) = self.slot.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            e.certain = false;
        }
    }

    /// How many times the file's bytes were read (a hit reads none).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, UNIX_EPOCH};

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

    /// The cache's parse of each text in turn, next to a whole parse of the same text.
    fn versions(texts: &[&str]) -> Vec<(Arc<ParsedFile>, ParsedFile)> {
        let (_dir, path) = setup(texts[0]);
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        texts
            .iter()
            .map(|text| {
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("write: {e}"));
                cache.invalidate();
                let cached = cache.get(&path).unwrap_or_else(|e| panic!("read: {e}"));
                let whole = parse_issues(&path, text.as_bytes())
                    .map(ParsedFile::new)
                    .unwrap_or_else(|e| panic!("parse: {e}"));
                (cached, whole)
            })
            .collect()
    }

    fn same_issues(a: &ParsedFile, b: &ParsedFile) -> bool {
        a.full_issues().collect::<Vec<_>>() == b.full_issues().collect::<Vec<_>>()
    }

    #[test]
    fn a_changed_file_parses_only_the_changed_elements_and_shares_the_rest() {
        let v = versions(&[
            r#"[{"id": "1", "state": "To Do", "comments": [{"body": "c"}]}, {"id": "2", "state": "To Do"}]"#,
            r#"[{"id": "1", "state": "To Do", "comments": [{"body": "c"}]}, {"id": "2", "state": "Done"}]"#,
            // An element added in front: the others are found where they moved.
            r#"[{"id": "0"}, {"id": "1", "state": "To Do", "comments": [{"body": "c"}]}, {"id": "2", "state": "Done"}]"#,
        ]);
        for (cached, whole) in &v {
            assert!(same_issues(cached, whole));
        }
        let (a, b, c) = (&v[0].0, &v[1].0, &v[2].0);
        assert!(Arc::ptr_eq(&a.issues()[0], &b.issues()[0]));
        assert!(!Arc::ptr_eq(&a.issues()[1], &b.issues()[1]));
        assert!(Arc::ptr_eq(&b.issues()[0], &c.issues()[1]));
        assert!(Arc::ptr_eq(&b.issues()[1], &c.issues()[2]));
    }

    #[test]
    fn an_unchanged_issue_whose_blocker_changed_is_resolved_again() {
        let v = versions(&[
            r#"[{"id": "1", "state": "To Do"}, {"id": "2", "blocked_by": [{"id": "1"}, {"identifier": "X-9", "state": "Open"}]}]"#,
            r#"[{"id": "1", "state": "Done"}, {"id": "2", "blocked_by": [{"id": "1"}, {"identifier": "X-9", "state": "Open"}]}]"#,
            r#"[{"id": "1", "state": "Done", "title": "t"}, {"id": "2", "blocked_by": [{"id": "1"}, {"identifier": "X-9", "state": "Open"}]}]"#,
            r#"[{"id": "2", "blocked_by": [{"id": "1"}, {"identifier": "X-9", "state": "Open"}]}]"#,
        ]);
        for (cached, whole) in &v {
            assert!(same_issues(cached, whole));
        }
        let states = |p: &ParsedFile| -> Vec<String> {
            p.issues()[p.issues().len() - 1]
                .blocked_by
                .iter()
                .map(|b| b.state.clone())
                .collect()
        };
        assert_eq!(states(&v[0].0), ["To Do", "Open"]);
        assert_eq!(states(&v[1].0), ["Done", "Open"]);
        // Its blocker's state is as it was: the dependent is shared again.
        assert!(Arc::ptr_eq(&v[1].0.issues()[1], &v[2].0.issues()[1]));
        // The blocker left the file: the state written in the list stands again.
        assert_eq!(states(&v[3].0), ["", "Open"]);
    }

    #[test]
    fn what_a_lone_element_does_not_take_is_parsed_whole() {
        let (_dir, path) = setup(r#"[{"id": "1", "state": "To Do"}, {"id": "2"}]"#);
        let cache = FileCache::with_probes(Probes {
            now: later,
            ..Probes::default()
        });
        assert_eq!(states(&cache, &path), ["To Do", ""]);
        // A repeated key: only the whole parse's lenient path takes it (the last one wins).
        std::fs::write(
            &path,
            r#"[{"id": "1", "state": "To Do"}, {"id": "2", "state": "A", "state": "B"}]"#,
        )
        .ok();
        assert_eq!(states(&cache, &path), ["To Do", "B"]);
        // A broken element: the whole parse names it.
        std::fs::write(
            &path,
            r#"[{"id": "1", "state": "To Do"}, {"id": 2, "title": 5}]"#,
        )
        .ok();
        let err = cache
            .get(&path)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(err.contains("issue [1]"), "{err}");
    }
}
