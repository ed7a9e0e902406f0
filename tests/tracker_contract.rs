//! The contract every tracker adapter must pass, written once against [`TrackerAdapter`] and
//! instantiated per registered kind. A kind's instantiation only says how to stand the
//! tracker up over the seed issues of `tests/fixtures/contract/tracker_seed.json` (and over a
//! broken backing store), and how it names what the seed names: its id and identifier for a
//! seed id (`c1`, or `nope` for one that exists nowhere) and identifier (`CON-1`), and its
//! spelling of a seed state. Every assertion lives in the shared suite.
//!
//! Two cases are about what comes from outside: a tracker answer the adapter cannot read
//! (HTML, text, wrong shape, missing fields) is an error of a kind that is retried, never
//! "not found"; and an issue id from outside sortie is resolved within the configured scope
//! by what the tracker answers, while a spelling that could change a request's path is refused
//! before any request is sent.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use sortie::clock::ManualClock;
use sortie::domain::contract::Contract;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Made = Result<UnderTest, Box<dyn std::error::Error>>;

/// The states the seed's candidates are in.
const ACTIVE: &[&str] = &["To Do", "In Progress"];

/// A tracker stood up for one contract run; `_keep` owns whatever backs it (a temp dir, a
/// fake server).
struct UnderTest {
    tracker: Arc<dyn TrackerAdapter>,
    /// The kind's id or identifier for a seed id or identifier; absent ones are the seed's.
    names: BTreeMap<String, String>,
    /// The kind's spelling of a seed state.
    state: fn(&str) -> String,
    /// How many requests the backing server has seen (always 0 without one).
    requests: Box<dyn Fn() -> usize>,
    _keep: Box<dyn std::any::Any>,
}

impl UnderTest {
    /// The kind's name for a seed id or identifier.
    fn n(&self, seed: &str) -> String {
        self.names
            .get(seed)
            .cloned()
            .unwrap_or_else(|| seed.to_string())
    }

    /// The kind's names for seed ids, sorted.
    fn ids(&self, seed: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = seed.iter().map(|s| self.n(s)).collect();
        v.sort();
        v
    }

    fn st(&self, seed_state: &str) -> String {
        (self.state)(seed_state)
    }
}

/// How one kind is stood up: over the seed issues, over backing data it cannot parse, or over
/// a server (or file) giving one answer to everything.
struct Instantiation {
    /// Seed items marked `"foreign": true` belong to another project, team or repository (a
    /// kind whose backing server holds one repository leaves them out).
    seeded: fn(&Value, &[String]) -> Made,
    broken: fn() -> Made,
    answering: fn(&Answer) -> Made,
    /// Label-less trackers answer label calls with `Ok` and show nothing.
    supports_labels: bool,
    /// Spellings that name an issue outside the configured scope: the seed's foreign issue,
    /// or another repository's.
    foreign: &'static [&'static str],
    /// Whether the backing store is a server (requests counted, answers quoted in errors) or
    /// a lenient local file, whose records may lack any field.
    http: bool,
}

/// One answer served to every request.
struct Answer {
    content_type: &'static str,
    body: &'static str,
    /// Whether the body is an array of records lacking every field (read leniently from a
    /// local file, where an issue without an id simply is not there).
    fieldless_records: bool,
}

const fn answer(content_type: &'static str, body: &'static str) -> Answer {
    Answer {
        content_type,
        body,
        fieldless_records: false,
    }
}

/// Answers no tracker sends when it works: an error page, text, nothing, and JSON of the
/// wrong shape or without the fields an adapter reads.
const UNREADABLE: &[Answer] = &[
    answer(
        "text/html",
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>upstream down</body></html>",
    ),
    answer("text/plain", "not json at all"),
    answer("application/json", ""),
    answer("application/json", "null"),
    answer("application/json", "{}"),
    answer("application/json", "{\"data\": {}}"),
    Answer {
        content_type: "application/json",
        body: "[{\"unexpected\": true}]",
        fieldless_records: true,
    },
    answer(
        "application/json",
        r#"{"data": {"issue": {"unexpected": true}, "issues": {"nodes": [{"unexpected": true}], "pageInfo": {"hasNextPage": false}}, "workflowStates": {"nodes": [{"unexpected": true}], "pageInfo": {"hasNextPage": false}}}, "issues": [{"unexpected": true}], "comments": [{"unexpected": true}], "items": [{"unexpected": true}], "isLast": true, "startAt": 0, "total": 1}"#,
    ),
];

