//! Triage runs on `orch`'s side. A check's `Step::Triage` starts one on a thread of its own
//! ([`crate::orchestrator::features::reactions::triage_run`]); at most one runs per row, and while it is
//! out the issue's retry slot counts as busy, so nothing else runs in its workspace. The verdict
//! comes back here: it is kept in the row's memory, stored (`triage_answers`), and the row is
//! due at once, so the next check applies it to the subject as the forge shows it then
//! (`orchestrator::reactions::triage::before_fix`). A run that fails or times out answers
//! `escalate`.

use crate::domain::ReactionKind;
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::reactions::pass::Checked;
use crate::orchestrator::features::reactions::triage::{self, Verdict};
use crate::orchestrator::features::reactions::triage_run::{
    self, TriageDone, TriageJob, TriageResult, TriageSpend,
};
use crate::orchestrator::features::reactions::{FixContext, ReactionRow, RowMemory};
use crate::store::{ReactionWrite, TriageAnswer};

type Key = (String, ReactionKind);

/// A triage run's deadline when `agent.turn_timeout_ms` is 0 (no turn limit): an hour, the
/// default turn limit.
const FALLBACK_DEADLINE_MS: u64 = 3_600_000;

impl Orchestrator {
    /// Starts the triage run of `row`'s subject `fingerprint`, unless one is out.
    pub(crate) fn start_triage(
        &mut self,
        key: &Key,
        row: &ReactionRow,
        mem: &mut RowMemory,
        fingerprint: String,
        context: Option<FixContext>,
    ) {
        if mem.triage.in_flight.is_some() || self.features.reactions.triage_runs.contains_key(key) {
            return;
        }
        let issue = persist::issue_from_parts(
            &row.issue.id,
            &row.issue.identifier,
            &row.issue.title,
            &row.issue.url,
            row.issue.issue_type.as_deref().unwrap_or(""),
            row.issue.labels.as_deref().unwrap_or(&[]),
            &row.issue.state,
        );
        let Some((_, _, agent)) = self.attempt_resources(&issue, &row.route()) else {
            let why =
                crate::orchestrator::features::reactions::triage::TriageError::AgentUnavailable;
            self.record_verdict(key, mem, fingerprint, Err(why));
            return;
        };
        let host = match self.place(&issue) {
            crate::orchestrator::features::hosts::hooks::Placement::Here => None,
            crate::orchestrator::features::hosts::hooks::Placement::Host(h) => Some(h),
            crate::orchestrator::features::hosts::hooks::Placement::NoRoom => {
                let why = crate::orchestrator::features::reactions::triage::TriageError::NoSshHost;
                self.record_verdict(key, mem, fingerprint, Err(why));
                return;
            }
        };
        let turn_ms = self.workflow.config.agent.turn_timeout_ms;
        let cancel = CancelToken::new();
        let job = TriageJob {
            agent,
            workspaces: self.workspaces(),
            issue_id: row.issue.id.clone(),
            issue_identifier: row.issue.identifier.clone(),
            prompt: triage::prompt(row, context.as_ref()),
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
            self.record_verdict(
                key,
                mem,
                fingerprint,
                Err(
                    crate::orchestrator::features::reactions::triage::TriageError::NoThread(
                        e.to_string(),
                    ),
                ),
            );
            return;
        }
        mem.triage.in_flight = Some(fingerprint);
        self.features
            .reactions
            .triage_runs
            .insert(key.clone(), cancel);
        log::info!(
            issue_id:% = row.issue.id,
            issue_identifier:% = row.issue.identifier,
            reaction_kind:% = row.kind;
            "reaction triage run started"
        );
    }

