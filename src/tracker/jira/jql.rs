//! The JQL sortie sends. JQL has no escape inside a quoted literal, so every value has its
//! `"` deleted; key and id lookups go in batches of [`BATCH`] to keep URLs short.

/// Keys or ids per lookup query.
pub const BATCH: usize = 40;

/// A value as a JQL string literal, its `"` removed.
fn quote(v: &str) -> String {
    format!("\"{}\"", v.replace('"', ""))
}

fn list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| quote(v))
        .collect::<Vec<_>>()
        .join(", ")
}

fn project_states(project: &str, states: &[String], filter: Option<&str>) -> String {
    let mut q = format!(
        "project = {} AND status IN ({})",
        quote(project),
        list(states)
    );
    if let Some(f) = filter.map(str::trim).filter(|f| !f.is_empty()) {
        q.push_str(&format!(" AND ({f})"));
    }
    q
}

/// Candidates: most urgent first, then oldest.
pub fn candidates(project: &str, states: &[String], filter: Option<&str>) -> String {
    project_states(project, states, filter) + " ORDER BY priority ASC, created ASC"
}

/// Issues in any of `states`, oldest first.
pub fn by_states(project: &str, states: &[String], filter: Option<&str>) -> String {
    project_states(project, states, filter) + " ORDER BY created ASC"
}

/// The issue with numeric id `id`, if it is in `project` and selected by `filter`: the scope
/// check of an id from outside sortie.
pub fn in_scope(project: &str, id: &str, filter: &str) -> String {
    format!(
        "project = {} AND id = {} AND ({})",
        quote(project),
        id.trim(),
        filter.trim()
    )
}

/// One query per batch of keys; no filter (a lookup is not a selection).
pub fn by_keys(keys: &[String]) -> Vec<String> {
    keys.chunks(BATCH)
        .map(|c| format!("key IN ({}) ORDER BY key ASC", list(c)))
        .collect()
}

/// One query per batch of numeric ids; other ids cannot name a Jira issue and are dropped.
pub fn by_ids(ids: &[String]) -> Vec<String> {
    let numeric: Vec<&str> = ids
        .iter()
        .map(|i| i.trim())
        .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    numeric
        .chunks(BATCH)
        .map(|c| format!("id IN ({}) ORDER BY key ASC", c.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn candidates_and_states_quote_values_and_append_the_filter() {
        assert_eq!(
            candidates(
                "PR\"J",
                &s(&["To Do", "In \"Progress\""]),
                Some(" labels = ai ")
            ),
            "project = \"PRJ\" AND status IN (\"To Do\", \"In Progress\") AND (labels = ai) ORDER BY priority ASC, created ASC"
        );
        assert_eq!(
            by_states("P", &s(&["Done"]), None),
            "project = \"P\" AND status IN (\"Done\") ORDER BY created ASC"
        );
    }

    #[test]
    fn lookups_batch_by_forty_and_drop_non_numeric_ids() {
        let keys: Vec<String> = (1..=41).map(|i| format!("P-{i}")).collect();
        let q = by_keys(&keys);
        assert_eq!(q.len(), 2);
        assert!(q[0].starts_with("key IN (\"P-1\", \"P-2\""));
        assert_eq!(q[1], "key IN (\"P-41\") ORDER BY key ASC");
        assert_eq!(
            by_ids(&s(&["10001", "PROJ-1", " 10002 ", ""])),
            ["id IN (10001, 10002) ORDER BY key ASC"]
        );
        assert!(by_ids(&s(&["x"])).is_empty());
        assert!(by_keys(&[]).is_empty());
    }
}
