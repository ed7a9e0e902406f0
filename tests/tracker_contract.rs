//! The contract every tracker adapter must pass, written once against [`TrackerAdapter`] and
//! instantiated per registered kind. A kind's instantiation only says how to stand the
//! tracker up over the seed issues of `tests/fixtures/contract/tracker_seed.json` (and over a
//! broken backing store); every assertion lives in the shared suite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use sortie::clock::ManualClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Made = Result<UnderTest, Box<dyn std::error::Error>>;

/// The states the seed's candidates are in.
const ACTIVE: &[&str] = &["To Do", "In Progress"];

/// A tracker stood up for one contract run; `_keep` owns whatever backs it (a temp dir).
struct UnderTest {
    tracker: Arc<dyn TrackerAdapter>,
    _keep: Box<dyn std::any::Any>,
}

/// How one kind is stood up: over the seed issues, or over backing data it cannot parse.
struct Instantiation {
    seeded: fn(&Value, &[String]) -> Made,
    broken: fn() -> Made,
    /// Label-less trackers answer label calls with `Ok` and show nothing.
    supports_labels: bool,
}

fn seed() -> Result<Value, Box<dyn std::error::Error>> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contract/tracker_seed.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn sorted_ids(issues: &[sortie::domain::Issue]) -> Vec<String> {
    let mut ids: Vec<String> = issues.iter().map(|i| i.id.clone()).collect();
    ids.sort();
    ids
}

fn stand_up(inst: &Instantiation) -> Made {
    (inst.seeded)(&seed()?, &strings(ACTIVE))
}

fn kind_is_registered(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let d = registry::tracker(t.kind()).ok_or("adapter kind is not in the registry")?;
    assert_eq!(d.kind, t.kind());
    Ok(())
}

fn candidates_are_the_active_issues_without_comments(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let found = t.fetch_candidate_issues()?;
    assert_eq!(sorted_ids(&found), ["c1", "c2"]);
    for issue in &found {
        assert!(issue.comments.is_none(), "{}: comments fetched", issue.id);
        assert!(!issue.identifier.is_empty() && !issue.title.is_empty());
        assert!(ACTIVE.contains(&issue.state.as_str()), "{}", issue.state);
    }
    Ok(())
}

fn one_issue_comes_with_its_comments(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let issue = t.fetch_issue_by_id("c1")?;
    assert_eq!(issue.identifier, "CON-1");
    assert_eq!(issue.state, "To Do");
    let comments = issue.comments.ok_or("comments not fetched")?;
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, "first comment");
    assert_eq!(t.fetch_issue_by_id("c2")?.comments, Some(vec![]));
    assert_eq!(t.fetch_issue_comments("c2")?, vec![]);
    Ok(())
}

fn unknown_ids_are_not_found_and_never_retried(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let calls = [
        t.fetch_issue_by_id("nope").err(),
        t.fetch_issue_comments("nope").err(),
        t.transition_issue("nope", "Done").err(),
        t.comment_issue("nope", "hello").err(),
        t.fetch_blockers("nope").err(),
    ];
    for (n, e) in calls.into_iter().enumerate() {
        let e = e.ok_or(format!("call {n} on an unknown id succeeded"))?;
        assert_eq!(e.kind, TrackerErrorKind::NotFound, "call {n}: {e}");
        assert!(!e.kind.retryable());
        assert_eq!(e.tracker, t.kind());
    }
    Ok(())
}

fn state_queries_match_case_insensitively(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    assert!(t.fetch_issues_by_states(&[])?.is_empty());
    let found = t.fetch_issues_by_states(&strings(&["done", "BACKLOG"]))?;
    assert_eq!(sorted_ids(&found), ["c3", "c4"]);
    assert!(t.fetch_issue_states_by_ids(&[])?.is_empty());
    assert_eq!(
        t.fetch_issue_states_by_ids(&strings(&["c2", "nope", "c3"]))?,
        BTreeMap::from([
            ("c2".to_string(), "In Progress".to_string()),
            ("c3".to_string(), "Done".to_string()),
        ])
    );
    assert!(t.fetch_issue_states_by_identifiers(&[])?.is_empty());
    assert_eq!(
        t.fetch_issue_states_by_identifiers(&strings(&["CON-4", "CON-404"]))?,
        BTreeMap::from([("CON-4".to_string(), "Backlog".to_string())])
    );
    Ok(())
}

fn a_transition_is_seen_by_the_next_read(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    t.transition_issue("c2", "Review")?;
    let states = t.fetch_issue_states_by_ids(&strings(&["c2"]))?;
    assert_eq!(states.get("c2").map(String::as_str), Some("Review"));
    assert_eq!(sorted_ids(&t.fetch_candidate_issues()?), ["c1"]);
    // Moving to the state it already has is not an error.
    t.transition_issue("c2", "Review")?;
    assert_eq!(t.fetch_issue_by_id("c2")?.state, "Review");
    Ok(())
}

