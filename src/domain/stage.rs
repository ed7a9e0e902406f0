//! Dispatch routing and stage chains as plain facts: the selection a claim runs on, where it
//! stands on a stage chain, and the record a stage hop leaves. Every layer above reads these
//! (the orchestrator decides them, the store keeps them, the API serves them).

/// The selection a claim is dispatched on. It is resolved at the claim's first dispatch and
/// frozen for the life of the claim: retries and reaction continuations reuse it, and a
/// stage hop releases the claim, so the next stage resolves a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// The dispatch rule; `"default"` for the `dispatch.default` selection; `""` for the
    /// workflow-wide agent (no rule, no default).
    pub rule_name: String,
    /// The agent kind the selection resolved.
    pub agent_kind: String,
    /// The prompt template path as written in WORKFLOW.md (relative to its directory); `""`
    /// for the WORKFLOW.md body.
    pub template: String,
    /// The `model` of the settings block the attempt runs with; `""` for the runtime's default.
    pub configured_model: String,
    /// The pass's stage chain identifier: new for a dispatch no hop reached, inherited by
    /// every retry, continuation and stage the pass's hops lead to. `""` for a pass recorded
    /// without one.
    pub chain_id: String,
    /// The hop that placed the issue on this rule's stage; `None` when no hop did.
    pub lineage: Option<StageLineage>,
}

/// The hop that reached a claim: the rule whose run made it and how that run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageLineage {
    pub previous: String,
    pub previous_outcome: StageOutcome,
}

/// How the run that made a hop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageOutcome {
    Succeeded,
    /// The agent declared that nothing needed changing, and the declaration stood.
    NoChange,
}

impl StageOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            StageOutcome::Succeeded => "succeeded",
            StageOutcome::NoChange => "no_change",
        }
    }

    pub fn parse(s: &str) -> Option<StageOutcome> {
        match s {
            "succeeded" => Some(StageOutcome::Succeeded),
            "no_change" => Some(StageOutcome::NoChange),
            _ => None,
        }
    }
}

/// What became of a hop a run's exit was due to make (the run's `stage_result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopResult {
    /// The target label was added and every other stage label removed.
    Advanced,
    /// The target label was added; removing another stage label failed.
    Partial,
    /// Adding the target label failed: the exit took the handoff write instead.
    Failed,
    /// The issue's consecutive hops reached the hop ceiling: the exit took the handoff write.
    Ceiling,
}

impl HopResult {
    pub const fn as_str(self) -> &'static str {
        match self {
            HopResult::Advanced => "advanced",
            HopResult::Partial => "partial",
            HopResult::Failed => "failed",
            HopResult::Ceiling => "ceiling",
        }
    }

    pub fn parse(s: &str) -> Option<HopResult> {
        match s {
            "advanced" => Some(HopResult::Advanced),
            "partial" => Some(HopResult::Partial),
            "failed" => Some(HopResult::Failed),
            "ceiling" => Some(HopResult::Ceiling),
            _ => None,
        }
    }

    /// Whether the hop was made (the issue moved to its next stage).
    pub const fn made(self) -> bool {
        matches!(self, HopResult::Advanced | HopResult::Partial)
    }
}

/// An issue's latest stage hop. It is kept (in memory and in the `stage_hops` table) until
/// the issue's consecutive-hop count resets, so it both counts hops and, while no run has
/// picked the issue up since, lists the issue in `between_stages[]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageHop {
    pub issue_id: String,
    pub identifier: String,
    pub display_identifier: String,
    /// Consecutive automatic hops of the issue, this one included.
    pub hop_count: u32,
    pub source_rule: String,
    pub target_rule: String,
    pub target_label: String,
    /// How the hopping run ended.
    pub previous_outcome: Option<StageOutcome>,
    /// The dispatch id of the run that made the hop.
    pub source_dispatch_id: String,
    /// The pass the hop continues.
    pub chain_id: String,
    /// When the pass's first run was dispatched; `None` when it cannot be dated.
    pub dispatched_at_ms: Option<i64>,
    pub hopped_at_ms: i64,
    /// A read has shown the target label since the hop (the `stage_hop_unconfirmed` hold
    /// lifts), or found the issue outside the active states.
    pub target_observed: bool,
    /// A run of the issue was dispatched after the hop: the issue is no longer between stages.
    pub picked_up: bool,
    /// The issue as the hopping run read it (the `between_stages[]` row's fields); each `""`
    /// when unread.
    pub issue_title: String,
    pub issue_url: String,
    pub issue_type: String,
    pub state: String,
    /// The labels the hop leaves: the dispatch read's, without the removed stage labels and
    /// with the target label; `None` while the hop holds no read of the labels.
    pub issue_labels: Option<Vec<String>>,
}

impl StageHop {
    /// Listed in `between_stages[]`: made, and no run has picked the issue up since.
    pub fn between_stages(&self) -> bool {
        !self.picked_up
    }

    /// The lineage the next stage's claim carries.
    pub fn lineage(&self) -> Option<StageLineage> {
        self.previous_outcome.map(|o| StageLineage {
            previous: self.source_rule.clone(),
            previous_outcome: o,
        })
    }
}

/// What holds a live stage pass: a running session of a stage rule, or a budget hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivePassKind {
    Session,
    BudgetHold,
}

impl LivePassKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            LivePassKind::Session => "session",
            LivePassKind::BudgetHold => "budget_hold",
        }
    }

    pub fn parse(s: &str) -> Option<LivePassKind> {
        match s {
            "session" => Some(LivePassKind::Session),
            "budget_hold" => Some(LivePassKind::BudgetHold),
            _ => None,
        }
    }
}

/// A stage pass that holds no retry entry (a queued retry carries its own chain and stage):
/// kept in the `live_stage_passes` table so `sortie stats`, another process, can count the
/// work on each stage that has not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePass {
    pub issue_id: String,
    pub identifier: String,
    pub kind: LivePassKind,
    pub chain_id: String,
    /// The stage rule the pass is on.
    pub rule_name: String,
    /// The rule whose hop reached the pass; `""` when no hop did.
    pub via_rule: String,
    pub since_ms: i64,
}

/// A new stage chain identifier: 26 lowercase base-32 characters (130 random bits).
pub fn new_chain_id() -> String {
    let mut bytes = [0u8; 17];
    if getrandom::fill(&mut bytes).is_err() {
        // Fall back to time-derived bytes; ids only need to be unique within this database.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            .to_be_bytes();
        bytes[..8].copy_from_slice(&t);
    }
    let encoded = data_encoding::BASE32_NOPAD.encode(&bytes).to_lowercase();
    encoded.chars().take(26).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_chain_ids_are_26_lowercase_characters() {
        for r in [
            HopResult::Advanced,
            HopResult::Partial,
            HopResult::Failed,
            HopResult::Ceiling,
        ] {
            assert_eq!(HopResult::parse(r.as_str()), Some(r));
        }
        for o in [StageOutcome::Succeeded, StageOutcome::NoChange] {
            assert_eq!(StageOutcome::parse(o.as_str()), Some(o));
        }
        let id = new_chain_id();
        assert_eq!(id.len(), 26);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_ne!(id, new_chain_id());
    }
}
