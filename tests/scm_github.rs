//! The GitHub forge adapter against the fake GitHub API: the CI verdict over check runs and
//! commit statuses with paging, the job log behind its redirect (no credential to the log
//! host), review comments with bot and outdated flags, the review decision, the pull request
//! read with its ETag, the guarded merge, branch deletion, label events and removal, and the
//! error kind of every fault, each followed by a call that recovers. Writes are sent once.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake_github::{
    self, FakeGithub, TOKEN, check_run_json, fixture, review_comment_json, review_json, status_json,
};
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
const R: &str = "/repos/owner/repo";

/// A forge adapter over the fake; retried reads back off 10 ms instead of 2 s.
fn scm_with(fake: &FakeGithub, mut block: Value) -> Box<dyn ScmAdapter> {
    block["retry_base_ms"] = json!(10);
    let settings = ScmSettings {
        kind: "github".into(),
        endpoint: Some(fake.url.clone()),
        token: TOKEN.into(),
        block: block.as_object().cloned().unwrap_or_default(),
    };
    registry::build_scm(&settings, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"))
}

fn scm(fake: &FakeGithub) -> Box<dyn ScmAdapter> {
    scm_with(fake, json!({"timeout_ms": 2000}))
}

fn pr(number: u64) -> PullRequestRef {
    PullRequestRef {
        owner: "owner".into(),
        repo: "repo".into(),
        number,
    }
}

/// A fake with pull request 7 on branch `feat/x` at [`SHA`].
fn with_pull() -> FakeGithub {
    let fake = fake_github::start(&["bug", "sortie:fix"]);
    fake.with_state(|s| s.add_pull(7, "feat/x", SHA));
    fake
}

fn runs(name: &str) -> Vec<Value> {
    fixture(name)["check_runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn the_ci_verdict_of_the_recorded_check_runs() {
    let fake = with_pull();
    let f = scm(&fake);
    let cases = [
        ("check_runs_passing.json", CiStatus::Passing, (0, 0, 2)),
        ("check_runs_failing.json", CiStatus::Failing, (1, 0, 1)),
        ("check_runs_pending.json", CiStatus::Pending, (0, 1, 1)),
        ("check_runs_mixed.json", CiStatus::Failing, (1, 1, 1)),
        ("check_runs_empty.json", CiStatus::Pending, (0, 0, 0)),
    ];
    for (name, status, counts) in cases {
        fake.with_state(|s| s.set_check_runs(SHA, runs(name)));
        let r = f
            .ci_report(&pr(7), SHA, 0)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.status, status, "{name}");
        assert_eq!((r.failing, r.pending, r.passing), counts, "{name}");
        assert_eq!(r.git_ref, SHA);
        assert!(r.log_excerpt.is_empty());
    }
    let mixed = f.ci_report(&pr(7), SHA, 0).err();
    assert!(mixed.is_none());
    fake.with_state(|s| s.set_check_runs(SHA, runs("check_runs_mixed.json")));
    let r = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.failing_checks, ["test"]);
    assert_eq!(r.check_runs.len(), 3);
    assert_eq!(r.check_runs[2].status, "in_progress");
    let first = &fake.requests("GET", &format!("{R}/commits/{SHA}/check-runs"))[0];
    assert_eq!(first.param("per_page").as_deref(), Some("100"));
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(first.header("x-github-api-version"), Some("2022-11-28"));
    // A branch ref works the same way.
    fake.with_state(|s| s.set_check_runs("feat/x", runs("check_runs_passing.json")));
    let b = f
        .ci_report(&pr(7), "feat/x", 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (b.status, b.git_ref.as_str()),
        (CiStatus::Passing, "feat/x")
    );
}

#[test]
fn commit_statuses_join_the_check_runs() {
    let fake = with_pull();
    let f = scm(&fake);
    fake.with_state(|s| {
        s.set_check_runs(SHA, runs("check_runs_passing.json"));
        s.set_statuses(SHA, vec![status_json("ci/jenkins", "pending")]);
    });
    let r = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.status, r.pending, r.passing), (CiStatus::Pending, 1, 2));
    fake.with_state(|s| s.set_statuses(SHA, vec![status_json("ci/jenkins", "error")]));
    let r = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.status, r.failing_checks.clone()),
        (CiStatus::Failing, vec!["ci/jenkins".to_string()])
    );
    assert_eq!(r.check_runs[2].details_url, "https://ci.example/ci/jenkins");
    fake.with_state(|s| {
        s.set_check_runs(SHA, vec![]);
        s.set_statuses(SHA, vec![status_json("ci/jenkins", "success")]);
    });
    let r = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status, CiStatus::Passing);
    fake.with_state(|s| s.set_statuses(SHA, vec![]));
    let r = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.status, r.check_runs.len()), (CiStatus::Pending, 0));
}

