//! The GitHub adapter against the fake GitHub API: paging, pull requests dropped, label
//! states, convergent transitions, ETag reuse, blockers and parent, comments, search, and
//! the error classes of faults.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_github::{self, FakeGithub, OWNER, REPO, TOKEN, fixture};
use common::fake_server::Fault;
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "wontfix", "bug"];

fn settings(fake: &FakeGithub, block: serde_json::Value) -> TrackerSettings {
    TrackerSettings {
        kind: "github".into(),
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
fn tracker_with(fake: &FakeGithub, mut block: serde_json::Value) -> Arc<dyn TrackerAdapter> {
    block["retry_base_ms"] = json!(10);
    registry::build_tracker(&settings(fake, block), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tracker(fake: &FakeGithub) -> Arc<dyn TrackerAdapter> {
    tracker_with(fake, json!({"timeout_ms": 2000}))
}

fn seeded(n: u64) -> FakeGithub {
    let fake = fake_github::start(LABELS);
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

#[test]
fn candidate_paging_reads_0_1_50_and_51_issues_completely() {
    for n in [0u64, 1, 50, 51] {
        let fake = seeded(n);
        let got = tracker(&fake)
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len() as u64, n, "{n} issues");
        let pages = fake.requests("GET", "/repos/owner/repo/issues").len();
        assert_eq!(pages, if n > 50 { 2 } else { 1 }, "{n} issues");
        let first = &fake.requests("GET", "/repos/owner/repo/issues")[0];
        assert_eq!(first.param("state").as_deref(), Some("open"));
        assert_eq!(first.param("sort").as_deref(), Some("created"));
        assert_eq!(first.param("direction").as_deref(), Some("asc"));
        assert_eq!(first.param("per_page").as_deref(), Some("50"));
    }
}

#[test]
fn a_page_cap_stops_reading_with_a_partial_result() {
    let fake = seeded(120);
    let t = tracker_with(&fake, json!({"page_cap": 2, "timeout_ms": 2000}));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 100);
    assert_eq!(fake.requests("GET", "/repos/owner/repo/issues").len(), 2);
    let exact = seeded(100);
    let t = tracker_with(&exact, json!({"page_cap": 2, "timeout_ms": 2000}));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(100));
}

#[test]
fn the_recorded_issue_list_drops_pull_requests_and_maps_label_states() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        for v in fixture("issues.json")
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let n = v["number"].as_u64().unwrap_or(0);
            s.issues.insert(n, v);
        }
    });
    let t = tracker(&fake);
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&got), ["1", "3"]);
    assert_eq!(got[0].state, "backlog");
    assert_eq!(got[1].state, "in-progress");
    assert_eq!(got[1].assignee, "bob");
    assert_eq!(got[0].display_identifier, "owner/repo#1");
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
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "open, unlabeled", &["bug"], false);
        s.add_issue(2, "closed, unlabeled", &[], true);
        s.add_issue(3, "closed, wontfix", &["wontfix"], true);
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
        .fetch_issues_by_states(&["wontfix".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&terminal), ["3"]);
    let search = &fake.requests("GET", "/search/issues")[0];
    assert_eq!(
        search.param("q").as_deref(),
        Some("repo:owner/repo type:issue state:closed label:\"wontfix\"")
    );
    assert!(
        t.fetch_issues_by_states(&[])
            .map(|v| v.is_empty())
            .unwrap_or(false)
    );
}

#[test]
fn a_query_filter_goes_through_the_search_api() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        let v = fixture("search.json")["items"][0].clone();
        s.issues.insert(10, v);
        s.add_issue(11, "not matched", &["backlog"], false);
    });
    let mut st = settings(&fake, json!({}));
    st.active_states = vec!["review".into()];
    st.handoff_state = None;
    st.query_filter = Some("label:review".into());
    let t = registry::build_tracker(&st, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&got), ["10"]);
    let q = fake.requests("GET", "/search/issues")[0].param("q");
    assert_eq!(
        q.as_deref(),
        Some("repo:owner/repo type:issue state:open label:review")
    );
    assert!(fake.requests("GET", "/repos/owner/repo/issues").is_empty());
}

#[test]
fn an_issue_by_id_carries_comments_blockers_and_parent() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.issues.insert(42, fixture("issue.json"));
        for b in fixture("blockers.json")
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            s.issues.insert(b["number"].as_u64().unwrap_or(0), b);
        }
        s.issues.insert(7, fixture("parent.json"));
        s.comments.insert(
            42,
            fixture("comments.json")
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        s.blocked_by.insert(42, vec![5]);
        s.parents.insert(42, 7);
    });
    let t = tracker(&fake);
    let i = t.fetch_issue_by_id("42").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(i.title, "Add dark mode support");
    assert_eq!(i.labels, ["in-progress", "ui", "enhancement"]);
    assert_eq!(i.issue_type, "Feature");
    let comments = i.comments.unwrap_or_default();
    assert_eq!(comments.len(), 2);
    assert_eq!(
        (comments[0].id.as_str(), comments[0].author.as_str()),
        ("9001", "alice")
    );
    assert_eq!(i.blocked_by.len(), 1);
    assert_eq!(
        (i.blocked_by[0].id.as_str(), i.blocked_by[0].state.as_str()),
        ("5", "in-progress")
    );
    assert_eq!(i.parent.map(|p| p.identifier), Some("7".to_string()));
    fake.with_state(|s| s.dependencies_off = true);
    let b = t.fetch_blockers("42").unwrap_or_else(|e| panic!("{e}"));
    assert!(b.refs.is_empty() && b.complete);
}

