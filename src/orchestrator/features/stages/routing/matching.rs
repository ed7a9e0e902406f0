//! A rule's `match` block against an issue: AND across keys, OR within a key's list; a key
//! left empty does not take part.

use crate::config::dispatch::RuleMatch;
use crate::domain::Issue;

use super::title::title_has_phrase;

pub fn rule_matches(m: &RuleMatch, issue: &Issue) -> bool {
    let labels = m.labels.is_empty()
        || m.labels
            .iter()
            .any(|p| issue.labels.iter().any(|l| glob_matches(p, l)));
    let identifier = m.identifier.is_empty()
        || m.identifier
            .iter()
            .any(|p| glob_matches(p, &issue.identifier));
    let issue_type = m.issue_type.is_empty() || equal_any(&m.issue_type, &issue.issue_type);
    let assignee = m.assignee.is_empty() || equal_any(&m.assignee, &issue.assignee);
    let priority = m
        .priority
        .as_ref()
        .is_none_or(|p| issue.priority.is_some_and(|v| p.matches(v)));
    let title = m.title.is_empty() || m.title.iter().any(|p| title_has_phrase(&issue.title, p));
    labels && identifier && issue_type && assignee && priority && title
}

/// Shell-style glob, case-insensitive (labels are lowercase; patterns are kept as written).
/// A pattern that does not compile (load refuses those) matches nothing.
fn glob_matches(pattern: &str, value: &str) -> bool {
    let opts = glob::MatchOptions {
        case_sensitive: false,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches_with(value, opts))
}

/// Case-insensitive equality with any entry; an empty value never matches.
fn equal_any(allowed: &[String], value: &str) -> bool {
    if value.is_empty() {
        return false;
    }
    let v = value.to_lowercase();
    allowed.iter().any(|a| a.to_lowercase() == v)
}
