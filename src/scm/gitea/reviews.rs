//! Review comments and the review decision from the pull request's reviews
//! (`GET /repos/R/pulls/{index}/reviews`, each counted review's
//! `…/reviews/{id}/comments`). A review counts when it requests changes and is not dismissed,
//! or when a bot account commented (review bots rarely request changes); its body is comment
//! `review-<id>` and its code comments follow. A code comment someone resolved is dealt with
//! and left out. Comments of a stale review (the pull request's head moved since it was
//! written) are marked outdated: Gitea's API has no per-comment flag, and a push after a
//! review is how the requested changes usually arrive.
//!
//! The decision: each reviewer's latest non-dismissed `APPROVED` or `REQUEST_CHANGES` review
//! counts; any request for changes wins, else any approval; a pending review request
//! (`REQUEST_REVIEW`) with no decisive review is review required; else none.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::api::{Api, epoch_ms, scm_error};
use crate::http_client::Request;
use crate::scm::{PullRequestRef, ReviewComment, ReviewDecision, ScmResult};

/// Pages of reviews read (50 each).
const REVIEW_PAGE_CAP: usize = 20;

fn login(v: &Value) -> String {
    v["user"]["login"].as_str().unwrap_or("").to_string()
}

/// Whether an author is a bot account: its login ends `[bot]` or `-bot`, as forge bots are
/// named (Gitea's user JSON marks no account as a bot).
pub fn is_bot(v: &Value) -> bool {
    let name = v["user"]["login"].as_str().unwrap_or("");
    name.ends_with("[bot]") || name.ends_with("-bot")
}

fn state(review: &Value) -> String {
    review["state"].as_str().unwrap_or("").to_ascii_uppercase()
}

/// Whether a review's comments are read.
pub fn review_counts(review: &Value) -> bool {
    if review["dismissed"].as_bool() == Some(true) {
        return false;
    }
    match state(review).as_str() {
        "REQUEST_CHANGES" => true,
        "COMMENT" => is_bot(review),
        _ => false,
    }
}

/// A counted review's own body as a comment; `None` when blank.
pub fn review_body(review: &Value) -> Option<ReviewComment> {
    ReviewComment::of_review(
        review["id"].as_u64().unwrap_or(0),
        login(review),
        review["body"].as_str().unwrap_or(""),
        is_bot(review),
        epoch_ms(&review["submitted_at"]),
    )
}

/// A code comment of a review; `None` when resolved or without an id. `position` is the line
/// in the new file, `original_position` the line in the old one (a comment on a removed line).
pub fn code_comment(c: &Value, stale: bool) -> Option<ReviewComment> {
    if c["resolver"].is_object() {
        return None;
    }
    let line = c["position"]
        .as_u64()
        .filter(|l| *l > 0)
        .or_else(|| c["original_position"].as_u64())
        .unwrap_or(0);
    Some(ReviewComment {
        id: c["id"].as_u64()?.to_string(),
        file: c["path"].as_str().unwrap_or("").to_string(),
        start_line: line,
        end_line: 0,
        reviewer: login(c),
        body: c["body"].as_str().unwrap_or("").to_string(),
        outdated: stale,
        from_bot: is_bot(c),
        created_at_ms: epoch_ms(&c["created_at"]),
    })
}

