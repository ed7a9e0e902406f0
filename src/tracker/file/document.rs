//! The tracker file as a JSON document on disk: read, parse, and atomic rewrite.
//!
//! Write-back works on `serde_json::Value` (with `preserve_order`), never on the typed record,
//! so unknown keys and key order survive; the document is walked and rewritten one element at
//! a time (`stream`), so a rewrite of a large file holds one issue's tree, not the file's.
//!
//! A rewrite re-reads the file right before editing (rewrites in this process take turns), so a
//! person's hand edit made since the last poll is kept; it checks right before its rename that
//! the file is still what it read, and starts over when not, so an edit made *during* the
//! rewrite is kept too. The rename means a concurrent reader sees either the old or the new
//! document.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::tracker::{TrackerError, TrackerErrorKind, TrackerResult};

// The adapter name in every error this module raises.
use super::KIND as TRACKER;
use super::file_key::FileKey;
use super::group_commit::GroupCommit;
use super::stream::{self, ArrayWriter, WalkError};

/// The buffer between a rewrite's elements and the temp file.
const WRITE_BUFFER: usize = 64 << 10;

/// Distinguishes temp files of concurrent writers within this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

pub fn payload(message: impl Into<String>) -> TrackerError {
    TrackerError::new(TrackerErrorKind::Payload, TRACKER, message)
}

pub fn not_found(id: &str) -> TrackerError {
    TrackerError::new(
        TrackerErrorKind::NotFound,
        TRACKER,
        format!("issue not found: {id}"),
    )
}

/// Largest issues file read (a guard against pointing the tracker at something huge).
const MAX_ISSUES_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a regular file of at most [`MAX_ISSUES_FILE_BYTES`]. Opened with `O_NONBLOCK` so a
/// FIFO without writer cannot hang the open; the opened descriptor must be a regular file.
/// Answers the bytes with the metadata of the descriptor they were read from, so a cache keys
/// them on the file actually read, not on whatever the path names a moment later.
fn read_regular(path: &Path) -> Result<(Vec<u8>, fs::Metadata), ReadProblem> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(ReadProblem::Io)?;
    let meta = file.metadata().map_err(ReadProblem::Io)?;
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(ReadProblem::NotRegular(kind));
    }
    let mut bytes = Vec::new();
    file.take(MAX_ISSUES_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadProblem::Io)?;
    if bytes.len() as u64 > MAX_ISSUES_FILE_BYTES {
        return Err(ReadProblem::TooLarge);
    }
    Ok((bytes, meta))
}

/// Why the issues file could not be read.
#[derive(Debug)]
enum ReadProblem {
    Io(std::io::Error),
    /// Something other than a regular file (`a directory`, `a FIFO`, …).
    NotRegular(&'static str),
    /// Over [`MAX_ISSUES_FILE_BYTES`].
    TooLarge,
}

impl std::fmt::Display for ReadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadProblem::Io(e) => write!(f, "{e}"),
            ReadProblem::NotRegular(kind) => write!(f, "not a regular file (it is {kind})"),
            ReadProblem::TooLarge => write!(
                f,
                "file is too large: more than {MAX_ISSUES_FILE_BYTES} bytes"
            ),
        }
    }
}

fn read_error(path: &Path, cause: impl std::fmt::Display) -> TrackerError {
    payload(format!("failed to read file: {}: {cause}", path.display()))
}

/// Reads the file's bytes and the metadata of what was read. Special files (a FIFO would block
/// the read) are refused.
pub fn read_bytes(path: &Path) -> TrackerResult<(Vec<u8>, fs::Metadata)> {
    read_regular(path).map_err(|cause| read_error(path, cause))
}

/// The file's text: a UTF-8 BOM is accepted, anything else that is not UTF-8 is refused.
pub fn decode_text<'a>(path: &Path, bytes: &'a [u8]) -> TrackerResult<&'a str> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(body).map_err(|e| read_error(path, format!("not valid UTF-8: {e}")))
}

/// Reads and parses the file; the top level must be an array.
#[cfg(test)]
pub fn read_document(path: &Path) -> TrackerResult<Vec<Value>> {
    let (bytes, _) = read_bytes(path)?;
    parse_document(path, decode_text(path, &bytes)?)
}

