//! The parsed tracker file, indexed: issues in file order, lookups by id and by identifier, and
//! blockers resolved through those lookups. Built once per version of the file and shared
//! (behind an `Arc`) by every read until the file changes. Pure: no I/O here.

use std::collections::HashMap;

use crate::domain::{BlockerRef, Comment, Issue};

/// Position of the first issue with each key. The first wins, as a front-to-back search of the
/// file would find it.
#[derive(Debug, Default)]
struct Lookup {
    by_id: HashMap<String, usize>,
    by_identifier: HashMap<String, usize>,
}

impl Lookup {
    fn new(issues: &[Issue]) -> Lookup {
        let mut lookup = Lookup {
            by_id: HashMap::with_capacity(issues.len()),
            by_identifier: HashMap::with_capacity(issues.len()),
        };
        for (pos, issue) in issues.iter().enumerate() {
            lookup.by_id.entry(issue.id.clone()).or_insert(pos);
            lookup
                .by_identifier
                .entry(issue.identifier.clone())
                .or_insert(pos);
        }
        lookup
    }

    /// The issue a blocker references: by id, else by identifier; empty keys match nothing.
    fn blocker_target(&self, b: &BlockerRef) -> Option<usize> {
        let by_id = (!b.id.is_empty()).then(|| self.by_id.get(&b.id)).flatten();
        by_id
            .or_else(|| {
                (!b.identifier.is_empty())
                    .then(|| self.by_identifier.get(&b.identifier))
                    .flatten()
            })
            .copied()
    }
}

/// Every issue of one version of the file. Comments are kept apart from the issues so that
/// the calls that never return comments (candidates) do not copy them.
#[derive(Debug, Default)]
pub struct ParsedFile {
    /// File order, blockers resolved, `comments` always `None`.
    issues: Vec<Issue>,
    /// The comments of `issues[i]` as written (`None` when the record has no `comments`).
    comments: Vec<Option<Vec<Comment>>>,
    lookup: Lookup,
}

impl ParsedFile {
    /// Indexes freshly normalized issues and resolves their blockers.
    pub fn new(mut issues: Vec<Issue>) -> ParsedFile {
        let lookup = Lookup::new(&issues);
        resolve_with(&mut issues, &lookup);
        let comments = issues.iter_mut().map(|i| i.comments.take()).collect();
        ParsedFile {
            issues,
            comments,
            lookup,
        }
    }

    /// Issues in file order, without comments.
    pub fn issues(&self) -> &[Issue] {
        &self.issues
    }

    /// The first issue with this id, without comments.
    pub fn by_id(&self, id: &str) -> Option<&Issue> {
        self.lookup.by_id.get(id).map(|&pos| &self.issues[pos])
    }

    /// The first issue with this identifier, without comments.
    pub fn by_identifier(&self, identifier: &str) -> Option<&Issue> {
        self.lookup
            .by_identifier
            .get(identifier)
            .map(|&pos| &self.issues[pos])
    }

    /// The first issue with this id, with its comments as written.
    pub fn full_by_id(&self, id: &str) -> Option<Issue> {
        self.lookup.by_id.get(id).map(|&pos| self.full(pos))
    }

    /// Every issue in file order with its comments as written.
    pub fn full_issues(&self) -> impl Iterator<Item = Issue> + '_ {
        (0..self.issues.len()).map(|pos| self.full(pos))
    }

    fn full(&self, pos: usize) -> Issue {
        Issue {
            comments: self.comments[pos].clone(),
            ..self.issues[pos].clone()
        }
    }
}

