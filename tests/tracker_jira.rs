//! The Jira adapter against the fake Jira API: cursor paging of searches and offset paging of
//! comments, JQL lookups in batches, transitions by destination status, ADF comments, labels,
//! blockers, and the error classes of faults (the CAPTCHA refusal among them).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_jira::{self, FakeJira, PROJECT, fixture};
use common::fake_server::{Fault, Reply};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::tracker::{TrackerAdapter, TrackerErrorKind, TrackerSettings};

const SEARCH: &str = "/rest/api/3/search/jql";

fn settings(fake: &FakeJira, block: serde_json::Value) -> TrackerSettings {
    TrackerSettings {
        kind: "jira".into(),
        endpoint: Some(format!("{}/", fake.url)),
        api_key: Some(fake_jira::api_key()),
        project: Some(PROJECT.into()),
        active_states: vec!["To Do".into(), "In Progress".into()],
        terminal_states: vec!["Done".into()],
        handoff_state: Some("Human Review".into()),
        block: block.as_object().cloned().unwrap_or_default(),
        ..TrackerSettings::default()
    }
}

/// A tracker over the fake; retried reads back off 10 ms instead of 2 s.
fn tracker_with(fake: &FakeJira, mut block: serde_json::Value) -> Arc<dyn TrackerAdapter> {
    block["retry_base_ms"] = json!(10);
    registry::build_tracker(&settings(fake, block), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tracker(fake: &FakeJira) -> Arc<dyn TrackerAdapter> {
    tracker_with(fake, json!({"timeout_ms": 2000}))
}

fn seeded(n: u64) -> FakeJira {
    let fake = fake_jira::start();
    fake.with_state(|s| {
        for i in 1..=n {
            s.add_issue(i, &format!("Issue {i}"), "To Do");
        }
    });
    fake
}

#[test]
fn candidate_paging_reads_0_1_50_and_51_issues_completely() {
    for n in [0u64, 1, 50, 51] {
        let fake = seeded(n);
        let got = tracker(&fake)
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len() as u64, n, "{n} issues");
        let pages = fake.requests("GET", SEARCH);
        assert_eq!(pages.len(), if n > 50 { 2 } else { 1 }, "{n} issues");
        assert_eq!(
            pages[0].param("jql").as_deref(),
            Some(
                "project = \"PROJ\" AND status IN (\"To Do\", \"In Progress\") ORDER BY priority ASC, created ASC"
            )
        );
        assert_eq!(pages[0].param("maxResults").as_deref(), Some("50"));
        assert!(
            pages[0]
                .param("fields")
                .is_some_and(|f| f.contains("issuelinks"))
        );
        if n > 50 {
            assert_eq!(pages[1].param("nextPageToken").as_deref(), Some("tok-50"));
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
        assert_eq!(fake.requests("GET", SEARCH).len(), 2, "{n} issues");
    }
}

#[test]
fn a_page_that_is_not_last_without_a_cursor_is_a_missing_end_cursor() {
    let fake = seeded(51);
    fake.with_state(|s| s.drop_cursor = true);
    let e = tracker(&fake).fetch_candidate_issues().err();
    assert_eq!(e.map(|e| e.kind), Some(TrackerErrorKind::MissingEndCursor));
}

#[test]
fn the_query_filter_applies_to_selections_only_and_lookups_batch_by_forty() {
    let fake = seeded(41);
    let t = tracker_with(&fake, json!({}));
    let mut s = settings(&fake, json!({"retry_base_ms": 10}));
    s.query_filter = Some("labels = \"ai\"".into());
    let filtered =
        registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    let _ = filtered.fetch_candidate_issues();
    let _ = filtered.fetch_issues_by_states(&["Done".into()]);
    assert_eq!(
        fake.with_state(|s| s.filters.clone()),
        ["labels = \"ai\""; 2]
    );
    fake.clear_journal();
    let keys: Vec<String> = (1..=41).map(|i| format!("PROJ-{i}")).collect();
    let states = t
        .fetch_issue_states_by_identifiers(&keys)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.len(), 41);
    assert_eq!(states.get("PROJ-7").map(String::as_str), Some("To Do"));
    let reqs = fake.requests("GET", SEARCH);
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs.iter()
            .all(|r| r.param("fields").as_deref() == Some("status"))
    );
    assert!(
        reqs.iter()
            .all(|r| !r.param("jql").unwrap_or_default().contains("labels"))
    );
    fake.clear_journal();
    let ids = vec!["10001".to_string(), "PROJ-2".into(), "99999".into()];
    let states = t
        .fetch_issue_states_by_ids(&ids)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(states.keys().collect::<Vec<_>>(), ["10001"]);
    assert_eq!(
        fake.requests("GET", SEARCH)[0].param("jql").as_deref(),
        Some("id IN (10001, 99999) ORDER BY key ASC")
    );
    assert!(t.fetch_issues_by_states(&[]).unwrap_or_default().is_empty());
    assert!(
        t.fetch_issue_states_by_ids(&["x".into()])
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(
        fake.requests("GET", SEARCH).len(),
        1,
        "no call for nothing to ask"
    );
}

#[test]
fn transitions_post_the_first_matching_id_once_and_refuse_a_missing_path() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.transition_issue("10001", "in progress")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.with_state(|s| s.status(10001)), "In Progress");
    let posts = fake.requests("POST", "/rest/api/3/issue/10001/transitions");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].json(), json!({"transition": {"id": "21"}}));
    t.transition_issue("10001", "In Progress")
        .unwrap_or_else(|e| panic!("already there: {e}"));
    let e = t.transition_issue("10001", "Nowhere").err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Payload));
    assert!(e.is_some_and(|e| e.message.contains("Human Review")));
    assert_eq!(
        fake.requests("POST", "/rest/api/3/issue/10001/transitions")
            .len(),
        1
    );
    let missing = t.transition_issue("10999", "Done").err().map(|e| e.kind);
    assert_eq!(missing, Some(TrackerErrorKind::NotFound));
}

