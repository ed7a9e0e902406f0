//! GitHub JSON → the tracker-neutral [`Issue`] and [`Comment`].

use serde_json::Value;

use crate::domain::{BlockerRef, BlockersRead, Comment, Issue, IssueRef};
use crate::tracker::label_state::StateWords;

/// Pull requests come back from the issues endpoints too; they are never work items here.
pub fn is_pull_request(v: &Value) -> bool {
    !v.get("pull_request").is_none_or(Value::is_null)
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The issue number as text; `None` when missing.
pub fn number(v: &Value) -> Option<String> {
    v.get("number")
        .and_then(Value::as_u64)
        .map(|n| n.to_string())
}

fn labels(v: &Value) -> Vec<String> {
    v.get("labels")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l.get("name").and_then(Value::as_str).or_else(|| l.as_str()))
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default()
}

/// The state an issue is in, per the label rules.
pub fn state(v: &Value, words: &StateWords) -> String {
    words.state_of(&labels(v), &text(v, "state"))
}

/// One issue; `None` for items without a number (not an issue). Comments are not fetched.
pub fn issue(v: &Value, words: &StateWords, full_name: &str) -> Option<Issue> {
    let n = number(v)?;
    Some(Issue {
        id: n.clone(),
        identifier: n.clone(),
        display_identifier: format!("{full_name}#{n}"),
        title: text(v, "title"),
        description: text(v, "body"),
        state: state(v, words),
        priority: None,
        branch_name: String::new(),
        url: text(v, "html_url"),
        assignee: v
            .pointer("/assignees/0/login")
            .or_else(|| v.pointer("/assignee/login"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        issue_type: v
            .pointer("/type/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        labels: labels(v),
        parent: None,
        comments: None,
        blocked_by: Vec::new(),
        blockers_read: blockers_read(v),
        created_at: text(v, "created_at"),
        updated_at: text(v, "updated_at"),
    })
}

/// An issue payload lists no blockers, only, when GitHub sends it,
/// `issue_dependencies_summary`: a zero count proves there are none (`Complete` with an empty
/// list, no read needed); anything else leaves the list for a separate read (`Unread`).
/// `total_blocked_by` counts closed blockers too (a closed issue can still carry an active
/// state label, which blocks), so it is the proof when present; `blocked_by` (open ones) when
/// it is the only count.
pub fn blockers_read(v: &Value) -> BlockersRead {
    let summary = v.get("issue_dependencies_summary");
    let count = summary
        .and_then(|s| s.get("total_blocked_by"))
        .or_else(|| summary.and_then(|s| s.get("blocked_by")))
        .and_then(Value::as_u64);
    if count == Some(0) {
        BlockersRead::Complete
    } else {
        BlockersRead::Unread
    }
}

/// A blocking issue as a reference with its current state.
pub fn blocker(v: &Value, words: &StateWords) -> Option<BlockerRef> {
    let n = number(v)?;
    Some(BlockerRef {
        id: n.clone(),
        identifier: n,
        state: state(v, words),
    })
}

/// A parent issue as a reference (id = identifier = number).
pub fn parent(v: &Value) -> Option<IssueRef> {
    let n = number(v)?;
    Some(IssueRef {
        id: n.clone(),
        identifier: n,
    })
}

pub fn comment(v: &Value) -> Comment {
    Comment {
        id: match v.get("id") {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        },
        author: v
            .pointer("/user/login")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        body: text(v, "body"),
        created_at: text(v, "created_at"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> StateWords {
        StateWords {
            active: vec!["backlog".into(), "in-progress".into()],
            terminal: vec!["done".into()],
            handoff: None,
        }
    }

    #[test]
    fn only_a_zero_dependency_count_proves_an_issue_unblocked() {
        use serde_json::json;
        let read = |v: Value| blockers_read(&v);
        assert_eq!(read(json!({"number": 1})), BlockersRead::Unread);
        assert_eq!(
            read(json!({"issue_dependencies_summary": {"blocked_by": 0}})),
            BlockersRead::Complete
        );
        assert_eq!(
            read(json!({"issue_dependencies_summary": {"blocked_by": 2}})),
            BlockersRead::Unread
        );
        // Closed blockers count too when GitHub says how many there are.
        assert_eq!(
            read(json!({"issue_dependencies_summary": {"blocked_by": 0, "total_blocked_by": 1}})),
            BlockersRead::Unread
        );
        assert_eq!(
            read(json!({"issue_dependencies_summary": {"blocked_by": 0, "total_blocked_by": 0}})),
            BlockersRead::Complete
        );
    }

    #[test]
    fn an_issue_maps_to_the_neutral_shape() {
        let v = serde_json::json!({
            "id": 100, "number": 3, "title": "T", "body": null, "state": "open",
            "html_url": "https://github.com/o/r/issues/3",
            "labels": [{"name": "In-Progress"}, {"name": "bug"}],
            "assignees": [{"login": "bob"}], "type": {"name": "Bug"}, "pull_request": null,
            "created_at": "2026-01-02T00:00:00Z", "updated_at": "2026-01-03T00:00:00Z"
        });
        let i = issue(&v, &words(), "o/r").unwrap_or_else(|| panic!("no issue"));
        assert_eq!((i.id.as_str(), i.identifier.as_str()), ("3", "3"));
        assert_eq!(i.display_identifier, "o/r#3");
        assert_eq!(i.state, "in-progress");
        assert_eq!(i.labels, ["in-progress", "bug"]);
        assert_eq!((i.assignee.as_str(), i.issue_type.as_str()), ("bob", "Bug"));
        assert_eq!(i.description, "");
        assert!(!is_pull_request(&v));
        assert!(is_pull_request(&serde_json::json!({"pull_request": {}})));
    }

    #[test]
    fn comment_ids_become_strings() {
        let c = comment(
            &serde_json::json!({"id": 9001, "user": {"login": "alice"}, "body": "hi", "created_at": "x"}),
        );
        assert_eq!(
            (c.id.as_str(), c.author.as_str(), c.body.as_str()),
            ("9001", "alice", "hi")
        );
    }
}