#[test]
fn check_runs_are_read_page_by_page_up_to_the_cap() {
    let fake = with_pull();
    let f = scm(&fake);
    let path = format!("{R}/commits/{SHA}/check-runs");
    for n in [0u64, 1, 100, 101] {
        let list = (1..=n)
            .map(|i| check_run_json(i, &format!("job {i}"), "completed", Some("success")))
            .collect();
        fake.with_state(|s| s.set_check_runs(SHA, list));
        fake.clear_journal();
        let r = f
            .ci_report(&pr(7), SHA, 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.check_runs.len() as u64, n);
        assert_eq!(
            fake.requests("GET", &path).len(),
            if n > 100 { 2 } else { 1 },
            "{n}"
        );
    }
    let capped = scm_with(&fake, json!({"page_cap": 2, "timeout_ms": 2000}));
    let list = (1..=250)
        .map(|i| check_run_json(i, "j", "completed", Some("success")))
        .collect();
    fake.with_state(|s| s.set_check_runs(SHA, list));
    let r = capped
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.check_runs.len(), 200);
}

#[test]
fn the_log_tail_comes_from_the_first_failing_actions_job_without_the_credential() {
    let fake = with_pull();
    let f = scm(&fake);
    let log = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/job_log_sample.txt"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut other_app = check_run_json(900, "external", "completed", Some("failure"));
    other_app["app"]["slug"] = json!("circleci");
    fake.with_state(|s| {
        s.set_check_runs(
            SHA,
            vec![
                other_app,
                check_run_json(901, "lint", "completed", Some("success")),
                check_run_json(902, "test", "completed", Some("failure")),
                check_run_json(903, "e2e", "completed", Some("timed_out")),
            ],
        );
        s.set_job_log(902, &log);
        s.set_job_log(903, "other job\n");
    });
    let r = f
        .ci_report(&pr(7), SHA, 3)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.failing_checks, ["external", "test", "e2e"]);
    assert_eq!(
        r.log_excerpt,
        "FAIL: TestFoo\nExit code: 1\nProcess completed with exit code 1."
    );
    assert_eq!(
        fake.requests("GET", &format!("{R}/actions/jobs/902/logs"))
            .len(),
        1
    );
    assert!(
        fake.requests("GET", &format!("{R}/actions/jobs/900/logs"))
            .is_empty()
    );
    assert!(
        fake.requests("GET", &format!("{R}/actions/jobs/903/logs"))
            .is_empty()
    );
    let downloads = fake.with_state(|s| s.log_downloads());
    assert_eq!(downloads.len(), 1);
    assert_eq!(downloads[0].path, "/job-logs/902");
    assert!(downloads[0].header("authorization").is_none());
    // Log reading off: no log request at all.
    fake.clear_journal();
    let off = f
        .ci_report(&pr(7), SHA, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(off.log_excerpt.is_empty());
    assert!(
        fake.requests("GET", &format!("{R}/actions/jobs/902/logs"))
            .is_empty()
    );
    // A log that cannot be read leaves the verdict standing with no excerpt.
    // (A 410 is an API answer, retried twice like any failed read.)
    for _ in 0..3 {
        fake.push_fault(
            "GET",
            &format!("{R}/actions/jobs/902/logs"),
            Fault::Status(Reply::json(410, &json!({"message": "Gone"}))),
        );
    }
    let gone = f
        .ci_report(&pr(7), SHA, 50)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (gone.status, gone.log_excerpt.as_str()),
        (CiStatus::Failing, "")
    );
    fake.with_state(|s| {
        if let Some(h) = &s.log_host {
            h.server
                .push_fault("GET", "/job-logs/902", Fault::server_error(500));
            h.server
                .push_fault("GET", "/job-logs/902", Fault::server_error(500));
            h.server
                .push_fault("GET", "/job-logs/902", Fault::server_error(500));
        }
    });
    let down = f
        .ci_report(&pr(7), SHA, 50)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(down.log_excerpt, "");
    let again = f
        .ci_report(&pr(7), SHA, 50)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        again
            .log_excerpt
            .ends_with("Process completed with exit code 1.")
    );
}

