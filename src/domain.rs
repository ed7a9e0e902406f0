//! Tracker-neutral domain types shared by every layer (no I/O here).

use serde::{Deserialize, Serialize};

/// A comment on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Comment {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub created_at: String,
}

/// A reference to another issue (parent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IssueRef {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub identifier: String,
}

/// An issue that blocks this one. An empty `state` means "not known to be resolved": it blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BlockerRef {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub identifier: String,
    #[serde(default)]
    pub state: String,
}

/// The normalized issue every tracker adapter produces (trackers-scm.md §1.3). The snake_case
/// field names are also the keys of `.issue` in prompt templates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Issue {
    /// Stable internal key (Jira numeric id, GitHub number, file `id`).
    pub id: String,
    /// Human key (`PROJ-123`); also the workspace directory name (sanitized).
    pub identifier: String,
    /// Qualified key when the identifier alone is ambiguous; empty when the identifier is enough.
    #[serde(default)]
    pub display_identifier: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// Original casing kept; compare with [`state_eq`].
    pub state: String,
    /// Lower is more urgent; only true integers count.
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub branch_name: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub assignee: String,
    #[serde(default)]
    pub issue_type: String,
    /// Lowercased, tracker order.
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub parent: Option<IssueRef>,
    /// `None` = not fetched; `Some(vec![])` = fetched, none.
    #[serde(default)]
    pub comments: Option<Vec<Comment>>,
    #[serde(default)]
    pub blocked_by: Vec<BlockerRef>,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
}

impl Issue {
    /// The orchestrator only dispatches issues that carry these four fields.
    pub fn is_dispatchable_shape(&self) -> bool {
        !self.id.is_empty()
            && !self.identifier.is_empty()
            && !self.title.is_empty()
            && !self.state.is_empty()
    }
}

/// Tracker states compare case-insensitively (after trimming).
pub fn state_eq(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// True when `state` is one of `states` (case-insensitive).
pub fn state_in(state: &str, states: &[String]) -> bool {
    states.iter().any(|s| state_eq(s, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_compare_case_insensitively() {
        assert!(state_eq("In Progress", "in progress "));
        assert!(state_in("DONE", &["Done".to_string()]));
        assert!(!state_in("Done", &[]));
    }
}
