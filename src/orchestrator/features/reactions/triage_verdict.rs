//! Triage runs as the feature decides them. A check's `Step::Triage` asks the loop to start a
//! run (`Effect::StartTriage`, started by `triage_hooks.rs`); at most one runs per row, and
//! while it is out the issue's retry slot counts as busy, so nothing else runs in its
//! workspace. The verdict comes back here: it is kept in the row's memory, stored
//! (`triage_answers`), and the row is due at once, so the next check applies it to the
//! subject as the forge shows it then (`reactions::triage::before_fix`). A run that fails,
//! times out or cannot start answers `escalate`.

use crate::agent::CancelToken;
use crate::orchestrator::core::effect::{Count, Effect, TriageStart};
use crate::orchestrator::core::feature::Cx;
use crate::orchestrator::core::io_pool::CallPanicked;
use crate::orchestrator::features::reactions::activity::{self, reaction_write};
use crate::orchestrator::features::reactions::feature::ReactionsFeature;
use crate::orchestrator::features::reactions::pass::{Checked, Key};
use crate::orchestrator::features::reactions::triage::{TriageError, Verdict};
use crate::orchestrator::features::reactions::triage_run::{TriageDone, TriageResult, TriageSpend};
use crate::orchestrator::features::reactions::{FixContext, ReactionRow, RowMemory};
use crate::store::{PrLoopMark, ReactionWrite, TriageAnswer};

impl ReactionsFeature {
    /// The triage run of `row`'s subject `fingerprint`, unless one is out.
    pub(crate) fn triage_wanted(
        &self,
        key: &Key,
        row: &ReactionRow,
        mem: &RowMemory,
        fingerprint: String,
        context: Option<FixContext>,
    ) -> Option<Effect> {
        if mem.triage.in_flight.is_some() || self.triage_runs.contains_key(key) {
            return None;
        }
        Some(Effect::StartTriage(Box::new(TriageStart {
            key: key.clone(),
            row: row.clone(),
            fingerprint,
            context,
        })))
    }

    /// The loop started the triage run of `fingerprint`; `cancel` stops it at shutdown.
    pub(crate) fn triage_started(&mut self, key: Key, fingerprint: String, cancel: CancelToken) {
        if let Some(mem) = self.memory.get_mut(&key) {
            mem.triage.in_flight = Some(fingerprint);
        }
        self.triage_runs.insert(key, cancel);
    }

    /// The loop could not start the triage run: the subject's verdict is `escalate`. The row
    /// was out of the pending set while its step was decided, so no `pr_loop` mark is written.
    pub(crate) fn triage_not_started(
        &mut self,
        key: &Key,
        fingerprint: String,
        why: TriageError,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        let Some(mut mem) = self.memory.remove(key) else {
            return Vec::new();
        };
        let effects = self.record_verdict(key, &mut mem, fingerprint, Err(why), cx, false);
        self.memory.insert(key.clone(), mem);
        effects
    }

    /// A triage run came back: its verdict (or `escalate` for a failed run) is recorded and
    /// the row is checked at once. A row that left the pending set meanwhile takes nothing,
    /// and neither does anything while the process drains.
    pub(crate) fn triage_returned(
        &mut self,
        key: Key,
        fingerprint: String,
        r: Result<TriageDone, CallPanicked>,
        draining: bool,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        self.triage_runs.remove(&key);
        let done = r.unwrap_or_else(|panic| TriageDone {
            result: Err(TriageError::Panicked(panic.to_string())),
            spend: None,
        });
        let mut effects = Vec::new();
        if let Some(spend) = &done.spend {
            effects.extend(self.triage_run_record(&key, spend, &done.result, cx));
        }
        let Some(mut mem) = self.memory.remove(&key) else {
            return effects;
        };
        let current = mem.triage.in_flight.as_deref() == Some(fingerprint.as_str());
        if current {
            mem.triage.in_flight = None;
        }
        // A run the shutdown stopped answered nothing: the subject is triaged after the
        // restart.
        if current && !draining {
            effects.extend(self.record_verdict(&key, &mut mem, fingerprint, done.result, cx, true));
            if let Some(row) = self.rows.get_mut(&key) {
                row.next_poll_at_ms = row.next_poll_at_ms.min(cx.now_ms);
            }
        }
        self.memory.insert(key, mem);
        effects
    }