/// Spellings that could change a request's path or name a resource elsewhere.
const UNSAFE_IDS: &[&str] = &[
    "",
    "   ",
    ".",
    "..",
    "../1",
    "1/..",
    "1/../2",
    "/1",
    "1/",
    "1/comments",
    "%2F",
    "1%2F..%2F2",
    "..%2F1",
    "%2e%2e",
    "http://127.0.0.1:9/rest/api/3/issue/1",
    "https://evil.example/repos/o/r/issues/1",
    "//evil.example/1",
    "1?x=1",
    "1#x",
    "1\n2",
    "1 2",
    "1\\..\\2",
];

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

/// The seed with one foreign issue: `f9` / `OTHER-9`, active, with a private comment.
fn seed_with_foreign() -> Result<Value, Box<dyn std::error::Error>> {
    let mut seed = seed()?;
    let foreign = serde_json::json!({
        "id": "f9", "identifier": "OTHER-9", "title": "Private elsewhere",
        "state": "To Do", "foreign": true,
        "comments": [{"id": "k9", "author": "eve", "body": "private comment",
            "created_at": "2026-03-01T10:00:00Z"}]});
    seed.as_array_mut()
        .ok_or("seed is not a list")?
        .push(foreign);
    Ok(seed)
}

fn is_foreign(item: &Value) -> bool {
    item["foreign"] == true
}

fn kind_is_registered(inst: &Instantiation) -> TestResult {
    let under = stand_up(inst)?;
    let t = &under.tracker;
    let d = registry::tracker(t.kind()).ok_or("adapter kind is not in the registry")?;
    assert_eq!(d.kind, t.kind());
    Ok(())
}

fn candidates_are_the_active_issues_without_comments(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let found = t.fetch_candidate_issues()?;
    assert_eq!(sorted_ids(&found), u.ids(&["c1", "c2"]));
    let active: Vec<String> = ACTIVE.iter().map(|s| u.st(s)).collect();
    for issue in &found {
        assert!(issue.comments.is_none(), "{}: comments fetched", issue.id);
        assert!(!issue.identifier.is_empty() && !issue.title.is_empty());
        assert!(active.contains(&issue.state), "{}", issue.state);
    }
    Ok(())
}

fn one_issue_comes_with_its_comments(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let issue = t.fetch_issue_by_id(&u.n("c1"))?;
    assert_eq!(issue.identifier, u.n("CON-1"));
    assert_eq!(issue.state, u.st("To Do"));
    assert_eq!(issue.title, "Active with a blocker");
    let comments = issue.comments.ok_or("comments not fetched")?;
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, "first comment");
    assert_eq!(t.fetch_issue_by_id(&u.n("c2"))?.comments, Some(vec![]));
    assert_eq!(t.fetch_issue_comments(&u.n("c2"))?, vec![]);
    Ok(())
}

