//! File tracker write-back (a deliberate deviation from Go, which keeps writes in memory):
//! transitions, comments and labels land in the file atomically, touching only their keys.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sortie::clock::ManualClock;
use sortie::tracker::file::FileTracker;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind};

/// 2026-03-05T10:00:00Z
const T0_MS: i64 = 1_772_704_800_000;

struct Setup {
    _dir: tempfile::TempDir,
    path: PathBuf,
    clock: Arc<ManualClock>,
}

impl Setup {
    fn new(doc: &Value) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("issues.json");
        write_pretty(&path, doc);
        Setup {
            _dir: dir,
            path,
            clock: Arc::new(ManualClock::new(T0_MS)),
        }
    }

    /// A fresh adapter, as after a daemon restart.
    fn tracker(&self) -> FileTracker {
        FileTracker::new(
            self.path.clone(),
            vec!["To Do".to_string()],
            self.clock.clone(),
        )
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.path).expect("read")
    }

    fn doc(&self) -> Value {
        serde_json::from_str(&self.text()).expect("valid json")
    }
}

fn write_pretty(path: &Path, doc: &Value) {
    std::fs::write(path, pretty(doc)).expect("write");
}

/// The canonical form the tracker writes: 2-space pretty print plus a trailing newline.
fn pretty(doc: &Value) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("serialize");
    s.push('\n');
    s
}

/// Two issues with unknown keys in unusual order, and a non-issue neighbour.
fn sample() -> Value {
    json!([
        {
            "zeta": {"nested": [1, 2.5, null, "x"]},
            "id": "1",
            "identifier": "DEMO-1",
            "custom_team": "platform",
            "title": "Add a README",
            "state": "To Do",
            "labels": ["Docs"],
            "estimate": 3,
            "updated_at": "2026-03-01T12:00:00Z",
            "alpha": true
        },
        {
            "id": "2",
            "identifier": "DEMO-2",
            "title": "Fix the build ✓",
            "state": "To Do",
            "blocked_by": [{"id": "1", "identifier": "DEMO-1", "state": "To Do"}],
            "comments": null,
            "x-extra": {"b": 1, "a": 2}
        }
    ])
}

#[test]
fn transition_survives_restart_and_preserves_everything_else() {
    let s = Setup::new(&sample());
    s.tracker()
        .transition_issue("1", "Review")
        .expect("transition");

    // A fresh instance (restart) sees the new state; the issue left the active set.
    let fresh = s.tracker();
    assert_eq!(fresh.fetch_issue_by_id("1").expect("1").state, "Review");
    let candidates = fresh.fetch_candidate_issues().expect("candidates");
    assert_eq!(candidates.len(), 1);
    assert_eq!(candidates[0].id, "2");

    // Byte-for-byte: only `state` and `updated_at` of issue 1 changed, keys stay in place.
    let mut expected = sample();
    expected[0]["state"] = json!("Review");
    expected[0]["updated_at"] = json!("2026-03-05T10:00:00Z");
    assert_eq!(s.text(), pretty(&expected));
}

#[test]
fn transition_adds_updated_at_when_absent_and_noop_keeps_file() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    t.transition_issue("2", "In Progress").expect("transition");
    let doc = s.doc();
    let keys: Vec<&String> = doc[1].as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "identifier",
            "title",
            "state",
            "blocked_by",
            "comments",
            "x-extra",
            "updated_at"
        ]
    );
    assert_eq!(doc[1]["updated_at"], "2026-03-05T10:00:00Z");

    // Moving to the state it already has does not touch the file (not even updated_at).
    s.clock.advance(Duration::from_secs(60));
    let before = s.text();
    t.transition_issue("2", "In Progress").expect("same state");
    assert_eq!(s.text(), before);
}

#[test]
fn hand_edit_between_two_writes_survives() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    t.transition_issue("1", "In Progress").expect("first write");

    // A person edits the file while the daemon runs: another issue, an unknown key, a new issue.
    let mut edited = s.doc();
    edited[1]["title"] = json!("Fix the build (edited by hand)");
    edited[1]["owner_note"] = json!("do not touch");
    edited
        .as_array_mut()
        .expect("array")
        .push(json!({"id": "3", "identifier": "DEMO-3", "title": "New", "state": "To Do"}));
    write_pretty(&s.path, &edited);

    s.clock.advance(Duration::from_secs(90));
    t.comment_issue("1", "Started work.").expect("second write");

    let mut expected = edited.clone();
    expected[0]["comments"] = json!([{
        "id": format!("sortie-{}", T0_MS + 90_000),
        "author": "sortie",
        "body": "Started work.",
        "created_at": "2026-03-05T10:01:30Z"
    }]);
    assert_eq!(s.text(), pretty(&expected));
    assert_eq!(
        t.fetch_issue_by_id("2").expect("2").title,
        "Fix the build (edited by hand)"
    );
}

#[test]
fn comments_are_appended_and_read_back() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    // Issue 2 has `comments: null`: the array is created in place.
    t.comment_issue("2", "first").expect("comment");
    s.clock.advance(Duration::from_secs(1));
    t.comment_issue("2", "second\nwith \"quotes\"")
        .expect("comment");

    let comments = s.tracker().fetch_issue_comments("2").expect("comments");
    let bodies: Vec<&str> = comments.iter().map(|c| c.body.as_str()).collect();
    assert_eq!(bodies, ["first", "second\nwith \"quotes\""]);
    assert!(comments.iter().all(|c| c.author == "sortie"));
    assert_eq!(comments[0].created_at, "2026-03-05T10:00:00Z");
    assert_eq!(comments[1].created_at, "2026-03-05T10:00:01Z");
    assert_ne!(comments[0].id, comments[1].id);

    // The comments key kept its position among the issue's keys.
    let doc = s.doc();
    let keys: Vec<&String> = doc[1].as_object().expect("object").keys().collect();
    assert_eq!(keys[5], "comments");
    // Candidates still carry no comments; by id they are there.
    assert!(
        t.fetch_candidate_issues()
            .expect("candidates")
            .iter()
            .all(|i| i.comments.is_none())
    );
    assert_eq!(
        t.fetch_issue_by_id("2")
            .expect("2")
            .comments
            .map(|c| c.len()),
        Some(2)
    );
}

