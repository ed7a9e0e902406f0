//! File tracker: fixtures, normalization and read queries. The recorded issue files in
//! `tests/fixtures/file/` must normalize into the same domain `Issue` any tracker adapter
//! produces (the orchestrator sees only `TrackerAdapter`), and the read queries must answer
//! from the file as it is at each call.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sortie::clock::ManualClock;
use sortie::domain::{BlockerRef, Comment, Issue, IssueRef};
use sortie::tracker::file::FileTracker;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/file")
        .join(name)
}

fn tracker(path: PathBuf, active: &[&str]) -> FileTracker {
    FileTracker::new(
        path,
        active.iter().map(|s| s.to_string()).collect(),
        Arc::new(ManualClock::new(0)),
    )
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn ids(issues: &[Issue]) -> Vec<&str> {
    issues.iter().map(|i| i.id.as_str()).collect()
}

#[test]
fn basic_fixture_normalizes_every_field() {
    let t = tracker(fixture("basic.json"), &[]);
    let issue = t.fetch_issue_by_id("10001").expect("issue 10001");
    let expected = Issue {
        blockers_read: Default::default(),
        id: "10001".into(),
        identifier: "PROJ-1".into(),
        display_identifier: String::new(),
        title: "Implement login".into(),
        description: "Add OAuth2 login flow.".into(),
        state: "To Do".into(),
        priority: Some(2),
        branch_name: "feature/PROJ-1".into(),
        url: "https://tracker.example.com/PROJ-1".into(),
        assignee: "alice".into(),
        issue_type: "Story".into(),
        labels: strings(&["feature", "auth"]),
        parent: Some(IssueRef {
            id: "10000".into(),
            identifier: "PROJ-0".into(),
        }),
        comments: Some(vec![Comment {
            id: "c1".into(),
            author: "bob".into(),
            body: "Needs SSO support.".into(),
            created_at: "2026-03-01T10:00:00Z".into(),
        }]),
        // PROJ-2 is in the same file and "In Progress": its live state wins over the "Done"
        // written inside blocked_by (documented deviation).
        blocked_by: vec![BlockerRef {
            id: "10002".into(),
            identifier: "PROJ-2".into(),
            state: "In Progress".into(),
        }],
        created_at: "2026-02-28T09:00:00Z".into(),
        updated_at: "2026-03-01T12:00:00Z".into(),
    };
    assert_eq!(issue, expected);
}

#[test]
fn candidates_filter_by_startup_active_states_and_drop_comments() {
    let t = tracker(fixture("basic.json"), &["to do", "IN PROGRESS"]);
    let c = t.fetch_candidate_issues().expect("candidates");
    assert_eq!(ids(&c), ["10001", "10002"]);
    assert!(c.iter().all(|i| i.comments.is_none()));

    let all = tracker(fixture("basic.json"), &[]);
    assert_eq!(
        ids(&all.fetch_candidate_issues().expect("all")),
        ["10001", "10002", "10003"]
    );
}

#[test]
fn by_id_turns_absent_comments_into_empty_list() {
    let t = tracker(fixture("basic.json"), &[]);
    assert_eq!(
        t.fetch_issue_by_id("10003").expect("10003").comments,
        Some(vec![])
    );
    assert_eq!(
        t.fetch_issue_by_id("10002").expect("10002").comments,
        Some(vec![])
    );
    assert_eq!(t.fetch_issue_comments("10003").expect("comments"), vec![]);
    let c = t.fetch_issue_comments("10001").expect("comments");
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].body, "Needs SSO support.");
}

#[test]
fn by_states_is_case_insensitive_and_keeps_file_comments() {
    let t = tracker(fixture("basic.json"), &[]);
    let done = t.fetch_issues_by_states(&strings(&["done"])).expect("done");
    assert_eq!(ids(&done), ["10003"]);
    assert_eq!(done[0].comments, None);
    let two = t
        .fetch_issues_by_states(&strings(&["Done", "in progress"]))
        .expect("two");
    assert_eq!(ids(&two), ["10002", "10003"]);
    assert_eq!(two[0].comments, Some(vec![]));
}

#[test]
fn empty_state_list_answers_without_reading() {
    let t = tracker(PathBuf::from("/nonexistent/sortie/issues.json"), &[]);
    assert_eq!(t.fetch_issues_by_states(&[]).expect("no read"), vec![]);
    let err = t
        .fetch_issues_by_states(&strings(&["Done"]))
        .expect_err("read fails");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
}

#[test]
fn state_maps_omit_unknown_keys() {
    let t = tracker(fixture("basic.json"), &[]);
    let by_id = t
        .fetch_issue_states_by_ids(&strings(&["10001", "nope", "10003"]))
        .expect("by ids");
    assert_eq!(
        by_id.into_iter().collect::<Vec<_>>(),
        [
            ("10001".to_string(), "To Do".to_string()),
            ("10003".to_string(), "Done".to_string())
        ]
    );
    let by_key = t
        .fetch_issue_states_by_identifiers(&strings(&["PROJ-2", "PROJ-404"]))
        .expect("by identifiers");
    assert_eq!(
        by_key.into_iter().collect::<Vec<_>>(),
        [("PROJ-2".to_string(), "In Progress".to_string())]
    );
}

#[test]
fn unknown_id_is_not_found() {
    let t = tracker(fixture("basic.json"), &[]);
    for err in [
        t.fetch_issue_by_id("missing").expect_err("by id"),
        t.fetch_issue_comments("missing").expect_err("comments"),
        t.fetch_blockers("missing").expect_err("blockers"),
    ] {
        assert_eq!(err.kind, TrackerErrorKind::NotFound);
        assert_eq!(err.message, "issue not found: missing");
        assert_eq!(err.tracker, "file");
        assert!(!err.kind.retryable());
    }
}

