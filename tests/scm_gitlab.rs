//! The GitLab forge adapter against the fake GitLab API: the CI verdict from the merge
//! request's head pipeline and its jobs (with the failing job's trace tail), review comments
//! from unresolved discussion notes, the decision from approvals, the merge request read with
//! its mergeability words, the guarded merge (sha guard, squash), branch deletion, label events
//! and removal, and the error kind of every fault. Writes are sent once.

mod common;

use std::sync::Arc;

use common::fake_gitlab::{self, FakeGitlab, TOKEN, fixture, job_json, pipeline_json};
use common::fake_server::{Fault, Reply};
use serde_json::{Value, json};
use sortie::clock::SystemClock;
use sortie::domain::CiStatus;
use sortie::registry;
use sortie::scm::{
    MergeOutcome, MergeStrategy, PullRequestRef, ReviewDecision, ScmAdapter, ScmErrorKind,
    ScmSettings,
};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// A forge adapter over the fake; retried reads back off 10 ms.
fn scm_with(fake: &FakeGitlab, block: Value) -> Box<dyn ScmAdapter> {
    let mut block = block;
    block["retry_base_ms"] = json!(10);
    block["timeout_ms"] = json!(2000);
    let settings = ScmSettings {
        kind: "gitlab".into(),
        endpoint: Some(fake.url.clone()),
        token: TOKEN.into(),
        block: block.as_object().cloned().unwrap_or_default(),
    };
    registry::build_scm(&settings, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"))
}

fn scm(fake: &FakeGitlab) -> Box<dyn ScmAdapter> {
    scm_with(fake, json!({}))
}

/// Merge request 7 of `group/sub/project`.
fn mr7() -> PullRequestRef {
    PullRequestRef {
        owner: "group/sub".into(),
        repo: "project".into(),
        number: 7,
    }
}

fn mr_path(rest: &str) -> String {
    format!("{}/merge_requests/7{rest}", fake_gitlab::project_path())
}

/// A fake with merge request 7 on `feat/x` at [`SHA`].
fn with_mr() -> FakeGitlab {
    let fake = fake_gitlab::start();
    fake.with_state(|s| s.add_mr(7, "feat/x", SHA));
    fake
}

fn jobs() -> Vec<Value> {
    fixture("pipeline_jobs.json")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn the_ci_verdict_comes_from_the_head_pipeline_with_the_failing_trace() {
    let fake = with_mr();
    let f = scm(&fake);
    // No pipeline yet: pending, nothing to count.
    let none = f
        .ci_report(&mr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none.status, CiStatus::Pending);
    assert!(none.check_runs.is_empty());

    fake.with_state(|s| {
        s.add_pipeline(pipeline_json(9001, SHA, "feat/x", "failed"), jobs());
        s.set_trace(
            8002,
            "\u{1b}[0KRunning tests\n\u{1b}[31;1mFAIL handler_test.go:42\u{1b}[0m\nexit 1\n",
        );
    });
    let r = f
        .ci_report(&mr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status, CiStatus::Failing);
    assert_eq!((r.failing, r.pending, r.passing), (1, 0, 2));
    assert_eq!(r.failing_checks, ["test"]);
    assert_eq!(r.check_runs.len(), 3);
    assert!(
        r.log_excerpt.contains("FAIL handler_test.go:42"),
        "{}",
        r.log_excerpt
    );
    assert!(!r.log_excerpt.contains('\u{1b}'), "{}", r.log_excerpt);
    let trace = format!("{}/jobs/8002/trace", fake_gitlab::project_path());
    assert_eq!(fake.requests("GET", &trace).len(), 1);

    // Log reading off: no trace read.
    fake.clear_journal();
    let quiet = f
        .ci_report(&mr7(), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(quiet.log_excerpt.is_empty());
    assert!(fake.requests("GET", &trace).is_empty());

    // A newer pipeline for the head passes.
    fake.with_state(|s| {
        s.add_pipeline(
            pipeline_json(9002, SHA, "feat/x", "success"),
            vec![
                job_json(8101, "build", "success"),
                job_json(8102, "test", "success"),
            ],
        );
    });
    let ok = f
        .ci_report(&mr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok.status, CiStatus::Passing);
    assert_eq!(ok.passing, 2);

    // Another sha than the head's: the newest pipeline of that sha.
    fake.with_state(|s| {
        s.add_pipeline(
            pipeline_json(9003, "abcdef0", "feat/x", "running"),
            vec![job_json(8201, "test", "running")],
        );
    });
    let other = f
        .ci_report(&mr7(), "abcdef0", 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(other.status, CiStatus::Pending);
    assert_eq!(other.pending, 1);
}

#[test]
fn review_comments_are_the_unresolved_notes_and_the_decision_is_approvals() {
    let fake = with_mr();
    let f = scm(&fake);
    let discussions = fixture("discussions.json")
        .as_array()
        .cloned()
        .unwrap_or_default();
    fake.with_state(|s| s.set_discussions(7, discussions));
    let got = f.review_comments(&mr7()).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
    // The resolved note and the system note are left out.
    assert_eq!(ids, ["1126", "1127"]);
    let c = &got[0];
    assert_eq!(
        (c.file.as_str(), c.start_line, c.end_line),
        ("internal/handler.go", 10, 12)
    );
    assert_eq!((c.reviewer.as_str(), c.from_bot), ("alice", false));
    assert!(c.created_at_ms > 0);
    assert!(got[1].from_bot);

    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::None)
    );
    // GitLab Premium: two approvals required, one given, no `approvals_left` in the answer.
    fake.with_state(|s| s.set_approvals(7, fixture("approvals.json")));
    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::ReviewRequired)
    );
    fake.with_state(|s| {
        let mut v = fixture("approvals.json");
        if let Some(a) = v["approved_by"].as_array_mut() {
            a.push(json!({"user": {"id": 8, "username": "dan"}}));
        }
        s.set_approvals(7, v);
    });
    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::None)
    );
    fake.with_state(|s| {
        s.set_approvals(
            7,
            json!({"approved": true, "approved_by": [{"user": {"id": 7, "username": "carol"}}],
                "user_has_approved": false, "user_can_approve": false}),
        )
    });
    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::Approved)
    );
    // GitLab 17 reviewers' states: one asking for changes decides, whatever approvals say.
    fake.with_state(|s| s.set_reviewers(7, &[("alice", "approved"), ("bob", "unreviewed")]));
    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::Approved)
    );
    fake.with_state(|s| s.set_reviewers(7, &[("alice", "approved"), ("bob", "requested_changes")]));
    assert_eq!(
        f.review_decision(&mr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::ChangesRequested)
    );
    assert!(!fake.requests("GET", &mr_path("/reviewers")).is_empty());
}

