//! A `held[]` row: an issue a dispatch pass held back (blockers, full agent slots, a
//! workspace whose lock another process holds, a hold on its whole agent kind, or a spend
//! window that holds every dispatch).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::state_key;
use crate::orchestrator::dispatch_pass::{HoldReason, SlotScope};
use crate::orchestrator::snapshot::{HeldRow, Snapshot};

use super::super::wording::{self, BlockerWords};
use super::{IssueFields, nonempty, ts};

/// The sessions running against each agent slot limit in the snapshot a document is built
/// from. A hold is the latest pass's decision, while the running rows are the snapshot's: a
/// slot hold is counted and worded against the running rows served beside it, so a document
/// never calls every slot taken next to a running list with a free one.
#[derive(Debug, Default)]
pub struct SlotUse {
    total: usize,
    by_state: BTreeMap<String, usize>,
}

impl SlotUse {
    pub fn of(snap: &Snapshot) -> SlotUse {
        let mut by_state = BTreeMap::new();
        for r in &snap.running {
            *by_state.entry(state_key(&r.issue.state)).or_insert(0) += 1;
        }
        SlotUse {
            total: snap.running.len(),
            by_state,
        }
    }

    fn used(&self, scope: &SlotScope) -> usize {
        match scope {
            SlotScope::Global => self.total,
            SlotScope::State(s) => self.by_state.get(&state_key(s)).copied().unwrap_or(0),
            // Counted across workflows: only the pass saw it.
            SlotScope::Daemon => 0,
        }
    }
}

/// An issue that blocks the held one.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BlockerView {
    pub issue_id: String,
    pub issue_identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlotScopeName {
    Global,
    State,
    /// The cap every workflow of the daemon shares (several workflows only).
    Daemon,
}

/// The agent-slot limit that is full.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SlotView {
    pub scope: SlotScopeName,
    /// The state whose limit is full (state scope only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    pub used: usize,
    pub limit: usize,
}

/// Why and since when the issue is held.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Hold")]
pub struct HoldView {
    pub reason: crate::domain::HoldCode,
    pub held_since: String,
    pub blockers: Option<Vec<BlockerView>>,
    pub slot: Option<SlotView>,
    /// When the holding spend window or the usage limit resets (the spend reasons and
    /// usage_limit only).
    pub resets_at: Option<String>,
    /// The agent kind the hold stops (usage_limit, agent_auth_failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    /// True for a usage_limit hold on one configured model alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_only: Option<bool>,
    /// The configured model a model_only hold stops; absent for the runtime's default model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub reason_text: String,
    pub release_text: String,
}

/// A `held[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "HeldRow")]
pub struct HeldView {
    #[serde(flatten)]
    pub issue: IssueFields,
    pub hold: HoldView,
    pub status_text: String,
    pub status_text_full: String,
}

