//! Keeps the `live_stage_passes` table in step with the state: written at each full publish,
//! only what changed since the last write; emptied when the daemon starts.

use crate::orchestrator::core::orchestrator::*;

impl Orchestrator {
    /// Empties the table the previous process left (nothing is restored from it).
    pub(crate) fn clear_live_passes(&mut self) {
        self.state.live_passes.clear();
        let w = crate::store::StageHopWrite::ClearLivePasses;
        if let Err(e) = self.store.writer().stage_hop(w) {
            log::warn!(error:% = e.to_string(); "live stage passes not emptied");
        }
    }

    /// Writes the live passes that began or changed and ends the ones that are gone.
    pub(crate) fn sync_live_passes(&mut self) {
        let now = self.clock.now_ms();
        let next = crate::orchestrator::features::stages::live_passes(
            &self.state,
            &self.workflow.config,
            now,
        );
        if next == self.state.live_passes {
            return;
        }
        let writer = self.store.writer();
        for id in self.state.live_passes.keys() {
            if !next.contains_key(id) {
                let w = crate::store::StageHopWrite::EndLivePass(id.clone());
                if let Err(e) = writer.stage_hop(w) {
                    log::warn!(issue_id:% = id, error:% = e.to_string(); "live stage pass not ended");
                }
            }
        }
        for (id, p) in &next {
            if self.state.live_passes.get(id) != Some(p) {
                let w = crate::store::StageHopWrite::LivePass(Box::new(p.clone()));
                if let Err(e) = writer.stage_hop(w) {
                    log::warn!(
                        issue_id:% = id,
                        issue_identifier:% = p.identifier,
                        error:% = e.to_string();
                        "live stage pass not saved"
                    );
                }
            }
        }
        self.state.live_passes = next;
    }
}
