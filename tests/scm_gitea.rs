//! The Gitea forge adapter against the fake Gitea API: the CI verdict from the combined
//! commit status (one run per context, Gitea Actions contexts marked), review comments from
//! counted reviews and their unresolved code comments (a stale review's marked outdated), the
//! decision from each reviewer's latest review, the pull request read with its mergeability
//! words, the guarded merge (head guard, draft, not mergeable), branch deletion, timeline label
//! events and removal by id, and the error kind of every fault. Writes are sent once.

mod common;

use std::sync::Arc;

use common::fake_gitea::pulls::{MERGE_SHA, status_json};
use common::fake_gitea::{self, FakeGitea, TOKEN, fixture};
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
const REPO: &str = "/api/v1/repos/owner/repo";

fn settings(endpoint: Option<String>) -> ScmSettings {
    ScmSettings {
        kind: "gitea".into(),
        endpoint,
        token: TOKEN.into(),
        block: json!({"retry_base_ms": 10, "timeout_ms": 2000})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    }
}

/// A forge adapter over the fake; retried reads back off 10 ms.
fn scm(fake: &FakeGitea) -> Box<dyn ScmAdapter> {
    registry::build_scm(&settings(Some(fake.url.clone())), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn pr7() -> PullRequestRef {
    PullRequestRef {
        owner: "owner".into(),
        repo: "repo".into(),
        number: 7,
    }
}

/// A fake with pull request 7 from `feat/x` at [`SHA`], labelled `bug`.
fn with_pull() -> FakeGitea {
    let fake = fake_gitea::start(&["bug", "sortie:fix", "backlog"]);
    fake.with_state(|s| s.add_pull(7, "feat/x", SHA, &["bug"]));
    fake
}

fn array(name: &str) -> Vec<Value> {
    fixture(name).as_array().cloned().unwrap_or_default()
}

#[test]
fn the_ci_verdict_comes_from_the_combined_status_of_the_ref() {
    let fake = with_pull();
    let f = scm(&fake);
    let none = f
        .ci_report(&pr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none.status, CiStatus::Pending);
    assert!(none.check_runs.is_empty());

    let recorded = fixture("combined_status.json");
    fake.with_state(|s| {
        for st in recorded["statuses"].as_array().into_iter().flatten() {
            s.set_status(SHA, st.clone());
        }
    });
    let r = f
        .ci_report(&pr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status, CiStatus::Failing);
    assert_eq!((r.failing, r.pending, r.passing), (1, 0, 2));
    assert_eq!(r.failing_checks, ["ci / test (pull_request)"]);
    assert_eq!(r.git_ref, SHA);
    let slugs: Vec<&str> = r.check_runs.iter().map(|c| c.app_slug.as_str()).collect();
    assert_eq!(slugs, ["gitea-actions", "gitea-actions", ""]);
    assert!(r.log_excerpt.is_empty(), "no log is read from Gitea");
    let sent = fake.requests("GET", &format!("{REPO}/commits/{SHA}/status"));
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].param("limit").as_deref(), Some("50"));

    // The failing job is rerun and passes: the context's newer status replaces it.
    fake.with_state(|s| {
        s.set_status(
            SHA,
            status_json(804, "ci / test (pull_request)", "success", ""),
        )
    });
    let ok = f
        .ci_report(&pr7(), SHA, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok.status, CiStatus::Passing);
    assert_eq!(ok.passing, 3);

    // A branch name as the ref, encoded as one path segment.
    fake.with_state(|s| s.set_status(SHA, status_json(805, "e2e", "pending", "")));
    let by_branch = f
        .ci_report(&pr7(), "feat/x", 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(by_branch.status, CiStatus::Pending);
    assert_eq!(by_branch.pending, 1);
    assert_eq!(
        fake.requests("GET", &format!("{REPO}/commits/feat%2Fx/status"))
            .len(),
        1
    );
}

#[test]
fn review_comments_come_from_counted_reviews_and_the_decision_from_the_latest() {
    let fake = with_pull();
    let f = scm(&fake);
    assert_eq!(
        f.review_decision(&pr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::None)
    );
    fake.with_state(|s| {
        s.set_reviews(7, array("reviews.json"));
        s.set_review_comments(61, array("review_comments.json"));
    });
    let got = f.review_comments(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
    // The request for changes' body and its unresolved code comment; the approval is not
    // read, and the bot's blank comment review has no body and no code comments.
    assert_eq!(ids, ["review-61", "901"]);
    let c = &got[1];
    assert_eq!(
        (c.file.as_str(), c.start_line, c.reviewer.as_str()),
        ("src/login.rs", 12, "alice")
    );
    assert!(!c.outdated && !c.from_bot && c.created_at_ms > 0);
    let review_reads: Vec<String> = fake
        .journal()
        .iter()
        .filter(|r| r.path.contains("/reviews/"))
        .map(|r| format!("{}?{}", r.path, r.query))
        .collect();
    // One request each, without paging: `repoGetPullReviewComments` declares no `page` or
    // `limit` (Gitea answers every comment of the review at once).
    assert_eq!(
        review_reads,
        [
            format!("{REPO}/pulls/7/reviews/61/comments?"),
            format!("{REPO}/pulls/7/reviews/63/comments?")
        ]
    );
    // One reviewer asks for changes, another approves: changes win.
    assert_eq!(
        f.review_decision(&pr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::ChangesRequested)
    );

    // A push after the review makes it stale: its comments are outdated.
    fake.with_state(|s| {
        let mut reviews = array("reviews.json");
        reviews[0]["stale"] = json!(true);
        s.set_reviews(7, reviews);
    });
    let stale = f.review_comments(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(stale.iter().any(|c| c.id == "901" && c.outdated));

    // Alice approves later: her latest review decides.
    fake.with_state(|s| {
        let mut reviews = array("reviews.json");
        let mut again = reviews[1].clone();
        again["id"] = json!(64);
        again["user"] = reviews[0]["user"].clone();
        reviews.push(again);
        s.set_reviews(7, reviews);
    });
    assert_eq!(
        f.review_decision(&pr7()).map_err(|e| e.kind),
        Ok(ReviewDecision::Approved)
    );
}

#[test]
fn the_pull_request_read_and_its_mergeability() {
    let fake = with_pull();
    let f = scm(&fake);
    let i = f.pull_request(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(i.open && !i.merged);
    assert_eq!(
        (i.mergeable, i.mergeable_state.as_str()),
        (Some(true), "clean")
    );
    assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), (SHA, "feat/x"));
    assert_eq!(i.url, format!("{}/owner/repo/pulls/7", fake.url));
    assert_eq!(i.labels, ["bug"]);
    let sent = fake.requests("GET", &format!("{REPO}/pulls/7"));
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("token {TOKEN}").as_str())
    );
    let reading = |key: &str, value: Value| {
        fake.with_state(|s| {
            s.add_pull(7, "feat/x", SHA, &["bug"]);
            s.set_pull(7, key, value);
        });
        let i = f.pull_request(&pr7()).unwrap_or_else(|e| panic!("{e}"));
        (i.mergeable, i.mergeable_state)
    };
    assert_eq!(
        reading("mergeable", json!(false)),
        (Some(false), "dirty".into())
    );
    assert_eq!(reading("draft", json!(true)), (None, "draft".into()));
    assert_eq!(
        reading("title", json!("WIP: Fix the login")),
        (None, "draft".into())
    );
    fake.with_state(|s| s.set_open(7, false));
    let closed = f.pull_request(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!closed.open && !closed.merged);
    assert_eq!(closed.mergeable_state, "closed");
}