    /// A triage run came back: its verdict (or `escalate` for a failed run) is recorded and the
    /// row is checked at once. A row that left the pending set meanwhile takes nothing, and
    /// neither does anything while the process drains.
    fn finish_triage(
        &mut self,
        key: Key,
        fingerprint: String,
        r: Result<TriageDone, crate::orchestrator::core::io_pool::CallPanicked>,
    ) {
        self.features.reactions.triage_runs.remove(&key);
        let done = r.unwrap_or_else(|panic| TriageDone {
            result: Err(
                crate::orchestrator::features::reactions::triage::TriageError::Panicked(
                    panic.to_string(),
                ),
            ),
            spend: None,
        });
        if let Some(spend) = &done.spend {
            self.record_triage_run(&key, spend, &done.result);
        }
        let result = done.result;
        let Some(mut mem) = self.features.reactions.memory.remove(&key) else {
            return;
        };
        let current = mem.triage.in_flight.as_deref() == Some(fingerprint.as_str());
        if current {
            mem.triage.in_flight = None;
        }
        // A run the shutdown stopped answered nothing: the subject is triaged after the
        // restart.
        if current && self.draining.is_none() {
            self.record_verdict(&key, &mut mem, fingerprint, result);
            let now = self.clock.now_ms();
            if let Some(row) = self.features.reactions.rows.get_mut(&key) {
                row.next_poll_at_ms = row.next_poll_at_ms.min(now);
            }
        }
        self.features.reactions.memory.insert(key, mem);
    }

    /// A triage run that started its agent is a run-history row of the reaction's kind (no
    /// dispatch id), so its tokens count against `agent.max_tokens` and its session against
    /// `agent.max_sessions` like any run's, and its cost, priced as any session's under the
    /// rates in force for the model it used and frozen on the row, against the money budget
    /// and the spend ceilings.
    fn record_triage_run(&mut self, key: &Key, spend: &TriageSpend, result: &TriageResult) {
        let Some(row) = self.features.reactions.rows.get(key) else {
            return;
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
        run.workflow_file = self.workflow.path.display().to_string();
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
        let price = self.triage_price(row, spend);
        if let Some(usd) = price.cost_usd {
            self.metrics.estimated_cost(usd);
        }
        let run = run.with_price(&price);
        if let Err(e) = self.store.writer().record_run(run, Vec::new()) {
            log::warn!(
                issue_id:% = key.0,
                issue_identifier:% = row.issue.identifier,
                error:% = e.to_string();
                "triage run not recorded"
            );
        }
    }

    /// The triage session's spend priced under the rates in force: one part under the model
    /// the agent named, for the reaction's agent kind (the workflow's when it names none).
    fn triage_price(&self, row: &ReactionRow, spend: &TriageSpend) -> crate::pricing::RunPrice {
        let kind = if row.agent_kind.is_empty() {
            self.workflow.config.agent.kind.as_str()
        } else {
            row.agent_kind.as_str()
        };
        let completeness = if spend.measured {
            crate::pricing::UsageCompleteness::Complete
        } else {
            crate::pricing::UsageCompleteness::Unmeasured
        };
        self.prices.current().price_run(
            kind,
            completeness,
            &spend.tokens,
            &[(spend.model.clone(), spend.tokens)],
            &std::collections::BTreeMap::new(),
        )
    }

    /// Keeps and stores the verdict of `fingerprint`; a failure is logged and answers
    /// `escalate`.
    fn record_verdict(
        &mut self,
        key: &Key,
        mem: &mut RowMemory,
        fingerprint: String,
        result: TriageResult,
    ) {
        let identifier = self
            .features
            .reactions
            .rows
            .get(key)
            .map(|r| r.issue.identifier.clone())
            .unwrap_or_default();
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
            answered_at_ms: self.clock.now_ms(),
        };
        persist::reaction_write(&self.store, ReactionWrite::SaveTriageAnswer(answer));
        if let Some(row) = self.features.reactions.rows.get(key) {
            self.note_pr_loop(row, crate::store::PrLoopMark::Acted);
        }
        mem.triage.answer = Some((fingerprint, verdict));
    }

    /// A checked row's triage state is `orch`'s, not the pass's copy; returns whether a verdict
    /// arrived while the pass was out (the row is then checked again at once).
    pub(crate) fn keep_live_triage(&self, c: &mut Checked) -> bool {
        let live = self
            .features
            .reactions
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
            if let Some(mem) = self
                .features
                .reactions
                .memory
                .get_mut(&(a.issue_id.clone(), a.kind))
            {
                mem.triage.answer = Some((a.fingerprint.clone(), verdict));
            }
        }
    }

    /// Whether a triage run of the issue is out.
    pub(crate) fn triage_running(&self, issue_id: &str) -> bool {
        self.features.reactions.triage_running(issue_id)
    }
}