#[test]
fn comments_go_out_as_adf_and_page_by_offset() {
    let fake = seeded(1);
    let t = tracker(&fake);
    t.comment_issue("10001", "Started.\n\nSee the log")
        .unwrap_or_else(|e| panic!("{e}"));
    let post = &fake.requests("POST", "/rest/api/3/issue/10001/comment")[0];
    assert!(fake_jira::is_adf(&post.json()["body"]));
    assert_eq!(
        post.json()["body"]["content"].as_array().map(Vec::len),
        Some(3)
    );
    fake.with_state(|s| {
        let recorded = &fixture("comments_multi_page_1.json")["comments"][0];
        if let Some(i) = s.issues.get_mut(&10001) {
            for _ in 0..120 {
                i.comments.push(recorded.clone());
            }
        }
    });
    fake.clear_journal();
    let issue = t
        .fetch_issue_by_id("10001")
        .unwrap_or_else(|e| panic!("{e}"));
    let comments = issue.comments.unwrap_or_default();
    assert_eq!(comments.len(), 121);
    assert_eq!(comments[0].body, "Started.\n\nSee the log");
    assert_eq!(comments[1].body, "First comment.");
    let starts: Vec<_> = fake
        .requests("GET", "/rest/api/3/issue/10001/comment")
        .iter()
        .map(|r| r.param("startAt").unwrap_or_default())
        .collect();
    assert_eq!(starts, ["0", "50", "100"]);
    let empty = seeded(1);
    assert_eq!(
        tracker(&empty).fetch_issue_comments("PROJ-1").ok(),
        Some(vec![])
    );
}

#[test]
fn labels_and_blockers() {
    let fake = seeded(3);
    fake.with_state(|s| {
        if let Some(i) = s.issues.get_mut(&10002) {
            i.blocked_by = vec![10003];
        }
    });
    let t = tracker(&fake);
    t.add_label("10001", "sortie-parked")
        .unwrap_or_else(|e| panic!("{e}"));
    t.add_label("10001", "sortie-parked")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fake.with_state(|s| s.issues[&10001].labels.clone()),
        ["sortie-parked"]
    );
    t.remove_label("10001", "sortie-parked")
        .unwrap_or_else(|e| panic!("{e}"));
    t.remove_label("10001", "absent")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.with_state(|s| s.issues[&10001].labels.is_empty()));
    let puts = fake.requests("PUT", "/rest/api/3/issue/10001");
    assert_eq!(
        puts[2].json(),
        json!({"update": {"labels": [{"remove": "sortie-parked"}]}})
    );
    let b = t.fetch_blockers("10002").unwrap_or_else(|e| panic!("{e}"));
    assert!(b.complete);
    assert_eq!(b.refs[0].identifier, "PROJ-3");
    assert_eq!(b.refs[0].state, "To Do");
    let c = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    let blocked = c
        .iter()
        .find(|i| i.id == "10002")
        .map(|i| i.blocked_by.len());
    assert_eq!(blocked, Some(1));
    let other = tracker_with(&fake, json!({"blocker_link_type": "Depends"}));
    assert!(
        other
            .fetch_blockers("10002")
            .is_ok_and(|b| b.refs.is_empty())
    );
}