/// Parses the file's text; the top level must be an array.
pub fn parse_document(path: &Path, text: &str) -> TrackerResult<Vec<Value>> {
    let parse_err =
        |cause: String| payload(format!("failed to parse file: {}: {cause}", path.display()));
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(other) => Err(parse_err(format!(
            "top-level value must be an array, found {}",
            json_type(&other)
        ))),
        Err(e) => Err(parse_err(e.to_string())),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One edit of one issue object: `Ok(true)` when it changed the object. Owned (`'static`)
/// because the thread that writes the file may be another caller's (see [`modify_issue`]);
/// `Fn` because a rewrite that finds the file changed under it applies its edits again.
pub type Edit = Box<dyn Fn(&mut Map<String, Value>) -> TrackerResult<bool> + Send>;

/// An edit waiting for the next rewrite, with where its answer goes.
struct Queued {
    path: PathBuf,
    id: String,
    edit: Edit,
    answer: crossbeam_channel::Sender<TrackerResult<bool>>,
}

/// Edits queued for the next rewrite (see [`modify_issue`]). One for every file tracker in the
/// process, so read-modify-write cycles never interleave (there is normally one file; two
/// adapters on the same file are kept apart too).
static EDITS: GroupCommit<Queued> = GroupCommit::new();

/// Re-reads the file, applies `edit` to the first issue object whose `id` equals `id`, and
/// rewrites the file when an edit reports a change (`Ok(true)`). Unknown id → `NotFound`.
///
/// Edits that arrive while a rewrite is under way are applied together by the next one (a
/// group commit, [`GroupCommit`]): the caller that finds no rewrite under way applies every
/// queued edit in one read, one parse and one rewrite, and answers each; a caller whose edit
/// another's rewrite applied returns its answer as that rewrite ends. Each edit sees the edits
/// queued before it, and one that fails leaves its issue as it was.
pub fn modify_issue(path: &Path, id: &str, edit: Edit) -> TrackerResult<bool> {
    let (answer, answered) = crossbeam_channel::bounded(1);
    let queued = Queued {
        path: path.to_path_buf(),
        id: id.to_string(),
        edit,
        answer,
    };
    EDITS
        .submit(queued, &answered, apply_batch)
        .unwrap_or_else(|| Err(payload("edit was not applied")))
}

/// Applies queued edits, one rewrite per file, and answers each. Called by one caller at a
/// time ([`GroupCommit`]).
fn apply_batch(mut batch: Vec<Queued>) {
    while let Some(first) = batch.first() {
        let path = first.path.clone();
        let (this, rest): (Vec<Queued>, Vec<Queued>) =
            batch.into_iter().partition(|q| q.path == path);
        batch = rest;
        apply_to_file(&path, this);
    }
}

/// How many times one batch's rewrite starts over because the file changed between its read
/// and its rename, before the batch is answered with an error.
const REWRITE_ATTEMPTS: usize = 8;

/// One file's queued edits, rewritten once, and answered. A rewrite whose file changed after
/// it was read (a person's edit, another program's write) replaces nothing and starts over
/// from the new text, so that change is kept; a file that changes during every attempt is
/// left as its writers made it and the edits are answered with an error.
fn apply_to_file(path: &Path, edits: Vec<Queued>) {
    for _ in 0..REWRITE_ATTEMPTS {
        if let Some(answers) = rewrite_once(path, &edits) {
            for (q, answer) in edits.into_iter().zip(answers) {
                let _ = q.answer.send(answer);
            }
            return;
        }
    }
    let e = payload(format!(
        "failed to write file: {}: it changed during each of {REWRITE_ATTEMPTS} rewrites; \
         the edit was not applied",
        path.display()
    ));
    for q in edits {
        let _ = q.answer.send(Err(e.clone()));
    }
}

/// One read, edit and rewrite in two streamed passes over the text (see [`super::stream`]):
/// the first keeps only the objects the edits name, the second, run only when an edit changed
/// something, writes every element with the edited objects in place. Answers each edit, or
/// `None` when the file changed before the rename (nothing was replaced).
fn rewrite_once(path: &Path, edits: &[Queued]) -> Option<Vec<TrackerResult<bool>>> {
    let every = |e: TrackerError| Some(vec![Err(e); edits.len()]);
    let read_at = SystemTime::now();
    let (bytes, meta) = match read_bytes(path) {
        Ok(read) => read,
        Err(e) => return every(e),
    };
    let text = match decode_text(path, &bytes) {
        Ok(text) => text,
        Err(e) => return every(e),
    };
    let Some(mut targets) = find_targets(text, edits) else {
        return every(refusal(path, text));
    };
    let mut answers: Vec<TrackerResult<bool>> = edits
        .iter()
        .map(|q| apply_to_target(&mut targets, &q.id, &q.edit))
        .collect();
    if !answers.iter().any(|a| matches!(a, Ok(true))) {
        return Some(answers);
    }
    let mut by_index: HashMap<usize, Value> = targets
        .into_values()
        .map(|(index, obj)| (index, Value::Object(obj)))
        .collect();
    let read = ReadVersion {
        key: FileKey::of(&meta),
        bytes: &bytes,
        read_at,
    };
    let written = match write_atomic(path, &read, |out| {
        let mut writer = ArrayWriter::new(out);
        stream::walk(text, |index, element| {
            writer.push(by_index.remove(&index).as_ref().unwrap_or(&element))
        })
        .map_err(|e| match e {
            WalkError::Io(e) => e,
            WalkError::Json(e) => e.into(),
        })?;
        writer.finish().map(drop)
    }) {
        Ok(()) => Ok(true),
        Err(WriteFailure::Changed) => return None,
        Err(WriteFailure::Failed(e)) => Err(e),
    };
    for answer in answers.iter_mut().filter(|a| matches!(a, Ok(true))) {
        *answer = written.clone();
    }
    Some(answers)
}

/// By id: the position of the first object with that id, and the object (edited in place).
type Targets = HashMap<String, (usize, Map<String, Value>)>;

/// The first object with each id the edits name, with its position; `None` when the text is
/// not one JSON array.
fn find_targets(text: &str, edits: &[Queued]) -> Option<Targets> {
    let wanted: HashSet<&str> = edits.iter().map(|q| q.id.as_str()).collect();
    let mut found = HashMap::new();
    let walked = stream::walk(text, |index, element| {
        if let Value::Object(obj) = element
            && let Some(id) = obj.get("id").and_then(Value::as_str)
            && wanted.contains(id)
            && !found.contains_key(id)
        {
            found.insert(id.to_string(), (index, obj));
        }
        Ok(())
    });
    walked.ok().map(|()| found)
}

/// Applies `edit` to a copy of its target, kept only when the edit succeeds.
fn apply_to_target(targets: &mut Targets, id: &str, edit: &Edit) -> TrackerResult<bool> {
    let (_, target) = targets.get_mut(id).ok_or_else(|| not_found(id))?;
    let mut copy = target.clone();
    let changed = edit(&mut copy)?;
    if changed {
        *target = copy;
    }
    Ok(changed)
}

/// The error of text the streamed walk refused: the whole-document parse's, whose message
/// names the problem as a read of the file does.
fn refusal(path: &Path, text: &str) -> TrackerError {
    match parse_document(path, text) {
        Err(e) => e,
        Ok(_) => payload(format!(
            "failed to parse file: {}: not one JSON array",
            path.display()
        )),
    }
}

/// The version of the file a rewrite was built from.
struct ReadVersion<'a> {
    /// The stat of the descriptor the bytes were read from.
    key: FileKey,
    bytes: &'a [u8],
    /// When the read began.
    read_at: SystemTime,
}

