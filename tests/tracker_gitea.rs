//! The Gitea adapter against the fake Gitea API: paging by `Link` at the page-size
//! boundaries and the page cap, pull requests dropped, label states with the open/closed
//! fallback, by-id reads with comments and blockers, label writes by id, convergent
//! transitions, and the error kinds of every fault with recovery on the next call.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_gitea::{self, FakeGitea, OWNER, REPO, TOKEN, fixture};
use common::fake_server::{Fault, Reply};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

/// In the order (and so with the ids) of `tests/fixtures/gitea/labels.json`.
const LABELS: &[&str] = &[
    "backlog",
    "in-progress",
    "review",
    "done",
    "wontfix",
    "bug",
    "ui",
];
const ISSUES: &str = "/api/v1/repos/owner/repo/issues";

fn settings(fake: &FakeGitea, block: serde_json::Value) -> TrackerSettings {
    TrackerSettings {
        kind: "gitea".into(),
        endpoint: Some(fake.url.clone()),
        api_key: Some(TOKEN.into()),
        project: Some(format!("{OWNER}/{REPO}")),
        active_states: vec!["backlog".into(), "in-progress".into()],
        terminal_states: vec!["done".into(), "wontfix".into()],
        handoff_state: Some("review".into()),
        block: block.as_object().cloned().unwrap_or_default(),
        ..TrackerSettings::default()
    }
}

/// A tracker over the fake; retried reads back off 10 ms instead of 2 s.
fn tracker_with(fake: &FakeGitea, mut block: serde_json::Value) -> Arc<dyn TrackerAdapter> {
    block["retry_base_ms"] = json!(10);
    registry::build_tracker(&settings(fake, block), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tracker(fake: &FakeGitea) -> Arc<dyn TrackerAdapter> {
    tracker_with(fake, json!({"timeout_ms": 2000}))
}

fn seeded(n: u64) -> FakeGitea {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        for i in 1..=n {
            s.add_issue(i, &format!("Issue {i}"), &["backlog"], false);
        }
    });
    fake
}

fn ids(issues: &[sortie::domain::Issue]) -> Vec<String> {
    issues.iter().map(|i| i.id.clone()).collect()
}

fn insert_all(fake: &FakeGitea, name: &str) {
    fake.with_state(|s| {
        for v in fixture(name).as_array().cloned().unwrap_or_default() {
            s.issues.insert(v["number"].as_u64().unwrap_or(0), v);
        }
    });
}

#[test]
fn candidate_paging_reads_0_1_50_and_51_issues_completely() {
    for n in [0u64, 1, 50, 51, 101] {
        let fake = seeded(n);
        let got = tracker(&fake)
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len() as u64, n, "{n} issues");
        let pages = fake.requests("GET", ISSUES);
        assert_eq!(pages.len() as u64, n.div_ceil(50).max(1), "{n} issues");
        let first = &pages[0];
        assert_eq!(first.param("state").as_deref(), Some("open"));
        assert_eq!(first.param("type").as_deref(), Some("issues"));
        assert_eq!(first.param("limit").as_deref(), Some("50"));
        assert_eq!(first.param("page").as_deref(), Some("1"));
        if n > 50 {
            assert_eq!(pages[1].param("page").as_deref(), Some("2"));
        }
        assert_eq!(
            first.header("authorization"),
            Some(format!("token {TOKEN}").as_str())
        );
        assert_eq!(first.header("accept"), Some("application/json"));
        let mut unique = ids(&got);
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len() as u64, n);
    }
}

#[test]
fn a_page_cap_stops_reading_with_a_partial_result() {
    let fake = seeded(120);
    let t = tracker_with(&fake, json!({"page_cap": 2, "timeout_ms": 2000}));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 100);
    assert_eq!(fake.requests("GET", ISSUES).len(), 2);
    let exact = seeded(100);
    let t = tracker_with(&exact, json!({"page_cap": 2, "timeout_ms": 2000}));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(100));
    assert_eq!(exact.requests("GET", ISSUES).len(), 2);
}

