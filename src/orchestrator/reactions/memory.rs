//! What the engine remembers about a pending reaction beyond what it serves: how to continue
//! the session, the heads it has seen, and what it already dispatched.

use std::collections::BTreeSet;

/// Per (issue, kind) engine memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowMemory {
    /// The attempt the next continuation of the issue dispatches.
    pub run_attempt: u32,
    /// The agent session a continuation resumes.
    pub session_id: Option<String>,
    /// The head the latest check read (empty before the first).
    pub last_head: String,
    /// Heads Sortie's own runs recorded: a change to one of these is not someone else's work.
    pub own_heads: BTreeSet<String>,
    /// What the kind last acted on, and whether a run was dispatched for it.
    pub fingerprint: Option<(String, bool)>,
    /// Review comments a run was given (review kinds).
    pub given: BTreeSet<String>,
    /// When a check first saw the pull request merged without a merge commit.
    pub merged_seen_at_ms: Option<i64>,
    /// The kind's triage run and verdict (`orch`'s; see [`super::triage`]).
    pub triage: super::triage::TriageMemory,
}

impl RowMemory {
    /// Whether `fingerprint` is the one already dispatched.
    pub fn dispatched(&self, fingerprint: &str) -> bool {
        matches!(&self.fingerprint, Some((f, true)) if f == fingerprint)
    }
}
