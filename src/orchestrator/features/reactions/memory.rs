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
    /// The kind's triage run and verdict (`orch`'s; see `reactions::triage`).
    pub triage: TriageMemory,
    /// The pass (`chain_id`) whose quiet check is already recorded (`pr_loop`).
    pub quiet_noted: Option<String>,
    /// The context the latest run dispatched for the kind carried, so a retry of that run
    /// after a failure or stall carries it again.
    pub last_context: Option<super::FixContext>,
}

impl RowMemory {
    /// Whether `fingerprint` is the one already dispatched.
    pub fn dispatched(&self, fingerprint: &str) -> bool {
        matches!(&self.fingerprint, Some((f, true)) if f == fingerprint)
    }
}

/// What a triage run decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Act,
    Ignore,
    Escalate,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Act => "act",
            Verdict::Ignore => "ignore",
            Verdict::Escalate => "escalate",
        }
    }

    pub fn parse(s: &str) -> Option<Verdict> {
        match s.trim().to_ascii_lowercase().as_str() {
            "act" => Some(Verdict::Act),
            "ignore" => Some(Verdict::Ignore),
            "escalate" => Some(Verdict::Escalate),
            _ => None,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind's triage state, kept by `orch` (a pass's copy of the row memory never replaces it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TriageMemory {
    /// The subject a triage run is out for.
    pub in_flight: Option<String>,
    /// The newest verdict and the subject it answered.
    pub answer: Option<(String, Verdict)>,
}

impl TriageMemory {
    /// The verdict for `fingerprint`, when the newest answer is for it.
    pub fn verdict_for(&self, fingerprint: &str) -> Option<Verdict> {
        match &self.answer {
            Some((f, v)) if f == fingerprint => Some(*v),
            _ => None,
        }
    }
}
