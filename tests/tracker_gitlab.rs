//! The GitLab adapter against the fake GitLab API: `X-Next-Page` paging with its cap, label
//! states with the opened/closed fallback, the recorded payloads normalized, issues by id with
//! notes (system notes dropped) and `is_blocked_by` links, one-edit transitions that converge,
//! labels and notes written once, both auth headers, and the error classes of faults.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_gitlab::{self, FakeGitlab, PROJECT, PROJECT_ID, TOKEN, fixture, issue_path};
use common::fake_server::{Fault, Reply};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

fn settings(fake: &FakeGitlab, block: serde_json::Value) -> TrackerSettings {
    TrackerSettings {
        kind: "gitlab".into(),
        endpoint: Some(fake.url.clone()),
        api_key: Some(TOKEN.into()),
        project: Some(PROJECT.into()),
        active_states: vec!["backlog".into(), "in-progress".into()],
        terminal_states: vec!["done".into(), "wontfix".into()],
        handoff_state: Some("review".into()),
        block: block.as_object().cloned().unwrap_or_default(),
        ..TrackerSettings::default()
    }
}

/// A tracker over the fake; retried reads back off 10 ms instead of 2 s.
fn tracker_with(fake: &FakeGitlab, mut block: serde_json::Value) -> Arc<dyn TrackerAdapter> {
    block["retry_base_ms"] = json!(10);
    registry::build_tracker(&settings(fake, block), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tracker(fake: &FakeGitlab) -> Arc<dyn TrackerAdapter> {
    tracker_with(fake, json!({"timeout_ms": 2000}))
}

fn seeded(n: u64) -> FakeGitlab {
    let fake = fake_gitlab::start();
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

fn list_path() -> String {
    format!("{}/issues", fake_gitlab::project_path())
}

#[test]
fn candidate_paging_reads_0_1_100_and_101_issues_completely() {
    for n in [0u64, 1, 100, 101] {
        let fake = seeded(n);
        let got = tracker(&fake)
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len() as u64, n, "{n} issues");
        let pages = fake.requests("GET", &list_path());
        assert_eq!(pages.len(), if n > 100 { 2 } else { 1 }, "{n} issues");
        let first = &pages[0];
        assert_eq!(first.param("state").as_deref(), Some("opened"));
        assert_eq!(first.param("per_page").as_deref(), Some("100"));
        assert_eq!(first.param("page").as_deref(), Some("1"));
        assert_eq!(first.param("sort").as_deref(), Some("asc"));
        if n > 100 {
            assert_eq!(pages[1].param("page").as_deref(), Some("2"));
        }
    }
}

#[test]
fn a_page_cap_stops_reading_with_a_partial_result() {
    let fake = seeded(250);
    let t = tracker_with(&fake, json!({"page_cap": 2, "timeout_ms": 2000}));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 200);
    assert_eq!(fake.requests("GET", &list_path()).len(), 2);
    let exact = seeded(200);
    let t = tracker_with(&exact, json!({"page_cap": 2, "timeout_ms": 2000}));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(200));
}

