//! GitLab JSON → the tracker-neutral [`Issue`] and [`Comment`]. Shapes per
//! <https://docs.gitlab.com/ee/api/issues.html> (issue: `iid`, `state` `opened`/`closed`,
//! `labels` as strings, `web_url`, `references.full`), <https://docs.gitlab.com/ee/api/notes.html>
//! (note: `id`, `body`, `author.username`, `system`) and
//! <https://docs.gitlab.com/ee/api/issue_links.html> (an issue plus `link_type`).

use serde_json::Value;

use crate::domain::{BlockerRef, BlockersRead, Comment, Issue};
use crate::tracker::label_state::StateWords;

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The project-scoped issue number (`iid`) as text; `None` when missing.
pub fn iid(v: &Value) -> Option<String> {
    match v.get("iid") {
        Some(Value::Number(n)) => n.as_u64().map(|n| n.to_string()),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(s.clone())
        }
        _ => None,
    }
}

/// Label names, lowercased. Lists answer plain strings; `with_labels_details=true` answers
/// objects with `name`, so both are read.
pub fn labels(v: &Value) -> Vec<String> {
    v.get("labels")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name").and_then(Value::as_str)))
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default()
}

/// The state an issue is in, per the label rules.
pub fn state(v: &Value, words: &StateWords) -> String {
    words.state_of(&labels(v), &text(v, "state"))
}

/// One issue; `None` for items without an `iid`. Comments and blockers are not read here.
pub fn issue(v: &Value, words: &StateWords, project: &str) -> Option<Issue> {
    let n = iid(v)?;
    let display = v
        .pointer("/references/full")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map_or_else(|| format!("{project}#{n}"), String::from);
    Some(Issue {
        id: n.clone(),
        identifier: n,
        display_identifier: display,
        title: text(v, "title"),
        description: text(v, "description"),
        state: state(v, words),
        priority: None,
        branch_name: String::new(),
        url: text(v, "web_url"),
        assignee: v
            .pointer("/assignees/0/username")
            .or_else(|| v.pointer("/assignee/username"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        issue_type: text(v, "issue_type"),
        labels: labels(v),
        parent: None,
        comments: None,
        blocked_by: Vec::new(),
        // Issue payloads carry no blocked-by list: the links endpoint answers it.
        blockers_read: BlockersRead::Unread,
        created_at: text(v, "created_at"),
        updated_at: text(v, "updated_at"),
    })
}

/// A linked issue that blocks this one, with its current state; `None` for other link types.
pub fn blocker(v: &Value, words: &StateWords) -> Option<BlockerRef> {
    if v.get("link_type").and_then(Value::as_str) != Some("is_blocked_by") {
        return None;
    }
    let n = iid(v)?;
    Some(BlockerRef {
        id: n.clone(),
        identifier: n,
        state: state(v, words),
    })
}

/// Whether a note was written by GitLab itself (label changes, state changes, mentions).
pub fn is_system_note(v: &Value) -> bool {
    v.get("system").and_then(Value::as_bool) == Some(true)
}

pub fn comment(v: &Value) -> Comment {
    Comment {
        id: match v.get("id") {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        },
        author: v
            .pointer("/author/username")
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
    use serde_json::json;

    fn words() -> StateWords {
        StateWords {
            active: vec!["backlog".into(), "in-progress".into()],
            terminal: vec!["done".into()],
            handoff: None,
        }
    }

    #[test]
    fn an_issue_maps_to_the_neutral_shape() {
        let v = json!({
            "id": 76, "iid": 6, "project_id": 1, "title": "T", "description": null,
            "state": "opened", "labels": ["In-Progress", "bug"],
            "assignees": [{"username": "bob"}], "assignee": {"username": "bob"},
            "issue_type": "issue", "web_url": "https://gitlab.example.com/g/p/-/issues/6",
            "references": {"short": "#6", "relative": "#6", "full": "g/p#6"},
            "created_at": "2026-01-02T00:00:00.000Z", "updated_at": "2026-01-03T00:00:00.000Z"
        });
        let i = issue(&v, &words(), "g/p").unwrap_or_else(|| panic!("no issue"));
        assert_eq!((i.id.as_str(), i.identifier.as_str()), ("6", "6"));
        assert_eq!(i.display_identifier, "g/p#6");
        assert_eq!(i.state, "in-progress");
        assert_eq!(i.labels, ["in-progress", "bug"]);
        assert_eq!(
            (i.assignee.as_str(), i.issue_type.as_str()),
            ("bob", "issue")
        );
        assert_eq!(i.description, "");
        assert_eq!(i.blockers_read, BlockersRead::Unread);
        let bare = json!({"iid": 7, "state": "closed"});
        let b = issue(&bare, &words(), "42").unwrap_or_else(|| panic!("no issue"));
        assert_eq!(
            (b.display_identifier.as_str(), b.state.as_str()),
            ("42#7", "done")
        );
        assert!(issue(&json!({"id": 1}), &words(), "g/p").is_none());
    }

    #[test]
    fn only_is_blocked_by_links_are_blockers() {
        let link = |t: &str| json!({"iid": 3, "state": "opened", "labels": [], "link_type": t});
        assert_eq!(
            blocker(&link("is_blocked_by"), &words()).map(|b| b.state),
            Some("backlog".to_string())
        );
        assert!(blocker(&link("blocks"), &words()).is_none());
        assert!(blocker(&link("relates_to"), &words()).is_none());
    }

    #[test]
    fn notes_become_comments() {
        let n = json!({"id": 302, "body": "hi", "author": {"username": "alice"},
            "created_at": "x", "system": false});
        let c = comment(&n);
        assert_eq!(
            (c.id.as_str(), c.author.as_str(), c.body.as_str()),
            ("302", "alice", "hi")
        );
        assert!(!is_system_note(&n));
        assert!(is_system_note(&json!({"system": true})));
    }
}
