//! Linear issue nodes → the tracker-neutral [`Issue`], [`Comment`] and blocker references.
//! Priority 0 means "no priority" in Linear, so it maps to `None`; 1 (urgent) … 4 (low) keep
//! their value, lower being more urgent as everywhere else.

use serde_json::Value;

use crate::domain::{BlockerRef, Comment, Issue, IssueRef};

fn text_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The state name of an issue node.
pub fn state(v: &Value) -> String {
    text_at(v, "/state/name")
}

/// Linear's priority number (a float in the schema): 0 → `None`, 1–4 kept.
fn priority(v: Option<&Value>) -> Option<i64> {
    let p = v?.as_f64()?;
    (p.fract() == 0.0 && (1.0..=4.0).contains(&p)).then_some(p as i64)
}

/// One issue; `None` without an id or identifier. Comments are not fetched.
pub fn issue(v: &Value) -> Option<Issue> {
    let id = Some(text_at(v, "/id")).filter(|s| !s.is_empty())?;
    let identifier = Some(text_at(v, "/identifier")).filter(|s| !s.is_empty())?;
    Some(Issue {
        id,
        identifier,
        display_identifier: String::new(),
        title: text_at(v, "/title"),
        description: text_at(v, "/description"),
        state: state(v),
        priority: priority(v.get("priority")),
        branch_name: text_at(v, "/branchName"),
        url: text_at(v, "/url"),
        assignee: text_at(v, "/assignee/name"),
        issue_type: String::new(),
        labels: v
            .pointer("/labels/nodes")
            .and_then(Value::as_array)
            .map(|ls| {
                ls.iter()
                    .filter_map(|l| l.get("name").and_then(Value::as_str))
                    .map(str::to_lowercase)
                    .collect()
            })
            .unwrap_or_default(),
        parent: parent(v),
        comments: None,
        blocked_by: blockers(v),
        blockers_read: Default::default(),
        created_at: text_at(v, "/createdAt"),
        updated_at: text_at(v, "/updatedAt"),
    })
}

fn parent(v: &Value) -> Option<IssueRef> {
    let p = v.get("parent").filter(|p| p.is_object())?;
    Some(IssueRef {
        id: Some(text_at(p, "/id")).filter(|s| !s.is_empty())?,
        identifier: text_at(p, "/identifier"),
    })
}

/// The inverse relations of type `blocks`: the relation's `issue` blocks this one.
pub fn blockers(v: &Value) -> Vec<BlockerRef> {
    v.pointer("/inverseRelations/nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| {
            r.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("blocks"))
        })
        .filter_map(|r| {
            let b = r.get("issue").filter(|b| b.is_object())?;
            Some(BlockerRef {
                id: text_at(b, "/id"),
                identifier: text_at(b, "/identifier"),
                state: text_at(b, "/state/name"),
            })
        })
        .collect()
}

/// Whether the inverse relations of an issue node were all read.
pub fn blockers_complete(v: &Value) -> bool {
    v.pointer("/inverseRelations/pageInfo/hasNextPage")
        .and_then(Value::as_bool)
        != Some(true)
}

/// One comment (Markdown body, author's name).
pub fn comment(v: &Value) -> Comment {
    Comment {
        id: text_at(v, "/id"),
        author: text_at(v, "/user/name"),
        body: text_at(v, "/body"),
        created_at: text_at(v, "/createdAt"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn an_issue_page_maps_fields_blockers_and_nulls() {
        let page = fixture("issues_page.json");
        let nodes = &page["data"]["issues"]["nodes"];
        let a = issue(&nodes[0]).unwrap_or_else(|| panic!("no issue"));
        assert_eq!(a.identifier, "ENG-1");
        assert_eq!(a.id, "5a0e1b46-8c2a-4f4e-9f39-0c1b6f1d2a01");
        assert_eq!((a.state.as_str(), a.priority), ("Todo", Some(2)));
        assert_eq!(a.labels, ["feature", "auth"]);
        assert_eq!(a.url, "https://linear.app/acme/issue/ENG-1/add-oauth-login");
        assert_eq!(a.branch_name, "eng-1-add-oauth-login");
        assert_eq!(a.assignee, "Ada Lovelace");
        assert_eq!(
            a.parent.as_ref().map(|p| p.identifier.as_str()),
            Some("ENG-0")
        );
        assert_eq!(a.blocked_by.len(), 1, "related relations are not blockers");
        assert_eq!(a.blocked_by[0].identifier, "ENG-10");
        assert_eq!(a.blocked_by[0].state, "In Progress");
        assert_eq!(a.created_at, "2026-01-10T09:00:00.000Z");
        let b = issue(&nodes[1]).unwrap_or_else(|| panic!("no issue"));
        assert_eq!((b.priority, b.description.as_str()), (None, ""));
        assert!(b.parent.is_none() && b.blocked_by.is_empty() && b.assignee.is_empty());
        assert!(issue(&serde_json::json!({"id": "x"})).is_none());
    }

    #[test]
    fn detail_comments_and_priorities() {
        let d = fixture("issue_detail.json");
        let i = &d["data"]["issue"];
        assert_eq!(issue(i).map(|i| i.priority), Some(Some(1)));
        assert!(!blockers_complete(i));
        let c = comment(&i["comments"]["nodes"][0]);
        assert_eq!(
            (c.author.as_str(), c.body.as_str()),
            ("Ada Lovelace", "Looks good.")
        );
        for (p, want) in [(0.0, None), (1.0, Some(1)), (4.0, Some(4)), (2.5, None)] {
            assert_eq!(priority(Some(&serde_json::json!(p))), want);
        }
    }
}
