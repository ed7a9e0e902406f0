//! The Linear adapter against the fake Linear GraphQL API: cursor paging of `issues` with its
//! cap, normalization of the documented payloads, reads by id with comments and blockers,
//! lookups by UUID and by identifier, transitions by workflow-state id (cached, refreshed on a
//! miss), comments and labels written once, and the error classes of every fault, each followed
//! by a call that recovers.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_linear::{self, FakeLinear, PATH, TEAM, calls, fixture, issue_id};
use common::fake_server::{Fault, Reply};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

fn settings(fake: &FakeLinear, block: serde_json::Value) -> TrackerSettings {
    TrackerSettings {
        kind: "linear".into(),
        endpoint: Some(format!("{}/", fake.url)),
        api_key: Some(fake_linear::TOKEN.into()),
        project: Some(TEAM.into()),
        active_states: vec!["todo".into(), "In Progress".into()],
        terminal_states: vec!["Done".into(), "Canceled".into()],
        handoff_state: Some("In Review".into()),
        block: block.as_object().cloned().unwrap_or_default(),
        ..TrackerSettings::default()
    }
}

/// A tracker over the fake; retried reads back off 10 ms instead of 2 s.
fn tracker_with(fake: &FakeLinear, mut block: serde_json::Value) -> Arc<dyn TrackerAdapter> {
    block["retry_base_ms"] = json!(10);
    registry::build_tracker(&settings(fake, block), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tracker(fake: &FakeLinear) -> Arc<dyn TrackerAdapter> {
    tracker_with(fake, json!({"timeout_ms": 2000}))
}

fn seeded(n: u64) -> FakeLinear {
    let fake = fake_linear::start();
    fake.with_state(|s| {
        for i in 1..=n {
            s.add_issue(i, &format!("Issue {i}"), "Todo");
        }
    });
    fake
}

#[test]
fn candidate_paging_reads_0_1_50_and_51_issues_completely() {
    for n in [0u64, 1, 50, 51] {
        let fake = seeded(n);
        fake.with_state(|s| {
            s.add_issue(900, "Finished", "Done");
        });
        let got = tracker(&fake)
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len() as u64, n, "{n} issues");
        let pages = calls(&fake, "SortieIssues");
        assert_eq!(pages.len(), if n > 50 { 2 } else { 1 }, "{n} issues");
        assert_eq!(
            pages[0],
            json!({"team": "ENG", "states": ["Todo", "In Progress"], "first": 50, "after": null}),
            "configured names are spelled as the team spells them"
        );
        if n > 50 {
            assert_eq!(pages[1]["after"], "c-50");
            assert_eq!(got[50].identifier, "ENG-51");
        }
    }
}

#[test]
fn a_cap_sized_result_is_read_whole_and_a_larger_one_stops_at_the_cap() {
    for (n, read) in [(100u64, 100usize), (120, 100)] {
        let fake = seeded(n);
        let got = tracker_with(&fake, json!({"page_cap": 2}))
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len(), read, "{n} issues");
        assert_eq!(calls(&fake, "SortieIssues").len(), 2, "{n} issues");
    }
}

#[test]
fn a_page_that_says_more_follow_without_a_cursor_is_a_missing_end_cursor() {
    let fake = seeded(51);
    fake.with_state(|s| s.drop_cursor = true);
    let e = tracker(&fake).fetch_candidate_issues().err();
    assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::MissingEndCursor));
}

#[test]
fn the_documented_payloads_normalize() {
    let fake = seeded(0);
    let t = tracker(&fake);
    // The state lookup first, then the documented page.
    let _ = t.fetch_issues_by_states(&["Done".into()]);
    fake.push_fault(
        "POST",
        PATH,
        Fault::Status(Reply::json(200, &fixture("issues_page.json"))),
    );
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 2);
    let a = &got[0];
    assert_eq!((a.identifier.as_str(), a.state.as_str()), ("ENG-1", "Todo"));
    assert_eq!(
        (a.priority, a.labels.clone()),
        (Some(2), vec!["feature".to_string(), "auth".into()])
    );
    assert_eq!(a.blocked_by.len(), 1);
    assert_eq!(
        (
            a.blocked_by[0].identifier.as_str(),
            a.blocked_by[0].state.as_str()
        ),
        ("ENG-10", "In Progress")
    );
    assert!(a.comments.is_none());
    assert_eq!((got[1].priority, got[1].description.as_str()), (None, ""));
}