#[test]
fn the_recorded_issue_list_maps_label_states_and_drops_pull_requests() {
    let fake = fake_gitea::start(LABELS);
    insert_all(&fake, "issues.json");
    let t = tracker(&fake);
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&got), ["3", "1"]);
    let crash = &got[0];
    assert_eq!(crash.state, "in-progress");
    assert_eq!(crash.labels, ["in-progress", "bug"]);
    assert_eq!(crash.assignee, "bob");
    assert_eq!(crash.branch_name, "fix-empty-config");
    assert_eq!(crash.display_identifier, "owner/repo#3");
    assert_eq!(crash.identifier, "3");
    assert_eq!(crash.url, "https://gitea.example.com/owner/repo/issues/3");
    assert_eq!(crash.created_at, "2026-01-04T10:00:00Z");
    assert!(crash.comments.is_none());
    assert_eq!(got[1].description, "Write the install steps.");
    // A pull request read by number is not an issue.
    let pr = t.fetch_issue_by_id("2").err().map(|e| e.kind);
    assert_eq!(pr, Some(TrackerErrorKind::NotFound));
    let states = t
        .fetch_issue_states_by_ids(&["1".into(), "4".into(), "99".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.get("1").map(String::as_str), Some("backlog"));
    assert_eq!(states.get("4").map(String::as_str), Some("done"));
    assert!(!states.contains_key("99"));
}

#[test]
fn unlabeled_issues_fall_back_to_open_and_closed() {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "open, unlabeled", &["bug"], false);
        s.add_issue(2, "closed, unlabeled", &[], true);
        s.add_issue(3, "closed, wontfix", &["wontfix"], true);
        s.add_issue(4, "open, done label", &["done"], false);
    });
    let t = tracker(&fake);
    let states = t
        .fetch_issue_states_by_identifiers(&["1".into(), "2".into(), "owner/repo#3".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.get("1").map(String::as_str), Some("backlog"));
    assert_eq!(states.get("2").map(String::as_str), Some("done"));
    assert_eq!(
        states.get("owner/repo#3").map(String::as_str),
        Some("wontfix")
    );
    let terminal = t
        .fetch_issues_by_states(&["WONTFIX".into(), "done".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut found = ids(&terminal);
    found.sort();
    assert_eq!(found, ["3", "4"]);
    let closed: Vec<_> = fake
        .requests("GET", ISSUES)
        .into_iter()
        .filter(|r| r.param("state").as_deref() == Some("closed"))
        .map(|r| (r.param("labels"), r.param("type")))
        .collect();
    assert_eq!(
        closed,
        [
            (Some("wontfix".to_string()), Some("issues".to_string())),
            (Some("done".to_string()), Some("issues".to_string()))
        ]
    );
    fake.clear_journal();
    assert!(
        t.fetch_issues_by_states(&[])
            .map(|v| v.is_empty())
            .unwrap_or(false)
    );
    assert!(fake.journal().is_empty());
}

#[test]
fn an_issue_by_id_carries_comments_and_blockers() {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.issues.insert(42, fixture("issue.json"));
        s.comments.insert(
            42,
            fixture("comments.json")
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        s.depends_on.insert(42, vec![5, 6]);
    });
    insert_all(&fake, "dependencies.json");
    let t = tracker(&fake);
    let i = t.fetch_issue_by_id("42").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(i.title, "Add dark mode support");
    assert_eq!(
        i.description,
        "Users want a dark theme.\n\n- [ ] settings page"
    );
    assert_eq!(i.labels, ["in-progress", "ui"]);
    assert_eq!(i.state, "in-progress");
    assert_eq!(i.issue_type, "");
    assert!(i.parent.is_none());
    let comments = i.comments.unwrap_or_default();
    assert_eq!(comments.len(), 2);
    assert_eq!(
        (
            comments[0].id.as_str(),
            comments[0].author.as_str(),
            comments[0].created_at.as_str()
        ),
        ("501", "alice", "2026-01-05T09:00:00Z")
    );
    let blockers: Vec<(String, String)> = i
        .blocked_by
        .iter()
        .map(|b| (b.id.clone(), b.state.clone()))
        .collect();
    assert_eq!(
        blockers,
        [
            ("5".to_string(), "review".to_string()),
            ("6".to_string(), "done".to_string())
        ]
    );
    let deps = &fake.requests("GET", &format!("{ISSUES}/42/dependencies"))[0];
    assert_eq!(deps.param("limit").as_deref(), Some("50"));
    // No comments is an empty list; dependencies turned off mean no blockers.
    assert_eq!(t.fetch_issue_comments("5").ok(), Some(vec![]));
    fake.with_state(|s| s.dependencies_off = true);
    let b = t.fetch_blockers("42").unwrap_or_else(|e| panic!("{e}"));
    assert!(b.refs.is_empty() && b.complete);
    // An unknown issue stays not found, for blockers too.
    for e in [
        t.fetch_blockers("404").err(),
        t.fetch_issue_comments("404").err(),
        t.fetch_issue_by_id("404").err(),
    ] {
        assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::NotFound));
    }
}

