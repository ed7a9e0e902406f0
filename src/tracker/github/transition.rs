//! Moving an issue to a state: swap state labels, then close or reopen. Not atomic on GitHub,
//! so every step looks at the issue as it is now; a retry after a partial failure finishes
//! the job instead of repeating what was done.

use serde_json::Value;

use super::api::GithubApi;
use super::normalize;
use crate::http_client::HttpError;
use crate::tracker::label_state::StateWords;

/// What a transition still has to do, decided from the issue as read.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// State labels to remove (every state label that is not the target).
    pub remove: Vec<String>,
    /// Whether the target label must be added.
    pub add: bool,
    /// `Some(open)` when the issue must be reopened or closed.
    pub set_open: Option<bool>,
}

/// The steps that take `issue` to `target` (a known state word, lowercased).
pub fn plan(issue: &Value, target: &str, words: &StateWords) -> Plan {
    let labels: Vec<String> = issue
        .get("labels")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .filter_map(|l| l.get("name").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let remove = labels
        .iter()
        .filter(|l| {
            let low = l.to_lowercase();
            low != target && words.is_state_label(&low)
        })
        .cloned()
        .collect();
    let add = !labels.iter().any(|l| l.to_lowercase() == target);
    let open = issue.get("state").and_then(Value::as_str) != Some("closed");
    let set_open = if words.is_terminal(target) && open {
        Some(false)
    } else if words.is_active(target) && !open {
        Some(true)
    } else {
        None
    };
    Plan {
        remove,
        add,
        set_open,
    }
}

/// Reads the issue and applies what is left of the plan, in order: remove, add, close/reopen.
pub fn apply(
    api: &GithubApi,
    number: &str,
    target: &str,
    words: &StateWords,
) -> Result<(), HttpError> {
    let issue = api.get_issue(number)?;
    if normalize::is_pull_request(&issue) {
        return Err(HttpError::new(
            crate::http_client::ErrorClass::NotFound,
            "GET",
            &api.issue_path(number, ""),
            "is a pull request, not an issue".into(),
        ));
    }
    let steps = plan(&issue, target, words);
    for label in &steps.remove {
        api.remove_label(number, label)?;
    }
    if steps.add {
        api.add_label(number, target)?;
    }
    if let Some(open) = steps.set_open {
        api.set_open(number, open)?;
    }
    Ok(())
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
    fn a_plan_does_only_what_is_left() {
        let open =
            serde_json::json!({"state": "open", "labels": [{"name": "backlog"}, {"name": "bug"}]});
        assert_eq!(
            plan(&open, "in-progress", &words()),
            Plan {
                remove: vec!["backlog".into()],
                add: true,
                set_open: None
            }
        );
        let half = serde_json::json!({"state": "open", "labels": [{"name": "Done"}]});
        assert_eq!(
            plan(&half, "done", &words()),
            Plan {
                remove: vec![],
                add: false,
                set_open: Some(false)
            }
        );
        let closed = serde_json::json!({"state": "closed", "labels": [{"name": "review"}]});
        assert_eq!(
            plan(&closed, "backlog", &words()),
            Plan {
                remove: vec!["review".into()],
                add: true,
                set_open: Some(true)
            }
        );
    }
}