#[test]
fn by_id_reads_carry_comments_and_blockers_and_unknown_ids_are_not_found() {
    let fake = seeded(3);
    fake.with_state(|s| {
        if let Some(i) = s.issue_mut(2) {
            i.blocked_by = vec![3];
            i.priority = 0;
            for k in 0..60 {
                i.comments.push(json!({"id": format!("c{k}"), "body": format!("note {k}"),
                    "createdAt": format!("2026-01-03T00:{:02}:00.000Z", k), "user": {"name": "Ada"}}));
            }
        }
    });
    let t = tracker(&fake);
    let i = t
        .fetch_issue_by_id(&issue_id(2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((i.identifier.as_str(), i.priority), ("ENG-2", None));
    let comments = i.comments.unwrap_or_default();
    assert_eq!(comments.len(), 60);
    assert_eq!(
        (comments[0].body.as_str(), comments[0].author.as_str()),
        ("note 0", "Ada")
    );
    let pages = calls(&fake, "SortieComments");
    assert_eq!(
        pages.iter().map(|p| p["after"].clone()).collect::<Vec<_>>(),
        [json!(null), json!("c-50")]
    );
    assert_eq!(i.blocked_by[0].identifier, "ENG-3");
    let b = t
        .fetch_blockers(&issue_id(2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(b.complete);
    assert_eq!(
        (b.refs[0].identifier.as_str(), b.refs[0].state.as_str()),
        ("ENG-3", "Todo")
    );
    assert!(
        t.fetch_blockers(&issue_id(1))
            .is_ok_and(|b| b.refs.is_empty())
    );
    assert_eq!(t.fetch_issue_comments(&issue_id(1)).ok(), Some(vec![]));
    for e in [
        t.fetch_issue_by_id(&issue_id(99)).err(),
        t.fetch_issue_comments(&issue_id(99)).err(),
        t.fetch_blockers(&issue_id(99)).err(),
    ] {
        assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::NotFound));
    }
}

#[test]
fn lookups_by_id_and_identifier_omit_unknown_issues_and_empty_asks_send_nothing() {
    let fake = seeded(55);
    fake.with_state(|s| s.set_state(7, "Done"));
    let t = tracker(&fake);
    let mut ids: Vec<String> = (1..=55).map(issue_id).collect();
    ids.push(issue_id(999));
    let states = t
        .fetch_issue_states_by_ids(&ids)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.len(), 55);
    assert_eq!(states.get(&issue_id(7)).map(String::as_str), Some("Done"));
    assert_eq!(
        calls(&fake, "SortieIssueStatesByIds").len(),
        2,
        "batches of 50"
    );
    let keys = vec![
        "ENG-7".to_string(),
        "eng-8".into(),
        "ENG-999".into(),
        "OPS-1".into(),
        "junk".into(),
    ];
    let states = t
        .fetch_issue_states_by_identifiers(&keys)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        states.into_iter().collect::<Vec<_>>(),
        [
            ("ENG-7".to_string(), "Done".to_string()),
            ("ENG-8".into(), "Todo".into())
        ]
    );
    let asks = calls(&fake, "SortieIssueStatesByNumbers");
    assert_eq!(asks.len(), 2, "one per team");
    assert_eq!(asks[0]["team"], "ENG");
    assert_eq!(asks[0]["numbers"], json!([7, 8, 999]));
    fake.clear_journal();
    assert!(
        t.fetch_issues_by_states(&[" ".into()])
            .unwrap_or_default()
            .is_empty()
    );
    assert!(
        t.fetch_issue_states_by_ids(&[])
            .unwrap_or_default()
            .is_empty()
    );
    assert!(
        t.fetch_issue_states_by_identifiers(&["x".into()])
            .unwrap_or_default()
            .is_empty()
    );
    assert!(fake.journal().is_empty(), "no call for nothing to ask");
}

