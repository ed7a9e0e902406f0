//! A returned check pass, applied by the feature to the rows still pending: ended issues,
//! expired watches, and each checked row's step (a wait, a fix run, a triage run, an
//! escalation, the end of the watch, a merge). The loop hands the checked rows back one at a
//! time (`Orchestrator::finish_reaction_pass`), applying each one's effects before the next,
//! so a row sees the retry slot as the previous row left it.

use crate::config::reactions::ReactionsConfig;
use crate::domain::{OutcomeKind, ReactionKind, ReactionWait};
use crate::orchestrator::core::effect::{Count, Effect};
use crate::orchestrator::core::feature::Cx;
use crate::orchestrator::core::io_pool::CallPanicked;
use crate::orchestrator::features::reactions::activity::{self, reaction_write};
use crate::orchestrator::features::reactions::cadence::{poll_interval, set_wait};
use crate::orchestrator::features::reactions::feature::ReactionsFeature;
use crate::orchestrator::features::reactions::pass::{Checked, Ending, Key, PassDone};
use crate::orchestrator::features::reactions::step::Step;
use crate::orchestrator::features::reactions::{LastCheck, ReactionRow};
use crate::store::{PrLoopMark, ReactionWrite};

impl ReactionsFeature {
    /// The pass came back: a failed state read backs the due rows off; ended issues and
    /// expired watches leave. Returns the checked rows for [`ReactionsFeature::apply_checked`].
    pub(crate) fn pass_returned(
        &mut self,
        done: Result<PassDone, CallPanicked>,
        cx: &Cx<'_>,
    ) -> (Vec<Checked>, Vec<Effect>) {
        self.pass_out = false;
        let done = match done {
            Ok(d) => d,
            Err(panic) => {
                log::error!(panic:% = panic; "reaction checks panicked");
                return (Vec::new(), Vec::new());
            }
        };
        if let Err(e) = &done.states {
            log::warn!(error:% = e; "reaction issue states not read; reactions wait");
            let base = cx.workflow.config.polling.interval_ms;
            self.back_off(&done.due, cx.now_ms, base);
            return (Vec::new(), Vec::new());
        }
        let mut effects = Vec::new();
        for (id, ending) in done.ended {
            match ending {
                Ending::Terminal { state, merged } => {
                    effects.push(terminal_outcome(&id, state, merged));
                    effects.extend(self.end_issue(&id, "the issue reached a terminal state"));
                }
                Ending::Departed => {
                    effects.extend(self.end_issue(&id, "the issue left the handoff state"))
                }
            }
        }
        for key in done.expired {
            if let Some(row) = self.rows.remove(&key) {
                self.memory.remove(&key);
                log::warn!(
                    issue_id:% = row.issue.id,
                    issue_identifier:% = row.issue.identifier,
                    reaction_kind:% = row.kind;
                    "reaction watch window ended"
                );
                effects.extend(self.forget_row(&row));
            }
        }
        (done.checked, effects)
    }

    /// One checked row: skipped when it left the pending set while the pass was out (its
    /// issue hopped, or a new run re-seeded it for another pull request); otherwise it takes
    /// what `orch` learnt meanwhile and its step is applied.
    pub(crate) fn apply_checked(
        &mut self,
        mut c: Checked,
        started_ms: i64,
        cx: &Cx<'_>,
        cfg: &ReactionsConfig,
    ) -> Vec<Effect> {
        let Some(live) = self.rows.get(&c.key).filter(|r| r.pr.pr == c.row.pr.pr) else {
            return Vec::new();
        };
        c.keep_live_seed(live, self.memory.get(&c.key));
        let answered = self.keep_live_triage(&mut c);
        let key = c.key.clone();
        self.rows.remove(&c.key);
        self.memory.remove(&c.key);
        let mut effects: Vec<Effect> = count_check(&c.row, &c.step).into_iter().collect();
        effects.extend(activity::quiet_check(
            &c.row, &mut c.mem, &c.step, cx.now_ms,
        ));
        if c.was_escalated && c.row.escalated_at_ms.is_none() {
            effects.push(escalation_ended(&c.row));
        }
        effects.extend(self.apply_step(c, started_ms, cx, cfg));
        if let (true, Some(row)) = (answered, self.rows.get_mut(&key)) {
            row.next_poll_at_ms = row.next_poll_at_ms.min(started_ms);
        }
        effects
    }