#[test]
fn review_comments_keep_changes_requested_with_bot_and_outdated_flags() {
    let fake = with_pull();
    let f = scm(&fake);
    let first = |name: &str| {
        fixture(name)
            .as_array()
            .and_then(|a| a.first().cloned())
            .unwrap_or_default()
    };
    fake.with_state(|s| {
        s.add_review(7, first("reviews_changes_requested_with_body.json"));
        s.add_review(7, first("reviews_changes_requested_no_body.json"));
        s.add_review(7, first("reviews_approved.json"));
        s.add_review(7, first("reviews_bot.json"));
        s.add_review_comment(7, 10, first("comments_inline.json"));
        s.add_review_comment(7, 20, first("comments_outdated.json"));
        // The same comment listed under two reviews is kept once.
        s.add_review_comment(7, 20, first("comments_inline.json"));
        s.add_review_comment(
            7,
            1,
            review_comment_json(
                400,
                "a.rs",
                None,
                Some(1),
                Some(1),
                "approved-review note",
                "alice",
                false,
            ),
        );
        s.add_review_comment(
            7,
            30,
            review_comment_json(
                500,
                "b.rs",
                Some(3),
                Some(3),
                Some(2),
                "bot says",
                "lint[bot]",
                true,
            ),
        );
    });
    let got = f.review_comments(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["review-10", "100", "200", "review-30", "500"]);
    let body = &got[0];
    assert_eq!(
        (body.file.as_str(), body.start_line, body.reviewer.as_str()),
        ("", 0, "alice")
    );
    let inline = &got[1];
    assert_eq!(
        (inline.file.as_str(), inline.start_line, inline.end_line),
        ("internal/handler.go", 10, 12)
    );
    assert!(!inline.outdated && !inline.from_bot);
    assert!(got[2].outdated);
    assert_eq!((got[2].start_line, got[2].end_line), (5, 0));
    assert!(got[3].from_bot && got[4].from_bot);
    assert_eq!((got[4].start_line, got[4].end_line), (3, 0));
    // The approved review's comments are never read.
    assert!(
        fake.requests("GET", &format!("{R}/pulls/7/reviews/1/comments"))
            .is_empty()
    );
    let reviews = &fake.requests("GET", &format!("{R}/pulls/7/reviews"))[0];
    assert_eq!(reviews.param("per_page").as_deref(), Some("100"));
    // A bot's COMMENTED review counts; a person's does not.
    fake.with_state(|s| {
        s.add_review(7, review_json(40, "COMMENTED", "fyi", "bob", false));
        s.add_review(
            7,
            review_json(41, "COMMENTED", "auto", "coderabbit[bot]", true),
        );
    });
    let got = f.review_comments(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    assert!(got.iter().any(|c| c.id == "review-41"));
    assert!(!got.iter().any(|c| c.id == "review-40"));
    assert_eq!(
        f.review_comments(&pr(8)).err().map(|e| e.kind),
        Some(ScmErrorKind::NotFound)
    );
}

#[test]
fn reviews_and_their_comments_are_read_over_every_page() {
    let fake = with_pull();
    let f = scm(&fake);
    fake.with_state(|s| {
        for id in 1..=101 {
            s.add_review(7, review_json(id, "CHANGES_REQUESTED", "", "alice", false));
        }
        for c in 1..=101 {
            s.add_review_comment(
                7,
                101,
                review_comment_json(
                    1000 + c,
                    "x.rs",
                    None,
                    Some(c),
                    Some(c),
                    "fix",
                    "alice",
                    false,
                ),
            );
        }
        let p1 = fixture("comments_page1.json")
            .as_array()
            .cloned()
            .unwrap_or_default();
        let p2 = fixture("comments_page2.json")
            .as_array()
            .cloned()
            .unwrap_or_default();
        for c in p1.into_iter().chain(p2) {
            s.add_review_comment(7, 1, c);
        }
    });
    let got = f.review_comments(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 103);
    assert_eq!((got[0].id.as_str(), got[1].id.as_str()), ("300", "301"));
    assert_eq!(
        fake.requests("GET", &format!("{R}/pulls/7/reviews")).len(),
        2
    );
    assert_eq!(
        fake.requests("GET", &format!("{R}/pulls/7/reviews/101/comments"))
            .len(),
        2
    );
    assert_eq!(
        fake.requests("GET", &format!("{R}/pulls/7/reviews/1/comments"))
            .len(),
        1
    );
}

#[test]
fn the_review_decision_comes_from_graphql() {
    let fake = with_pull();
    let f = scm(&fake);
    let ask = |f: &dyn ScmAdapter| f.review_decision(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ask(f.as_ref()), ReviewDecision::None);
    for (word, want) in [
        ("APPROVED", ReviewDecision::Approved),
        ("CHANGES_REQUESTED", ReviewDecision::ChangesRequested),
        ("REVIEW_REQUIRED", ReviewDecision::ReviewRequired),
    ] {
        fake.with_state(|s| s.set_review_decision(7, Some(word)));
        assert_eq!(ask(f.as_ref()), want);
    }
    let sent = &fake.requests("POST", "/graphql")[0];
    assert_eq!(
        sent.json()["variables"],
        json!({"owner": "owner", "repo": "repo", "number": 7})
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        f.review_decision(&pr(99)).err().map(|e| e.kind),
        Some(ScmErrorKind::NotFound)
    );
    fake.push_fault("POST", "/graphql", Fault::server_error(502));
    assert_eq!(
        f.review_decision(&pr(7)).err().map(|e| e.kind),
        Some(ScmErrorKind::Transport)
    );
    assert_eq!(ask(f.as_ref()), ReviewDecision::ReviewRequired);
}

#[test]
fn the_pull_request_read_and_its_etag() {
    let fake = with_pull();
    let f = scm(&fake);
    let read = || f.pull_request(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    let i = read();
    assert!(i.open && !i.merged);
    assert_eq!((i.mergeable, i.mergeable_state.as_str()), (None, "unknown"));
    assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), (SHA, "feat/x"));
    assert_eq!(i.url, "https://github.com/owner/repo/pull/7");
    assert_eq!(i.merge_commit_sha, None);
    let again = read();
    assert_eq!(again, i);
    let reads = fake.requests("GET", &format!("{R}/pulls/7"));
    assert!(reads[0].header("if-none-match").is_none());
    assert!(reads[1].header("if-none-match").is_some());
    fake.with_state(|s| {
        s.set_mergeable(7, Some(false), "dirty");
        s.add_label_event(7, "bug", "alice", true);
    });
    let i = read();
    assert_eq!(
        (i.mergeable, i.mergeable_state.as_str()),
        (Some(false), "dirty")
    );
    assert_eq!(i.labels, ["bug"]);
    fake.with_state(|s| s.set_merged(7, Some("feedbeef")));
    let i = read();
    assert!(!i.open && i.merged);
    assert_eq!(i.merge_commit_sha.as_deref(), Some("feedbeef"));
    assert_eq!(
        f.pull_request(&pr(8)).err().map(|e| e.kind),
        Some(ScmErrorKind::NotFound)
    );
}