#[test]
fn the_merge_request_read_and_its_mergeability() {
    let fake = with_mr();
    let f = scm(&fake);
    let i = f.pull_request(&mr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(i.open && !i.merged);
    assert_eq!(i.mergeable, Some(true));
    assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), (SHA, "feat/x"));
    assert_eq!(
        i.url,
        "https://gitlab.example.com/group/sub/project/-/merge_requests/7"
    );
    assert_eq!(i.labels, ["bug"]);
    // The project travels as its encoded full path; the token in PRIVATE-TOKEN.
    let sent = fake.requests("GET", &mr_path(""));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("private-token"), Some(TOKEN));
    for (word, want) in [
        ("conflict", Some(false)),
        ("broken_status", Some(false)),
        ("checking", None),
        ("unchecked", None),
        ("ci_must_pass", None),
    ] {
        fake.with_state(|s| s.set_mr(7, "detailed_merge_status", json!(word)));
        let i = f.pull_request(&mr7()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((i.mergeable, i.mergeable_state.as_str()), (want, word));
    }
}

#[test]
fn the_merge_is_guarded_by_the_head_and_sent_once() {
    let fake = with_mr();
    let f = scm(&fake);
    assert_eq!(
        f.merge(&mr7(), MergeStrategy::Squash, "0000000"),
        Ok(MergeOutcome::HeadMoved)
    );
    fake.with_state(|s| s.set_mr(7, "detailed_merge_status", json!("conflict")));
    assert!(matches!(
        f.merge(&mr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::NotMergeable(_))
    ));
    fake.with_state(|s| s.set_mr(7, "detailed_merge_status", json!("ci_must_pass")));
    assert!(matches!(
        f.merge(&mr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::NotMergeable(_))
    ));
    let path = mr_path("/merge");
    fake.push_fault(
        "PUT",
        &path,
        Fault::Status(Reply::json(
            422,
            &json!({"message": "Branch cannot be merged"}),
        )),
    );
    assert!(matches!(
        f.merge(&mr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::Refused(_))
    ));
    fake.push_fault("PUT", &path, Fault::server_error(502));
    assert_eq!(
        f.merge(&mr7(), MergeStrategy::Squash, SHA)
            .map_err(|e| e.kind),
        Err(ScmErrorKind::Transport)
    );
    fake.with_state(|s| s.set_mr(7, "detailed_merge_status", json!("mergeable")));
    fake.clear_journal();
    let merged = f.merge(&mr7(), MergeStrategy::Squash, SHA);
    assert_eq!(
        merged,
        Ok(MergeOutcome::Merged {
            sha: Some("feedfacefeedfacefeedfacefeedfacefeedface".into())
        })
    );
    let sent = fake.requests("PUT", &path);
    assert_eq!(sent.len(), 1, "a write is sent once");
    assert_eq!(sent[0].json(), json!({"sha": SHA, "squash": true}));
    let after = f.pull_request(&mr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(after.merged && !after.open);
    assert_eq!(
        after.merge_commit_sha.as_deref(),
        Some("feedfacefeedfacefeedfacefeedfacefeedface")
    );
}

#[test]
fn the_source_branch_is_deleted_and_a_missing_one_is_fine() {
    let fake = with_mr();
    let f = scm(&fake);
    assert_eq!(f.delete_branch(&mr7(), "feat/x"), Ok(()));
    assert!(!fake.with_state(|s| s.branch_exists("feat/x")));
    let path = format!(
        "{}/repository/branches/feat%2Fx",
        fake_gitlab::project_path()
    );
    assert_eq!(fake.requests("DELETE", &path).len(), 1);
    assert_eq!(f.delete_branch(&mr7(), "feat/x"), Ok(()));
    fake.push_fault("DELETE", &path, Fault::server_error(500));
    assert_eq!(
        f.delete_branch(&mr7(), "feat/x").map_err(|e| e.kind),
        Err(ScmErrorKind::Transport)
    );
    assert_eq!(
        f.delete_branch(&mr7(), " ").map_err(|e| e.kind),
        Err(ScmErrorKind::Payload)
    );
}

#[test]
fn label_events_and_label_removal() {
    let fake = with_mr();
    let f = scm(&fake);
    let recorded = fixture("resource_label_events.json")
        .as_array()
        .cloned()
        .unwrap_or_default();
    fake.with_state(|s| {
        s.mr.label_events.insert(7, recorded);
    });
    let got = f.label_events(&mr7()).unwrap_or_else(|e| panic!("{e}"));
    let view: Vec<(&str, &str, bool)> = got
        .iter()
        .map(|e| (e.label.as_str(), e.actor.as_str(), e.added))
        .collect();
    assert_eq!(
        view,
        [("sortie:fix", "alice", true), ("bug", "alice", false)]
    );
    assert!(got[0].created_at_ms < got[1].created_at_ms);

    fake.with_state(|s| s.set_mr(7, "labels", json!(["bug", "sortie:fix"])));
    assert_eq!(f.remove_label(&mr7(), "sortie:fix"), Ok(()));
    let sent = fake.requests("PUT", &mr_path(""));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json(), json!({"remove_labels": "sortie:fix"}));
    let labels = fake.with_state(|s| s.mr_json(7)["labels"].clone());
    assert_eq!(labels, json!(["bug"]));
    // Absent: still fine.
    assert_eq!(f.remove_label(&mr7(), "sortie:fix"), Ok(()));
}