fn unknown_ids_are_not_found_and_never_retried(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let nope = u.n("nope");
    let calls = [
        t.fetch_issue_by_id(&nope).err(),
        t.fetch_issue_comments(&nope).err(),
        t.transition_issue(&nope, &u.st("Done")).err(),
        t.comment_issue(&nope, "hello").err(),
        t.fetch_blockers(&nope).err(),
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
    let u = stand_up(inst)?;
    let t = &u.tracker;
    assert!(t.fetch_issues_by_states(&[])?.is_empty());
    let asked = [u.st("Done").to_lowercase(), u.st("Backlog").to_uppercase()];
    let found = t.fetch_issues_by_states(&asked)?;
    assert_eq!(sorted_ids(&found), u.ids(&["c3", "c4"]));
    assert!(t.fetch_issue_states_by_ids(&[])?.is_empty());
    let ids = [u.n("c2"), u.n("nope"), u.n("c3")];
    assert_eq!(
        t.fetch_issue_states_by_ids(&ids)?,
        BTreeMap::from([(u.n("c2"), u.st("In Progress")), (u.n("c3"), u.st("Done"))])
    );
    assert!(t.fetch_issue_states_by_identifiers(&[])?.is_empty());
    let identifiers = [u.n("CON-4"), u.n("CON-404")];
    assert_eq!(
        t.fetch_issue_states_by_identifiers(&identifiers)?,
        BTreeMap::from([(u.n("CON-4"), u.st("Backlog"))])
    );
    Ok(())
}

fn a_transition_is_seen_by_the_next_read(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let c2 = u.n("c2");
    t.transition_issue(&c2, &u.st("Review"))?;
    let states = t.fetch_issue_states_by_ids(std::slice::from_ref(&c2))?;
    assert_eq!(states.get(&c2), Some(&u.st("Review")));
    assert_eq!(sorted_ids(&t.fetch_candidate_issues()?), u.ids(&["c1"]));
    // Moving to the state it already has is not an error.
    t.transition_issue(&c2, &u.st("Review"))?;
    assert_eq!(t.fetch_issue_by_id(&c2)?.state, u.st("Review"));
    Ok(())
}

fn a_comment_is_appended(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    t.comment_issue(&u.n("c1"), "contract says hi")?;
    let bodies: Vec<String> = t
        .fetch_issue_comments(&u.n("c1"))?
        .into_iter()
        .map(|c| c.body)
        .collect();
    assert_eq!(bodies, ["first comment", "contract says hi"]);
    Ok(())
}

fn labels_are_added_and_removed_idempotently(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let c2 = u.n("c2");
    let has = |want: &str| -> Result<bool, Box<dyn std::error::Error>> {
        let labels = t.fetch_issue_by_id(&c2)?.labels;
        Ok(labels.iter().any(|l| l.eq_ignore_ascii_case(want)))
    };
    t.add_label(&c2, "needs-review")?;
    t.add_label(&c2, "needs-review")?;
    assert_eq!(has("needs-review")?, inst.supports_labels);
    t.remove_label(&c2, "needs-review")?;
    t.remove_label(&c2, "never-there")?;
    assert!(!has("needs-review")?);
    Ok(())
}

fn blockers_are_reported(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let b = t.fetch_blockers(&u.n("c1"))?;
    let refs: Vec<(&str, &str)> = b
        .refs
        .iter()
        .map(|r| (r.id.as_str(), r.identifier.as_str()))
        .collect();
    let (c3, con3) = (u.n("c3"), u.n("CON-3"));
    assert_eq!(refs, [(c3.as_str(), con3.as_str())]);
    assert_eq!(b.refs[0].state, u.st("Done"));
    assert!(t.fetch_blockers(&u.n("c2"))?.refs.is_empty());
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
    assert!(t.fetch_issue_by_id(&under.n("c1")).is_err());
    Ok(())
}

/// Every read of `t`, named, each with what it answered (`Ok` dropped).
fn every_read(u: &UnderTest) -> Vec<(&'static str, Option<sortie::tracker::TrackerError>)> {
    let t = &u.tracker;
    let done = [u.st("Done")];
    vec![
        ("candidates", t.fetch_candidate_issues().err()),
        ("issue by id", t.fetch_issue_by_id(&u.n("c1")).err()),
        ("issues by states", t.fetch_issues_by_states(&done).err()),
        (
            "states by ids",
            t.fetch_issue_states_by_ids(&[u.n("c1")]).err(),
        ),
        (
            "states by identifiers",
            t.fetch_issue_states_by_identifiers(&[u.n("CON-1")]).err(),
        ),
        ("comments", t.fetch_issue_comments(&u.n("c1")).err()),
        ("blockers", t.fetch_blockers(&u.n("c1")).err()),
        ("scope", t.resolve_in_scope(&u.n("c1")).err()),
    ]
}

fn unreadable_answers_are_retried_errors_never_not_found(inst: &Instantiation) -> TestResult {
    for a in UNREADABLE {
        if a.fieldless_records && !inst.http {
            continue;
        }
        let u = (inst.answering)(a)?;
        for (read, e) in every_read(&u) {
            let what = format!("{read} over {:?}", a.body);
            let e = e.ok_or(format!("{what}: answered as if it could read it"))?;
            assert_ne!(e.kind, TrackerErrorKind::NotFound, "{what}: {e}");
            assert_ne!(e.kind, TrackerErrorKind::OutOfScope, "{what}: {e}");
            assert_eq!(e.tracker, u.tracker.kind(), "{what}");
            let shown = e.to_string();
            assert!(shown.starts_with("tracker: "), "{what}: {shown}");
            // The first bytes of what came back are in the message, escaped.
            let head = a.body.get(..12).unwrap_or(a.body);
            if inst.http && !head.trim().is_empty() {
                assert!(shown.contains(head), "{what}: {shown}");
            }
            assert!(!shown.contains('\n'), "{what}: {shown}");
        }
    }
    Ok(())
}

fn ids_resolve_only_within_the_scope(inst: &Instantiation) -> TestResult {
    let u = (inst.seeded)(&seed_with_foreign()?, &strings(ACTIVE))?;
    let t = &u.tracker;
    let want = sortie::domain::IssueRef {
        id: u.n("c1"),
        identifier: u.n("CON-1"),
    };
    assert_eq!(t.resolve_in_scope(&u.n("c1"))?, want);
    assert_eq!(t.resolve_in_scope(&u.n("CON-1"))?, want);
    assert_eq!(
        t.resolve_in_scope(&format!(" {} ", u.n("c2")))?.id,
        u.n("c2")
    );
    let absent = t.resolve_in_scope(&u.n("nope")).err().map(|e| e.kind);
    assert_eq!(absent, Some(TrackerErrorKind::NotFound));
    for f in inst.foreign {
        let e = t
            .resolve_in_scope(f)
            .err()
            .ok_or(format!("foreign issue {f:?} resolved in scope"))?;
        assert_eq!(e.kind, TrackerErrorKind::OutOfScope, "{f:?}: {e}");
        assert!(e.to_string().contains("rule: "), "{f:?}: {e}");
        assert!(!e.to_string().contains("Private elsewhere"), "{e}");
    }
    Ok(())
}

fn unsafe_ids_are_refused_before_any_request(inst: &Instantiation) -> TestResult {
    let u = stand_up(inst)?;
    let t = &u.tracker;
    let c1 = u.n("c1");
    let suffixed = [
        format!("{c1}/.."),
        format!("{c1}%2F..%2F"),
        format!("../{c1}"),
    ];
    let ids = UNSAFE_IDS
        .iter()
        .map(|s| s.to_string())
        .chain(suffixed.iter().cloned());
    for id in ids {
        let before = (u.requests)();
        let calls = [
            ("scope", t.resolve_in_scope(&id).err()),
            ("issue", t.fetch_issue_by_id(&id).err()),
            ("comments", t.fetch_issue_comments(&id).err()),
            ("blockers", t.fetch_blockers(&id).err()),
            ("transition", t.transition_issue(&id, &u.st("Done")).err()),
            ("comment", t.comment_issue(&id, "hi").err()),
            ("add label", t.add_label(&id, "needs-review").err()),
            ("remove label", t.remove_label(&id, "seed").err()),
        ];
        for (call, e) in calls {
            let e = e.ok_or(format!("{call} of {id:?} succeeded"))?;
            assert!(
                matches!(
                    e.kind,
                    TrackerErrorKind::OutOfScope | TrackerErrorKind::NotFound
                ),
                "{call} of {id:?}: {e}"
            );
        }
        let one = std::slice::from_ref(&id);
        assert!(t.fetch_issue_states_by_ids(one)?.is_empty(), "{id:?}");
        assert!(
            t.fetch_issue_states_by_identifiers(one)?.is_empty(),
            "{id:?}"
        );
        assert_eq!((u.requests)(), before, "{id:?} reached the server");
    }
    // The issue itself was never touched.
    let issue = t.fetch_issue_by_id(&c1)?;
    assert_eq!(issue.state, u.st("To Do"));
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
            #[test]
            fn unreadable_answers_are_retried_errors_never_not_found() -> TestResult {
                super::unreadable_answers_are_retried_errors_never_not_found(&$inst)
            }
            #[test]
            fn ids_resolve_only_within_the_scope() -> TestResult {
                super::ids_resolve_only_within_the_scope(&$inst)
            }
            #[test]
            fn unsafe_ids_are_refused_before_any_request() -> TestResult {
                super::unsafe_ids_are_refused_before_any_request(&$inst)
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
        project: Some("CON".into()),
        active_states: active.to_vec(),
        path: Some(path),
        ..TrackerSettings::default()
    };
    let tracker =
        registry::build_tracker(&settings, Arc::new(ManualClock::new(1_767_225_600_000)))?;
    Ok(UnderTest {
        tracker,
        names: BTreeMap::new(),
        state: str::to_string,
        requests: Box::new(|| 0),
        _keep: Box::new(dir),
    })
}

const FILE: Instantiation = Instantiation {
    seeded: |seed, active| file_tracker_over(&serde_json::to_string_pretty(seed)?, active),
    broken: || file_tracker_over("[{\"id\": ", &strings(ACTIVE)),
    answering: |a| file_tracker_over(a.body, &strings(ACTIVE)),
    supports_labels: true,
    foreign: &["f9", "OTHER-9", "other-9"],
    http: false,
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

// ---- the label trackers (github, gitlab, gitea): the seed in a fake server ----

use common::fake_server::{FakeServer, Reply};
use common::{fake_gitea, fake_github, fake_gitlab};

/// A label tracker reads a state from the labels naming configured states and falls back to
/// open/closed, so the seed's not-yet-active `Backlog` is configured as a terminal state (a
/// label naming no configured state would read as open). States are labels, lowercased.
const LABEL_ACTIVE: [&str; 2] = ["to do", "in progress"];
const LABEL_TERMINAL: [&str; 2] = ["done", "backlog"];
const LABEL_HANDOFF: &str = "review";
/// The repository labels every label fake starts with.
const REPO_LABELS: &[&str] = &[
    "to do",
    "in progress",
    "done",
    "backlog",
    "review",
    "seed",
    "needs-review",
];

/// One seed issue as a numbered tracker holds it.
struct Numbered {
    number: u64,
    title: String,
    /// The seed's state, as written.
    state: String,
    /// The state label, then the seed's own labels.
    labels: Vec<String>,
    closed: bool,
    /// `(author, body, created_at)`.
    comments: Vec<(String, String, String)>,
    blocked_by: Vec<u64>,
    /// In another project, team or repository (see [`seed_with_foreign`]).
    foreign: bool,
}

impl Numbered {
    fn labels(&self) -> Vec<&str> {
        self.labels.iter().map(String::as_str).collect()
    }
}

/// `c7` → 7.
fn seed_number(id: &str) -> u64 {
    id.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0)
}

fn numbered(seed: &Value) -> Vec<Numbered> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    list(seed)
        .iter()
        .map(|i| {
            let state = text(&i["state"]);
            let mut labels = vec![state.to_lowercase()];
            labels.extend(list(&i["labels"]).iter().map(text));
            Numbered {
                number: seed_number(&text(&i["id"])),
                title: text(&i["title"]),
                closed: LABEL_TERMINAL.contains(&labels[0].as_str()),
                labels,
                state,
                comments: list(&i["comments"])
                    .iter()
                    .map(|c| (text(&c["author"]), text(&c["body"]), text(&c["created_at"])))
                    .collect(),
                blocked_by: list(&i["blocked_by"])
                    .iter()
                    .map(|b| seed_number(&text(&b["id"])))
                    .collect(),
                foreign: is_foreign(i),
            }
        })
        .collect()
}

