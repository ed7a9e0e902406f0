//! What a reaction does when a check asks it to act, decided by the feature and returned as
//! effects: a fix run queued as the issue's retry, a standing escalation (stored, then
//! written to the tracker), a failing CI verdict's run-history row, a merge's outcome.

use crate::config::reactions::ReactionsConfig;
use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait, RetryTrigger};
use crate::orchestrator::core::effect::{Effect, ReactionDispatch};
use crate::orchestrator::core::feature::Cx;
use crate::orchestrator::core::tracker_ops::TrackerOp;
use crate::orchestrator::features::reactions::activity::{self, reaction_write};
use crate::orchestrator::features::reactions::cadence::{poll_interval, set_wait};
use crate::orchestrator::features::reactions::escalation;
use crate::orchestrator::features::reactions::feature::ReactionsFeature;
use crate::orchestrator::features::reactions::pass::Key;
use crate::orchestrator::features::reactions::{
    FixContext, LastCheck, ReactionRow, RowMemory, RunReaction,
};
use crate::store::{Fingerprint, GivenComments, PrLoopMark, ReactionWrite, StoredEscalation};

/// A fix run starts this soon after the check that asked for it.
const REACTION_RETRY_DELAY_MS: u64 = 1_000;

/// The fix a check asked for (`Step::Dispatch`).
pub(crate) struct Fix {
    pub context: Option<FixContext>,
    pub fingerprint: Option<String>,
    pub given: Vec<String>,
    /// The kind counts the run (`used_attempts` rises).
    pub counts: bool,
}

/// The continuation run a check asked for, queued as the issue's retry. A budget hold may
/// keep it from starting; it still counts.
pub(crate) fn dispatch(
    row: &mut ReactionRow,
    mem: &mut RowMemory,
    fix: Fix,
    cx: &Cx<'_>,
) -> Vec<Effect> {
    let now = cx.now_ms;
    let used = row.used_attempts.unwrap_or(0) + u32::from(fix.counts);
    let mut effects = Vec::new();
    if row.kind == ReactionKind::Ci {
        effects.extend(ci_failed_run(row, cx));
    }
    let attempt = mem.run_attempt.max(1);
    effects.push(Effect::DispatchReaction(Box::new(ReactionDispatch {
        issue: recorded_issue(row),
        attempt,
        delay_ms: REACTION_RETRY_DELAY_MS,
        trigger: if row.kind == ReactionKind::Ci {
            RetryTrigger::CiFix
        } else {
            RetryTrigger::Continuation
        },
        session_id: mem.session_id.clone(),
        dispatched_at_ms: row.dispatched_at_ms.unwrap_or(now),
        route: row.route(),
        reaction: RunReaction {
            kind: row.kind,
            attempt: fix.counts.then_some(used),
            pr: row.pr.pr.clone(),
        },
        context: fix.context.clone(),
    })));
    mem.last_context = fix.context;
    if fix.counts {
        row.used_attempts = Some(used);
    }
    mem.run_attempt = attempt + 1;
    effects.extend(activity::pr_loop(row, PrLoopMark::Continuation, now));
    effects.extend(note_dispatched(row, mem, fix.fingerprint, fix.given, now));
    log::info!(
        issue_id:% = row.issue.id,
        issue_identifier:% = row.issue.identifier,
        reaction_kind:% = row.kind,
        attempt:% = used;
        "reaction dispatched a continuation"
    );
    effects
}

/// The fingerprint and the given comments of a dispatch, kept so the same subject is never
/// dispatched twice, also across a restart.
fn note_dispatched(
    row: &ReactionRow,
    mem: &mut RowMemory,
    fingerprint: Option<String>,
    given: Vec<String>,
    now: i64,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    if let Some(fp) = fingerprint {
        mem.fingerprint = Some((fp.clone(), true));
        let f = Fingerprint {
            issue_id: row.issue.id.clone(),
            kind: row.kind,
            fingerprint: fp,
            dispatched: true,
        };
        effects.push(reaction_write(ReactionWrite::SaveFingerprint(f, now)));
    }
    if !given.is_empty() {
        mem.given.extend(given.iter().cloned());
        effects.push(reaction_write(ReactionWrite::GiveComments(GivenComments {
            issue_id: row.issue.id.clone(),
            pr_key: format!("{}#{}", row.pr.pr.repository(), row.pr.pr.number),
            comment_ids: given,
        })));
    }
    effects
}