#[test]
fn labels_are_written_idempotently() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    t.add_label("1", "needs-human").expect("add");
    let after_add = s.text();
    t.add_label("1", "NEEDS-HUMAN").expect("add again");
    t.add_label("1", "docs").expect("present with other case");
    assert_eq!(s.text(), after_add, "idempotent adds leave the file alone");
    assert_eq!(s.doc()[0]["labels"], json!(["Docs", "needs-human"]));
    assert_eq!(
        s.tracker().fetch_issue_by_id("1").expect("1").labels,
        ["docs", "needs-human"]
    );

    t.remove_label("1", "DOCS").expect("remove");
    assert_eq!(s.doc()[0]["labels"], json!(["needs-human"]));
    let after_remove = s.text();
    t.remove_label("1", "absent").expect("remove absent");
    t.remove_label("2", "absent")
        .expect("remove from label-less issue");
    assert_eq!(s.text(), after_remove);

    // Issue 2 had no labels key: adding creates it at the end.
    t.add_label("2", "stage:review").expect("create labels");
    assert_eq!(s.doc()[1]["labels"], json!(["stage:review"]));
    assert_eq!(
        s.doc()[1]
            .as_object()
            .expect("object")
            .keys()
            .next_back()
            .map(String::as_str),
        Some("labels")
    );
}

#[test]
fn writes_to_unknown_ids_are_not_found_and_leave_the_file_alone() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    let before = s.text();
    for err in [
        t.transition_issue("404", "Done").expect_err("transition"),
        t.comment_issue("404", "hi").expect_err("comment"),
        t.add_label("404", "x").expect_err("add"),
        t.remove_label("404", "x").expect_err("remove"),
    ] {
        assert_eq!(err.kind, TrackerErrorKind::NotFound);
        assert_eq!(err.message, "issue not found: 404");
    }
    assert_eq!(s.text(), before);
}

#[test]
fn write_to_an_unparsable_file_fails_without_clobbering() {
    let s = Setup::new(&sample());
    std::fs::write(&s.path, "{not valid json").expect("write");
    let err = s
        .tracker()
        .transition_issue("1", "Done")
        .expect_err("bad json");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
    assert!(err.message.starts_with("failed to parse file: "));
    assert_eq!(s.text(), "{not valid json");

    // A field of the wrong type is a person's data: refused, not overwritten.
    let mut doc = sample();
    doc[0]["comments"] = json!("see wiki");
    write_pretty(&s.path, &doc);
    let err = s
        .tracker()
        .comment_issue("1", "hi")
        .expect_err("comments not an array");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
    assert_eq!(s.text(), pretty(&doc));
}

#[test]
fn moving_a_blocker_to_done_in_the_file_unblocks_the_dependent() {
    let s = Setup::new(&sample());
    let t = s.tracker();
    let before = t.fetch_blockers("2").expect("blockers");
    assert!(before.complete);
    assert_eq!(before.refs[0].state, "To Do");

    t.transition_issue("1", "Done").expect("transition blocker");
    let after = s.tracker().fetch_blockers("2").expect("blockers");
    assert_eq!(after.refs[0].state, "Done");
    // The issue views agree with fetch_blockers.
    assert_eq!(
        t.fetch_issue_by_id("2").expect("2").blocked_by[0].state,
        "Done"
    );
    // The state written inside blocked_by was not rewritten.
    assert_eq!(s.doc()[1]["blocked_by"][0]["state"], "To Do");
}

#[cfg(unix)]
#[test]
fn permissions_are_kept_and_no_temp_files_remain() {
    use std::os::unix::fs::PermissionsExt;

    let s = Setup::new(&sample());
    std::fs::set_permissions(&s.path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    s.tracker().transition_issue("1", "Review").expect("write");
    let mode = std::fs::metadata(&s.path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o640);
    let dir = s.path.parent().expect("dir");
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["issues.json"]);
}

#[cfg(unix)]
#[test]
fn a_symlinked_file_stays_a_symlink() {
    let s = Setup::new(&sample());
    let link = s.path.with_file_name("link.json");
    std::os::unix::fs::symlink(&s.path, &link).expect("symlink");
    let t = FileTracker::new(link.clone(), vec![], s.clock.clone());
    t.transition_issue("1", "Review")
        .expect("write through link");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("lstat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(s.doc()[0]["state"], "Review");
}

#[test]
fn concurrent_writers_in_one_process_lose_nothing() {
    let s = Setup::new(&sample());
    let tracker = Arc::new(s.tracker());
    let handles: Vec<_> = (0..4)
        .map(|n| {
            let t = Arc::clone(&tracker);
            std::thread::spawn(move || {
                for k in 0..5 {
                    t.add_label("1", &format!("l{n}-{k}")).expect("add");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let labels = tracker.fetch_issue_by_id("1").expect("1").labels;
    assert_eq!(labels.len(), 1 + 4 * 5);
}