/// Numbered trackers use the issue number as id and identifier.
fn numbered_names() -> BTreeMap<String, String> {
    let mut names = BTreeMap::from([
        ("nope".to_string(), "999".to_string()),
        ("CON-404".to_string(), "404".to_string()),
    ]);
    for n in 1..=4 {
        names.insert(format!("c{n}"), n.to_string());
        names.insert(format!("CON-{n}"), n.to_string());
    }
    names
}

fn label_settings(kind: &str, url: &str, token: &str, project: &str) -> TrackerSettings {
    TrackerSettings {
        kind: kind.to_string(),
        endpoint: Some(url.to_string()),
        api_key: Some(token.to_string()),
        project: Some(project.to_string()),
        active_states: strings(&LABEL_ACTIVE),
        terminal_states: strings(&LABEL_TERMINAL),
        handoff_state: Some(LABEL_HANDOFF.into()),
        block: serde_json::json!({"retry_base_ms": 10, "timeout_ms": 2000})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        ..TrackerSettings::default()
    }
}

fn over_fake<S: Send + 'static>(settings: &TrackerSettings, fake: FakeServer<S>) -> Made {
    let tracker = registry::build_tracker(settings, Arc::new(ManualClock::new(1_767_225_600_000)))?;
    let fake = Arc::new(fake);
    let seen = Arc::clone(&fake);
    Ok(UnderTest {
        tracker,
        names: numbered_names(),
        state: str::to_lowercase,
        requests: Box::new(move || seen.journal().len()),
        _keep: Box::new(fake),
    })
}