/// A failing CI verdict Sortie acts on is a run-history row (no agent, no dispatch id),
/// counted towards `agent.max_sessions`.
fn ci_failed_run(row: &ReactionRow, cx: &Cx<'_>) -> Option<Effect> {
    let Some(LastCheck::Ci {
        head_sha,
        status: CiStatus::Failing,
        failing_checks,
        ..
    }) = &row.last_check
    else {
        return None;
    };
    let now = cx.now_ms;
    let mut run = crate::store::RunRecord::new(crate::domain::RunStatus::CiFailed);
    run.issue_id = row.issue.id.clone();
    run.identifier = row.issue.identifier.clone();
    run.display_identifier = row.issue.display_identifier.clone();
    run.issue_title = row.issue.title.clone();
    run.issue_url = row.issue.url.clone();
    run.started_at_ms = now;
    run.completed_at_ms = now;
    run.dispatched_at_ms = row.dispatched_at_ms;
    run.chain_id = row.chain_id.clone();
    run.workflow_file = cx.workflow.path.display().to_string();
    run.trigger = Some(String::new());
    run.reaction_kind = Some(ReactionKind::Ci.as_str().into());
    run.reaction_config_key = Some(ReactionKind::Ci.config_key().into());
    run.error = Some(crate::mask::mask(&format!(
        "CI failing on {head_sha}: {}",
        failing_checks.join(", ")
    )));
    Some(Effect::RecordRun {
        run: Box::new(run),
        what: "CI result",
    })
}

/// Begins a standing escalation: stored first, then the tracker write queued (a failed write
/// is logged and the escalation stands).
pub(crate) fn escalate(
    row: &mut ReactionRow,
    trigger: EscalationTrigger,
    cfg: &ReactionsConfig,
    cx: &Cx<'_>,
) -> Vec<Effect> {
    let now = cx.now_ms;
    let mut effects = Vec::new();
    if row.kind == ReactionKind::Ci {
        effects.extend(ci_failed_run(row, cx));
        effects.push(reaction_write(ReactionWrite::DeleteFingerprint(
            row.issue.id.clone(),
            row.kind,
        )));
    }
    row.escalated_at_ms = Some(now);
    row.escalation_trigger = Some(trigger);
    effects.push(reaction_write(ReactionWrite::SaveEscalation(stored(row))));
    effects.extend(activity::pr_loop(row, PrLoopMark::Escalated, now));
    log::warn!(
        issue_id:% = row.issue.id,
        issue_identifier:% = row.issue.identifier,
        reaction_kind:% = row.kind,
        trigger:% = trigger;
        "reaction escalated to a person"
    );
    effects.push(Effect::Tracker(TrackerOp::Escalate {
        issue_id: row.issue.id.clone(),
        issue_identifier: row.issue.identifier.clone(),
        kind: row.kind,
        write: escalation::write_for(row, cfg),
    }));
    effects
}

/// A merged pull request as a check found it (`Step::Merged`), with the pass's transition.
pub(crate) struct Merged {
    pub key: Key,
    pub row: ReactionRow,
    pub mem: RowMemory,
    pub merge_path: &'static str,
    pub transition: Option<crate::tracker::TrackerResult<()>>,
}

