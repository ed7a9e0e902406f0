//! Where the loop starts the triage runs the reactions feature asks for
//! (`Effect::StartTriage`): it finds the reaction's agent and the issue's host and starts one
//! agent turn on a `triage-<identifier>` thread ([`crate::orchestrator::features::reactions::triage_run`]),
//! and hands what happened back to the feature (`triage_verdict.rs`), applying its effects.

use crate::orchestrator::core::effect::TriageStart;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::hosts::hooks::Placement;
use crate::orchestrator::features::reactions::pass::Key;
use crate::orchestrator::features::reactions::triage::{self, TriageError};
use crate::orchestrator::features::reactions::triage_run::{self, TriageDone, TriageJob};

/// A triage run's deadline when `agent.turn_timeout_ms` is 0 (no turn limit): an hour, the
/// default turn limit.
const FALLBACK_DEADLINE_MS: u64 = 3_600_000;

impl Orchestrator {
    /// Starts the triage run the feature asked for; one that cannot start answers `escalate`.
    pub(crate) fn start_triage(&mut self, t: TriageStart) {
        let TriageStart {
            key,
            row,
            fingerprint,
            context,
        } = t;
        let issue = super::act::recorded_issue(&row);
        let Some((_, _, agent)) = self.attempt_resources(&issue, &row.route()) else {
            return self.triage_not_started(&key, fingerprint, TriageError::AgentUnavailable);
        };
        let host = match self.place(&issue) {
            Placement::Here => None,
            Placement::Host(h) => Some(h),
            Placement::NoRoom => {
                return self.triage_not_started(&key, fingerprint, TriageError::NoSshHost);
            }
        };
        let turn_ms = self.workflow.config.agent.turn_timeout_ms;
        let cancel = CancelToken::new();
        let job = TriageJob {
            agent,
            workspaces: self.workspaces(),
            issue_id: row.issue.id.clone(),
            issue_identifier: row.issue.identifier.clone(),
            prompt: triage::prompt(&row, context.as_ref()),
            deadline: Duration::from_millis(if turn_ms == 0 {
                FALLBACK_DEADLINE_MS
            } else {
                turn_ms
            }),
            cancel: cancel.clone(),
            host,
        };
        let name = supervisor::thread_name("triage-", &row.issue.identifier);
        let (k, fp) = (key.clone(), fingerprint.clone());
        let clock = self.clock.clone();
        let started = self.spawn_thread(
            name,
            move || triage_run::run_counted(&job, &|| clock.now_ms()),
            move |o: &mut Orchestrator, r| o.finish_triage(k, fp, r),
        );
        if let Err(e) = started {
            let why = TriageError::NoThread(e.to_string());
            return self.triage_not_started(&key, fingerprint, why);
        }
        self.features
            .reactions
            .triage_started(key, fingerprint, cancel);
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            reaction_kind:% = row.kind;
            "reaction triage run started"
        );
    }

    fn triage_not_started(&mut self, key: &Key, fingerprint: String, why: TriageError) {
        self.with_features(|f, cx| f.reactions.triage_not_started(key, fingerprint, why, cx));
    }

    /// A triage run came back (`ReactionsFeature::triage_returned`).
    fn finish_triage(
        &mut self,
        key: Key,
        fingerprint: String,
        r: Result<TriageDone, crate::orchestrator::core::io_pool::CallPanicked>,
    ) {
        let draining = self.draining.is_some();
        self.with_features(|f, cx| {
            f.reactions
                .triage_returned(key, fingerprint, r, draining, cx)
        });
    }
}