/// A server that answers every request with `body`.
fn serving(settings: fn(&str) -> TrackerSettings, content_type: &str, body: &str) -> Made {
    let (content_type, body) = (content_type.to_string(), body.as_bytes().to_vec());
    let server = FakeServer::start((), move |_, _| Reply {
        status: 200,
        headers: vec![("Content-Type".into(), content_type.clone())],
        body: body.clone(),
    });
    over_fake(&settings(&server.url), server)
}

/// A server that answers every request with a cut-off JSON body.
fn broken_server(settings: fn(&str) -> TrackerSettings) -> Made {
    serving(settings, "application/json", "[{\"id\": ")
}

fn github_settings(url: &str) -> TrackerSettings {
    let project = format!("{}/{}", fake_github::OWNER, fake_github::REPO);
    label_settings("github", url, fake_github::TOKEN, &project)
}

const GITHUB: Instantiation = Instantiation {
    seeded: |seed, _| {
        let fake = fake_github::start(REPO_LABELS);
        fake.with_state(|s| {
            for (k, i) in numbered(seed).iter().filter(|i| !i.foreign).enumerate() {
                s.add_issue(i.number, &i.title, &i.labels(), i.closed);
                for (c, (author, body, at)) in i.comments.iter().enumerate() {
                    s.comments
                        .entry(i.number)
                        .or_default()
                        .push(serde_json::json!({
                        "id": 100 * (k + 1) + c, "user": {"login": author},
                        "body": body, "created_at": at}));
                }
                s.blocked_by.insert(i.number, i.blocked_by.clone());
            }
        });
        over_fake(&github_settings(&fake.url), fake)
    },
    broken: || broken_server(github_settings),
    answering: |a| serving(github_settings, a.content_type, a.body),
    supports_labels: true,
    foreign: &["other/repo#1", "Owner/Elsewhere#2", "someone/repo#1"],
    http: true,
};

