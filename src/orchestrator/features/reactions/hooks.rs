//! Where the loop reaches the reactions feature (`feature.rs` and the files it spreads over):
//! seeding at a run's exit, rebuilding at startup, the poll tick's check pass and the pass's
//! result. Each applies the effects the feature returns; the decisions are the feature's.

use crate::config::reactions::ReactionsConfig;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::reactions::feature::PassSources;
use crate::orchestrator::features::reactions::pass::PassDone;

impl Orchestrator {
    /// The reactions the process applies: every kind as captured at startup, except
    /// `ci_failure`, which follows the workflow in effect.
    pub(crate) fn reaction_config(&self) -> ReactionsConfig {
        self.reactions_cfg
            .after_reload(&self.workflow.config.reactions)
    }

    /// At the exit of a run that ended normally and left a pull-request record
    /// (`ReactionsFeature::seed_exit`); nothing without a forge.
    pub(crate) fn seed_reactions(&mut self, entry: &RunningEntry, result: &SupervisorResult) {
        if self.scm.is_none() {
            return;
        }
        let cfg = self.reaction_config();
        self.with_features(|f, cx| {
            f.reactions.seed_exit(&entry.facts, result, &cfg, cx);
            Vec::new()
        });
    }

    /// Checks every due row (the reconcile part of a poll tick): the feature decides the
    /// pass ([`ReactionsFeature::due_pass`](super::feature::ReactionsFeature::due_pass)), the
    /// loop runs it on a `work` thread and applies it in
    /// [`Orchestrator::finish_reaction_pass`].
    pub(crate) fn check_reactions(&mut self) {
        let Some(scm) = self.scm.clone() else {
            return;
        };
        let sources = PassSources {
            scm,
            tracker: self.tracker.clone(),
            cfg: self.reaction_config(),
        };
        self.with_features(|f, cx| f.reactions.due_pass(cx, sources));
    }

    /// A reaction pass came back: the forge's health as it read it, then the feature's
    /// decisions (`ReactionsFeature::pass_returned`), and each checked row in turn
    /// (`ReactionsFeature::apply_checked`), its effects applied before the next row's, so a
    /// row sees the retry slot as the previous one left it.
    pub(crate) fn finish_reaction_pass(
        &mut self,
        done: Result<PassDone, crate::orchestrator::core::io_pool::CallPanicked>,
    ) {
        let done = done.map(|mut d| {
            if let Some(h) = self.state.health.scm.as_mut() {
                h.check = std::mem::take(&mut d.health);
            }
            d
        });
        let started_ms = done.as_ref().map_or(0, |d| d.started_ms);
        let mut checked = Vec::new();
        self.with_features(|f, cx| {
            let (rows, effects) = f.reactions.pass_returned(done, cx);
            checked = rows;
            effects
        });
        let cfg = self.reaction_config();
        for c in checked {
            self.with_features(|f, cx| f.reactions.apply_checked(c, started_ms, cx, &cfg));
        }
    }

    /// Startup: the rows rebuilt from run history (`ReactionsFeature::rebuild`); nothing
    /// without a forge.
    pub(crate) fn rebuild_reactions(&mut self, snap: crate::store::ReactionsSnapshot) {
        if self.scm.is_none() {
            return;
        }
        let cfg = self.reaction_config();
        self.with_features(|f, cx| {
            f.reactions.rebuild(&snap, &cfg, cx);
            Vec::new()
        });
    }
}
