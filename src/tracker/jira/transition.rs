//! Choosing a transition: Jira moves an issue only along its workflow, so sortie lists the
//! transitions available from the current status and takes the first whose destination
//! status (never the transition's own label) is the target.

use serde_json::Value;

/// The id of the first transition into `target` (case-insensitive); `None` when no
/// transition leads there from the current status.
pub fn choose(transitions: &Value, target: &str) -> Option<String> {
    let target = target.trim().to_lowercase();
    transitions
        .get("transitions")?
        .as_array()?
        .iter()
        .find(|t| {
            t.pointer("/to/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.trim().to_lowercase() == target)
        })
        .and_then(|t| match t.get("id")? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// The destination names on offer, for the error when none fits.
pub fn destinations(transitions: &Value) -> Vec<String> {
    transitions
        .get("transitions")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t.pointer("/to/name").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn destination_status_decides_and_the_first_match_wins() {
        let t = fixture("transitions.json");
        assert_eq!(choose(&t, "human review").as_deref(), Some("31"));
        assert_eq!(choose(&t, "Send to Review"), None);
        let dup = fixture("transitions_duplicate_target.json");
        assert_eq!(choose(&dup, "Human Review").as_deref(), Some("31"));
        assert_eq!(choose(&fixture("transitions_empty.json"), "Done"), None);
        assert_eq!(
            choose(&fixture("transitions_no_match.json"), "Human Review"),
            None
        );
        assert_eq!(destinations(&t), ["In Progress", "Human Review", "Done"]);
    }
}