#[test]
fn the_merge_is_guarded_by_the_head_and_sent_once() {
    let fake = with_pull();
    let f = scm(&fake);
    let path = format!("{R}/pulls/7/merge");
    let merge = |sha: &str| {
        f.merge(&pr(7), MergeStrategy::Squash, sha)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert!(matches!(merge(SHA), MergeOutcome::NotMergeable(m) if m.contains("not mergeable")));
    fake.with_state(|s| s.set_mergeable(7, Some(true), "clean"));
    assert_eq!(
        merge("0000000000000000000000000000000000000000"),
        MergeOutcome::HeadMoved
    );
    assert!(fake.with_state(|s| s.pr(7)["merged"] == false));
    let puts = fake.requests("PUT", &path);
    assert_eq!(puts.len(), 3 - 1);
    assert_eq!(
        puts[1].json(),
        json!({"merge_method": "squash", "sha": "0000000000000000000000000000000000000000"})
    );
    // Refusals and failures are not retried.
    for (fault, want) in [
        (
            Fault::Status(Reply::json(
                403,
                &json!({"message": "Resource not accessible by integration"}),
            )),
            "refused",
        ),
        (
            Fault::Status(Reply::json(
                422,
                &json!({"message": "Merge method not allowed"}),
            )),
            "refused",
        ),
    ] {
        fake.clear_journal();
        fake.push_fault("PUT", &path, fault);
        let got = merge(SHA);
        assert!(
            matches!(&got, MergeOutcome::Refused(m) if !m.contains(TOKEN)),
            "{want}: {got:?}"
        );
        assert_eq!(fake.requests("PUT", &path).len(), 1);
    }
    fake.clear_journal();
    fake.push_fault("PUT", &path, Fault::server_error(502));
    let e = f.merge(&pr(7), MergeStrategy::Squash, SHA).err();
    assert_eq!(e.map(|e| e.kind), Some(ScmErrorKind::Transport));
    assert_eq!(fake.requests("PUT", &path).len(), 1);
    fake.push_fault("PUT", &path, Fault::rate_limited());
    let e = f.merge(&pr(7), MergeStrategy::Squash, SHA).err();
    assert_eq!(e.map(|e| e.kind), Some(ScmErrorKind::RateLimited));
    fake.clear_journal();
    let done = f
        .merge(&pr(7), MergeStrategy::Rebase, SHA)
        .unwrap_or_else(|e| panic!("{e}"));
    let sha = fake.with_state(|s| s.pr(7)["merge_commit_sha"].as_str().map(String::from));
    assert_eq!(done, MergeOutcome::Merged { sha: sha.clone() });
    assert!(sha.is_some());
    assert_eq!(
        fake.requests("PUT", &path)[0].json()["merge_method"],
        "rebase"
    );
    assert_eq!(fake.requests("PUT", &path).len(), 1);
    let info = f.pull_request(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    assert!(info.merged && !info.open);
    assert!(matches!(merge(SHA), MergeOutcome::NotMergeable(_)));
    assert_eq!(
        f.merge(&pr(8), MergeStrategy::Merge, SHA)
            .err()
            .map(|e| e.kind),
        Some(ScmErrorKind::NotFound)
    );
}

#[test]
fn the_head_branch_is_deleted_once_and_a_missing_one_is_fine() {
    let fake = with_pull();
    let f = scm(&fake);
    let path = format!("{R}/git/refs/heads/feat/x");
    f.delete_branch(&pr(7), "feat/x")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!fake.with_state(|s| s.branch_exists("feat/x")));
    assert_eq!(fake.requests("DELETE", &path).len(), 1);
    f.delete_branch(&pr(7), "feat/x")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fake.requests("DELETE", &path).len(), 2);
    fake.with_state(|s| {
        s.branches.insert("feat/y".into());
    });
    let ypath = format!("{R}/git/refs/heads/feat/y");
    fake.push_fault("DELETE", &ypath, Fault::server_error(500));
    let e = f.delete_branch(&pr(7), "feat/y").err().map(|e| e.kind);
    assert_eq!(e, Some(ScmErrorKind::Transport));
    assert_eq!(fake.requests("DELETE", &ypath).len(), 1);
    fake.push_fault("DELETE", &ypath, Fault::unauthorized());
    assert_eq!(
        f.delete_branch(&pr(7), "feat/y").err().map(|e| e.kind),
        Some(ScmErrorKind::Auth)
    );
    f.delete_branch(&pr(7), "feat/y")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!fake.with_state(|s| s.branch_exists("feat/y")));
    assert_eq!(
        f.delete_branch(&pr(7), " ").err().map(|e| e.kind),
        Some(ScmErrorKind::Payload)
    );
}