#[test]
fn transitions_swap_labels_close_reopen_and_converge_after_a_partial_failure() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.transition_issue("1", "in-progress")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["in-progress"]);
    // Labels are removed and added by id (backlog is 1, in-progress 2).
    assert_eq!(
        fake.requests("DELETE", &format!("{ISSUES}/1/labels/1"))
            .len(),
        1
    );
    let add = &fake.requests("POST", &format!("{ISSUES}/1/labels"))[0];
    assert_eq!(add.json(), json!({"labels": [2]}));
    // The label is removed, then adding the new one fails: the retry only adds.
    fake.push_fault(
        "POST",
        &format!("{ISSUES}/1/labels"),
        Fault::server_error(502),
    );
    let e = t.transition_issue("1", "review").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Transport));
    assert!(fake.with_state(|s| s.labels(1)).is_empty());
    fake.clear_journal();
    t.transition_issue("1", "review")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["review"]);
    assert!(
        fake.journal().iter().all(|r| r.method != "DELETE"),
        "nothing left to remove"
    );
    assert_eq!(
        fake.requests("POST", &format!("{ISSUES}/1/labels")).len(),
        1
    );
    // Repository label ids were read once and kept.
    assert!(
        fake.requests("GET", "/api/v1/repos/owner/repo/labels")
            .is_empty()
    );
    t.transition_issue("1", "done")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!fake.with_state(|s| s.is_open(1)));
    let patch = &fake.requests("PATCH", &format!("{ISSUES}/1"))[0];
    assert_eq!(patch.json(), json!({"state": "closed"}));
    // Closing failed after the label moved: the retry only closes.
    t.transition_issue("1", "backlog")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.with_state(|s| s.is_open(1)));
    fake.push_fault("PATCH", &format!("{ISSUES}/1"), Fault::server_error(500));
    assert!(t.transition_issue("1", "wontfix").is_err());
    fake.clear_journal();
    t.transition_issue("1", "wontfix")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["wontfix"]);
    assert!(!fake.with_state(|s| s.is_open(1)));
    let writes: Vec<String> = fake
        .journal()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| r.method.clone())
        .collect();
    assert_eq!(writes, ["PATCH"]);
    // Already there: no write at all.
    fake.clear_journal();
    t.transition_issue("1", "wontfix")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.journal().iter().all(|r| r.method == "GET"));
    let e = t.transition_issue("1", "nowhere").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
}

#[test]
fn labels_and_comments_are_written_once() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.comment_issue("owner/repo#1", "Sortie started work")
        .unwrap_or_else(|e| panic!("{e}"));
    let posts = fake.requests("POST", &format!("{ISSUES}/1/comments"));
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].json(), json!({"body": "Sortie started work"}));
    let comments = t
        .fetch_issue_comments("1")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].author, "sortie-bot");
    // A label the repository lacks: the ids are read again once, then a payload error.
    let e = t.add_label("1", "no-such-label").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
    assert!(
        fake.requests("POST", &format!("{ISSUES}/1/labels"))
            .is_empty()
    );
    // A label made after the ids were read is found by the re-read.
    fake.with_state(|s| s.add_repo_label("needs-human"));
    t.add_label("1", "Needs-Human")
        .unwrap_or_else(|e| panic!("{e}"));
    t.add_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fake.with_state(|s| s.labels(1)),
        ["backlog", "needs-human", "bug"]
    );
    let label_reads = fake
        .requests("GET", "/api/v1/repos/owner/repo/labels")
        .len();
    assert_eq!(label_reads, 2);
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("1", "never-there")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["backlog", "needs-human"]);
    assert_eq!(
        fake.requests("DELETE", &format!("{ISSUES}/1/labels/6"))
            .len(),
        1
    );
    fake.push_fault(
        "POST",
        &format!("{ISSUES}/1/comments"),
        Fault::server_error(500),
    );
    let e = t.comment_issue("1", "again").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Transport));
    // Writes are never retried by the client.
    assert_eq!(
        fake.requests("POST", &format!("{ISSUES}/1/comments")).len(),
        2
    );
    let e = t.comment_issue("77", "nobody").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::NotFound));
}

