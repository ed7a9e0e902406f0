//! Every request the GitHub forge adapter sends is checked against GitHub's own OpenAPI
//! description by Prism (`tests/common/prism.rs`), the way `tests/tracker_github_openapi.rs`
//! checks the tracker: the relay answers from the hand-written fake (so merges, deletions and
//! label removals reach their success paths) while Prism validates a copy of each request. The
//! tests assert that the requests reached Prism and that it logged no violation.
//!
//! `POST /graphql` (the review decision) is not part of the REST description, so that one
//! operation is sent to the fake directly, not through Prism; `tests/scm_github.rs` covers it.
//! `DELETE /repos/{owner}/{repo}/git/refs/{ref}` takes `ref` as `heads/<branch>`, which the
//! description marks `x-multi-segment` (example `heads/feature-a`); Prism's router matches a
//! path parameter against one segment only and answers that request `NO_PATH_MATCHED`. That one
//! violation is checked by hand against the document instead ([`multi_segment_ref`]).
//!
//! The job log's download from the storage host behind GitHub's redirect is not a REST call
//! either: the redirect target is the fake's log host, reached without the relay.

mod common;

use std::sync::Arc;

use common::fake_github::{
    self, FakeGithub, TOKEN, check_run_json, review_comment_json, review_json, status_json,
};
use common::prism::{self, Answer, Report};
use serde_json::json;
use sortie::clock::SystemClock;
use sortie::registry;
use sortie::scm::{MergeOutcome, MergeStrategy, PullRequestRef, ScmAdapter, ScmSettings};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn adapter(endpoint: &str) -> Box<dyn ScmAdapter> {
    let settings = ScmSettings {
        kind: "github".into(),
        endpoint: Some(endpoint.into()),
        token: TOKEN.into(),
        block: json!({"retry_base_ms": 10, "timeout_ms": 5000})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    registry::build_scm(&settings, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"))
}

/// The violations that concern sortie's requests. Two kinds of Prism errors are set aside:
/// - its one-segment matching of the multi-segment `{ref}` of `DELETE …/git/refs/{ref}` (only
///   for requests of that shape; checked against the document by [`multi_segment_ref`]);
/// - a `VIOLATIONS` termination of a request Prism had already logged as passing the request
///   validation: that is its own synthetic answer failing response validation (its mock pull
///   request lacks `requested_teams[].type`), an answer the relay discards anyway.
fn request_violations(report: &Report) -> Vec<String> {
    let mut passed = std::collections::BTreeSet::new();
    let mut current = String::new();
    let mut out = Vec::new();
    for line in report.log.lines() {
        if let Some(rest) = line.split("[HTTP SERVER] ").nth(1) {
            let request = rest.split(" ℹ").next().unwrap_or("").trim().to_string();
            if rest.contains("Request received") {
                passed.remove(&request);
                current = request;
                continue;
            }
            if !rest.contains('✖') {
                continue;
            }
            let target = rest.split(" ✖").next().unwrap_or("").trim().to_string();
            let response_side = rest.contains("#VIOLATIONS") && passed.contains(&target);
            let ref_route = target.starts_with("delete /repos/owner/repo/git/refs/heads/")
                && rest.contains("NO_PATH_MATCHED");
            if !response_side && !ref_route {
                out.push(rest.trim().to_string());
            }
        } else if line.contains("[VALIDATOR] ✔") && line.contains("The request passed") {
            passed.insert(current.clone());
        } else if let Some(rest) = line.split("[VALIDATOR] ").nth(1)
            && (rest.contains('✖') || rest.contains('⚠'))
        {
            out.push(rest.trim().to_string());
        }
    }
    out
}

/// Whether GitHub's description has `DELETE /repos/{owner}/{repo}/git/refs/{ref}` with a
/// multi-segment `ref` whose example is `heads/<branch>`.
fn multi_segment_ref() -> bool {
    let text = std::fs::read_to_string(prism::document()).unwrap_or_else(|e| panic!("{e}"));
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let op = &doc["paths"]["/repos/{owner}/{repo}/git/refs/{ref}"]["delete"];
    let refs = op["parameters"].as_array().cloned().unwrap_or_default();
    refs.iter().any(|p| {
        let name = p["$ref"]
            .as_str()
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or("");
        let param = &doc["components"]["parameters"][name];
        param["name"] == "ref"
            && param["x-multi-segment"] == true
            && param["example"]
                .as_str()
                .is_some_and(|e| e.starts_with("heads/"))
    })
}

fn assert_requested(report: &Report, want: &str) {
    assert!(
        report.requests.iter().any(|r| r == want),
        "Prism never received {want:?}; it received {:?}",
        report.requests
    );
}

/// Pull request 7 with a failing Actions job (and its log), a commit status, a review that
/// requests changes with an inline comment, and a label set by a person.
fn seeded() -> FakeGithub {
    let fake = fake_github::start(&["bug", "sortie:fix"]);
    fake.with_state(|s| {
        s.add_pull(7, "feature-x", SHA);
        s.set_mergeable(7, Some(true), "clean");
        s.set_check_runs(
            SHA,
            vec![
                check_run_json(11, "test", "completed", Some("failure")),
                check_run_json(12, "lint", "completed", Some("success")),
            ],
        );
        s.set_statuses(SHA, vec![status_json("ci/jenkins", "success")]);
        s.set_job_log(
            11,
            "2026-01-15T10:30:00.1234567Z \u{1b}[31mFAIL: TestFoo\u{1b}[0m\n",
        );
        s.add_review(
            7,
            review_json(10, "CHANGES_REQUESTED", "Please fix", "alice", false),
        );
        s.add_review_comment(
            7,
            10,
            review_comment_json(
                100,
                "src/a.rs",
                Some(3),
                Some(5),
                Some(2),
                "extract",
                "alice",
                false,
            ),
        );
        s.add_label_event(7, "sortie:fix", "alice", true);
    });
    fake
}

#[test]
fn every_forge_operation_sends_only_described_requests() {
    let fake = seeded();
    let Some(session) = prism::session_or_skip(Answer::Fake(fake.url.clone())) else {
        return;
    };
    let f = adapter(&session.url);
    let pr = PullRequestRef {
        owner: "owner".into(),
        repo: "repo".into(),
        number: 7,
    };
    let ci = f
        .ci_report(&pr, SHA, 20)
        .unwrap_or_else(|e| panic!("ci: {e}"));
    assert_eq!(ci.log_excerpt, "FAIL: TestFoo");
    let branch_ci = f.ci_report(&pr, "feature-x", 0);
    branch_ci.unwrap_or_else(|e| panic!("ci by branch: {e}"));
    let comments = f
        .review_comments(&pr)
        .unwrap_or_else(|e| panic!("reviews: {e}"));
    assert_eq!(comments.len(), 2);
    let info = f.pull_request(&pr).unwrap_or_else(|e| panic!("pull: {e}"));
    assert_eq!(info.head_sha, SHA);
    // The second read is conditional (If-None-Match).
    f.pull_request(&pr)
        .unwrap_or_else(|e| panic!("pull again: {e}"));
    let events = f
        .label_events(&pr)
        .unwrap_or_else(|e| panic!("events: {e}"));
    assert_eq!(events.len(), 1);
    f.remove_label(&pr, "sortie:fix")
        .unwrap_or_else(|e| panic!("remove label: {e}"));
    f.remove_label(&pr, "sortie:fix")
        .unwrap_or_else(|e| panic!("remove absent label: {e}"));
    let moved = f.merge(
        &pr,
        MergeStrategy::Squash,
        "ffffffffffffffffffffffffffffffffffffffff",
    );
    assert_eq!(moved.ok(), Some(MergeOutcome::HeadMoved));
    let merged = f
        .merge(&pr, MergeStrategy::Squash, SHA)
        .unwrap_or_else(|e| panic!("merge: {e}"));
    assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
    f.delete_branch(&pr, "feature-x")
        .unwrap_or_else(|e| panic!("delete branch: {e}"));
    f.delete_branch(&pr, "feature-x")
        .unwrap_or_else(|e| panic!("delete gone branch: {e}"));
    // Not through Prism: GraphQL is outside the REST description (see the module doc).
    let direct = adapter(&fake.url);
    direct
        .review_decision(&pr)
        .unwrap_or_else(|e| panic!("decision: {e}"));
    let report = session.report();
    let left = request_violations(&report);
    assert!(
        left.is_empty(),
        "requests violate GitHub's OpenAPI description:\n{}\n--- Prism log of this test:\n{}",
        left.join("\n"),
        report.log
    );
    assert!(
        multi_segment_ref(),
        "the description's DELETE git/refs/{{ref}} changed"
    );
    for want in [
        format!("get /repos/owner/repo/commits/{SHA}/check-runs"),
        format!("get /repos/owner/repo/commits/{SHA}/status"),
        "get /repos/owner/repo/commits/feature-x/check-runs".to_string(),
        "get /repos/owner/repo/actions/jobs/11/logs".to_string(),
        "get /repos/owner/repo/pulls/7/reviews".to_string(),
        "get /repos/owner/repo/pulls/7/reviews/10/comments".to_string(),
        "get /repos/owner/repo/pulls/7".to_string(),
        "get /repos/owner/repo/issues/7/events".to_string(),
        "delete /repos/owner/repo/issues/7/labels/sortie%3Afix".to_string(),
        "put /repos/owner/repo/pulls/7/merge".to_string(),
        "delete /repos/owner/repo/git/refs/heads/feature-x".to_string(),
    ] {
        assert_requested(&report, &want);
    }
    assert!(!report.requests.iter().any(|r| r.contains("graphql")));
    eprintln!("forge requests: {:?}", report.requests);
}

/// The filter keeps request violations and sets aside only the two known Prism errors.
#[test]
fn the_violation_filter_keeps_request_violations() {
    let log = "\
[1] › [HTTP SERVER] get /repos/owner/repo/pulls/7 ℹ  info      Request received
[1] ›     [VALIDATOR] ✔  success   The request passed the validation rules. Looking for the best response
[1] › [HTTP SERVER] get /repos/owner/repo/pulls/7 ✖  error     Request terminated with error: https://stoplight.io/prism/errors#VIOLATIONS: Request/Response not valid
[2] › [HTTP SERVER] get /repos/owner/repo/pulls/7/reviews ℹ  info      Request received
[2] ›     [VALIDATOR] ✖  error     Request query parameter per_page must be integer
[2] › [HTTP SERVER] get /repos/owner/repo/pulls/7/reviews ✖  error     Request terminated with error: https://stoplight.io/prism/errors#VIOLATIONS: Request/Response not valid
[3] › [HTTP SERVER] delete /repos/owner/repo/git/refs/heads/x ℹ  info      Request received
[3] › [HTTP SERVER] delete /repos/owner/repo/git/refs/heads/x ✖  error     Request terminated with error: https://stoplight.io/prism/errors#NO_PATH_MATCHED_ERROR: Route not resolved, no path matched
[4] › [HTTP SERVER] get /repos/owner/repo/nowhere ℹ  info      Request received
[4] › [HTTP SERVER] get /repos/owner/repo/nowhere ✖  error     Request terminated with error: https://stoplight.io/prism/errors#NO_PATH_MATCHED_ERROR: Route not resolved, no path matched
";
    let report = prism::parse_log(log, "end-of-session-marker");
    let kept = request_violations(&report);
    assert_eq!(kept.len(), 3, "{kept:#?}");
    assert!(kept[0].contains("per_page must be integer"));
    assert!(kept[1].starts_with("get /repos/owner/repo/pulls/7/reviews"));
    assert!(kept[2].starts_with("get /repos/owner/repo/nowhere"));
}
