//! Gitea JSON → the tracker-neutral [`Issue`] and [`Comment`]. Field names follow the
//! `Issue` and `Comment` models of the Gitea API (<https://docs.gitea.com/api/1.22/>).

use serde_json::Value;

use crate::domain::{BlockerRef, BlockersRead, Comment, Issue};
use crate::tracker::label_state::StateWords;

/// Pull requests share the issue numbers and endpoints; they are never work items here.
pub fn is_pull_request(v: &Value) -> bool {
    !v.get("pull_request").is_none_or(Value::is_null)
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The issue number (`number`, the per-repository index) as text; `None` when missing.
pub fn number(v: &Value) -> Option<String> {
    v.get("number")
        .and_then(Value::as_u64)
        .map(|n| n.to_string())
}

/// The issue's labels as `(name as given, id)`.
pub fn label_entries(v: &Value) -> Vec<(String, Option<u64>)> {
    v.get("labels")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .filter_map(|l| {
                    let name = l.get("name").and_then(Value::as_str)?;
                    Some((name.to_string(), l.get("id").and_then(Value::as_u64)))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn labels(v: &Value) -> Vec<String> {
    label_entries(v)
        .into_iter()
        .map(|(n, _)| n.to_lowercase())
        .collect()
}

/// The state an issue is in, per the label rules.
pub fn state(v: &Value, words: &StateWords) -> String {
    words.state_of(&labels(v), &text(v, "state"))
}

/// The branch an issue names (`ref`, e.g. `refs/heads/fix-1`), without `refs/heads/`.
fn branch(v: &Value) -> String {
    let r = text(v, "ref");
    r.strip_prefix("refs/heads/").unwrap_or(&r).to_string()
}

/// One issue; `None` for items without a number. Comments and blockers are not read: the
/// issue payload carries neither, so blockers are left for their own read (`Unread`).
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
        branch_name: branch(v),
        url: text(v, "html_url"),
        assignee: v
            .pointer("/assignees/0/login")
            .or_else(|| v.pointer("/assignee/login"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        issue_type: String::new(),
        labels: labels(v),
        parent: None,
        comments: None,
        blocked_by: Vec::new(),
        blockers_read: BlockersRead::Unread,
        created_at: text(v, "created_at"),
        updated_at: text(v, "updated_at"),
    })
}

/// An issue this one depends on, with its current state.
pub fn blocker(v: &Value, words: &StateWords) -> Option<BlockerRef> {
    let n = number(v)?;
    Some(BlockerRef {
        id: n.clone(),
        identifier: n,
        state: state(v, words),
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
            handoff: Some("review".into()),
        }
    }

    #[test]
    fn an_issue_maps_labels_branch_and_assignee() {
        let v = serde_json::json!({
            "id": 77, "number": 4, "title": "T", "body": null, "state": "open",
            "ref": "refs/heads/fix-4", "html_url": "https://g/o/r/issues/4",
            "labels": [{"id": 3, "name": "In-Progress"}, {"id": 9, "name": "kind/bug"}],
            "assignee": {"login": "bob"}, "assignees": null, "pull_request": null,
            "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-03T00:00:00Z"
        });
        let i = issue(&v, &words(), "o/r").unwrap_or_else(|| panic!("no issue"));
        assert_eq!(
            (i.id.as_str(), i.display_identifier.as_str()),
            ("4", "o/r#4")
        );
        assert_eq!(i.state, "in-progress");
        assert_eq!(i.labels, ["in-progress", "kind/bug"]);
        assert_eq!(
            (i.branch_name.as_str(), i.assignee.as_str()),
            ("fix-4", "bob")
        );
        assert_eq!(i.description, "");
        assert_eq!(label_entries(&v)[0], ("In-Progress".to_string(), Some(3)));
        assert!(!is_pull_request(&v));
        assert!(is_pull_request(
            &serde_json::json!({"pull_request": {"merged": false}})
        ));
        let c = comment(
            &serde_json::json!({"id": 12, "user": {"login": "al"}, "body": "b", "created_at": "x"}),
        );
        assert_eq!((c.id.as_str(), c.author.as_str()), ("12", "al"));
    }
}