#[test]
fn transitions_write_the_state_id_once_and_refresh_the_states_on_a_miss() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.transition_issue(&issue_id(1), "in progress")
        .unwrap_or_else(|e| panic!("{e}"));
    t.transition_issue(&issue_id(1), "In Review")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.state(1)), "In Review");
    assert_eq!(
        calls(&fake, "SortieIssueUpdate"),
        [
            json!({"id": issue_id(1), "stateId": "st-progress"}),
            json!({"id": issue_id(1), "stateId": "st-review"})
        ]
    );
    assert_eq!(
        calls(&fake, "SortieWorkflowStates").len(),
        1,
        "states cached"
    );
    // A state added after the cache was filled is found by reading the states again.
    fake.with_state(|s| {
        s.states
            .push(("st-qa".into(), "QA".into(), "started".into()))
    });
    t.transition_issue(&issue_id(1), "qa")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.state(1)), "QA");
    assert_eq!(calls(&fake, "SortieWorkflowStates").len(), 2);
    let e = t.transition_issue(&issue_id(1), "Nowhere").err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Payload));
    assert!(e.is_some_and(|e| e.message.contains("In Review")));
    assert_eq!(
        calls(&fake, "SortieIssueUpdate").len(),
        3,
        "nothing sent for a missing state"
    );
    // A failed write is not retried by the client; the caller's retry converges.
    fake.push_fault("POST", PATH, Fault::Status(Reply::json(502, &json!({}))));
    let e = t.transition_issue(&issue_id(1), "Done").err();
    assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::Transport));
    assert_eq!(fake.with_state(|s| s.state(1)), "QA");
    t.transition_issue(&issue_id(1), "Done")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.state(1)), "Done");
    assert_eq!(calls(&fake, "SortieIssueUpdate").len(), 5);
    let missing = t
        .transition_issue(&issue_id(9), "Done")
        .err()
        .map(|e| e.kind);
    assert_eq!(missing, Some(TrackerErrorKind::NotFound));
}

