//! The parsed tracker file, indexed: issues in file order, lookups by id and by identifier, and
//! blockers resolved through those lookups. Built once per version of the file and shared
//! (behind an `Arc`) by every read until the file changes. Pure: no I/O here.

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::{BlockerRef, Comment, Issue};

/// Position of the first issue with each key. The first wins, as a front-to-back search of the
/// file would find it.
#[derive(Debug, Default)]
struct Lookup {
    by_id: HashMap<String, usize>,
    by_identifier: HashMap<String, usize>,
}

impl Lookup {
    fn new<'a>(issues: impl ExactSizeIterator<Item = &'a Issue>) -> Lookup {
        let mut lookup = Lookup {
            by_id: HashMap::with_capacity(issues.len()),
            by_identifier: HashMap::with_capacity(issues.len()),
        };
        for (pos, issue) in issues.enumerate() {
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
    /// File order, blockers resolved, `comments` always `None`; shared with the candidate
    /// lists handed out and with the next version of the file where an issue's bytes did not
    /// change, so an unchanged issue is never copied.
    issues: Vec<Arc<Issue>>,
    /// The comments of `issues[i]` as written (`None` when the record has no `comments`).
    comments: Vec<Option<Arc<[Comment]>>>,
    /// `issues[i].blocked_by` as written, where resolution changed it (`None`: as it stands),
    /// so the next version resolves it again against the issues it then references.
    written_blockers: Vec<Option<Arc<[BlockerRef]>>>,
    lookup: Lookup,
}

/// One element of a version of the file.
pub enum Element {
    /// The same bytes as this element of the previous version.
    Same(usize),
    /// Parsed now (blockers not resolved yet).
    New(Box<Issue>),
}

impl Element {
    fn issue<'a>(&'a self, previous: &'a ParsedFile) -> &'a Issue {
        match self {
            Element::Same(j) => &previous.issues[*j],
            Element::New(issue) => issue,
        }
    }

    /// Its `blocked_by` as written.
    fn written<'a>(&'a self, previous: &'a ParsedFile) -> &'a [BlockerRef] {
        match self {
            Element::Same(j) => previous.written_blockers[*j]
                .as_deref()
                .unwrap_or(&previous.issues[*j].blocked_by),
            Element::New(issue) => &issue.blocked_by,
        }
    }
}

impl ParsedFile {
    /// Indexes freshly normalized issues and resolves their blockers.
    pub fn new(issues: Vec<Issue>) -> ParsedFile {
        ParsedFile::rebuild(
            issues
                .into_iter()
                .map(|i| Element::New(Box::new(i)))
                .collect(),
            &ParsedFile::default(),
        )
    }

    /// The version made of `elements`: an element with the bytes of one of `previous` shares
    /// its issue (a new one only when its blockers now resolve differently); every blocker
    /// list is resolved again, since the issue it references may have changed. Every
    /// `Element::Same` index must be one of `previous`'s.
    pub fn rebuild(elements: Vec<Element>, previous: &ParsedFile) -> ParsedFile {
        let lookup = Lookup::new(elements.iter().map(|e| e.issue(previous)));
        let issue_at = |pos: usize| elements[pos].issue(previous);
        let resolved: Vec<Option<Vec<BlockerRef>>> = elements
            .iter()
            .map(|e| {
                let written = e.written(previous);
                (!written.is_empty()).then(|| resolve_refs(written, &lookup, &issue_at))
            })
            .collect();
        let n = elements.len();
        let mut file = ParsedFile {
            issues: Vec::with_capacity(n),
            comments: Vec::with_capacity(n),
            written_blockers: Vec::with_capacity(n),
            lookup,
        };
        for (element, resolved) in elements.into_iter().zip(resolved) {
            match element {
                Element::Same(j) => file.take_over(previous, j, resolved),
                Element::New(issue) => file.push_new(*issue, resolved),
            }
        }
        file
    }

    /// Shares issue `j` of `previous`, or copies it when its blockers resolve differently now.
    fn take_over(&mut self, previous: &ParsedFile, j: usize, resolved: Option<Vec<BlockerRef>>) {
        let shared = &previous.issues[j];
        let mut written = previous.written_blockers[j].clone();
        let issue = match resolved {
            Some(list) if list != shared.blocked_by => {
                written.get_or_insert_with(|| Arc::from(shared.blocked_by.as_slice()));
                Arc::new(Issue {
                    blocked_by: list,
                    ..Issue::clone(shared)
                })
            }
            _ => Arc::clone(shared),
        };
        self.issues.push(issue);
        self.comments.push(previous.comments[j].clone());
        self.written_blockers.push(written);
    }

    fn push_new(&mut self, mut issue: Issue, resolved: Option<Vec<BlockerRef>>) {
        let comments = issue.comments.take().map(Arc::from);
        let written = match resolved {
            Some(list) if list != issue.blocked_by => {
                Some(Arc::from(std::mem::replace(&mut issue.blocked_by, list)))
            }
            _ => None,
        };
        self.issues.push(Arc::new(issue));
        self.comments.push(comments);
        self.written_blockers.push(written);
    }

    /// Issues in file order, without comments.
    pub fn issues(&self) -> &[Arc<Issue>] {
        &self.issues
    }

    /// The first issue with this id, without comments.
    pub fn by_id(&self, id: &str) -> Option<&Issue> {
        self.lookup.by_id.get(id).map(|&pos| &*self.issues[pos])
    }

    /// The first issue with this identifier, without comments.
    pub fn by_identifier(&self, identifier: &str) -> Option<&Issue> {
        self.lookup
            .by_identifier
            .get(identifier)
            .map(|&pos| &*self.issues[pos])
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
            comments: self.comments[pos].as_deref().map(<[Comment]>::to_vec),
            ..Issue::clone(&self.issues[pos])
        }
    }
}

/// `written` resolved: each blocker takes the live state of the issue it references when
/// that issue is in the same file (matched by id, else by identifier), so moving the blocker
/// to a terminal state in the file unblocks its dependents. Blockers that reference nothing
/// in the file keep the state written inside `blocked_by`. A missing id or identifier of the
/// reference is filled in from the matched issue.
///
/// One hash lookup per blocker. Resolution reads only the issues' own id, identifier and
/// state and writes only blocker refs, so the order issues are resolved in does not matter.
fn resolve_refs<'a>(
    written: &[BlockerRef],
    lookup: &Lookup,
    issue_at: &impl Fn(usize) -> &'a Issue,
) -> Vec<BlockerRef> {
    written
        .iter()
        .map(|b| {
            let mut b = b.clone();
            if let Some(t) = lookup.blocker_target(&b).map(issue_at) {
                b.state = t.state.clone();
                if b.id.is_empty() {
                    b.id = t.id.clone();
                }
                if b.identifier.is_empty() {
                    b.identifier = t.identifier.clone();
                }
            }
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::file::record::normalize_record;
    use serde_json::{Value, json};

    fn resolve_blockers(issues: &mut [Issue]) {
        let file = ParsedFile::new(issues.to_vec());
        for (issue, resolved) in issues.iter_mut().zip(file.issues()) {
            issue.blocked_by = resolved.blocked_by.clone();
        }
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
