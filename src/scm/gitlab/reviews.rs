//! Review comments and the review decision. The comments are the unresolved, resolvable notes
//! of the merge request's discussions (system notes skipped); a diff note gives its file and
//! line. Bot accounts are kept and flagged (`author.bot`, or GitLab's access-token bot names
//! `project_<id>_bot…` / `group_<id>_bot…`): which ones count is the reaction's decision.
//!
//! No comment is marked outdated: GitLab's REST notes carry no such flag, and a diff note's
//! `position` names the diff version it was written on, not whether its line changed since;
//! resolving the discussion is how GitLab says a comment was dealt with, so the unresolved
//! ones are the ones acted on, before and after a push.
//!
//! The decision: a reviewer whose state is `requested_changes`
//! (<https://docs.gitlab.com/api/merge_requests/#get-single-merge-request-reviewers>, GitLab
//! 17) makes it `ChangesRequested`; otherwise the approvals answer
//! (<https://docs.gitlab.com/api/merge_request_approvals/>) decides. An instance without the
//! reviewers' states (404, or no `state` member) is read from approvals alone.

use std::collections::HashSet;

use serde_json::Value;

use super::api::{Api, epoch_ms};
use super::error::scm_error;
use crate::http_client::Request;
use crate::scm::{PullRequestRef, ReviewComment, ReviewDecision, ScmResult};

/// Pages of discussions read (100 each).
const DISCUSSION_PAGE_CAP: usize = 20;

/// Whether a note's author is a bot account.
pub fn is_bot(author: &Value) -> bool {
    if author["bot"].as_bool() == Some(true) {
        return true;
    }
    let name = author["username"].as_str().unwrap_or("");
    let token_bot =
        (name.starts_with("project_") || name.starts_with("group_")) && name.contains("_bot");
    token_bot || name.ends_with("[bot]") || name.ends_with("-bot")
}

/// A note as a review comment; `None` for a system note or one that is resolved or not
/// resolvable.
pub fn note_comment(n: &Value) -> Option<ReviewComment> {
    if n["system"].as_bool() == Some(true)
        || n["resolvable"].as_bool() != Some(true)
        || n["resolved"].as_bool() == Some(true)
    {
        return None;
    }
    let pos = &n["position"];
    let start = pos["new_line"]
        .as_u64()
        .or_else(|| pos["old_line"].as_u64())
        .unwrap_or(0);
    let end = pos["line_range"]["end"]["new_line"]
        .as_u64()
        .filter(|l| *l != start)
        .unwrap_or(0);
    Some(ReviewComment {
        id: n["id"].as_u64()?.to_string(),
        file: pos["new_path"]
            .as_str()
            .or_else(|| pos["old_path"].as_str())
            .unwrap_or("")
            .to_string(),
        start_line: start,
        end_line: end,
        reviewer: n["author"]["username"].as_str().unwrap_or("").to_string(),
        body: n["body"].as_str().unwrap_or("").to_string(),
        outdated: false,
        from_bot: is_bot(&n["author"]),
        created_at_ms: epoch_ms(&n["created_at"]),
    })
}