#[test]
fn the_merge_is_guarded_by_the_head_and_sent_once() {
    let fake = with_pull();
    let f = scm(&fake);
    let path = format!("{REPO}/pulls/7/merge");
    assert_eq!(
        f.merge(&pr7(), MergeStrategy::Squash, "0000000"),
        Ok(MergeOutcome::HeadMoved)
    );
    fake.with_state(|s| s.set_pull(7, "draft", json!(true)));
    assert!(matches!(
        f.merge(&pr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::NotMergeable(_))
    ));
    fake.with_state(|s| {
        s.set_pull(7, "draft", json!(false));
        s.set_pull(7, "mergeable", json!(false));
    });
    assert!(matches!(
        f.merge(&pr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::NotMergeable(_))
    ));
    fake.push_fault(
        "POST",
        &path,
        Fault::Status(Reply::json(
            423,
            &json!({"message": "repository is archived"}),
        )),
    );
    assert!(matches!(
        f.merge(&pr7(), MergeStrategy::Squash, SHA),
        Ok(MergeOutcome::Refused(_))
    ));
    fake.push_fault("POST", &path, Fault::server_error(502));
    assert_eq!(
        f.merge(&pr7(), MergeStrategy::Squash, SHA)
            .map_err(|e| e.kind),
        Err(ScmErrorKind::Transport)
    );
    fake.with_state(|s| s.set_pull(7, "mergeable", json!(true)));
    fake.clear_journal();
    assert_eq!(
        f.merge(&pr7(), MergeStrategy::Rebase, SHA),
        Ok(MergeOutcome::Merged {
            sha: Some(MERGE_SHA.into())
        })
    );
    let sent = fake.requests("POST", &path);
    assert_eq!(sent.len(), 1, "a write is sent once");
    assert_eq!(
        sent[0].json(),
        json!({"do": "rebase", "head_commit_id": SHA, "delete_branch_after_merge": false})
    );
    let after = f.pull_request(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(after.merged && !after.open);
    assert_eq!(after.merge_commit_sha.as_deref(), Some(MERGE_SHA));
    // Merged already: not mergeable, and nothing is sent twice by the adapter.
    assert!(matches!(
        f.merge(&pr7(), MergeStrategy::Rebase, SHA),
        Ok(MergeOutcome::NotMergeable(_))
    ));
}

#[test]
fn the_head_branch_is_deleted_and_a_missing_one_is_fine() {
    let fake = with_pull();
    let f = scm(&fake);
    assert_eq!(f.delete_branch(&pr7(), "feat/x"), Ok(()));
    assert!(!fake.with_state(|s| s.branch_exists("feat/x")));
    // One encoded segment, as the description's `{branch}` is (Gitea routes `/branches/*`
    // and unescapes it, so either form names the branch).
    let path = format!("{REPO}/branches/feat%2Fx");
    assert_eq!(fake.requests("DELETE", &path).len(), 1);
    assert_eq!(f.delete_branch(&pr7(), "feat/x"), Ok(()));
    fake.push_fault("DELETE", &path, Fault::server_error(500));
    assert_eq!(
        f.delete_branch(&pr7(), "feat/x").map_err(|e| e.kind),
        Err(ScmErrorKind::Transport)
    );
    assert_eq!(
        f.delete_branch(&pr7(), " ").map_err(|e| e.kind),
        Err(ScmErrorKind::Payload)
    );
}

#[test]
fn label_events_come_from_the_timeline_and_labels_are_removed_by_id() {
    let fake = with_pull();
    let f = scm(&fake);
    fake.with_state(|s| {
        s.pr.timeline.insert(7, array("timeline.json"));
    });
    let got = f.label_events(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    let view: Vec<(&str, &str, bool)> = got
        .iter()
        .map(|e| (e.label.as_str(), e.actor.as_str(), e.added))
        .collect();
    assert_eq!(
        view,
        [("sortie:fix", "alice", true), ("backlog", "alice", false)]
    );
    assert!(got[0].created_at_ms < got[1].created_at_ms);

    fake.with_state(|s| s.set_labels(7, &["bug", "sortie:fix"]));
    let id = fake.with_state(|s| s.label("sortie:fix").map(|l| l["id"].clone()));
    assert_eq!(f.remove_label(&pr7(), "SORTIE:FIX"), Ok(()));
    let path = format!("{REPO}/issues/7/labels/{}", id.unwrap_or_default());
    assert_eq!(fake.requests("DELETE", &path).len(), 1);
    assert_eq!(fake.with_state(|s| s.labels(7)), ["bug"]);
    let events = f.label_events(&pr7()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        events
            .iter()
            .any(|e| e.label == "sortie:fix" && !e.added && e.actor == "sortie-bot")
    );
    // Absent: nothing sent, still fine.
    fake.clear_journal();
    assert_eq!(f.remove_label(&pr7(), "sortie:fix"), Ok(()));
    assert!(fake.journal().iter().all(|r| r.method == "GET"));
}

#[test]
fn faults_map_to_error_kinds_and_the_next_call_recovers() {
    let fake = with_pull();
    let f = scm(&fake);
    let path = format!("{REPO}/pulls/7");
    let cases = [
        (Fault::unauthorized(), ScmErrorKind::Auth),
        (Fault::too_many_requests(0), ScmErrorKind::RateLimited),
        (
            Fault::Status(Reply::json(404, &json!({"message": "not found"}))),
            ScmErrorKind::NotFound,
        ),
        (
            Fault::Status(Reply::json(410, &json!({"message": "gone"}))),
            ScmErrorKind::Api,
        ),
        (
            Fault::Status(Reply::json(200, &json!(["not", "an", "object"]))),
            ScmErrorKind::Payload,
        ),
        (
            Fault::Status(Reply::json(200, &json!({"title": "no number"}))),
            ScmErrorKind::Payload,
        ),
    ];
    fake.assert_read_faults(&path, cases.into(), || {
        f.pull_request(&pr7()).map(drop).map_err(|e| e.kind)
    });
    let unknown = PullRequestRef {
        number: 99,
        ..pr7()
    };
    let e = f.pull_request(&unknown).err();
    assert_eq!(e.as_ref().map(|e| e.kind), Some(ScmErrorKind::NotFound));
    let message = e.map(|e| e.message).unwrap_or_default();
    assert!(
        message.starts_with("gitea: ") && !message.contains(TOKEN),
        "{message}"
    );
}

#[test]
fn an_endpoint_and_a_token_are_required() {
    let fake = with_pull();
    let build = |s: ScmSettings| {
        registry::build_scm(&s, Arc::new(SystemClock))
            .err()
            .map(|e| e.to_string())
    };
    let e = build(settings(None)).unwrap_or_default();
    assert!(e.contains("endpoint"), "{e}");
    let e = build(settings(Some("ftp://gitea.example.com".into()))).unwrap_or_default();
    assert!(e.contains("http(s)"), "{e}");
    let mut no_token = settings(Some(fake.url.clone()));
    no_token.token = " ".into();
    let e = build(no_token).unwrap_or_default();
    assert!(e.contains("api_key"), "{e}");
    // An endpoint that already ends in the API root is used as it is.
    let rooted = settings(Some(format!("{}/api/v1", fake.url)));
    let f = registry::build_scm(&rooted, Arc::new(SystemClock)).unwrap_or_else(|e| panic!("{e}"));
    assert!(f.pull_request(&pr7()).is_ok());
}

/// The fake merges on what Gitea accepts: the style under `do` or, as Gitea's form decoding
/// ignores the key's case, `Do`; a missing or unknown style is 422. The `Do` request is also a
/// planted violation of the 1.27.1 description, which the vendor check reports in its words.
#[test]
fn the_fake_merges_on_do_in_either_case_and_the_check_reports_the_old_spelling() {
    let fake = with_pull();
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build(),
    );
    let merge = |body: &str| {
        agent
            .post(format!("{}{REPO}/pulls/7/merge", fake.url))
            .header("Authorization", format!("token {TOKEN}"))
            .header("Content-Type", "application/json")
            .send(body)
            .map(|r| r.status().as_u16())
            .ok()
    };
    assert_eq!(merge(r#"{"head_commit_id": "x"}"#), Some(422));
    assert_eq!(merge(r#"{"do": "sideways"}"#), Some(422));
    assert_eq!(
        merge(&format!(r#"{{"Do": "merge", "head_commit_id": "{SHA}"}}"#)),
        Some(200)
    );
    fake.with_state(|s| {
        s.set_pull(7, "merged", json!(false));
        s.set_open(7, true);
    });
    assert_eq!(
        merge(&format!(r#"{{"do": "merge", "head_commit_id": "{SHA}"}}"#)),
        Some(200)
    );
    if !fake.is_checked() {
        return;
    }
    let found = fake.vendor_violations().join("\n");
    assert!(
        found.contains("must have required property 'do'")
            && found.contains("repoMergePullRequest"),
        "{found}"
    );
    assert!(
        found.contains("must be equal to one of the allowed values"),
        "{found}"
    );
}
