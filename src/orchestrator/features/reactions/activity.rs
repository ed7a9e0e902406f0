//! A reaction's activity in the pass it follows (`pr_loop`): each mark is a write through the
//! store's single writer, keyed by the row's issue, pass (`chain_id`) and reaction key, so the
//! API can say what a reaction did after its row has gone, also across a restart.

use crate::domain::ReactionWait;
use crate::orchestrator::core::effect::{Effect, Write};
use crate::orchestrator::features::reactions::step::Step;
use crate::orchestrator::features::reactions::{ReactionRow, RowMemory};
use crate::store::{PrLoopMark, PrLoopWrite, ReactionWrite};

/// The write of `mark` for the row's reaction in the row's pass. A pass without a chain or a
/// dispatch time records nothing: the API serves such a pass as `unrecorded`.
pub(crate) fn pr_loop(row: &ReactionRow, mark: PrLoopMark, now_ms: i64) -> Option<Effect> {
    if row.chain_id.is_empty() || row.dispatched_at_ms.is_none() {
        return None;
    }
    let w = PrLoopWrite {
        issue_id: row.issue.id.clone(),
        chain_id: row.chain_id.clone(),
        reaction_key: row.kind.config_key().to_string(),
        mark,
        at_ms: now_ms,
    };
    Some(Effect::Write(Write::Reaction(ReactionWrite::PrLoop(w))))
}

/// A check that read the pull request and had nothing to act on (it waits its cadence, not
/// escalated): `quiet`, written once per pass; the row's memory remembers the pass.
pub(crate) fn quiet_check(
    row: &ReactionRow,
    mem: &mut RowMemory,
    step: &Step,
    now_ms: i64,
) -> Option<Effect> {
    let quiet = matches!(
        step,
        Step::Wait {
            wait: ReactionWait::PollInterval,
            ..
        }
    ) && row.escalated_at_ms.is_none();
    if !quiet || mem.quiet_noted.as_deref() == Some(row.chain_id.as_str()) {
        return None;
    }
    mem.quiet_noted = Some(row.chain_id.clone());
    pr_loop(row, PrLoopMark::Quiet, now_ms)
}

/// A reaction row's write, as an effect.
pub(crate) fn reaction_write(w: ReactionWrite) -> Effect {
    Effect::Write(Write::Reaction(w))
}