#[test]
fn faults_map_to_tracker_error_kinds_and_the_next_call_recovers() {
    let fake = seeded(2);
    let t = tracker_with(&fake, json!({"timeout_ms": 500}));
    let gitea = |status: u16, text: &str| {
        Fault::Status(Reply::json(
            status,
            &json!({"message": text, "url": "/api/swagger"}),
        ))
    };
    let cases = [
        (Fault::unauthorized(), TrackerErrorKind::Auth),
        (
            gitea(
                403,
                "token does not have at least one of required scope(s): [read:issue]",
            ),
            TrackerErrorKind::Auth,
        ),
        (gitea(404, "not found"), TrackerErrorKind::NotFound),
        (gitea(422, "invalid state"), TrackerErrorKind::Payload),
        (Fault::too_many_requests(60), TrackerErrorKind::Api),
        (Fault::BadJson, TrackerErrorKind::Payload),
    ];
    for (fault, kind) in cases {
        let label = format!("{fault:?}");
        fake.push_fault("GET", ISSUES, fault);
        let e = t.fetch_candidate_issues().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with("tracker: gitea: "), "{text}");
        assert!(text.contains(&format!("GET {ISSUES}")), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
        assert_eq!(
            t.fetch_candidate_issues().map(|v| v.len()).ok(),
            Some(2),
            "{label}"
        );
    }
    // A body that is JSON but no list is a payload error too.
    fake.push_fault(
        "GET",
        ISSUES,
        Fault::Status(Reply::json(200, &json!({"items": []}))),
    );
    let e = t.fetch_candidate_issues().err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
    // Reads that keep failing are retried twice, then surface as transport errors.
    for fault in [
        Fault::server_error(500),
        Fault::server_error(503),
        Fault::Dropped,
        Fault::Truncated,
        Fault::Delay(Duration::from_millis(1500)),
    ] {
        for _ in 0..3 {
            fake.push_fault("GET", ISSUES, fault.clone());
        }
    }
    for _ in 0..5 {
        let e = t.fetch_candidate_issues().err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::Transport));
    }
    assert_eq!(fake.pending_faults("GET", ISSUES), 0);
    // One failed read followed by a good one is absorbed by the retry.
    fake.push_fault("GET", ISSUES, Fault::server_error(502));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(2));
    // A write's failure is classified alike.
    fake.push_fault(
        "PATCH",
        &format!("{ISSUES}/1"),
        gitea(403, "user should have specific permission"),
    );
    let e = t.transition_issue("1", "done").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Auth));
}

#[test]
fn a_missing_endpoint_or_wrong_token_is_reported_clearly() {
    let fake = seeded(1);
    let mut s = settings(&fake, json!({}));
    s.endpoint = None;
    let problems = (registry::tracker("gitea")
        .unwrap_or_else(|| panic!("gitea is not registered"))
        .validate)(&s);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].field, "tracker.endpoint");
    let e = registry::build_tracker(&s, Arc::new(SystemClock)).err();
    assert!(
        e.is_some_and(|e| e.to_string().contains("tracker.endpoint is required")),
        "missing endpoint"
    );
    // An endpoint already naming the API root is used as it is.
    let mut s = settings(&fake, json!({}));
    s.endpoint = Some(format!("{}/api/v1/", fake.url));
    let t = registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(1));
    let mut s = settings(&fake, json!({}));
    s.api_key = Some("wrong-token-value".into());
    let t = registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let e = t.fetch_candidate_issues().err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Auth));
    assert!(e.is_some_and(|e| !e.to_string().contains("wrong-token-value")));
}

/// `tracker.query_filter` adds issue-list parameters to candidate reads only; next-page links
/// naming another origin (a `ROOT_URL` that differs from the configured endpoint) are
/// followed at the configured one, so the token is never sent elsewhere.
#[test]
fn the_query_filter_narrows_candidates_and_next_links_stay_on_the_endpoint() {
    let fake = seeded(51);
    fake.with_state(|s| {
        s.base = "http://gitea.invalid:3000".into();
        s.add_issue(60, "Tagged", &["backlog", "ui"], false);
    });
    let mut s = settings(&fake, json!({"retry_base_ms": 10, "timeout_ms": 2000}));
    s.query_filter = Some("q=Issue & milestones=v1".into());
    let t = registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 52);
    let pages = fake.requests("GET", ISSUES);
    assert_eq!(
        pages.len(),
        2,
        "the second page was read from the fake itself"
    );
    for p in &pages {
        assert_eq!(p.param("q").as_deref(), Some("Issue"));
        assert_eq!(p.param("milestones").as_deref(), Some("v1"));
        assert_eq!(p.param("state").as_deref(), Some("open"));
    }
    assert_eq!(pages[1].param("page").as_deref(), Some("2"));

    s.query_filter = Some("labels=ui".into());
    let t = registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&got), ["60"]);
    // Lookups are not filtered.
    let one = t.fetch_issue_by_id("7").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one.id, "7");

    for (bad, says) in [
        ("state=closed", "may not set \"state\""),
        ("oops", "labels=bug&milestone=v1"),
    ] {
        s.query_filter = Some(bad.into());
        let e = registry::build_tracker(&s, Arc::new(SystemClock)).err();
        assert!(
            e.as_ref().is_some_and(|e| e.message.contains(says)),
            "{bad}: {e:?}"
        );
    }
}
