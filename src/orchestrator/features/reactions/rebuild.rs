//! Where pending reactions come from, as the feature decides it: a row per applied kind at the
//! exit of a run that left a pull-request record, and at startup rows rebuilt from run history
//! with the stored escalations, fingerprints, given comments and triage answers.

use crate::config::reactions::ReactionsConfig;
use crate::domain::{OutcomeKind, ReactionKind};
use crate::orchestrator::core::feature::Cx;
use crate::orchestrator::core::run_record::{SupervisorExit, SupervisorResult};
use crate::orchestrator::core::state::RunFacts;
use crate::orchestrator::features::reactions::feature::ReactionsFeature;
use crate::orchestrator::features::reactions::seed::{self, SeedRun};

impl ReactionsFeature {
    /// At the exit of a run that ended normally and left a pull-request record: a row per
    /// applied kind, or the existing rows follow the run (their counts kept).
    pub(crate) fn seed_exit(
        &mut self,
        facts: &RunFacts,
        result: &SupervisorResult,
        cfg: &ReactionsConfig,
        cx: &Cx<'_>,
    ) {
        let Some(record) = result.pr_record.clone() else {
            return;
        };
        let normal = matches!(
            &result.exit,
            SupervisorExit::Normal { declared, .. }
                if *declared != Some(crate::agent::status_file::DeclaredOutcome::Blocked)
        );
        if !normal {
            return;
        }
        let issue = &facts.issue;
        let state = match cx.state.outcomes.get(&issue.id) {
            Some((OutcomeKind::HandedOff, s)) => s.clone(),
            _ => issue.state.clone(),
        };
        let agent_kind = if facts.route.agent_kind.is_empty() {
            &cx.workflow.config.agent.kind
        } else {
            &facts.route.agent_kind
        };
        let run = SeedRun {
            issue: seed::issue_of(issue, &state),
            record,
            dispatched_at_ms: Some(facts.dispatched_at_ms),
            chain_id: facts.route.chain_id.clone(),
            rule_name: facts.route.rule_name.clone(),
            agent_kind: agent_kind.to_string(),
            configured_model: facts.route.configured_model.clone(),
            next_attempt: facts.attempt + 1,
            session_id: result.session_id.clone().or(facts.session_id.clone()),
        };
        let Some(pr) = run.pull_request() else {
            log::debug!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier;
                "reactions not seeded: the pull request record names no pull request"
            );
            return;
        };
        for kind in seed::applied_kinds(cfg) {
            self.seed((issue.id.clone(), kind), &run, &pr, cx.now_ms, cfg);
        }
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            pull_request:% = format!("{}#{}", pr.repository(), pr.number);
            "pull request reactions watching"
        );
    }

    /// Startup: rows rebuilt from the newest runs that left a pull-request record, with the
    /// stored escalations, fingerprints and given comments. A rebuilt row has no wait, no
    /// check, no link, and only the title and link of its issue.
    pub(crate) fn rebuild(
        &mut self,
        snap: &crate::store::ReactionsSnapshot,
        cfg: &ReactionsConfig,
        cx: &Cx<'_>,
    ) {
        let kinds = seed::applied_kinds(cfg);
        for run in &snap.pr_runs {
            let finished = matches!(
                cx.state.outcomes.get(&run.issue_id),
                Some((OutcomeKind::Merged | OutcomeKind::Terminal, _))
            );
            if finished {
                continue;
            }
            let Some(seed_run) = rebuilt_run(run) else {
                continue;
            };
            let Some(pr) = seed_run.pull_request() else {
                continue;
            };
            for kind in &kinds {
                self.seed(
                    (run.issue_id.clone(), *kind),
                    &seed_run,
                    &pr,
                    cx.now_ms,
                    cfg,
                );
            }
        }
        self.restore_memory(snap);
        self.restore_triage_answers(&snap.triage_answers);
    }

    fn restore_memory(&mut self, snap: &crate::store::ReactionsSnapshot) {
        for e in &snap.escalations {
            if let Some(row) = self.rows.get_mut(&(e.issue_id.clone(), e.kind)) {
                row.escalated_at_ms = Some(e.escalated_at_ms);
                row.escalation_trigger = Some(e.trigger);
                row.used_attempts = e.used_attempts.map(|n| n.max(0) as u32);
            }
        }
        for f in &snap.fingerprints {
            if let Some(mem) = self.memory.get_mut(&(f.issue_id.clone(), f.kind)) {
                mem.fingerprint = Some((f.fingerprint.clone(), f.dispatched));
            }
        }
        for g in &snap.given {
            for kind in [ReactionKind::Review, ReactionKind::BotReview] {
                if let Some(mem) = self.memory.get_mut(&(g.issue_id.clone(), kind)) {
                    mem.given.extend(g.comment_ids.iter().cloned());
                }
            }
        }
    }
}

/// The run a stored history row describes, when its record is readable.
fn rebuilt_run(run: &crate::store::PrRun) -> Option<SeedRun> {
    let record: crate::agent::pr_record::PrRecord = serde_json::from_str(&run.pr_record).ok()?;
    Some(SeedRun {
        issue: crate::orchestrator::features::reactions::ReactionIssue {
            id: run.issue_id.clone(),
            identifier: run.identifier.clone(),
            display_identifier: run.display_identifier.clone(),
            title: run.issue_title.clone(),
            url: run.issue_url.clone(),
            issue_type: None,
            labels: None,
            state: String::new(),
        },
        record,
        dispatched_at_ms: run.dispatched_at_ms,
        chain_id: run.chain_id.clone(),
        rule_name: run.rule_name.clone(),
        agent_kind: run.agent_adapter.clone(),
        configured_model: run.configured_model.clone(),
        next_attempt: u32::try_from(run.attempt.max(0)).unwrap_or(0),
        session_id: run.session_id.clone(),
    })
}