fn reviews(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<Value>> {
    let req = Request::get(format!("{}/reviews", Api::pull_path(pr)));
    api.list(req, REVIEW_PAGE_CAP, "reviews")
        .map_err(|e| scm_error(&e))
}

pub fn comments(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<ReviewComment>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for review in reviews(api, pr)?.iter().filter(|r| review_counts(r)) {
        if let Some(c) = review_body(review)
            && seen.insert(c.id.clone())
        {
            out.push(c);
        }
        let Some(id) = review["id"].as_u64() else {
            continue;
        };
        let code = review_comments(api, pr, id)?;
        let stale = review["stale"].as_bool() == Some(true);
        for c in code.iter().filter_map(|c| code_comment(c, stale)) {
            if seen.insert(c.id.clone()) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// A review's code comments. `repoGetPullReviewComments` is not paged (it declares no `page` or
/// `limit`, and Gitea answers every comment of the review at once), so it is one request.
fn review_comments(api: &Api, pr: &PullRequestRef, id: u64) -> ScmResult<Vec<Value>> {
    let req = Request::get(format!("{}/reviews/{id}/comments", Api::pull_path(pr)));
    api.send(req)
        .and_then(|r| r.json_array())
        .map_err(|e| scm_error(&e))
}

/// The decision over reviews listed oldest first.
pub fn decision_of(reviews: &[Value]) -> ReviewDecision {
    let mut latest: HashMap<String, String> = HashMap::new();
    let mut requested = false;
    for r in reviews {
        if r["dismissed"].as_bool() == Some(true) {
            continue;
        }
        match state(r).as_str() {
            s @ ("APPROVED" | "REQUEST_CHANGES") => {
                latest.insert(login(r), s.to_string());
            }
            "REQUEST_REVIEW" => requested = true,
            _ => {}
        }
    }
    if latest.values().any(|s| s == "REQUEST_CHANGES") {
        ReviewDecision::ChangesRequested
    } else if !latest.is_empty() {
        ReviewDecision::Approved
    } else if requested {
        ReviewDecision::ReviewRequired
    } else {
        ReviewDecision::None
    }
}

pub fn decision(api: &Api, pr: &PullRequestRef) -> ScmResult<ReviewDecision> {
    Ok(decision_of(&reviews(api, pr)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(id: u64, who: &str, state: &str) -> Value {
        json!({"id": id, "user": {"login": who}, "state": state, "body": "",
            "stale": false, "dismissed": false})
    }

    #[test]
    fn the_latest_decisive_review_of_each_reviewer_decides() {
        assert_eq!(decision_of(&[]), ReviewDecision::None);
        assert_eq!(
            decision_of(&[review(1, "ann", "REQUEST_REVIEW")]),
            ReviewDecision::ReviewRequired
        );
        let changed_mind = [
            review(1, "ann", "REQUEST_CHANGES"),
            review(2, "ann", "APPROVED"),
        ];
        assert_eq!(decision_of(&changed_mind), ReviewDecision::Approved);
        let split = [
            review(1, "ann", "APPROVED"),
            review(2, "bo", "REQUEST_CHANGES"),
        ];
        assert_eq!(decision_of(&split), ReviewDecision::ChangesRequested);
        let mut dismissed = review(3, "bo", "REQUEST_CHANGES");
        dismissed["dismissed"] = json!(true);
        assert_eq!(
            decision_of(&[review(1, "ann", "APPROVED"), dismissed.clone()]),
            ReviewDecision::Approved
        );
        assert!(!review_counts(&dismissed));
        assert_eq!(
            decision_of(&[review(1, "ann", "COMMENT")]),
            ReviewDecision::None
        );
    }

    #[test]
    fn code_comments_skip_resolved_ones_and_follow_staleness() {
        let c = json!({"id": 41, "path": "src/a.rs", "position": 12, "original_position": 0,
            "body": "rename", "user": {"login": "ann"}, "resolver": null,
            "created_at": "2026-04-01T10:00:00Z"});
        let got = code_comment(&c, false).unwrap_or_else(|| panic!("a comment"));
        assert_eq!((got.id.as_str(), got.file.as_str()), ("41", "src/a.rs"));
        assert_eq!((got.start_line, got.outdated), (12, false));
        assert!(code_comment(&c, true).is_some_and(|c| c.outdated));
        let mut old_side = c.clone();
        old_side["position"] = json!(0);
        old_side["original_position"] = json!(7);
        assert_eq!(
            code_comment(&old_side, false).map(|c| c.start_line),
            Some(7)
        );
        let mut resolved = c.clone();
        resolved["resolver"] = json!({"login": "bo"});
        assert!(code_comment(&resolved, false).is_none());
        assert!(is_bot(&json!({"user": {"login": "renovate[bot]"}})));
        assert!(!is_bot(&json!({"user": {"login": "robotics"}})));
        let mut bot_comment = review(5, "review-bot", "COMMENT");
        assert!(review_counts(&bot_comment));
        bot_comment["user"]["login"] = json!("ann");
        assert!(!review_counts(&bot_comment));
    }
}