#[test]
fn faults_map_to_error_kinds_and_the_next_call_recovers() {
    let fake = with_mr();
    let f = scm(&fake);
    let path = mr_path("");
    let cases = [
        (Fault::unauthorized(), ScmErrorKind::Auth),
        (Fault::too_many_requests(0), ScmErrorKind::RateLimited),
        (
            Fault::Status(Reply::json(404, &json!({"message": "404 Not found"}))),
            ScmErrorKind::NotFound,
        ),
        (
            Fault::Status(Reply::json(410, &json!({"message": "410 Gone"}))),
            ScmErrorKind::Api,
        ),
        (
            Fault::Status(Reply::json(200, &json!(["not", "an", "object"]))),
            ScmErrorKind::Payload,
        ),
    ];
    fake.assert_read_faults(&path, cases.into(), || {
        f.pull_request(&mr7()).map(drop).map_err(|e| e.kind)
    });
    let unknown = PullRequestRef {
        number: 99,
        ..mr7()
    };
    assert_eq!(
        f.pull_request(&unknown).map_err(|e| e.kind).err(),
        Some(ScmErrorKind::NotFound)
    );
    let message = f
        .pull_request(&unknown)
        .err()
        .map(|e| e.message)
        .unwrap_or_default();
    assert!(
        message.starts_with("gitlab: ") && !message.contains(TOKEN),
        "{message}"
    );
}

#[test]
fn bearer_auth_and_a_bad_auth_word() {
    let fake = with_mr();
    let f = scm_with(&fake, json!({"auth": "bearer"}));
    assert!(f.pull_request(&mr7()).is_ok());
    let sent = fake.requests("GET", &mr_path(""));
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let settings = ScmSettings {
        kind: "gitlab".into(),
        endpoint: Some(fake.url.clone()),
        token: TOKEN.into(),
        block: json!({"auth": "basic"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    let e = registry::build_scm(&settings, Arc::new(SystemClock))
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("gitlab.auth")));
}
