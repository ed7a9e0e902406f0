//! A reaction's activity in the pass it follows (`pr_loop`): each mark is written through the
//! store's single writer, keyed by the row's issue, pass (`chain_id`) and reaction key, so the
//! API can say what a reaction did after its row has gone, also across a restart.

use crate::domain::ReactionWait;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::reactions::step::Step;
use crate::orchestrator::features::reactions::{ReactionRow, RowMemory};
use crate::store::{PrLoopMark, PrLoopWrite, ReactionWrite};

impl Orchestrator {
    /// Records `mark` for the row's reaction in the row's pass. A pass without a chain or a
    /// dispatch time records nothing: the API serves such a pass as `unrecorded`.
    pub(crate) fn note_pr_loop(&self, row: &ReactionRow, mark: PrLoopMark) {
        if row.chain_id.is_empty() || row.dispatched_at_ms.is_none() {
            return;
        }
        let w = PrLoopWrite {
            issue_id: row.issue.id.clone(),
            chain_id: row.chain_id.clone(),
            reaction_key: row.kind.config_key().to_string(),
            mark,
            at_ms: self.clock.now_ms(),
        };
        persist::reaction_write(&self.store, ReactionWrite::PrLoop(w));
    }

    /// A check that read the pull request and had nothing to act on (it waits its cadence,
    /// not escalated): `quiet`, written once per pass; the row's memory remembers the pass.
    pub(crate) fn note_quiet_check(&self, row: &ReactionRow, mem: &mut RowMemory, step: &Step) {
        let quiet = matches!(
            step,
            Step::Wait {
                wait: ReactionWait::PollInterval,
                ..
            }
        ) && row.escalated_at_ms.is_none();
        if !quiet || mem.quiet_noted.as_deref() == Some(row.chain_id.as_str()) {
            return;
        }
        self.note_pr_loop(row, PrLoopMark::Quiet);
        mem.quiet_noted = Some(row.chain_id.clone());
    }
}