impl ReadVersion<'_> {
    /// Whether the file at `target` is still this version: the same stat and, when the read
    /// began within the racy window of the file's previous change (where a same-size rewrite
    /// can keep every stat field, see [`super::cache`]), the same bytes. A file that cannot be
    /// looked at counts as changed; the next attempt's read reports why.
    fn still_at(&self, target: &Path) -> bool {
        let same_stat = fs::metadata(target).is_ok_and(|m| FileKey::of(&m) == self.key);
        if !same_stat {
            return false;
        }
        self.key.certain_at(self.read_at)
            || read_bytes(target).is_ok_and(|(now, _)| now == self.bytes)
    }
}

/// Why [`write_atomic`] replaced nothing.
enum WriteFailure {
    /// The file is no longer the version the new text was built from.
    Changed,
    Failed(TrackerError),
}

/// Writes `body` (2-space pretty print, trailing newline) to a temp file beside the real file,
/// fsyncs it, gives it the original's permissions, and — when the file is still the version
/// `read` describes — renames it over the original and fsyncs the directory. The check sits
/// right before the rename, so a change made while the new text was built and synced is seen;
/// one landing between the check and the rename (microseconds) is not: a rename cannot be made
/// conditional. A symlinked path is resolved first so the link keeps pointing at the data.
fn write_atomic(
    path: &Path,
    read: &ReadVersion<'_>,
    body: impl FnOnce(&mut BufWriter<&mut File>) -> std::io::Result<()>,
) -> Result<(), WriteFailure> {
    let write_err = |cause: String| {
        WriteFailure::Failed(payload(format!(
            "failed to write file: {}: {cause}",
            path.display()
        )))
    };
    let target = fs::canonicalize(path).map_err(|e| write_err(e.to_string()))?;
    let permissions = fs::metadata(&target)
        .map_err(|e| write_err(e.to_string()))?
        .permissions();
    let temp = temp_path(&target);
    let result = (|| -> std::io::Result<bool> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, &mut file);
        body(&mut out)?;
        out.flush()?;
        drop(out);
        file.set_permissions(permissions)?;
        file.sync_all()?;
        drop(file);
        if !read.still_at(&target) {
            return Ok(false);
        }
        fs::rename(&temp, &target)?;
        Ok(true)
    })();
    match result {
        Ok(true) => {}
        Ok(false) => {
            let _ = fs::remove_file(&temp);
            return Err(WriteFailure::Changed);
        }
        Err(e) => {
            // Best effort: a leftover temp file is harmless but untidy.
            let _ = fs::remove_file(&temp);
            return Err(write_err(e.to_string()));
        }
    }
    if let Some(dir) = target.parent() {
        // Makes the rename itself durable; some filesystems refuse to open a directory, and
        // the data is already in place, so a failure here is only logged.
        if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
            log::debug!(path:% = dir.display(), error:% = e; "tracker file directory fsync failed");
        }
    }
    Ok(())
}

