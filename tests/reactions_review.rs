//! Review comments through the real binary and the fake forge: comments are debounced, bot
//! and outdated comments are filtered, one review-fix run is dispatched per new comment set
//! carrying exactly those comments, and a request to check now answers as the reference says.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, review_comment_json, review_json};
use common::reactions::{LABELS, PR, ReactionProject, idle, row};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str = "  review_comments:\n    provider: github\n    debounce_ms: 3000\n    poll_interval_ms: 30000\n    max_continuation_turns: 2\n";

fn now_rfc3339() -> String {
    sortie::clock::now_rfc3339()
}

fn comment(
    fake: &FakeGithub,
    review: u64,
    id: u64,
    login: &str,
    bot: bool,
    outdated: bool,
    fresh: bool,
) {
    let mut c = review_comment_json(
        id,
        "src/export.rs",
        Some(10),
        Some(12),
        (!outdated).then_some(5),
        &format!("please fix {id}"),
        login,
        bot,
    );
    if fresh {
        c["created_at"] = now_rfc3339().into();
    }
    fake.with_state(|s| s.add_review_comment(PR, review, c));
}

#[test]
fn review_comments_are_debounced_filtered_and_answered_once_per_new_set() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
    });
    let p = ReactionProject::new(&fake, REACTIONS);
    let d = p.start();
    d.wait_state("the review row watching", WAIT, |s| {
        row(s, "review").is_some_and(|r| r["wait"] == "poll_interval")
    });

    // Reviews arrive; the newest actionable comment is fresh, so the check brought forward
    // waits out the debounce.
    fake.with_state(|s| {
        s.add_review(
            PR,
            review_json(100, "CHANGES_REQUESTED", "", "alice", false),
        );
        s.add_review(PR, review_json(200, "COMMENTED", "", "lint-bot", true));
    });
    comment(&fake, 100, 1001, "alice", false, false, true);
    comment(&fake, 100, 1002, "alice", false, true, false);
    comment(&fake, 200, 1003, "lint-bot", true, false, false);
    assert_eq!(d.post("/api/v1/reactions/1/review/check").status, 202);
    let s = d.wait_state("the review row debouncing", WAIT, |s| {
        row(s, "review").is_some_and(|r| r["wait"] == "debounce")
    });
    let r = row(&s, "review").unwrap_or_default();
    assert_eq!(r["last_check"]["actionable_comments"], 1, "{r}");
    assert_eq!(r["last_check"]["new_comments"], 1, "{r}");
    assert_eq!(
        p.prompts().len(),
        1,
        "no fix run inside the debounce window"
    );

    // The brought-forward check kept the scheduled time; once the quiet time has passed, a
    // second request makes the check that dispatches the fix.
    let quiet = std::time::SystemTime::now() + Duration::from_millis(3_100);
    d.wait_until("the debounce window over", WAIT, || {
        std::time::SystemTime::now() >= quiet
    });
    assert_eq!(d.post("/api/v1/reactions/1/review/check").status, 202);
    d.wait_until("the review-fix run", WAIT, || p.prompts().len() >= 2);
    let fix = &p.prompts()[1];
    assert!(
        fix.contains("REVIEW 1001 by alice on src/export.rs:10: please fix 1001"),
        "{fix}"
    );
    assert!(!fix.contains("1002") && !fix.contains("1003"), "{fix}");
    let s = d.wait_state("the fix handed off", WAIT, |s| {
        idle(s) && row(s, "review").is_some_and(|r| r["used_attempts"] == 1)
    });
    let r = row(&s, "review").unwrap_or_default();
    assert_eq!(r["max_attempts"], 2, "{r}");

    // Checking again finds nothing new: no run.
    let before = fake
        .requests("GET", &format!("/repos/owner/repo/pulls/{PR}/reviews"))
        .len();
    let ok = d.post("/api/v1/reactions/1/review/check");
    assert_eq!(ok.status, 202, "{}", ok.body);
    let body = ok.json();
    assert_eq!(body["queued"], true, "{body}");
    assert_eq!(body["kind"], "review", "{body}");
    assert_eq!(body["pull_request"]["number"], PR, "{body}");
    assert_eq!(body["pull_request"]["repository"], "owner/repo", "{body}");
    d.wait_until("the brought-forward check", WAIT, || {
        fake.requests("GET", &format!("/repos/owner/repo/pulls/{PR}/reviews"))
            .len()
            > before
    });
    let s = d.wait_state("the check done", WAIT, |s| {
        row(s, "review").is_some_and(|r| r["wait"] == "poll_interval")
    });
    assert_eq!(p.prompts().len(), 2, "{s}");

    // A new comment set gets its own run, carrying only the new comment.
    comment(&fake, 100, 1004, "bob", false, false, false);
    assert_eq!(d.post("/api/v1/reactions/1/review/check").status, 202);
    d.wait_until("the second review-fix run", WAIT, || p.prompts().len() >= 3);
    let fix = &p.prompts()[2];
    assert!(fix.contains("REVIEW 1004 by bob"), "{fix}");
    assert!(!fix.contains("REVIEW 1001"), "{fix}");

    // The route's refusals.
    let missing = d.post("/api/v1/reactions/1/ci/check");
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(missing.json()["error"]["code"], "reaction_not_found");
    assert_eq!(d.post("/api/v1/reactions/1/bogus/check").status, 404);
}
