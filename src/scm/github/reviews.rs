//! Review comments and the review decision. Reviews that request changes give their body (as
//! comment `review-<id>`) and their inline comments; bot accounts' reviews also count when they
//! only comment, since review bots rarely request changes. Bot authors are kept and flagged:
//! which ones count as bot review is the reaction's decision.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::api::Api;
use super::error::{own, scm_error};
use crate::http_client::Request;
use crate::scm::{PullRequestRef, ReviewComment, ReviewDecision, ScmErrorKind, ScmResult};

/// Pages of reviews, and of each review's comments, read (100 each).
const REVIEW_PAGE_CAP: usize = 20;

const DECISION_QUERY: &str = "query($owner: String!, $repo: String!, $number: Int!) { repository(owner: $owner, name: $repo) { pullRequest(number: $number) { reviewDecision } } }";

fn is_bot(v: &Value) -> bool {
    v["user"]["type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("bot"))
}

fn login(v: &Value) -> String {
    v["user"]["login"].as_str().unwrap_or("").to_string()
}

use crate::clock::epoch_ms_of as epoch_ms;

/// Whether a review's comments are read: it requests changes, or a bot commented.
pub fn review_counts(review: &Value) -> bool {
    match review["state"]
        .as_str()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        Some("CHANGES_REQUESTED") => true,
        Some("COMMENTED") => is_bot(review),
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

/// An inline comment: `start = start_line ?? line`, `end = line` when it differs, outdated
/// when GitHub no longer places it in the diff (`position: null`).
pub fn inline_comment(c: &Value) -> ReviewComment {
    let line = c["line"].as_u64();
    let start = c["start_line"].as_u64().or(line).unwrap_or(0);
    let end = line.filter(|l| *l != start).unwrap_or(0);
    ReviewComment {
        id: c["id"].as_u64().map_or_else(String::new, |i| i.to_string()),
        file: c["path"].as_str().unwrap_or("").to_string(),
        start_line: start,
        end_line: end,
        reviewer: login(c),
        body: c["body"].as_str().unwrap_or("").to_string(),
        outdated: c["position"].is_null(),
        from_bot: is_bot(c),
        created_at_ms: epoch_ms(&c["created_at"]),
    }
}

fn array(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) => Some(items),
        _ => None,
    }
}

pub fn comments(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<ReviewComment>> {
    let pulls = format!("{}/pulls/{}", Api::repo_path(pr), pr.number);
    let reviews = api
        .list(
            Request::get(format!("{pulls}/reviews")),
            REVIEW_PAGE_CAP,
            "reviews",
            array,
        )
        .map_err(|e| scm_error(&e))?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for review in reviews.iter().filter(|r| review_counts(r)) {
        if let Some(c) = review_body(review)
            && seen.insert(c.id.clone())
        {
            out.push(c);
        }
        let Some(id) = review["id"].as_u64() else {
            continue;
        };
        let inline = api
            .list(
                Request::get(format!("{pulls}/reviews/{id}/comments")),
                REVIEW_PAGE_CAP,
                "review comments",
                array,
            )
            .map_err(|e| scm_error(&e))?;
        for c in inline.iter().map(inline_comment) {
            if !c.id.is_empty() && seen.insert(c.id.clone()) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// The decision word as GitHub's GraphQL API gives it.
pub fn decision_of(word: Option<&str>) -> ReviewDecision {
    match word {
        Some("APPROVED") => ReviewDecision::Approved,
        Some("CHANGES_REQUESTED") => ReviewDecision::ChangesRequested,
        Some("REVIEW_REQUIRED") => ReviewDecision::ReviewRequired,
        _ => ReviewDecision::None,
    }
}

pub fn decision(api: &Api, pr: &PullRequestRef) -> ScmResult<ReviewDecision> {
    let vars = json!({"owner": pr.owner, "repo": pr.repo, "number": pr.number});
    let data = api
        .graphql(DECISION_QUERY, vars)
        .map_err(|e| scm_error(&e))?;
    let pull = &data["repository"]["pullRequest"];
    if !pull.is_object() {
        return Err(own(
            ScmErrorKind::NotFound,
            format!("pull request {}#{} not found", pr.repository(), pr.number),
        ));
    }
    Ok(decision_of(pull["reviewDecision"].as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<Value> {
        let path = format!(
            "{}/tests/fixtures/github/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn which_reviews_count_and_their_bodies() {
        assert!(!review_counts(&fixture("reviews_approved.json")[0]));
        let with = &fixture("reviews_changes_requested_with_body.json")[0];
        assert!(review_counts(with));
        let body = review_body(with).unwrap_or_else(|| panic!("a body"));
        assert_eq!(body.id, "review-10");
        assert_eq!((body.reviewer.as_str(), body.from_bot), ("alice", false));
        assert_eq!(body.body, "Please fix these issues before merging.");
        assert!(body.created_at_ms > 0);
        let none = &fixture("reviews_changes_requested_no_body.json")[0];
        assert!(review_counts(none) && review_body(none).is_none());
        let bot = &fixture("reviews_bot.json")[0];
        assert!(review_counts(bot));
        assert_eq!(review_body(bot).map(|b| b.from_bot), Some(true));
        let commented = json!({"id": 5, "state": "COMMENTED", "body": "nit", "user": {"login": "al", "type": "User"}});
        assert!(!review_counts(&commented));
        let bot_commented = json!({"id": 6, "state": "COMMENTED", "body": "x", "user": {"login": "b[bot]", "type": "Bot"}});
        assert!(review_counts(&bot_commented));
    }

    #[test]
    fn inline_comments_lines_and_outdated_flag() {
        let c = inline_comment(&fixture("comments_inline.json")[0]);
        assert_eq!(
            (c.id.as_str(), c.file.as_str()),
            ("100", "internal/handler.go")
        );
        assert_eq!((c.start_line, c.end_line, c.outdated), (10, 12, false));
        let o = inline_comment(&fixture("comments_outdated.json")[0]);
        assert_eq!((o.start_line, o.end_line, o.outdated), (5, 0, true));
        let p = inline_comment(&fixture("comments_page1.json")[0]);
        assert_eq!((p.start_line, p.end_line), (20, 0));
        let same = inline_comment(&json!({"id": 1, "start_line": 7, "line": 7, "position": 1}));
        assert_eq!((same.start_line, same.end_line), (7, 0));
    }

    #[test]
    fn decision_words() {
        assert_eq!(decision_of(Some("APPROVED")), ReviewDecision::Approved);
        assert_eq!(
            decision_of(Some("CHANGES_REQUESTED")),
            ReviewDecision::ChangesRequested
        );
        assert_eq!(
            decision_of(Some("REVIEW_REQUIRED")),
            ReviewDecision::ReviewRequired
        );
        assert_eq!(decision_of(None), ReviewDecision::None);
    }
}