tracker_contract!(github, GITHUB);

fn gitlab_settings(url: &str) -> TrackerSettings {
    label_settings("gitlab", url, fake_gitlab::TOKEN, fake_gitlab::PROJECT)
}

const GITLAB: Instantiation = Instantiation {
    seeded: |seed, _| {
        let fake = fake_gitlab::start();
        fake.with_state(|s| {
            for i in numbered(seed).into_iter().filter(|i| !i.foreign) {
                s.add_issue(i.number, &i.title, &i.labels(), i.closed);
                for (author, body, _) in &i.comments {
                    s.add_note(i.number, author, body, false);
                }
                for b in &i.blocked_by {
                    s.block(i.number, *b);
                }
            }
        });
        over_fake(&gitlab_settings(&fake.url), fake)
    },
    broken: || broken_server(gitlab_settings),
    answering: |a| serving(gitlab_settings, a.content_type, a.body),
    supports_labels: true,
    foreign: &["other/project#1", "group/sub/other#1", "group/project#1"],
    http: true,
};

tracker_contract!(gitlab, GITLAB);

fn gitea_settings(url: &str) -> TrackerSettings {
    let project = format!("{}/{}", fake_gitea::OWNER, fake_gitea::REPO);
    label_settings("gitea", url, fake_gitea::TOKEN, &project)
}