#[test]
fn comments_and_labels_are_written_once() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.comment_issue(&issue_id(1), "Started.\n\nSee the log")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        calls(&fake, "SortieCommentCreate"),
        [json!({"issueId": issue_id(1), "body": "Started.\n\nSee the log"})]
    );
    let comments = t.fetch_issue_comments(&issue_id(1)).unwrap_or_default();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].author, "Sortie Bot");
    t.add_label(&issue_id(1), "Sortie-Parked")
        .unwrap_or_else(|e| panic!("{e}"));
    t.add_label(&issue_id(1), "sortie-parked")
        .unwrap_or_else(|e| panic!("{e}"));
    t.add_label(&issue_id(1), "ai")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fake.with_state(|s| s.label_names(1)),
        ["sortie-parked", "ai"]
    );
    let adds = calls(&fake, "SortieIssueAddLabel");
    assert_eq!(
        adds[0],
        json!({"id": issue_id(1), "labelId": "lb-parked"}),
        "the team's label, not another team's"
    );
    assert_eq!(adds[2]["labelId"], "lb-ai", "a workspace label");
    t.remove_label(&issue_id(1), "sortie-parked")
        .unwrap_or_else(|e| panic!("{e}"));
    t.remove_label(&issue_id(1), "never-made")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.label_names(1)), ["ai"]);
    assert_eq!(calls(&fake, "SortieIssueRemoveLabel").len(), 1);
    let e = t.add_label(&issue_id(1), "never-made").err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Payload));
    assert!(e.is_some_and(|e| e.message.contains("create it")));
    let issue = t
        .fetch_issue_by_id(&issue_id(1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(issue.labels, ["ai"]);
    fake.push_fault("POST", PATH, Fault::server_error(502));
    assert!(t.comment_issue(&issue_id(1), "hi").is_err());
    assert_eq!(
        calls(&fake, "SortieCommentCreate").len(),
        2,
        "a write is sent once"
    );
}

#[test]
fn faults_are_classified_and_the_next_call_recovers() {
    let fake = seeded(1);
    let t = tracker_with(&fake, json!({"timeout_ms": 500}));
    // Fill the state cache so every fault below meets the issues query.
    let _ = t.fetch_candidate_issues();
    let partial = Reply::json(
        200,
        &json!({"data": {"issues": {"nodes": [], "pageInfo": {"hasNextPage": false}}},
            "errors": [{"message": "Internal error", "extensions": {"code": "INTERNAL_SERVER_ERROR"}}]}),
    );
    let invalid = Reply::json(
        400,
        &json!({"errors": [{"message": "Cannot query field \"nope\"", "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]}),
    );
    let cases: Vec<(Fault, TrackerErrorKind, usize)> = vec![
        (fake_linear::ratelimited(60_000), TrackerErrorKind::Api, 1),
        (fake_linear::unauthenticated(), TrackerErrorKind::Auth, 1),
        (Fault::unauthorized(), TrackerErrorKind::Auth, 1),
        (
            Fault::Status(Reply::json(200, &fixture("error_not_found.json"))),
            TrackerErrorKind::NotFound,
            1,
        ),
        (Fault::Status(partial), TrackerErrorKind::Api, 1),
        (Fault::Status(invalid), TrackerErrorKind::Payload, 1),
        (Fault::server_error(500), TrackerErrorKind::Transport, 3),
        (Fault::BadJson, TrackerErrorKind::Payload, 1),
        (Fault::Truncated, TrackerErrorKind::Transport, 3),
        (Fault::Dropped, TrackerErrorKind::Transport, 3),
        (
            Fault::Delay(Duration::from_millis(2500)),
            TrackerErrorKind::Transport,
            3,
        ),
    ];
    for (fault, kind, sent) in cases {
        let label = format!("{fault:?}");
        for _ in 0..sent {
            fake.push_fault("POST", PATH, fault.clone());
        }
        fake.clear_journal();
        let e = t.fetch_candidate_issues().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        assert_eq!(
            fake.journal().len(),
            sent,
            "{label}: reads retried only when worth it"
        );
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with("tracker: linear: "), "{text}");
        assert!(!text.contains(fake_linear::TOKEN), "{text}");
        assert_eq!(fake.pending_faults("POST", PATH), 0, "{label}");
        assert!(t.fetch_candidate_issues().is_ok(), "{label}: recovers");
    }
}

#[test]
fn a_rate_limit_is_reported_with_its_reset_and_the_figures_are_kept() {
    let fake = seeded(1);
    let t = tracker(&fake);
    assert!(t.rate_limit().is_none());
    let _ = t.fetch_candidate_issues();
    let seen = t.rate_limit().unwrap_or_default();
    assert_eq!(seen.limit, Some(5000));
    assert!(seen.remaining.is_some_and(|r| r < 5000));
    assert_eq!(seen.reset_at_ms, Some(1_767_225_600_000));
    fake.push_fault("POST", PATH, fake_linear::ratelimited(120_000));
    let e = t.fetch_candidate_issues().err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Api));
    let text = e.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("RATELIMITED") && text.contains("retry after"),
        "{text}"
    );
    let limited = t.rate_limit().unwrap_or_default();
    assert_eq!(
        (limited.remaining, limited.last_limited_status),
        (Some(0), Some(400))
    );
}

#[test]
fn every_request_carries_the_raw_key_and_names_its_operation() {
    let fake = seeded(2);
    let t = tracker(&fake);
    let _ = t.fetch_candidate_issues();
    let _ = t.fetch_issue_by_id("ENG-1");
    let journal = fake.journal();
    assert!(journal.len() >= 3);
    for r in journal {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", PATH));
        assert_eq!(
            r.header("authorization"),
            Some(fake_linear::TOKEN),
            "no Bearer"
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(
            r.header("user-agent")
                .is_some_and(|u| u.starts_with("sortie/"))
        );
        let body = r.json();
        let op = body["operationName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            body["query"].as_str().is_some_and(|q| q.contains(&op)),
            "{body}"
        );
    }
    let mut wrong = settings(&fake, json!({}));
    wrong.api_key = Some("lin_api_wrong".into());
    let t =
        registry::build_tracker(&wrong, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let e = t.fetch_candidate_issues().err();
    assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::Auth));
}

#[test]
fn the_query_filter_narrows_candidate_reads_only() {
    let fake = seeded(3);
    tracker(&fake)
        .add_label(&issue_id(2), "ai")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut s = settings(&fake, json!({"retry_base_ms": 10}));
    s.query_filter = Some(r#"{"labels": {"name": {"eq": "ai"}}}"#.into());
    let t = registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));

    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = got.iter().map(|i| i.identifier.as_str()).collect();
    assert_eq!(ids, ["ENG-2"]);
    assert_eq!(
        calls(&fake, "SortieIssuesFiltered"),
        [json!({"team": "ENG", "states": ["Todo", "In Progress"],
                "extra": {"labels": {"name": {"eq": "ai"}}}, "first": 50, "after": null})]
    );
    assert!(calls(&fake, "SortieIssues").is_empty());
    let by_state = t
        .fetch_issues_by_states(&["Todo".to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(by_state.len(), 1);

    // Reads by id still see an issue the filter does not match.
    let one = t
        .fetch_issue_by_id(&issue_id(1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one.identifier, "ENG-1");

    s.query_filter = Some("labels = ai".into());
    let e = registry::build_tracker(&s, Arc::new(SystemClock)).err();
    assert!(
        e.as_ref()
            .is_some_and(|e| e.message.contains("tracker.query_filter")),
        "{e:?}"
    );
}