impl ReactionsFeature {
    /// The pull request merged. Merge completion moves the issue first (a failed move counts
    /// and may escalate); then the outcome is `merged` and the watch ends. A merge by the
    /// `merge` kind leaves a merge-completion row to move the issue.
    pub(crate) fn merged(&mut self, m: Merged, cfg: &ReactionsConfig, cx: &Cx<'_>) -> Vec<Effect> {
        let Merged {
            key,
            mut row,
            mem,
            merge_path,
            transition,
        } = m;
        if let Some(Err(e)) = transition {
            return self.merge_transition_failed(key, row, mem, &e, cfg, cx);
        }
        let mut effects = vec![Effect::Merged {
            issue_id: row.issue.id.clone(),
            merge_path,
            pr: row.pr.pr.clone(),
        }];
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            merge_path:% = merge_path;
            "pull request merged"
        );
        let completion = (row.issue.id.clone(), ReactionKind::MergeCompletion);
        if row.kind == ReactionKind::Merge
            && let Some(c) = self.rows.get_mut(&completion)
        {
            c.next_poll_at_ms = cx.now_ms;
            let others: Vec<Key> = self
                .rows
                .keys()
                .filter(|k| k.0 == row.issue.id && k.1 != ReactionKind::MergeCompletion)
                .cloned()
                .collect();
            for k in others {
                self.rows.remove(&k);
                self.memory.remove(&k);
            }
            row.escalated_at_ms = None;
            effects.extend(self.forget_row(&row));
            return effects;
        }
        effects.extend(self.end_issue(&row.issue.id, "the pull request merged"));
        effects
    }

    fn merge_transition_failed(
        &mut self,
        key: Key,
        mut row: ReactionRow,
        mem: RowMemory,
        e: &crate::tracker::TrackerError,
        cfg: &ReactionsConfig,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        log::warn!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            error:% = e.to_string();
            "merge completion transition failed"
        );
        let used = row.used_attempts.unwrap_or(0) + 1;
        row.used_attempts = Some(used);
        let max = row.max_attempts.unwrap_or(0);
        let refused = matches!(
            e.kind,
            crate::tracker::TrackerErrorKind::Auth | crate::tracker::TrackerErrorKind::Payload
        );
        let interval = poll_interval(row.kind, cfg, cx.workflow.config.polling.interval_ms);
        let now = cx.now_ms;
        let mut effects = Vec::new();
        if refused || used >= max {
            let trigger = if refused {
                EscalationTrigger::Refused
            } else {
                EscalationTrigger::BudgetExhausted
            };
            effects = escalate(&mut row, trigger, cfg, cx);
            set_wait(&mut row, ReactionWait::PollInterval, now + interval as i64);
        } else {
            row.backoff_count += 1;
            let delay = interval
                .saturating_mul(1 << row.backoff_count.min(16))
                .min(crate::orchestrator::features::reactions::cx::MAX_BACKOFF_MS);
            row.wait = Some(ReactionWait::Backoff);
            row.next_poll_at_ms = now + delay as i64;
        }
        self.keep(key, row, mem, now);
        effects
    }
}

fn stored(row: &ReactionRow) -> StoredEscalation {
    StoredEscalation {
        issue_id: row.issue.id.clone(),
        kind: row.kind,
        escalated_at_ms: row.escalated_at_ms.unwrap_or(0),
        trigger: row
            .escalation_trigger
            .unwrap_or(EscalationTrigger::BudgetExhausted),
        used_attempts: row.used_attempts.map(i64::from),
        identifier: row.issue.identifier.clone(),
        display_identifier: row.issue.display_identifier.clone(),
        issue_title: row.issue.title.clone(),
        issue_url: row.issue.url.clone(),
        pr_owner: row.pr.pr.owner.clone(),
        pr_repo: row.pr.pr.repo.clone(),
        pr_number: i64::try_from(row.pr.pr.number).unwrap_or(0),
        pr_branch: row.pr.branch.clone(),
        pr_head_sha: row.pr.head_sha.clone(),
    }
}

/// The issue as a reaction row recorded it, for a run the reaction starts (a fix, a triage).
pub(crate) fn recorded_issue(row: &ReactionRow) -> crate::domain::Issue {
    crate::orchestrator::core::persist::issue_from_parts(
        &row.issue.id,
        &row.issue.identifier,
        &row.issue.title,
        &row.issue.url,
        row.issue.issue_type.as_deref().unwrap_or(""),
        row.issue.labels.as_deref().unwrap_or(&[]),
        &row.issue.state,
    )
}
