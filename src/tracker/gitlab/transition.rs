//! Moving an issue to a state: one `PUT` that removes the other state labels, adds the target
//! label and closes (terminal target) or reopens (active target). The plan is computed from
//! the issue as it is now, so a retry after a failed or partly seen write does only what is
//! left, and a transition already done writes nothing.

use serde_json::Value;

use super::api::{Edit, GitlabApi};
use super::normalize;
use crate::http_client::HttpError;
use crate::tracker::label_state::StateWords;

/// The edit that takes `issue` to `target` (a known state word, lowercased).
pub fn plan(issue: &Value, target: &str, words: &StateWords) -> Edit {
    // GitLab answers label names as written; the edit must name them the same way.
    let labels: Vec<String> = issue
        .get("labels")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name").and_then(Value::as_str)))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let remove_labels = labels
        .iter()
        .filter(|l| {
            let low = l.to_lowercase();
            low != target && words.is_state_label(&low)
        })
        .cloned()
        .collect();
    let add_labels = if labels.iter().any(|l| l.to_lowercase() == target) {
        Vec::new()
    } else {
        vec![target.to_string()]
    };
    let open = issue.get("state").and_then(Value::as_str) != Some("closed");
    let state_event = if words.is_terminal(target) && open {
        Some("close")
    } else if words.is_active(target) && !open {
        Some("reopen")
    } else {
        None
    };
    Edit {
        add_labels,
        remove_labels,
        state_event,
    }
}

/// Reads the issue and sends what is left of the plan, if anything.
pub fn apply(
    api: &GitlabApi,
    iid: &str,
    target: &str,
    words: &StateWords,
) -> Result<(), HttpError> {
    let issue = api.get_issue(iid)?;
    let edit = plan(&issue, target, words);
    if edit.is_empty() {
        log::debug!(
            iid:% = iid,
            state:% = target,
            labels:% = crate::log_field::list(&normalize::labels(&issue));
            "transition already done"
        );
        return Ok(());
    }
    api.edit(iid, &edit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words() -> StateWords {
        StateWords {
            active: vec!["backlog".into(), "in-progress".into()],
            terminal: vec!["done".into()],
            handoff: Some("review".into()),
        }
    }

    #[test]
    fn a_plan_does_only_what_is_left() {
        let open = json!({"state": "opened", "labels": ["Backlog", "bug"]});
        assert_eq!(
            plan(&open, "in-progress", &words()),
            Edit {
                add_labels: vec!["in-progress".into()],
                remove_labels: vec!["Backlog".into()],
                state_event: None
            }
        );
        let half = json!({"state": "opened", "labels": ["Done"]});
        assert_eq!(
            plan(&half, "done", &words()),
            Edit {
                add_labels: vec![],
                remove_labels: vec![],
                state_event: Some("close")
            }
        );
        let closed = json!({"state": "closed", "labels": ["review"]});
        assert_eq!(
            plan(&closed, "backlog", &words()),
            Edit {
                add_labels: vec!["backlog".into()],
                remove_labels: vec!["review".into()],
                state_event: Some("reopen")
            }
        );
        let done = json!({"state": "closed", "labels": ["done"]});
        assert!(plan(&done, "done", &words()).is_empty());
    }
}