pub fn comments(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<ReviewComment>> {
    let req = Request::get(format!("{}/discussions", Api::mr_path(pr)));
    let discussions = api
        .list(req, DISCUSSION_PAGE_CAP, "discussions")
        .map_err(|e| scm_error(&e))?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for d in &discussions {
        for c in d["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(note_comment)
        {
            if seen.insert(c.id.clone()) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// The decision from an approvals answer, read from the fields GitLab's description gives it:
/// `approved` decides; otherwise approvals still owed are review required. What is owed is
/// `approvals_left` where the answer has it, else `approvals_required` (GitLab Premium) less
/// the approvals in `approved_by`; an answer with neither (GitLab Free) owes none.
pub fn decision_of(v: &Value) -> ReviewDecision {
    if v["approved"].as_bool() == Some(true) {
        return ReviewDecision::Approved;
    }
    let given = v["approved_by"].as_array().map_or(0, Vec::len) as u64;
    let left = v["approvals_left"].as_u64().or_else(|| {
        v["approvals_required"]
            .as_u64()
            .map(|n| n.saturating_sub(given))
    });
    if left.is_some_and(|n| n > 0) {
        ReviewDecision::ReviewRequired
    } else {
        ReviewDecision::None
    }
}

/// Whether a reviewers answer has a reviewer asking for changes.
pub fn changes_requested(reviewers: &[Value]) -> bool {
    reviewers
        .iter()
        .any(|r| r["state"].as_str() == Some("requested_changes"))
}

pub fn decision(api: &Api, pr: &PullRequestRef) -> ScmResult<ReviewDecision> {
    // "Get single merge request reviewers" is not paged: one request for every reviewer.
    let req = Request::get(format!("{}/reviewers", Api::mr_path(pr)));
    match api.send(req).and_then(|r| r.json_array()) {
        Ok(reviewers) if changes_requested(&reviewers) => {
            return Ok(ReviewDecision::ChangesRequested);
        }
        Ok(_) => {}
        Err(e) if e.status == Some(404) => {}
        Err(e) => return Err(scm_error(&e)),
    }
    let v = api
        .get_object(Request::get(format!("{}/approvals", Api::mr_path(pr))))
        .map_err(|e| scm_error(&e))?;
    Ok(decision_of(&v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unresolved_diff_notes_become_comments() {
        let n = json!({"id": 301, "type": "DiffNote", "body": "rename this", "system": false,
            "resolvable": true, "resolved": false, "created_at": "2026-04-01T10:00:00.000Z",
            "author": {"username": "alice"},
            "position": {"new_path": "src/a.rs", "new_line": 12, "old_line": null,
                "line_range": {"start": {"new_line": 12}, "end": {"new_line": 15}}}});
        let c = note_comment(&n).unwrap_or_else(|| panic!("a comment"));
        assert_eq!((c.id.as_str(), c.file.as_str()), ("301", "src/a.rs"));
        assert_eq!((c.start_line, c.end_line, c.from_bot), (12, 15, false));
        let mut resolved = n.clone();
        resolved["resolved"] = json!(true);
        assert!(note_comment(&resolved).is_none());
        let mut system = n.clone();
        system["system"] = json!(true);
        assert!(note_comment(&system).is_none());
        assert!(is_bot(&json!({"username": "project_42_bot_3f2a"})));
        assert!(is_bot(&json!({"username": "x", "bot": true})));
        assert!(!is_bot(&json!({"username": "robotics"})));
    }

    #[test]
    fn approvals_give_the_decision() {
        assert_eq!(
            decision_of(&json!({"approved": true, "approvals_left": 0})),
            ReviewDecision::Approved
        );
        assert_eq!(
            decision_of(&json!({"approved": false, "approvals_left": 1})),
            ReviewDecision::ReviewRequired
        );
        assert_eq!(decision_of(&json!({})), ReviewDecision::None);
        // Without `approvals_left`: what is required, less who approved.
        let owed = |required: u64, by: usize| {
            let approvers: Vec<Value> = (0..by).map(|i| json!({"user": {"id": i}})).collect();
            decision_of(&json!({"approved": false, "approvals_required": required,
                "approved_by": approvers}))
        };
        assert_eq!(owed(2, 1), ReviewDecision::ReviewRequired);
        assert_eq!(owed(1, 1), ReviewDecision::None);
        // GitLab Free: `approved` and `approved_by` only.
        assert_eq!(
            decision_of(&json!({"approved": false, "approved_by": [],
                "user_has_approved": false, "user_can_approve": true})),
            ReviewDecision::None
        );
    }

    #[test]
    fn a_reviewer_requesting_changes_is_seen() {
        let r = |state: &str| json!({"user": {"username": "bo"}, "state": state});
        assert!(changes_requested(&[r("approved"), r("requested_changes")]));
        assert!(!changes_requested(&[r("unreviewed"), r("reviewed")]));
        assert!(!changes_requested(&[json!({"user": {"username": "old"}})]));
        assert!(!changes_requested(&[]));
    }
}