fn a_comment_is_appended(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    t.comment_issue("c1", "contract says hi")?;
    let bodies: Vec<String> = t
        .fetch_issue_comments("c1")?
        .into_iter()
        .map(|c| c.body)
        .collect();
    assert_eq!(bodies, ["first comment", "contract says hi"]);
    Ok(())
}

fn labels_are_added_and_removed_idempotently(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let has = |want: &str| -> Result<bool, Box<dyn std::error::Error>> {
        let labels = t.fetch_issue_by_id("c2")?.labels;
        Ok(labels.iter().any(|l| l.eq_ignore_ascii_case(want)))
    };
    t.add_label("c2", "needs-review")?;
    t.add_label("c2", "needs-review")?;
    assert_eq!(has("needs-review")?, inst.supports_labels);
    t.remove_label("c2", "needs-review")?;
    t.remove_label("c2", "never-there")?;
    assert!(!has("needs-review")?);
    Ok(())
}

fn blockers_are_reported(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let b = t.fetch_blockers("c1")?;
    let refs: Vec<(&str, &str)> = b
        .refs
        .iter()
        .map(|r| (r.id.as_str(), r.identifier.as_str()))
        .collect();
    assert_eq!(refs, [("c3", "CON-3")]);
    assert_eq!(b.refs[0].state, "Done");
    assert!(t.fetch_blockers("c2")?.refs.is_empty());
    Ok(())
}

fn an_unreadable_backing_store_is_a_typed_error(inst: &Instantiation) -> TestResult {
    let under = (inst.broken)()?;
    let t = &under.tracker;
    let e = t
        .fetch_candidate_issues()
        .err()
        .ok_or("a broken store answered candidates")?;
    assert_eq!(e.tracker, t.kind());
    assert!(
        !e.to_string().is_empty() && e.to_string().starts_with("tracker: "),
        "{e}"
    );
    assert!(t.fetch_issue_by_id("c1").is_err());
    Ok(())
}

/// Writes one `#[test]` per contract case for a kind.
macro_rules! tracker_contract {
    ($module:ident, $inst:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn kind_is_registered() -> TestResult {
                super::kind_is_registered(&$inst)
            }
            #[test]
            fn candidates_are_the_active_issues_without_comments() -> TestResult {
                super::candidates_are_the_active_issues_without_comments(&$inst)
            }
            #[test]
            fn one_issue_comes_with_its_comments() -> TestResult {
                super::one_issue_comes_with_its_comments(&$inst)
            }
            #[test]
            fn unknown_ids_are_not_found_and_never_retried() -> TestResult {
                super::unknown_ids_are_not_found_and_never_retried(&$inst)
            }
            #[test]
            fn state_queries_match_case_insensitively() -> TestResult {
                super::state_queries_match_case_insensitively(&$inst)
            }
            #[test]
            fn a_transition_is_seen_by_the_next_read() -> TestResult {
                super::a_transition_is_seen_by_the_next_read(&$inst)
            }
            #[test]
            fn a_comment_is_appended() -> TestResult {
                super::a_comment_is_appended(&$inst)
            }
            #[test]
            fn labels_are_added_and_removed_idempotently() -> TestResult {
                super::labels_are_added_and_removed_idempotently(&$inst)
            }
            #[test]
            fn blockers_are_reported() -> TestResult {
                super::blockers_are_reported(&$inst)
            }
            #[test]
            fn an_unreadable_backing_store_is_a_typed_error() -> TestResult {
                super::an_unreadable_backing_store_is_a_typed_error(&$inst)
            }
        }
    };
}

// ---- the file tracker: the seed written to a temp file, built through the registry ----

fn file_tracker_over(text: &str, active: &[String]) -> Made {
    let dir = tempfile::tempdir()?;
    let path: PathBuf = dir.path().join("issues.json");
    std::fs::write(&path, text)?;
    let settings = TrackerSettings {
        kind: sortie::tracker::file::KIND.to_string(),
        active_states: active.to_vec(),
        path: Some(path),
        ..TrackerSettings::default()
    };
    let tracker =
        registry::build_tracker(&settings, Arc::new(ManualClock::new(1_767_225_600_000)))?;
    Ok(UnderTest {
        tracker,
        _keep: Box::new(dir),
    })
}

const FILE: Instantiation = Instantiation {
    seeded: |seed, active| file_tracker_over(&serde_json::to_string_pretty(seed)?, active),
    broken: || file_tracker_over("[{\"id\": ", &strings(ACTIVE)),
    supports_labels: true,
};

tracker_contract!(file, FILE);

#[test]
fn the_file_kind_refuses_to_build_without_its_path() {
    let settings = TrackerSettings {
        kind: sortie::tracker::file::KIND.to_string(),
        ..TrackerSettings::default()
    };
    let e = registry::build_tracker(&settings, Arc::new(ManualClock::new(0)))
        .err()
        .map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
    let problems = (sortie::tracker::file::DESCRIPTOR.validate)(&settings);
    assert_eq!(problems.len(), 1);
}