/// Replaces each blocker's state with the live state of the referenced issue when that issue
/// is in the same file (matched by id, else by identifier), so moving the blocker to a
/// terminal state in the file unblocks its dependents. Blockers that reference nothing in
/// the file keep the state written inside `blocked_by`. A missing id or identifier of the
/// reference is filled in from the matched issue.
///
/// One hash lookup per blocker. Resolution reads only the issues' own id, identifier and
/// state and writes only blocker refs, so the order issues are visited in does not matter.
fn resolve_with(issues: &mut [Issue], lookup: &Lookup) {
    for pos in 0..issues.len() {
        for k in 0..issues[pos].blocked_by.len() {
            let Some(target) = lookup.blocker_target(&issues[pos].blocked_by[k]) else {
                continue;
            };
            let (id, identifier, state) = {
                let t = &issues[target];
                let b = &issues[pos].blocked_by[k];
                (
                    b.id.is_empty().then(|| t.id.clone()),
                    b.identifier.is_empty().then(|| t.identifier.clone()),
                    t.state.clone(),
                )
            };
            let b = &mut issues[pos].blocked_by[k];
            b.state = state;
            if let Some(id) = id {
                b.id = id;
            }
            if let Some(identifier) = identifier {
                b.identifier = identifier;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::file::record::normalize_record;
    use serde_json::{Value, json};

    fn resolve_blockers(issues: &mut [Issue]) {
        let lookup = Lookup::new(issues);
        resolve_with(issues, &lookup);
    }

    fn norm(v: Value) -> Issue {
        match normalize_record(0, &v) {
            Ok(i) => i,
            Err(e) => panic!("normalize failed: {e}"),
        }
    }

    #[test]
    fn blockers_take_the_live_state_by_id_then_identifier() {
        let mut issues = vec![
            norm(json!({"id": "1", "identifier": "P-1", "state": "Done"})),
            norm(json!({"id": "2", "identifier": "P-2", "state": "In Progress"})),
            norm(
                json!({"id": "3", "identifier": "P-3", "state": "To Do", "blocked_by": [
                    {"id": "1", "identifier": "P-1", "state": "To Do"},
                    {"identifier": "P-2", "state": "Done"},
                    {"id": "99", "identifier": "X-99", "state": "Done"},
                    {"id": "98"}
                ]}),
            ),
        ];
        resolve_blockers(&mut issues);
        let b = &issues[2].blocked_by;
        assert_eq!((b[0].id.as_str(), b[0].state.as_str()), ("1", "Done"));
        assert_eq!(
            (
                b[1].id.as_str(),
                b[1].identifier.as_str(),
                b[1].state.as_str()
            ),
            ("2", "P-2", "In Progress")
        );
        assert_eq!(b[2].state, "Done");
        assert_eq!(b[3].state, "");
    }

    #[test]
    fn the_index_answers_the_first_issue_with_a_key() {
        let parsed = ParsedFile::new(vec![
            norm(
                json!({"id": "1", "identifier": "P-1", "state": "A", "comments": [{"body": "c"}]}),
            ),
            norm(json!({"id": "1", "identifier": "P-9", "state": "B"})),
            norm(json!({"id": "2", "identifier": "P-1", "state": "C"})),
        ]);
        assert_eq!(parsed.by_id("1").map(|i| i.state.as_str()), Some("A"));
        assert_eq!(
            parsed.by_identifier("P-1").map(|i| i.id.as_str()),
            Some("1")
        );
        assert_eq!(
            parsed.by_identifier("P-9").map(|i| i.state.as_str()),
            Some("B")
        );
        assert!(parsed.by_id("3").is_none());
        assert_eq!(parsed.by_id("1").and_then(|i| i.comments.clone()), None);
        let full = parsed.full_by_id("1").and_then(|i| i.comments);
        assert_eq!(full.map(|c| c.len()), Some(1));
        assert_eq!(parsed.full_issues().count(), 3);
    }

    #[test]
    fn blockers_resolve_through_the_index_in_a_large_file() {
        let n = 2_000;
        let issues: Vec<Issue> = (0..n)
            .map(|i| {
                norm(json!({
                    "id": i.to_string(), "identifier": format!("B-{i}"),
                    "state": if i % 2 == 0 { "Done" } else { "To Do" },
                    "blocked_by": [{"id": ((i + 1) % n).to_string()},
                                   {"identifier": format!("B-{}", (i + 3) % n)}]
                }))
            })
            .collect();
        let parsed = ParsedFile::new(issues);
        let i = parsed
            .by_id("10")
            .map(|i| i.blocked_by.clone())
            .unwrap_or_default();
        assert_eq!(i.len(), 2);
        assert_eq!(
            (i[0].identifier.as_str(), i[0].state.as_str()),
            ("B-11", "To Do")
        );
        assert_eq!((i[1].id.as_str(), i[1].state.as_str()), ("13", "To Do"));
        let last = parsed
            .by_id("1999")
            .map(|i| i.blocked_by.clone())
            .unwrap_or_default();
        assert_eq!((last[0].id.as_str(), last[0].state.as_str()), ("0", "Done"));
    }
}