#[test]
fn empty_fixture_is_an_empty_list() {
    let t = tracker(fixture("empty.json"), &[]);
    assert_eq!(t.fetch_candidate_issues().expect("empty"), vec![]);
    assert_eq!(
        t.fetch_issues_by_states(&strings(&["To Do"]))
            .expect("empty"),
        vec![]
    );
}

#[test]
fn malformed_fixture_is_a_parse_payload_error() {
    let path = fixture("malformed.json");
    let t = tracker(path.clone(), &[]);
    let err = t.fetch_candidate_issues().expect_err("malformed");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
    let prefix = format!("failed to parse file: {}: ", path.display());
    assert!(err.message.starts_with(&prefix), "{}", err.message);
    assert!(err.message.len() > prefix.len(), "cause missing");
    assert!(!err.kind.retryable());
    assert_eq!(
        t.fetch_issue_by_id("1").expect_err("by id too").kind,
        TrackerErrorKind::Payload
    );
}

#[test]
fn missing_file_is_a_read_payload_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("absent.json");
    let err = tracker(path.clone(), &[])
        .fetch_candidate_issues()
        .expect_err("missing");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
    let prefix = format!("failed to read file: {}: ", path.display());
    assert!(err.message.starts_with(&prefix), "{}", err.message);
}

#[test]
fn non_array_and_bad_record_are_parse_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("issues.json");
    let t = tracker(path.clone(), &[]);

    std::fs::write(&path, r#"{"id": "1"}"#).expect("write");
    let err = t.fetch_candidate_issues().expect_err("object");
    assert_eq!(
        err.message,
        format!(
            "failed to parse file: {}: top-level value must be an array, found an object",
            path.display()
        )
    );

    std::fs::write(&path, r#"[{"id": "1", "labels": "bug"}]"#).expect("write");
    let err = t.fetch_candidate_issues().expect_err("bad labels");
    assert_eq!(err.kind, TrackerErrorKind::Payload);
    assert!(
        err.message.starts_with(&format!(
            "failed to parse file: {}: issue [0] (id 1): ",
            path.display()
        )),
        "{}",
        err.message
    );
}

#[test]
fn normalization_fixture_case_by_case() {
    let t = tracker(fixture("normalization.json"), &["open"]);
    let issues = t.fetch_candidate_issues().expect("normalization");
    assert_eq!(ids(&issues), ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]);
    let by = |id: &str| {
        issues
            .iter()
            .find(|i| i.id == id)
            .unwrap_or_else(|| panic!("{id} missing"))
    };

    // n1: labels lowercased, tracker order; integer priority kept.
    assert_eq!(by("n1").labels, strings(&["bug", "high-priority"]));
    assert_eq!(by("n1").priority, Some(1));
    // n2–n4: string, float and boolean priorities are not priorities.
    assert_eq!(by("n2").priority, None);
    assert_eq!(by("n3").priority, None);
    assert_eq!(by("n4").priority, None);
    // n5: integer; n6: explicit null.
    assert_eq!(by("n5").priority, Some(1));
    assert_eq!(by("n6").priority, None);
    // n7: every optional field absent → defaults.
    let n7 = by("n7");
    let expected = Issue {
        id: "n7".into(),
        identifier: "NORM-7".into(),
        title: "Absent fields".into(),
        state: "Open".into(),
        ..Issue::default()
    };
    assert_eq!(n7, &expected);
    assert!(n7.is_dispatchable_shape());

    // By id, absent comments become an empty list.
    assert_eq!(
        t.fetch_issue_by_id("n7").expect("n7").comments,
        Some(vec![])
    );
}

#[test]
fn blockers_are_complete_and_fall_back_to_written_state() {
    let t = tracker(fixture("basic.json"), &[]);
    let b = t.fetch_blockers("10001").expect("blockers");
    assert!(b.complete);
    assert_eq!(b.refs.len(), 1);
    assert_eq!(b.refs[0].state, "In Progress");
    let none = t.fetch_blockers("10002").expect("blockers");
    assert!(none.complete);
    assert!(none.refs.is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("issues.json");
    std::fs::write(
        &path,
        r#"[{"id": "1", "identifier": "A-1", "title": "t", "state": "To Do",
             "blocked_by": [{"id": "elsewhere", "identifier": "B-9", "state": "Done"},
                            {"identifier": "B-10"}]}]"#,
    )
    .expect("write");
    let b = tracker(path, &[]).fetch_blockers("1").expect("blockers");
    assert_eq!(
        b.refs,
        vec![
            BlockerRef {
                id: "elsewhere".into(),
                identifier: "B-9".into(),
                state: "Done".into()
            },
            BlockerRef {
                id: String::new(),
                identifier: "B-10".into(),
                state: String::new()
            },
        ]
    );
}

#[test]
fn edits_to_the_file_are_seen_on_the_next_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("issues.json");
    std::fs::write(&path, "[]").expect("write");
    let t = tracker(path.clone(), &["To Do"]);
    assert_eq!(t.fetch_candidate_issues().expect("empty"), vec![]);
    std::fs::write(
        &path,
        r#"[{"id":"1","identifier":"DEMO-1","title":"Add a README","state":"To Do","priority":1}]"#,
    )
    .expect("write");
    let c = t.fetch_candidate_issues().expect("one");
    assert_eq!(ids(&c), ["1"]);
    assert_eq!(t.kind(), "file");
}