    fn apply_step(
        &mut self,
        c: Checked,
        started_ms: i64,
        cx: &Cx<'_>,
        cfg: &ReactionsConfig,
    ) -> Vec<Effect> {
        let Checked {
            key,
            mut row,
            mut mem,
            step,
            transition,
            ..
        } = c;
        let interval = poll_interval(row.kind, cfg, cx.workflow.config.polling.interval_ms);
        let next = started_ms + interval as i64;
        let mut effects = Vec::new();
        match step {
            Step::Wait {
                wait,
                next_poll_at_ms,
            } => set_wait(&mut row, wait, next_poll_at_ms),
            // Checks of one pass see the slot as it was when the pass began: a triage run
            // of another kind of the issue started since holds the workspace.
            Step::Dispatch { .. } if self.triage_running(&key.0) => {
                set_wait(&mut row, ReactionWait::RetrySlot, next);
            }
            Step::Dispatch {
                context,
                fingerprint,
                given,
                counts,
            } => {
                let fix = super::act::Fix {
                    context,
                    fingerprint,
                    given,
                    counts,
                };
                effects = super::act::dispatch(&mut row, &mut mem, fix, cx);
                set_wait(&mut row, ReactionWait::PollInterval, next);
            }
            Step::Escalate { trigger } => {
                effects = super::act::escalate(&mut row, trigger, cfg, cx);
                set_wait(&mut row, ReactionWait::PollInterval, next);
            }
            // Likewise a run or retry of the issue the pass did not see yet.
            Step::Triage { .. } if self.slot_busy(cx.state, &key.0) => {
                set_wait(&mut row, ReactionWait::RetrySlot, next);
            }
            Step::Triage {
                fingerprint,
                context,
            } => {
                effects.extend(self.triage_wanted(&key, &row, &mem, fingerprint, context));
                set_wait(&mut row, ReactionWait::Triage, next);
            }
            Step::End { why } => {
                log::info!(
                    issue_id:% = row.issue.id,
                    issue_identifier:% = row.issue.identifier,
                    reaction_kind:% = row.kind,
                    why:% = why;
                    "reaction ended"
                );
                return self.forget_row(&row);
            }
            Step::Merged {
                merge_path,
                merged_here,
                ..
            } => {
                if merged_here || matches!(transition, Some(Ok(()))) {
                    effects.extend(activity::pr_loop(&row, PrLoopMark::Acted, cx.now_ms));
                }
                let merged = super::act::Merged {
                    key,
                    row,
                    mem,
                    merge_path,
                    transition,
                };
                effects.extend(self.merged(merged, cfg, cx));
                return effects;
            }
        }
        self.keep(key, row, mem, started_ms);
        effects
    }

    /// Drops every row of the issue and what is stored for them.
    pub(crate) fn end_issue(&mut self, issue_id: &str, why: &str) -> Vec<Effect> {
        let keys: Vec<Key> = self
            .rows
            .keys()
            .filter(|k| k.0 == issue_id)
            .cloned()
            .collect();
        let Some(first) = keys.first() else {
            return Vec::new();
        };
        let identifier = self
            .rows
            .get(first)
            .map(|r| r.issue.identifier.clone())
            .unwrap_or_default();
        for key in &keys {
            self.rows.remove(key);
            self.memory.remove(key);
        }
        log::info!(
            issue_id:% = issue_id,
            issue_identifier:% = identifier,
            why:% = why;
            "pull request reactions ended"
        );
        vec![reaction_write(ReactionWrite::ClearIssue(
            issue_id.to_string(),
        ))]
    }

    /// A row left the pending set: its stored escalation, fingerprint and triage answer go
    /// with it, and the issue's stored rows when it was the issue's last.
    pub(crate) fn forget_row(&self, row: &ReactionRow) -> Vec<Effect> {
        let id = row.issue.id.clone();
        let mut effects = Vec::new();
        if row.escalated_at_ms.is_some() {
            effects.push(reaction_write(ReactionWrite::DeleteEscalation(
                id.clone(),
                row.kind,
            )));
        }
        effects.push(reaction_write(ReactionWrite::DeleteFingerprint(
            id.clone(),
            row.kind,
        )));
        effects.push(reaction_write(ReactionWrite::DeleteTriageAnswer(
            id.clone(),
            row.kind,
        )));
        if !self.rows.keys().any(|k| k.0 == id) {
            effects.push(reaction_write(ReactionWrite::ClearIssue(id)));
        }
        effects
    }
}

/// How a watched issue that reached a terminal state ended: `merged` when the pass read its
/// merge row's pull request as merged, `terminal` otherwise.
fn terminal_outcome(
    issue_id: &str,
    state: String,
    merged: Option<(ReactionKind, crate::scm::PullRequestRef)>,
) -> Effect {
    match merged {
        Some((kind, pr)) => Effect::Merged {
            issue_id: issue_id.to_string(),
            merge_path: if kind == ReactionKind::Merge {
                "auto_merge"
            } else {
                "merge_completion"
            },
            pr,
        },
        None => Effect::Outcome {
            issue_id: issue_id.to_string(),
            kind: OutcomeKind::Terminal,
            state,
        },
    }
}

/// `sortie_ci_status_checks_total` and `sortie_review_checks_total`.
fn count_check(row: &ReactionRow, step: &Step) -> Option<Effect> {
    let failed = matches!(
        step,
        Step::Wait {
            wait: ReactionWait::Backoff,
            ..
        }
    );
    match row.kind {
        ReactionKind::Ci => {
            let result = match (&row.last_check, failed) {
                (_, true) => "error",
                (Some(LastCheck::Ci { status, .. }), _) => status.as_str(),
                _ => "pending",
            };
            Some(Effect::Count(Count::CiStatusCheck(result)))
        }
        ReactionKind::Review | ReactionKind::BotReview => {
            let result = match step {
                Step::Dispatch { .. } => "dispatched",
                _ if failed => "error",
                _ => "skipped",
            };
            Some(Effect::Count(Count::ReviewCheck(result)))
        }
        _ => None,
    }
}

fn escalation_ended(row: &ReactionRow) -> Effect {
    log::info!(
        issue_id:% = row.issue.id,
        issue_identifier:% = row.issue.identifier,
        reaction_kind:% = row.kind;
        "reaction escalation ended"
    );
    reaction_write(ReactionWrite::DeleteEscalation(
        row.issue.id.clone(),
        row.kind,
    ))
}