#[test]
fn transitions_swap_labels_close_reopen_and_converge_after_a_partial_failure() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.transition_issue("1", "in-progress")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["in-progress"]);
    // The label is removed, then adding the new one fails: the retry only adds.
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/labels",
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
        fake.requests("DELETE", "/repos/owner/repo/issues/1/labels/in-progress")
            .is_empty()
    );
    assert_eq!(
        fake.requests("POST", "/repos/owner/repo/issues/1/labels")
            .len(),
        1
    );
    t.transition_issue("1", "done")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!fake.with_state(|s| s.is_open(1)));
    let patch = &fake.requests("PATCH", "/repos/owner/repo/issues/1")[0];
    assert_eq!(
        patch.json(),
        json!({"state": "closed", "state_reason": "completed"})
    );
    t.transition_issue("1", "backlog")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.with_state(|s| s.is_open(1)));
    let e = t.transition_issue("1", "nowhere").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
}

#[test]
fn labels_and_comments_are_written_once() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.comment_issue("1", "Sortie started work")
        .unwrap_or_else(|e| panic!("{e}"));
    let posts = fake.requests("POST", "/repos/owner/repo/issues/1/comments");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].json(), json!({"body": "Sortie started work"}));
    assert_eq!(
        posts[0].header("accept"),
        Some("application/vnd.github+json")
    );
    assert_eq!(posts[0].header("x-github-api-version"), Some("2022-11-28"));
    let e = t.add_label("1", "no-such-label").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
    t.add_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/comments",
        Fault::server_error(500),
    );
    assert!(t.comment_issue("1", "again").is_err());
    assert_eq!(
        fake.requests("POST", "/repos/owner/repo/issues/1/comments")
            .len(),
        2
    );
}

#[test]
fn single_issue_reads_reuse_their_etag() {
    let fake = seeded(1);
    let t = tracker(&fake);
    let ask = || {
        t.fetch_issue_states_by_ids(&["1".into()])
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(ask().get("1").map(String::as_str), Some("backlog"));
    assert_eq!(ask().get("1").map(String::as_str), Some("backlog"));
    let reads = fake.requests("GET", "/repos/owner/repo/issues/1");
    assert_eq!(reads.len(), 2);
    assert!(reads[0].header("if-none-match").is_none());
    assert!(reads[1].header("if-none-match").is_some());
    fake.with_state(|s| s.set_labels(1, &["done"]));
    assert_eq!(ask().get("1").map(String::as_str), Some("done"));
    let off = tracker_with(&fake, json!({"etag_cache_size": 0}));
    off.fetch_issue_states_by_ids(&["1".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    off.fetch_issue_states_by_ids(&["1".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    let last = fake.requests("GET", "/repos/owner/repo/issues/1");
    assert!(last[last.len() - 1].header("if-none-match").is_none());
}

#[test]
fn faults_map_to_tracker_error_kinds_and_the_next_call_recovers() {
    let fake = seeded(2);
    let t = tracker_with(&fake, json!({"timeout_ms": 500}));
    let path = "/repos/owner/repo/issues";
    let cases = [
        (Fault::rate_limited(), TrackerErrorKind::Api),
        (Fault::secondary_rate_limited(60), TrackerErrorKind::Api),
        (Fault::unauthorized(), TrackerErrorKind::Auth),
        (Fault::BadJson, TrackerErrorKind::Payload),
    ];
    for (fault, kind) in cases {
        let label = format!("{fault:?}");
        fake.push_fault("GET", path, fault);
        let e = t.fetch_candidate_issues().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with("tracker: github: "), "{text}");
        assert!(text.contains(&format!("GET {path}")), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
        assert_eq!(
            t.fetch_candidate_issues().map(|v| v.len()).ok(),
            Some(2),
            "{label}"
        );
    }
    let rate = t.rate_limit().unwrap_or_default();
    assert_eq!(rate.limit, Some(5000));
    assert_eq!(rate.last_limited_status, Some(403));
    // The two GitHub rate limits are told apart in the message.
    for (fault, name) in [
        (Fault::rate_limited(), "primary rate limit"),
        (Fault::secondary_rate_limited(60), "secondary rate limit"),
    ] {
        fake.push_fault("GET", path, fault);
        let text = t
            .fetch_candidate_issues()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(text.contains(name), "{text}");
    }
    // Reads that keep failing are retried twice, then surface as transport errors.
    for fault in [
        Fault::server_error(500),
        Fault::Dropped,
        Fault::Truncated,
        Fault::Delay(Duration::from_millis(1500)),
    ] {
        for _ in 0..3 {
            fake.push_fault("GET", path, fault.clone());
        }
    }
    let tight = tracker_with(&fake, json!({"timeout_ms": 500}));
    for _ in 0..4 {
        let e = tight.fetch_candidate_issues().err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::Transport));
    }
    assert_eq!(fake.pending_faults("GET", path), 0);
    assert_eq!(
        tight.fetch_candidate_issues().map(|v| v.len()).ok(),
        Some(2)
    );
}
