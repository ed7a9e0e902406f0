//! Issue detail over a real store and a hand-built snapshot: lookup of a renamed issue through
//! run history, the history-only answer, 404, and stored run events.

mod common;

use common::app::app_state as app;
use serde_json::json;
use sortie::domain::{Issue, RunStatus};
use sortie::orchestrator::snapshot::{RetryRow, Snapshot};
use sortie::store::{RunRecord, StoredEvent};

fn run(issue_id: &str, identifier: &str, dispatch: &str) -> RunRecord {
    RunRecord {
        issue_id: issue_id.into(),
        identifier: identifier.into(),
        issue_title: "Old title".into(),
        attempt: 1,
        started_at_ms: 1_000,
        completed_at_ms: 2_000,
        agent_kind: "mock".into(),
        input_tokens: 100,
        output_tokens: 50,
        total_tokens: 150,
        tokens_measured: true,
        usage_completeness: "complete".into(),
        dispatch_id: Some(dispatch.into()),
        ..RunRecord::new(RunStatus::Succeeded)
    }
}

#[test]
fn a_renamed_issue_is_found_through_its_history() {
    let mut snap = Snapshot::default();
    std::sync::Arc::make_mut(&mut snap.retrying).push(RetryRow {
        issue: Issue {
            id: "42".into(),
            identifier: "NEW-1".into(),
            title: "New title".into(),
            ..Default::default()
        },
        attempt: 2,
        due_at_ms: 10_000,
        error: Some("no available orchestrator slots".into()),
        trigger: sortie::domain::RetryTrigger::Timer,
        dispatched_at_ms: 500,
        reaction: None,
        route: Default::default(),
    });
    let (_d, app) = app(snap);
    let events = vec![StoredEvent {
        seq: 1,
        at_ms: 1_500,
        event_type: "notification".into(),
        payload: json!({"event": "notification", "at": "1970-01-01T00:00:01.500Z", "message": "hello"}),
    }];
    app.store
        .writer()
        .record_run(run("42", "OLD-1", "AAAA"), events)
        .unwrap_or_else(|e| panic!("{e}"));

    let v = sortie::http::issue_detail::detail(&app, "OLD-1")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .body;
    assert_eq!(v["status"], "retrying");
    assert_eq!(v["issue_identifier"], "NEW-1");
    assert_eq!(v["issue"]["title"], "New title");
    assert_eq!(v["retry"]["error"], "no available orchestrator slots");
    assert_eq!(v["status_text"], "Retry 2 in 10s: no agent slot was free");
    assert_eq!(v["last_error"], "no available orchestrator slots");
    assert_eq!(v["attempts"]["current_retry_attempt"], 2);
    assert_eq!(v["history"]["runs"][0]["issue_identifier"], "OLD-1");
    assert_eq!(v["history"]["totals"]["run_count"], 1);
    assert_eq!(v["history"]["totals"]["uncached_tokens"], 150);
    assert_eq!(v["recent_events"][0]["text"], "hello");
    assert_eq!(v["running"], serde_json::Value::Null);

    // The current identifier answers the same issue.
    let v2 = sortie::http::issue_detail::detail(&app, "NEW-1")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .body;
    assert_eq!(v2["issue_id"], "42");
}

#[test]
fn history_only_and_unknown_issues() {
    let (_d, app) = app(Snapshot::default());
    app.store
        .writer()
        .record_run(run("7", "H-7", "BBBB"), vec![])
        .unwrap_or_else(|e| panic!("{e}"));
    let v = sortie::http::issue_detail::detail(&app, "H-7")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .body;
    assert_eq!(v["status"], "history");
    assert_eq!(v["status_text"], "Not active; no ending recorded");
    assert_eq!(v["status_text_full"], "Not active; no ending recorded.");
    assert_eq!(v["next_outcomes"], json!([]));
    assert_eq!(v["pending_reactions"], json!([]));
    assert_eq!(v["workspace"], serde_json::Value::Null);
    assert_eq!(v["issue"], json!({"title": "Old title"}));
    assert_eq!(v["recent_events"], json!([]));
    let e = sortie::http::issue_detail::detail(&app, "NOPE-1").err();
    assert_eq!(
        e.map(|e| (e.status, e.code)),
        Some((404, "issue_not_found"))
    );
    // Stored events of a run without events are not retained.
    let e = sortie::http::runs::run_events(&app, "BBBB").err();
    assert_eq!(
        e.map(|e| (e.status, e.code)),
        Some((404, "run_events_not_retained"))
    );
}
