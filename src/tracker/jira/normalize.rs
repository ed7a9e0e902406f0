//! Jira issue JSON → the tracker-neutral [`Issue`], [`Comment`] and blocker references.

use serde_json::Value;

use super::adf;
use crate::domain::{BlockerRef, Comment, Issue, IssueRef};

fn text_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// An id Jira may send as a string or a number.
pub fn id_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The status name of an issue JSON.
pub fn state(v: &Value) -> String {
    text_at(v, "/fields/status/name")
}

/// The key of an issue JSON.
pub fn key(v: &Value) -> String {
    text_at(v, "/key")
}

/// One issue; `None` without an id or key. Comments are not fetched.
pub fn issue(v: &Value, endpoint: &str, link_type: &str) -> Option<Issue> {
    let id = id_of(v.get("id"))?;
    let key = Some(key(v)).filter(|k| !k.is_empty())?;
    let f = v.get("fields").cloned().unwrap_or(Value::Null);
    Some(Issue {
        url: format!("{endpoint}/browse/{key}"),
        id,
        identifier: key,
        display_identifier: String::new(),
        title: text_at(&f, "/summary"),
        description: f.get("description").map(adf::to_text).unwrap_or_default(),
        state: text_at(&f, "/status/name"),
        priority: id_of(f.pointer("/priority/id")).and_then(|p| p.trim().parse().ok()),
        branch_name: String::new(),
        assignee: text_at(&f, "/assignee/displayName"),
        issue_type: text_at(&f, "/issuetype/name"),
        labels: f
            .get("labels")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_lowercase)
                    .collect()
            })
            .unwrap_or_default(),
        parent: parent(&f),
        comments: None,
        blocked_by: blockers(&f, link_type),
        blockers_read: Default::default(),
        created_at: text_at(&f, "/created"),
        updated_at: text_at(&f, "/updated"),
    })
}

fn parent(fields: &Value) -> Option<IssueRef> {
    let p = fields.get("parent")?;
    Some(IssueRef {
        id: id_of(p.get("id"))?,
        identifier: text_at(p, "/key"),
    })
}

/// Inward links of type `link_type`: the issues that block this one, with their status.
pub fn blockers(fields: &Value, link_type: &str) -> Vec<BlockerRef> {
    let links = fields.get("issuelinks").and_then(Value::as_array);
    links
        .into_iter()
        .flatten()
        .filter(|l| {
            l.pointer("/type/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(link_type))
        })
        .filter_map(|l| {
            let b = l.get("inwardIssue")?;
            Some(BlockerRef {
                id: id_of(b.get("id")).unwrap_or_default(),
                identifier: text_at(b, "/key"),
                state: text_at(b, "/fields/status/name"),
            })
        })
        .collect()
}

/// One comment, its ADF body as text.
pub fn comment(v: &Value) -> Comment {
    Comment {
        id: id_of(v.get("id")).unwrap_or_default(),
        author: text_at(v, "/author/displayName"),
        body: v.get("body").map(adf::to_text).unwrap_or_default(),
        created_at: text_at(v, "/created"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn search_page_maps_fields_blockers_and_nulls() {
        let page = fixture("search_single_page.json");
        let a = issue(&page["issues"][0], "https://x.net", "Blocks");
        let a = a.unwrap_or_else(|| panic!("no issue"));
        assert_eq!((a.id.as_str(), a.identifier.as_str()), ("10001", "PROJ-1"));
        assert_eq!((a.state.as_str(), a.priority), ("To Do", Some(2)));
        assert_eq!(a.url, "https://x.net/browse/PROJ-1");
        assert_eq!(a.labels, ["feature", "auth"]);
        assert_eq!(a.description, "Implement OAuth2 flow");
        assert_eq!(a.parent.map(|p| p.identifier), Some("PROJ-0".into()));
        assert_eq!(a.blocked_by.len(), 1);
        assert_eq!(a.blocked_by[0].identifier, "PROJ-10");
        assert_eq!(a.blocked_by[0].state, "In Progress");
        let b = issue(&page["issues"][1], "https://x.net", "Blocks");
        let b = b.unwrap_or_else(|| panic!("no issue"));
        assert_eq!((b.assignee.as_str(), b.description.as_str()), ("", ""));
        assert!(b.parent.is_none() && b.blocked_by.is_empty());
        let other = issue(&page["issues"][0], "https://x.net", "Depends");
        assert!(other.is_some_and(|i| i.blocked_by.is_empty()));
    }

    #[test]
    fn detail_and_comments() {
        let d = fixture("issue_detail.json");
        let i = issue(&d, "https://x.net", "Blocks").unwrap_or_else(|| panic!("no issue"));
        assert_eq!((i.identifier.as_str(), i.priority), ("PROJ-5", Some(2)));
        assert_eq!(i.blocked_by[0].identifier, "PROJ-20");
        assert_eq!(i.blocked_by[0].state, "To Do");
        let c = fixture("comments.json");
        let first = comment(&c["comments"][0]);
        assert!(!first.body.is_empty() && !first.author.is_empty());
    }
}