const GITEA: Instantiation = Instantiation {
    seeded: |seed, _| {
        let fake = fake_gitea::start(REPO_LABELS);
        fake.with_state(|s| {
            for (k, i) in numbered(seed).iter().filter(|i| !i.foreign).enumerate() {
                s.add_issue(i.number, &i.title, &i.labels(), i.closed);
                for (c, (author, body, at)) in i.comments.iter().enumerate() {
                    s.comments
                        .entry(i.number)
                        .or_default()
                        .push(serde_json::json!({
                        "id": 100 * (k + 1) + c,
                        "user": {"id": 1, "login": author},
                        "body": body, "created_at": at, "updated_at": at}));
                }
                s.depends_on.insert(i.number, i.blocked_by.clone());
            }
        });
        over_fake(&gitea_settings(&fake.url), fake)
    },
    broken: || broken_server(gitea_settings),
    answering: |a| serving(gitea_settings, a.content_type, a.body),
    supports_labels: true,
    foreign: &["other/repo#1", "owner/else#2"],
    http: true,
};

tracker_contract!(gitea, GITEA);

// ---- the native-state trackers (jira, linear): the seed in a fake server ----

use common::{fake_jira, fake_linear};

/// Seed ids and identifiers as a native-state tracker names them: `c<n>` is `id(n)`,
/// `CON-<n>` is `<key>-<n>`; `nope` and `CON-404` exist nowhere.
fn keyed_names(id: fn(u64) -> String, key: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::from([
        ("nope".to_string(), id(99_999)),
        ("CON-404".to_string(), format!("{key}-404")),
    ]);
    for n in 1..=4 {
        names.insert(format!("c{n}"), id(n));
        names.insert(format!("CON-{n}"), format!("{key}-{n}"));
    }
    names
}

fn native_settings(kind: &str, url: &str, token: &str, project: &str) -> TrackerSettings {
    TrackerSettings {
        endpoint: Some(format!("{url}/")),
        ..label_settings(kind, url, token, project)
    }
}

/// The workflow's names for the seed's states (the seed's own where they agree).
fn jira_state(seed_state: &str) -> String {
    match seed_state {
        "Review" => "Human Review".into(),
        s => s.into(),
    }
}

fn jira_settings(url: &str) -> TrackerSettings {
    TrackerSettings {
        active_states: strings(ACTIVE),
        terminal_states: strings(&["Done"]),
        handoff_state: Some(jira_state("Review")),
        ..native_settings("jira", url, &fake_jira::api_key(), fake_jira::PROJECT)
    }
}