    /// A triage run that started its agent is a run-history row of the reaction's kind (no
    /// dispatch id), so its tokens count against `agent.max_tokens` and its session against
    /// `agent.max_sessions` like any run's, and its cost, priced as any session's under the
    /// rates in force for the model it used and frozen on the row, against the money budget
    /// and the spend ceilings.
    fn triage_run_record(
        &self,
        key: &Key,
        spend: &TriageSpend,
        result: &TriageResult,
        cx: &Cx<'_>,
    ) -> Vec<Effect> {
        let Some(row) = self.rows.get(key) else {
            return Vec::new();
        };
        let status = if result.is_ok() {
            crate::domain::RunStatus::Succeeded
        } else {
            crate::domain::RunStatus::Failed
        };
        let mut run = crate::store::RunRecord::new(status);
        run.issue_id = row.issue.id.clone();
        run.identifier = row.issue.identifier.clone();
        run.display_identifier = row.issue.display_identifier.clone();
        run.issue_title = row.issue.title.clone();
        run.issue_url = row.issue.url.clone();
        run.started_at_ms = spend.started_at_ms;
        run.completed_at_ms = spend.ended_at_ms;
        run.dispatched_at_ms = row.dispatched_at_ms;
        run.chain_id = row.chain_id.clone();
        run.workflow_file = cx.workflow.path.display().to_string();
        run.agent_kind = row.agent_kind.clone();
        run.rule_name = row.rule_name.clone();
        run.configured_model = row.configured_model.clone();
        run.reported_model = spend.model.clone();
        run.turns_completed = i64::from(result.is_ok());
        run.trigger = Some(String::new());
        run.reaction_kind = Some(row.kind.as_str().into());
        run.reaction_config_key = Some(row.kind.config_key().into());
        let t = &spend.tokens;
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        run.input_tokens = n(t.input_tokens);
        run.output_tokens = n(t.output_tokens);
        run.total_tokens = n(t.total_tokens);
        run.cache_read_tokens = n(t.cache_read_tokens);
        run.cache_write_tokens = n(t.cache_write_tokens);
        run.tokens_measured = spend.measured;
        run.ssh_host = spend.ssh_host.clone();
        run.usage_completeness = if spend.measured {
            "complete".into()
        } else {
            "unmeasured".into()
        };
        run.error = result
            .as_ref()
            .err()
            .map(|e| crate::mask::mask(&format!("triage run failed: {e}")));
        let price = triage_price(row, spend, cx);
        let mut effects: Vec<Effect> = price
            .cost_usd
            .map(|usd| Effect::Count(Count::EstimatedCost(usd)))
            .into_iter()
            .collect();
        effects.push(Effect::RecordRun {
            run: Box::new(run.with_price(&price)),
            what: "triage run",
        });
        effects
    }

    /// Keeps and stores the verdict of `fingerprint`; a failure is logged and answers
    /// `escalate`. `mark`: the row's pass records the verdict as acted on.
    fn record_verdict(
        &self,
        key: &Key,
        mem: &mut RowMemory,
        fingerprint: String,
        result: TriageResult,
        cx: &Cx<'_>,
        mark: bool,
    ) -> Vec<Effect> {
        let row = self.rows.get(key).filter(|_| mark);
        let identifier = row.map(|r| r.issue.identifier.clone()).unwrap_or_default();
        let verdict = match result {
            Ok((verdict, reason)) => {
                log::info!(
                    issue_id:% = key.0,
                    issue_identifier:% = identifier,
                    reaction_kind:% = key.1,
                    verdict:% = verdict,
                    reason:% = crate::mask::mask(&reason);
                    "reaction triage verdict"
                );
                verdict
            }
            Err(why) => {
                log::warn!(
                    issue_id:% = key.0,
                    issue_identifier:% = identifier,
                    reaction_kind:% = key.1,
                    error:% = crate::mask::mask(&why.to_string());
                    "reaction triage failed; asking a person"
                );
                Verdict::Escalate
            }
        };
        let answer = TriageAnswer {
            issue_id: key.0.clone(),
            kind: key.1,
            fingerprint: fingerprint.clone(),
            answer: verdict.as_str().to_string(),
            answered_at_ms: cx.now_ms,
        };
        let mut effects = vec![reaction_write(ReactionWrite::SaveTriageAnswer(answer))];
        if let Some(row) = row {
            effects.extend(activity::pr_loop(row, PrLoopMark::Acted, cx.now_ms));
        }
        mem.triage.answer = Some((fingerprint, verdict));
        effects
    }

    /// A checked row's triage state is `orch`'s, not the pass's copy; returns whether a
    /// verdict arrived while the pass was out (the row is then checked again at once).
    pub(crate) fn keep_live_triage(&self, c: &mut Checked) -> bool {
        let live = self
            .memory
            .get(&c.key)
            .map(|m| m.triage.clone())
            .unwrap_or_default();
        let answered_meanwhile = c.mem.triage.in_flight.is_some() && live.in_flight.is_none();
        c.mem.triage = live;
        answered_meanwhile
    }

    /// Restores the stored verdicts into the rebuilt rows' memory.
    pub(crate) fn restore_triage_answers(&mut self, answers: &[TriageAnswer]) {
        for a in answers {
            let Some(verdict) = Verdict::parse(&a.answer) else {
                continue;
            };
            if let Some(mem) = self.memory.get_mut(&(a.issue_id.clone(), a.kind)) {
                mem.triage.answer = Some((a.fingerprint.clone(), verdict));
            }
        }
    }
}

/// The triage session's spend priced under the rates in force: one part under the model the
/// agent named, for the reaction's agent kind (the workflow's when it names none).
fn triage_price(row: &ReactionRow, spend: &TriageSpend, cx: &Cx<'_>) -> crate::pricing::RunPrice {
    let kind = if row.agent_kind.is_empty() {
        cx.workflow.config.agent.kind.as_str()
    } else {
        row.agent_kind.as_str()
    };
    let completeness = if spend.measured {
        crate::pricing::UsageCompleteness::Complete
    } else {
        crate::pricing::UsageCompleteness::Unmeasured
    };
    cx.prices.current().price_run(
        kind,
        completeness,
        &spend.tokens,
        &[(spend.model.clone(), spend.tokens)],
        &std::collections::BTreeMap::new(),
    )
}