/// `.<name>.sortie-<pid>-<n>.tmp` in the same directory, so the rename stays on one filesystem.
fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "issues.json".to_string());
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}.sortie-{}-{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::UNIX_EPOCH;

    #[test]
    fn top_level_must_be_an_array() {
        let p = Path::new("/x/issues.json");
        let e = parse_document(p, r#"{"id": "1"}"#).err();
        assert_eq!(
            e.map(|e| e.message),
            Some(
                "failed to parse file: /x/issues.json: top-level value must be an array, found an object"
                    .to_string()
            )
        );
        assert_eq!(parse_document(p, "[]").ok(), Some(vec![]));
    }

    fn queued(
        path: &Path,
        id: &str,
        edit: Edit,
    ) -> (Queued, crossbeam_channel::Receiver<TrackerResult<bool>>) {
        let (answer, answered) = crossbeam_channel::bounded(1);
        let q = Queued {
            path: path.to_path_buf(),
            id: id.to_string(),
            edit,
            answer,
        };
        (q, answered)
    }

    fn answer(rx: &crossbeam_channel::Receiver<TrackerResult<bool>>) -> Result<bool, String> {
        rx.try_recv()
            .unwrap_or_else(|e| panic!("no answer: {e}"))
            .map_err(|e| e.message)
    }

    #[test]
    fn a_batch_is_one_rewrite_and_each_edit_gets_its_own_answer() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        fs::write(
            &path,
            r#"[{"id": "1", "state": "a"}, {"id": "2", "state": "a"}]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let set = |state: &'static str| -> Edit {
            Box::new(move |m| {
                m.insert("state".into(), Value::String(state.into()));
                Ok(true)
            })
        };
        let (q1, a1) = queued(&path, "1", set("b"));
        let (q2, a2) = queued(&path, "nope", set("x"));
        // A failing edit leaves its issue as it was, even after touching its copy.
        let (q3, a3) = queued(
            &path,
            "2",
            Box::new(|m| {
                m.insert("state".into(), Value::String("broken".into()));
                Err(payload("refused"))
            }),
        );
        let (q4, a4) = queued(&path, "1", Box::new(|_| Ok(false)));
        apply_batch(vec![q1, q2, q3, q4]);
        assert_eq!(answer(&a1), Ok(true));
        assert_eq!(answer(&a2), Err("issue not found: nope".to_string()));
        assert_eq!(answer(&a3), Err("refused".to_string()));
        assert_eq!(answer(&a4), Ok(false));
        let items = read_document(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(items[0]["state"], "b");
        assert_eq!(items[1]["state"], "a");
    }

    #[test]
    fn a_rewrite_edits_the_first_object_with_the_id_and_keeps_every_other_element() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        fs::write(
            &path,
            r#"[3, {"id": "1", "state": "a", "x": {"y": [1, 2.5, {}]}}, "s",
                {"id": "1", "state": "a"}, null, []]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (q, a) = queued(
            &path,
            "1",
            Box::new(|m| {
                m.insert("state".into(), Value::String("b".into()));
                Ok(true)
            }),
        );
        apply_batch(vec![q]);
        assert_eq!(answer(&a), Ok(true));
        let expected = serde_json::json!([3, {"id": "1", "state": "b", "x": {"y": [1, 2.5, {}]}},
            "s", {"id": "1", "state": "a"}, null, []]);
        let mut text = serde_json::to_string_pretty(&expected).unwrap_or_default();
        text.push('\n');
        assert_eq!(fs::read_to_string(&path).ok(), Some(text));
    }

    #[test]
    fn a_file_that_is_not_one_array_answers_its_parse_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        for text in [r#"{"id": "1"}"#, r#"[{"id": "1"}"#] {
            fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            let (q, a) = queued(&path, "1", Box::new(|_| Ok(true)));
            apply_batch(vec![q]);
            let whole = parse_document(&path, text).err().map(|e| e.message);
            assert!(whole.is_some());
            assert_eq!(answer(&a).err(), whole);
            assert_eq!(fs::read_to_string(&path).ok().as_deref(), Some(text));
        }
    }

    #[test]
    fn a_batch_that_changes_nothing_does_not_rewrite() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        let text = r#"[{"id": "1"}]"#;
        fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        let (q, a) = queued(&path, "1", Box::new(|_| Ok(false)));
        apply_batch(vec![q]);
        assert_eq!(answer(&a), Ok(false));
        assert_eq!(fs::read_to_string(&path).ok().as_deref(), Some(text));
    }

    #[test]
    fn concurrent_edits_all_land() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        let issues: Vec<Value> = (0..64)
            .map(|i| serde_json::json!({"id": i.to_string(), "n": 0}))
            .collect();
        fs::write(&path, Value::Array(issues).to_string()).unwrap_or_else(|e| panic!("{e}"));
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for i in (t..64).step_by(8) {
                        let r = modify_issue(
                            path,
                            &i.to_string(),
                            Box::new(|m| {
                                m.insert("n".into(), Value::from(1));
                                Ok(true)
                            }),
                        );
                        assert_eq!(r.map_err(|e| e.message), Ok(true));
                    }
                });
            }
        });
        let items = read_document(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(items.iter().all(|v| v["n"] == 1), "{items:?}");
    }

    /// An edit that, each time it is applied, first rewrites the file in place as another
    /// program would (the text `write(n)` for the n-th call), while the batch holds its read.
    fn meddling_edit(path: &Path, write: fn(usize) -> Option<String>) -> (Edit, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let (path, seen) = (path.to_path_buf(), Arc::clone(&calls));
        let edit: Edit = Box::new(move |m| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            if let Some(text) = write(n) {
                fs::write(&path, text).map_err(|e| payload(e.to_string()))?;
            }
            m.insert("state".into(), Value::String("b".into()));
            Ok(true)
        });
        (edit, calls)
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".tmp"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_change_made_during_the_rewrite_is_kept_and_the_edit_applied_to_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        // Same size, moments after the file's last change (the stat may or may not show it).
        fs::write(&path, r#"[{"id": "1", "state": "a", "n": 1}]"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let (edit, calls) = meddling_edit(&path, |n| {
            (n == 0).then(|| r#"[{"id": "1", "state": "a", "n": 2}]"#.to_string())
        });
        let (q, a) = queued(&path, "1", edit);
        apply_batch(vec![q]);
        assert_eq!(answer(&a), Ok(true));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "applied again to the new text"
        );
        let items = read_document(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            items,
            vec![serde_json::json!({"id": "1", "state": "b", "n": 2})]
        );
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());

        // A change that adds an element (another size) is seen by the stat alone.
        let (edit, calls) = meddling_edit(&path, |n| {
            (n == 0).then(|| r#"[{"id": "1", "state": "a"}, {"id": "2", "state": "new"}]"#.into())
        });
        let (q, a) = queued(&path, "1", edit);
        apply_batch(vec![q]);
        assert_eq!(answer(&a), Ok(true));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let items = read_document(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            items,
            vec![
                serde_json::json!({"id": "1", "state": "b"}),
                serde_json::json!({"id": "2", "state": "new"})
            ]
        );
    }

    /// Where the stat cannot be trusted to show a change (a read within the racy window of the
    /// file's previous change), the bytes are compared; outside it, the stat is enough.
    #[test]
    fn a_version_read_within_the_racy_window_is_compared_by_its_bytes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        fs::write(&path, "[1]").unwrap_or_else(|e| panic!("{e}"));
        let key = fs::metadata(&path)
            .map(|m| FileKey::of(&m))
            .unwrap_or_else(|e| panic!("{e}"));
        let changed_at =
            UNIX_EPOCH + std::time::Duration::new(key.mtime.0.max(key.ctime.0) as u64, 999_999_999);
        // The stat matches, as after a same-size rewrite in the same timestamp granule.
        let racy = |bytes: &'static [u8]| ReadVersion {
            key,
            bytes,
            read_at: changed_at,
        };
        assert!(racy(b"[1]").still_at(&path));
        assert!(!racy(b"[2]").still_at(&path));
        let settled = ReadVersion {
            read_at: changed_at + super::super::file_key::RACY_WINDOW,
            ..racy(b"[2]")
        };
        assert!(settled.still_at(&path), "the stat alone is trusted");
        let moved = ReadVersion {
            key: FileKey { size: 4, ..key },
            ..racy(b"[1]")
        };
        assert!(!moved.still_at(&path));
        assert!(!racy(b"[1]").still_at(&dir.path().join("gone.json")));
    }

    #[test]
    fn a_file_that_changes_during_every_rewrite_is_left_as_its_writer_made_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("issues.json");
        fs::write(&path, r#"[{"id": "1", "state": "a"}]"#).unwrap_or_else(|e| panic!("{e}"));
        let (edit, calls) = meddling_edit(&path, |n| {
            Some(format!(r#"[{{"id": "1", "state": "a", "n": {n}}}]"#))
        });
        let (q, a) = queued(&path, "1", edit);
        apply_batch(vec![q]);
        let message = answer(&a).err().unwrap_or_default();
        assert!(
            message.contains("it changed during each of 8 rewrites; the edit was not applied"),
            "{message}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), REWRITE_ATTEMPTS);
        let items = read_document(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            items,
            vec![serde_json::json!({"id": "1", "state": "a", "n": 7})]
        );
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn temp_file_sits_beside_the_target() {
        let t = temp_path(Path::new("/data/issues.json"));
        assert_eq!(t.parent(), Some(Path::new("/data")));
        let name = t.file_name().map(|n| n.to_string_lossy().into_owned());
        assert!(name.is_some_and(|n| n.starts_with(".issues.json.sortie-") && n.ends_with(".tmp")));
    }
}