impl HoldView {
    /// The hold and the row's long sentence; a slot hold counts its `used` in `slots`.
    pub fn build(reason: &HoldReason, since_ms: i64, slots: &SlotUse) -> (HoldView, String) {
        let mut agent = AgentHoldFields::default();
        let (blockers, slot, words) = match reason {
            HoldReason::BlockedBy(bs) => {
                let (list, words) = blocked_by(bs);
                (Some(list), None, words)
            }
            HoldReason::AgentSlotsFull { scope, limit, used } => {
                let (used, words) = match scope {
                    SlotScope::Daemon => (*used, wording::daemon_slots_full(*used, *limit)),
                    SlotScope::Global => {
                        let used = slots.used(scope);
                        (used, wording::slots_full(None, used, *limit))
                    }
                    SlotScope::State(s) => {
                        let used = slots.used(scope);
                        (used, wording::slots_full(Some(s), used, *limit))
                    }
                };
                let (scope, state) = match scope {
                    SlotScope::Global => (SlotScopeName::Global, None),
                    SlotScope::State(s) => (SlotScopeName::State, Some(s.clone())),
                    SlotScope::Daemon => (SlotScopeName::Daemon, None),
                };
                let slot = SlotView {
                    scope,
                    state,
                    used,
                    limit: *limit,
                };
                (None, Some(slot), words)
            }
            HoldReason::WorkspaceLocked { holder_pid } => {
                (None, None, wording::workspace_locked(*holder_pid))
            }
            HoldReason::IdentifierInUse { by_issue_id } => {
                (None, None, wording::identifier_in_use(by_issue_id))
            }
            HoldReason::UsageLimit {
                agent_kind,
                resets_at_ms,
                model_only,
                model,
            } => {
                agent = AgentHoldFields {
                    resets_at: Some(ts(*resets_at_ms)),
                    agent_kind: Some(agent_kind.clone()),
                    model_only: model_only.then_some(true),
                    model: model.clone().filter(|_| *model_only),
                };
                let on_model = model_only.then_some(model.as_deref());
                (None, None, wording::usage_limit(agent_kind, on_model))
            }
            HoldReason::AgentAuthFailed { agent_kind } => {
                agent.agent_kind = Some(agent_kind.clone());
                (None, None, wording::agent_auth_failed(agent_kind))
            }
            HoldReason::SpendCeiling {
                window,
                resets_at_ms,
            } => {
                agent.resets_at = Some(ts(*resets_at_ms));
                (None, None, wording::spend_ceiling_hold(*window))
            }
            HoldReason::BlockersUnresolved => (None, None, wording::blockers_unresolved()),
            HoldReason::BlockersNotRead => (None, None, wording::blockers_not_read()),
            HoldReason::BlockersIncomplete => (None, None, wording::blockers_incomplete()),
            HoldReason::ParkCommentsUnread => (None, None, wording::park_comments_unread()),
            HoldReason::SshHostsFull => (None, None, wording::ssh_hosts_full()),
            HoldReason::FailureHeld { cause, runs } => {
                (None, None, wording::failure_held(cause, *runs))
            }
            HoldReason::Feature(h) => {
                agent.resets_at = h.resets_at_ms.map(ts);
                let words = (
                    h.reason_text.clone(),
                    h.release_text.clone(),
                    h.full_text.clone(),
                );
                (None, None, words)
            }
        };
        let (reason_text, release_text, full) = words;
        let hold = HoldView {
            reason: reason.code(),
            held_since: ts(since_ms),
            blockers,
            slot,
            resets_at: agent.resets_at,
            agent_kind: agent.agent_kind,
            model_only: agent.model_only,
            model: agent.model,
            reason_text,
            release_text,
        };
        (hold, full)
    }
}

/// A `blocked_by` hold's blockers and sentences.
fn blocked_by(bs: &[crate::domain::BlockerRef]) -> (Vec<BlockerView>, (String, String, String)) {
    let list = bs
        .iter()
        .map(|b| BlockerView {
            issue_id: b.id.clone(),
            issue_identifier: b.identifier.clone(),
            state: nonempty(&b.state),
        })
        .collect();
    let names: Vec<BlockerWords<'_>> = bs
        .iter()
        .map(|b| BlockerWords {
            identifier: &b.identifier,
            state: &b.state,
        })
        .collect();
    (list, wording::blocked_by(&names))
}

/// The members of a hold on a whole agent kind.
#[derive(Default)]
struct AgentHoldFields {
    resets_at: Option<String>,
    agent_kind: Option<String>,
    model_only: Option<bool>,
    model: Option<String>,
}

impl HeldView {
    pub fn build(h: &HeldRow, slots: &SlotUse) -> HeldView {
        let (hold, full) = HoldView::build(&h.reason, h.since_ms, slots);
        HeldView {
            issue: IssueFields::of(&h.issue),
            status_text: hold.reason_text.clone(),
            hold,
            status_text_full: full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::dispatch_pass::{FeatureHold, OnRetry};

    #[test]
    fn a_feature_hold_serves_its_own_code_words_and_reset() {
        let hold = HoldReason::Feature(FeatureHold {
            code: crate::domain::HoldCode::UsageLimit,
            reason_text: "Reason".into(),
            release_text: "Released later.".into(),
            full_text: "Reason. More.".into(),
            dry_run_text: "reason".into(),
            resets_at_ms: Some(0),
            on_retry: OnRetry::Release,
        });
        let slots = SlotUse::of(&Snapshot::default());
        let (view, full) = HoldView::build(&hold, 0, &slots);
        assert_eq!(view.reason.as_str(), "usage_limit");
        assert_eq!(
            (view.reason_text.as_str(), view.release_text.as_str()),
            ("Reason", "Released later.")
        );
        assert_eq!(full, "Reason. More.");
        assert_eq!(view.resets_at, Some(crate::clock::rfc3339_ms(0)));
        assert!(view.blockers.is_none() && view.slot.is_none() && view.agent_kind.is_none());
    }
}