#[test]
fn the_recorded_issue_list_maps_label_states_and_identifiers() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        for v in fixture("issues.json")
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let n = v["iid"].as_u64().unwrap_or(0);
            s.issues.insert(n, v);
        }
    });
    let t = tracker(&fake);
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    // Issue 2 is opened without a state label: it falls back to the first active state.
    assert_eq!(ids(&got), ["1", "2", "3"]);
    assert_eq!(got[0].state, "backlog");
    assert_eq!(got[0].labels, ["backlog", "bug"]);
    assert_eq!(got[0].identifier, "1");
    assert_eq!(got[0].display_identifier, "group/sub/project#1");
    assert_eq!(
        got[0].url,
        "https://gitlab.example.com/group/sub/project/-/issues/1"
    );
    assert_eq!(got[1].description, "");
    assert_eq!(got[2].state, "in-progress");
    assert_eq!(got[2].assignee, "bob");
    assert_eq!(got[2].issue_type, "incident");
    assert!(got.iter().all(|i| i.comments.is_none()));
    let states = t
        .fetch_issue_states_by_ids(&["1".into(), "4".into(), "99".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.get("1").map(String::as_str), Some("backlog"));
    assert_eq!(states.get("4").map(String::as_str), Some("done"));
    assert!(!states.contains_key("99"));
    let by_ident = t
        .fetch_issue_states_by_identifiers(&["group/sub/project#3".into(), "#2".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        by_ident.get("group/sub/project#3").map(String::as_str),
        Some("in-progress")
    );
    assert_eq!(by_ident.get("#2").map(String::as_str), Some("backlog"));
}

#[test]
fn state_queries_read_closed_issues_by_terminal_label() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(1, "open, unlabeled", &["bug"], false);
        s.add_issue(2, "closed, done", &["done"], true);
        s.add_issue(3, "closed, wontfix", &["wontfix"], true);
        s.add_issue(4, "open but wontfix", &["WontFix"], false);
    });
    let t = tracker(&fake);
    let terminal = t
        .fetch_issues_by_states(&["WontFix".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&terminal), ["3", "4"]);
    let closed = fake
        .requests("GET", &list_path())
        .into_iter()
        .find(|r| r.param("state").as_deref() == Some("closed"));
    assert_eq!(
        closed.and_then(|r| r.param("labels")).as_deref(),
        Some("wontfix")
    );
    let active = t
        .fetch_issues_by_states(&["backlog".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&active), ["1"]);
    fake.clear_journal();
    assert!(
        t.fetch_issues_by_states(&[])
            .map(|v| v.is_empty())
            .unwrap_or(false)
    );
    assert!(fake.journal().is_empty());
}

#[test]
fn a_query_filter_adds_list_parameters() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(10, "matched", &["backlog", "team-a"], false);
        s.add_issue(11, "not matched", &["backlog"], false);
    });
    let mut st = settings(&fake, json!({}));
    st.query_filter = Some("labels=team-a".into());
    let t = registry::build_tracker(&st, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&got), ["10"]);
    let first = &fake.requests("GET", &list_path())[0];
    assert_eq!(first.param("labels").as_deref(), Some("team-a"));
}

#[test]
fn an_issue_by_id_carries_notes_without_system_ones_and_its_blockers() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.issues.insert(42, fixture("issue.json"));
        s.notes.insert(
            42,
            fixture("notes.json")
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        for mut l in fixture("links.json")
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let n = l["iid"].as_u64().unwrap_or(0);
            let kind = l["link_type"].as_str().unwrap_or_default().to_string();
            if let Some(o) = l.as_object_mut() {
                for k in [
                    "link_type",
                    "issue_link_id",
                    "link_created_at",
                    "link_updated_at",
                ] {
                    o.remove(k);
                }
            }
            s.issues.insert(n, l);
            s.links.entry(42).or_default().push((n, kind));
        }
    });
    let t = tracker(&fake);
    let i = t.fetch_issue_by_id("42").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(i.title, "Add dark mode support");
    assert_eq!(i.labels, ["in-progress", "ui", "enhancement"]);
    assert_eq!(i.assignee, "carol");
    let comments = i.comments.unwrap_or_default();
    let got: Vec<(&str, &str)> = comments
        .iter()
        .map(|c| (c.id.as_str(), c.author.as_str()))
        .collect();
    assert_eq!(got, [("301", "alice"), ("303", "carol")]);
    let notes = &fake.requests("GET", &format!("{}/notes", issue_path(42)))[0];
    assert_eq!(notes.param("sort").as_deref(), Some("asc"));
    let blockers: Vec<(&str, &str)> = i
        .blocked_by
        .iter()
        .map(|b| (b.id.as_str(), b.state.as_str()))
        .collect();
    // The closed, unlabeled blocker falls back to the first terminal state.
    assert_eq!(blockers, [("5", "in-progress"), ("7", "done")]);
    assert_eq!(i.blockers_read, sortie::domain::BlockersRead::Complete);
    let b = t.fetch_blockers("5").unwrap_or_else(|e| panic!("{e}"));
    assert!(b.refs.is_empty() && b.complete);
    let missing = t.fetch_issue_by_id("404").err().map(|e| e.kind);
    assert_eq!(missing, Some(TrackerErrorKind::NotFound));
    // Not an issue number: refused before any request, as every kind refuses such ids.
    let bad = t.fetch_issue_comments("not-a-number").err().map(|e| e.kind);
    assert_eq!(bad, Some(TrackerErrorKind::OutOfScope));
}