#[test]
fn faults_are_classified_and_writes_are_never_retried() {
    let fake = seeded(1);
    let t = tracker_with(&fake, json!({"timeout_ms": 500}));
    let cases: Vec<(Fault, TrackerErrorKind)> = vec![
        (Fault::unauthorized(), TrackerErrorKind::Auth),
        (Fault::too_many_requests(0), TrackerErrorKind::Api),
        (Fault::server_error(500), TrackerErrorKind::Transport),
        (Fault::BadJson, TrackerErrorKind::Payload),
        (Fault::Truncated, TrackerErrorKind::Transport),
        (Fault::Dropped, TrackerErrorKind::Transport),
        (
            Fault::Delay(Duration::from_millis(2500)),
            TrackerErrorKind::Transport,
        ),
    ];
    for (fault, kind) in cases {
        let label = format!("{fault:?}");
        let reads = if kind.retryable() { 3 } else { 1 };
        for _ in 0..reads {
            fake.push_fault("GET", SEARCH, fault.clone());
        }
        let e = t.fetch_candidate_issues().err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        assert!(
            e.is_some_and(|e| e.to_string().starts_with("tracker: jira: ")),
            "{label}"
        );
        assert_eq!(fake.pending_faults("GET", SEARCH), 0, "{label}");
        assert!(t.fetch_candidate_issues().is_ok(), "{label}: recovers");
    }
    let path = "/rest/api/3/issue/10001/comment";
    fake.push_fault("POST", path, Fault::server_error(502));
    assert!(t.comment_issue("10001", "hi").is_err());
    assert_eq!(fake.requests("POST", path).len(), 1, "a write is sent once");
}

#[test]
fn the_captcha_refusal_tells_the_operator_what_to_do() {
    let fake = seeded(1);
    let denied = Reply::json(403, &json!({"errorMessages": ["denied"]}))
        .header("X-Seraph-LoginReason", "AUTHENTICATION_DENIED")
        .header(
            "X-Authentication-Denied-Reason",
            "CAPTCHA_CHALLENGE; login-url=https://x/login",
        );
    fake.push_fault("GET", SEARCH, Fault::Status(denied));
    let e = tracker(&fake).fetch_candidate_issues().err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Auth));
    let text = e.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("CAPTCHA") && text.contains("browser"),
        "{text}"
    );
    assert!(!text.contains(fake_jira::TOKEN));
}

#[test]
fn every_request_carries_basic_auth_and_json_accept() {
    let fake = seeded(2);
    let t = tracker(&fake);
    let _ = t.fetch_candidate_issues();
    let _ = t.fetch_issue_by_id("PROJ-1");
    let basic = data_encoding::BASE64.encode(fake_jira::api_key().as_bytes());
    for r in fake.journal() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
        assert_eq!(r.header("accept"), Some("application/json"));
        assert!(
            r.header("user-agent")
                .is_some_and(|u| u.starts_with("sortie/"))
        );
    }
}

/// A tracker over the fake Jira Server / Data Center with `api_key`.
fn server_tracker(fake: &FakeJira, api_key: &str) -> Arc<dyn TrackerAdapter> {
    let mut s = settings(fake, json!({"retry_base_ms": 10, "timeout_ms": 2000}));
    s.api_key = Some(api_key.into());
    s.api_version = Some("2".into());
    s.user_agent = Some("acme-sortie/1.0".into());
    registry::build_tracker(&s, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn server_rest_v2_pages_search_by_offset_and_reads_wiki_text() {
    let fake = fake_jira::start_server();
    fake.with_state(|s| {
        for i in 1..=51 {
            s.add_issue(i, &format!("Issue {i}"), "To Do");
        }
    });
    let t = server_tracker(&fake, fake_jira::PAT);
    let got = t.fetch_candidate_issues().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 51);
    let starts: Vec<Option<String>> = fake
        .requests("GET", "/rest/api/2/search")
        .iter()
        .map(|r| r.param("startAt"))
        .collect();
    assert_eq!(starts, [Some("0".into()), Some("50".into())]);
    let one = t
        .fetch_issue_by_id("PROJ-1")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one.description, "h2. Body\nBody of PROJ-1");
    t.comment_issue("PROJ-1", "sortie: *working* on it\nline two")
        .unwrap_or_else(|e| panic!("{e}"));
    let posted = fake.requests("POST", "/rest/api/2/issue/PROJ-1/comment");
    assert_eq!(
        posted[0].json(),
        json!({"body": "sortie: *working* on it\nline two"})
    );
    let back = t
        .fetch_issue_comments("PROJ-1")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back[0].body, "sortie: *working* on it\nline two");
    t.transition_issue("PROJ-1", "In Progress")
        .unwrap_or_else(|e| panic!("{e}"));
    t.add_label("PROJ-1", "bug")
        .unwrap_or_else(|e| panic!("{e}"));
    let states = t
        .fetch_issue_states_by_identifiers(&["PROJ-1".into()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        states.get("PROJ-1").map(String::as_str),
        Some("In Progress")
    );
    for r in fake.journal() {
        assert!(r.path.starts_with("/rest/api/2/"), "{}", r.path);
        assert_eq!(r.header("user-agent"), Some("acme-sortie/1.0"));
    }
    // user:password goes as Basic.
    let basic = server_tracker(&fake, fake_jira::SERVER_LOGIN);
    fake.clear_journal();
    assert_eq!(basic.fetch_candidate_issues().map(|v| v.len()), Ok(51));
    let want = format!(
        "Basic {}",
        data_encoding::BASE64.encode(fake_jira::SERVER_LOGIN.as_bytes())
    );
    assert!(
        fake.journal()
            .iter()
            .all(|r| r.header("authorization") == Some(want.as_str()))
    );
}