#[test]
fn label_events_over_every_page_and_label_removal() {
    let fake = with_pull();
    let f = scm(&fake);
    fake.with_state(|s| {
        s.add_event(7, json!({"id": 1, "event": "closed", "actor": {"login": "x"}, "created_at": "2026-01-01T00:00:00Z"}));
        for i in 0..120 {
            s.record_label_event(7, &format!("l{i}"), "carol", i % 2 == 0);
        }
        s.add_label_event(7, "sortie:fix", "alice", true);
    });
    let events = f.label_events(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(events.len(), 121);
    assert_eq!(
        fake.requests("GET", &format!("{R}/issues/7/events")).len(),
        2
    );
    assert!(
        events
            .windows(2)
            .all(|w| w[0].created_at_ms <= w[1].created_at_ms)
    );
    let last = &events[120];
    assert_eq!(
        (last.label.as_str(), last.actor.as_str(), last.added),
        ("sortie:fix", "alice", true)
    );
    assert!(!events[1].added && events[0].added);
    f.remove_label(&pr(7), "sortie:fix")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(fake.with_state(|s| s.labels(7)).is_empty());
    let path = format!("{R}/issues/7/labels/sortie%3Afix");
    assert_eq!(fake.requests("DELETE", &path).len(), 1);
    // Already gone: fine.
    f.remove_label(&pr(7), "sortie:fix")
        .unwrap_or_else(|e| panic!("{e}"));
    let events = f.label_events(&pr(7)).unwrap_or_else(|e| panic!("{e}"));
    let removed = &events[events.len() - 1];
    assert_eq!(
        (removed.label.as_str(), removed.added),
        ("sortie:fix", false)
    );
    fake.push_fault("DELETE", &path, Fault::server_error(500));
    assert_eq!(
        f.remove_label(&pr(7), "sortie:fix").err().map(|e| e.kind),
        Some(ScmErrorKind::Transport)
    );
    assert_eq!(fake.requests("DELETE", &path).len(), 3);
}

#[test]
fn faults_map_to_error_kinds_and_the_next_call_recovers() {
    let fake = with_pull();
    let f = scm_with(&fake, json!({"timeout_ms": 500}));
    let path = format!("{R}/pulls/7");
    let cases = [
        (Fault::rate_limited(), ScmErrorKind::RateLimited),
        (Fault::secondary_rate_limited(60), ScmErrorKind::RateLimited),
        (Fault::too_many_requests(60), ScmErrorKind::RateLimited),
        (Fault::unauthorized(), ScmErrorKind::Auth),
        (
            Fault::Status(Reply::json(403, &json!({"message": "Forbidden"}))),
            ScmErrorKind::Auth,
        ),
        (
            Fault::Status(Reply::json(404, &json!({"message": "Not Found"}))),
            ScmErrorKind::NotFound,
        ),
        (
            Fault::Status(Reply::json(422, &json!({"message": "Validation Failed"}))),
            ScmErrorKind::Payload,
        ),
        (
            Fault::Status(Reply::json(410, &json!({"message": "Gone"}))),
            ScmErrorKind::Api,
        ),
        (Fault::BadJson, ScmErrorKind::Payload),
    ];
    for (fault, kind) in cases {
        let label = format!("{fault:?}");
        // A 410 is retried like other API answers: queue it for every attempt.
        let copies = if kind == ScmErrorKind::Api { 3 } else { 1 };
        for _ in 0..copies {
            fake.push_fault("GET", &path, fault.clone());
        }
        let e = f.pull_request(&pr(7)).err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(kind), "{label}");
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.starts_with(&format!("github: GET {path}")), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
        assert!(f.pull_request(&pr(7)).is_ok(), "{label}");
        assert_eq!(fake.pending_faults("GET", &path), 0, "{label}");
    }
    // Reads that keep failing are retried twice, then surface as transport errors.
    for fault in [
        Fault::server_error(500),
        Fault::Dropped,
        Fault::Truncated,
        Fault::Delay(Duration::from_millis(1500)),
    ] {
        let label = format!("{fault:?}");
        for _ in 0..3 {
            fake.push_fault("GET", &path, fault.clone());
        }
        let e = f.pull_request(&pr(7)).err().map(|e| e.kind);
        assert_eq!(e, Some(ScmErrorKind::Transport), "{label}");
        assert_eq!(fake.pending_faults("GET", &path), 0, "{label}");
        assert!(f.pull_request(&pr(7)).is_ok(), "{label}");
    }
    // A read fails once and is retried: the call succeeds.
    let runs = format!("{R}/commits/{SHA}/check-runs");
    fake.push_fault("GET", &runs, Fault::server_error(502));
    assert!(f.ci_report(&pr(7), SHA, 0).is_ok());
    assert_eq!(fake.requests("GET", &runs).len(), 2);
    // Every API request carried the token and the API version.
    for r in fake.journal() {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{}",
            r.path
        );
        assert!(r.header("x-github-api-version").is_some(), "{}", r.path);
    }
}