#[test]
fn transitions_are_one_edit_that_converges_after_a_failure() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.transition_issue("1", "In-Progress")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["in-progress"]);
    let puts = fake.requests("PUT", &issue_path(1));
    assert_eq!(puts.len(), 1);
    assert_eq!(
        puts[0].json(),
        json!({"add_labels": "in-progress", "remove_labels": "backlog"})
    );
    // The edit fails (writes are not retried by the client); the next call does it once.
    fake.push_fault("PUT", &issue_path(1), Fault::server_error(502));
    let e = t.transition_issue("1", "review").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Transport));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["in-progress"]);
    t.transition_issue("1", "review")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["review"]);
    // Already there: read, nothing written.
    fake.clear_journal();
    t.transition_issue("1", "review")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.requests("PUT", &issue_path(1)).is_empty());
    t.transition_issue("1", "done")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!fake.with_state(|s| s.is_open(1)));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["done"]);
    let close = &fake.requests("PUT", &issue_path(1))[0];
    assert_eq!(
        close.json(),
        json!({"add_labels": "done", "remove_labels": "review", "state_event": "close"})
    );
    // A person closed it with the label already swapped: only the state is left to do.
    fake.with_state(|s| {
        s.set_labels(1, &["backlog"]);
        s.set_open(1, false);
    });
    fake.clear_journal();
    t.transition_issue("1", "backlog")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.with_state(|s| s.is_open(1)));
    assert_eq!(
        fake.requests("PUT", &issue_path(1))[0].json(),
        json!({"state_event": "reopen"})
    );
    let e = t.transition_issue("1", "nowhere").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Payload));
    let e = t.transition_issue("77", "done").err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::NotFound));
}

#[test]
fn labels_and_notes_are_written_once() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.comment_issue("1", "Sortie started work")
        .unwrap_or_else(|e| panic!("{e}"));
    let notes_path = format!("{}/notes", issue_path(1));
    let posts = fake.requests("POST", &notes_path);
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].json(), json!({"body": "Sortie started work"}));
    assert_eq!(posts[0].header("private-token"), Some(TOKEN));
    assert!(posts[0].header("authorization").is_none());
    assert_eq!(
        fake.with_state(|s| s.user_notes(1)),
        ["Sortie started work"]
    );
    t.add_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["backlog", "bug"]);
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("1", "bug").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.labels(1)), ["backlog"]);
    let bodies: Vec<serde_json::Value> = fake
        .requests("PUT", &issue_path(1))
        .iter()
        .map(|r| r.json())
        .collect();
    assert_eq!(
        bodies,
        [
            json!({"add_labels": "bug"}),
            json!({"remove_labels": "bug"}),
            json!({"remove_labels": "bug"})
        ]
    );
    // A failed note is not sent again by the client.
    fake.push_fault("POST", &notes_path, Fault::server_error(500));
    assert!(t.comment_issue("1", "again").is_err());
    assert_eq!(fake.requests("POST", &notes_path).len(), 2);
    assert_eq!(
        fake.with_state(|s| s.user_notes(1)),
        ["Sortie started work"]
    );
}

#[test]
fn bearer_auth_numeric_ids_and_an_api_v4_endpoint_are_accepted() {
    let fake = seeded(2);
    let mut st = settings(&fake, json!({"auth": "bearer"}));
    st.project = Some(PROJECT_ID.to_string());
    st.endpoint = Some(format!("{}/api/v4/", fake.url));
    let t = registry::build_tracker(&st, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(2));
    let path = format!("/api/v4/projects/{PROJECT_ID}/issues");
    let first = &fake.requests("GET", &path)[0];
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(first.header("private-token").is_none());
    let wrong = {
        let mut s = settings(&fake, json!({}));
        s.api_key = Some("glpat-wrong".into());
        registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"))
    };
    let e = wrong.fetch_candidate_issues().err().map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::Auth));
}