const JIRA: Instantiation = Instantiation {
    seeded: |seed, _| {
        let fake = fake_jira::start();
        fake.with_state(|s| {
            for i in numbered(seed) {
                let project = if i.foreign {
                    "OTHER"
                } else {
                    fake_jira::PROJECT
                };
                let id = s.add_issue_in(project, i.number, &i.title, &jira_state(&i.state));
                let Some(issue) = s.issues.get_mut(&id) else {
                    continue;
                };
                issue.labels = i.labels[1..].to_vec();
                issue.blocked_by = i.blocked_by.iter().map(|b| 10_000 + b).collect();
                for (c, (author, body, at)) in i.comments.iter().enumerate() {
                    issue.comments.push(serde_json::json!({
                        "id": (20_000 + 100 * i.number + c as u64).to_string(),
                        "author": {"displayName": author},
                        "body": {"type": "doc", "version": 1, "content": [{"type": "paragraph",
                            "content": [{"type": "text", "text": body}]}]},
                        "created": at.replace('Z', ".000+0000")}));
                }
            }
        });
        let mut u = over_fake(&jira_settings(&fake.url), fake)?;
        u.names = keyed_names(|n| (10_000 + n).to_string(), fake_jira::PROJECT);
        u.state = |s| jira_state(s);
        Ok(u)
    },
    broken: || broken_server(jira_settings),
    answering: |a| {
        let mut u = serving(jira_settings, a.content_type, a.body)?;
        u.names = keyed_names(|n| (10_000 + n).to_string(), fake_jira::PROJECT);
        Ok(u)
    },
    supports_labels: true,
    foreign: &["20009", "OTHER-9", "other-9"],
    http: true,
};

tracker_contract!(jira, JIRA);

/// A new Linear team's names for the seed's states.
fn linear_state(seed_state: &str) -> String {
    match seed_state {
        "To Do" => "Todo".into(),
        "Review" => "In Review".into(),
        s => s.into(),
    }
}

fn linear_settings(url: &str) -> TrackerSettings {
    TrackerSettings {
        active_states: ACTIVE.iter().map(|s| linear_state(s)).collect(),
        terminal_states: strings(&["Done", "Canceled"]),
        handoff_state: Some(linear_state("Review")),
        ..native_settings("linear", url, fake_linear::TOKEN, fake_linear::TEAM)
    }
}

const LINEAR: Instantiation = Instantiation {
    seeded: |seed, _| {
        let fake = fake_linear::start();
        fake.with_state(|s| {
            s.labels.push((
                "lb-needs-review".into(),
                "needs-review".into(),
                Some(fake_linear::TEAM.into()),
            ));
            for i in numbered(seed) {
                s.add_issue(i.number, &i.title, &linear_state(&i.state));
                let Some(issue) = s.issue_mut(i.number) else {
                    continue;
                };
                if i.foreign {
                    issue.team = "OPS".into();
                }
                issue.blocked_by = i.blocked_by.clone();
                for (c, (author, body, at)) in i.comments.iter().enumerate() {
                    issue.comments.push(serde_json::json!({
                        "id": format!("cm-seed-{}-{c}", i.number), "body": body,
                        "createdAt": at, "user": {"name": author}}));
                }
            }
        });
        let mut u = over_fake(&linear_settings(&fake.url), fake)?;
        u.names = keyed_names(fake_linear::issue_id, fake_linear::TEAM);
        u.state = |s| linear_state(s);
        Ok(u)
    },
    broken: || broken_server(linear_settings),
    answering: |a| {
        let mut u = serving(linear_settings, a.content_type, a.body)?;
        u.names = keyed_names(fake_linear::issue_id, fake_linear::TEAM);
        Ok(u)
    },
    // Linear labels exist per team or workspace; the seed's are created with the team.
    supports_labels: true,
    foreign: &["00000000-0000-4000-8000-000000000009", "OPS-9", "ops-9"],
    http: true,
};

tracker_contract!(linear, LINEAR);

/// A registered kind without an instantiation above would run none of the contract: the
/// instantiations are read from this file and compared with the suites the registry's
/// descriptors name (each kind names its own, [`Contract::Suite`]).
#[test]
fn every_registered_kind_has_a_contract_instantiation() {
    let instantiated: std::collections::BTreeSet<String> = include_str!("tracker_contract.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("tracker_contract!(")?.split(',').next())
        .map(str::to_string)
        .collect();
    let registered: std::collections::BTreeSet<String> = registry::TRACKERS
        .iter()
        .map(|d| match d.contract {
            Contract::Suite(name) => name.to_string(),
            Contract::File(file) => panic!("{}: no suite instantiation, {file}", d.kind),
        })
        .collect();
    assert_eq!(instantiated, registered);
    assert_eq!(instantiated.len(), registry::TRACKERS.len());
}