/// A 429 as GitLab sends it: `Retry-After` and the `RateLimit-*` figures.
fn gitlab_throttled(retry_after_s: u64) -> Fault {
    Fault::Status(
        Reply::json(429, &json!({"message": "Retry later"}))
            .header("Retry-After", retry_after_s.to_string())
            .header("RateLimit-Limit", "2000")
            .header("RateLimit-Remaining", "0")
            .header("RateLimit-Reset", "4102444800"),
    )
}

/// A 403 with the budget spent, said only by `RateLimit-Remaining`.
fn gitlab_forbidden_spent() -> Fault {
    Fault::Status(
        Reply::json(403, &json!({"message": "403 Forbidden"}))
            .header("RateLimit-Remaining", "0")
            .header("RateLimit-Reset", "4102444800"),
    )
}

#[test]
fn faults_map_to_tracker_error_kinds_and_the_next_call_recovers() {
    let fake = seeded(2);
    let t = tracker_with(&fake, json!({"timeout_ms": 500}));
    let path = list_path();
    let forbidden = Fault::Status(Reply::json(403, &json!({"message": "403 Forbidden"})));
    let cases = [
        (gitlab_throttled(60), TrackerErrorKind::Api),
        (gitlab_forbidden_spent(), TrackerErrorKind::Api),
        (forbidden, TrackerErrorKind::Auth),
        (Fault::unauthorized(), TrackerErrorKind::Auth),
        (Fault::BadJson, TrackerErrorKind::Payload),
    ];
    for (fault, kind) in cases {
        let label = format!("{fault:?}");
        fake.push_fault("GET", &path, fault);
        let e = t.fetch_candidate_issues().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with("tracker: gitlab: "), "{text}");
        assert!(text.contains(&format!("GET {path}")), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
        assert_eq!(
            t.fetch_candidate_issues().map(|v| v.len()).ok(),
            Some(2),
            "{label}"
        );
    }
    let rate = t.rate_limit().unwrap_or_default();
    assert_eq!(rate.limit, Some(2000));
    assert_eq!(rate.remaining, Some(1999));
    assert_eq!(rate.last_limited_status, Some(403));
    // An issue that is not there, and a page that is not a list.
    assert_eq!(
        t.fetch_issue_comments("9").err().map(|e| e.kind),
        Some(TrackerErrorKind::NotFound)
    );
    fake.push_fault(
        "GET",
        &path,
        Fault::Status(Reply::json(200, &json!({"message": "not a list"}))),
    );
    assert_eq!(
        t.fetch_candidate_issues().err().map(|e| e.kind),
        Some(TrackerErrorKind::Payload)
    );
    // Reads that keep failing are retried twice, then surface as transport errors.
    for fault in [
        Fault::server_error(500),
        Fault::Dropped,
        Fault::Truncated,
        Fault::Delay(Duration::from_millis(1500)),
    ] {
        for _ in 0..3 {
            fake.push_fault("GET", &path, fault.clone());
        }
    }
    for _ in 0..4 {
        let e = t.fetch_candidate_issues().err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::Transport));
    }
    assert_eq!(fake.pending_faults("GET", &path), 0);
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(2));
    // A read failing once is retried by the client and succeeds.
    fake.push_fault("GET", &path, Fault::server_error(502));
    assert_eq!(t.fetch_candidate_issues().map(|v| v.len()).ok(), Some(2));
}

#[test]
fn settings_problems_are_reported_by_the_descriptor() {
    let d = registry::tracker("gitlab").unwrap_or_else(|| panic!("gitlab not registered"));
    let s = TrackerSettings {
        kind: "gitlab".into(),
        ..TrackerSettings::default()
    };
    let fields: Vec<String> = (d.validate)(&s).into_iter().map(|p| p.field).collect();
    assert_eq!(fields, ["tracker.api_key", "tracker.project"]);
    let e = registry::build_tracker(&s, Arc::new(SystemClock))
        .err()
        .map(|e| e.kind);
    assert_eq!(e, Some(TrackerErrorKind::MissingTrackerApiKey));
}
