//! Starting a supervisor for one issue.

use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::core::state::{DispatchCause, RunFacts, RunHandles};
use crate::orchestrator::features::hosts::hooks::Placement;

use crate::orchestrator::core::supervisor::Unstarted;

/// Posts the writer's reply to a started-session row to the loop. Dropped unanswered (the
/// writer ended before it ran the write), it posts a failure, so no session waits for ever.
struct RowReply(Option<(Sender<OrchMsg>, String)>);

impl RowReply {
    fn send(mut self, result: Result<(), persist::PersistError>) {
        self.post(result);
    }

    fn post(&mut self, result: Result<(), persist::PersistError>) {
        if let Some((tx, dispatch_id)) = self.0.take() {
            let _ = tx.send(OrchMsg::SessionRecorded {
                dispatch_id,
                result,
            });
        }
    }
}

impl Drop for RowReply {
    fn drop(&mut self) {
        let gone = persist::PersistError::store("record started session");
        self.post(Err(gone(crate::store::StoreError::WriterGone)));
    }
}

/// A dispatch that continues a pull-request reaction.
pub(crate) struct ReactionDispatch {
    pub reaction: crate::orchestrator::features::reactions::RunReaction,
    pub context: Option<crate::orchestrator::features::reactions::FixContext>,
}

impl Orchestrator {
    /// Whether the database check fails (writes kept for retry, a failed ping or budget
    /// read): then nothing new is dispatched, so no work starts that could not be recorded
    /// or whose budget is unknown. Running sessions go on.
    pub(crate) fn store_blocks_dispatch(&self) -> bool {
        let db = &self.state.health.database;
        if db.failing_streak > 0 {
            log::warn!(
                error:% = db.error.as_deref().unwrap_or("");
                "dispatch paused: database check failing"
            );
            return true;
        }
        false
    }

    pub(crate) fn dispatch(
        &mut self,
        issue: Issue,
        attempt: u32,
        resume_session_id: Option<String>,
        pass: Pass,
        cause: DispatchCause,
        reaction: Option<ReactionDispatch>,
    ) {
        let now = self.clock.now_ms();
        let Ok(daemon_slot) = self.daemon_slot(now) else {
            return self.no_daemon_slot(&issue, attempt, resume_session_id, pass, cause);
        };
        let Some((attempt_route, template, agent)) = self.attempt_resources(&issue, &pass.route)
        else {
            self.refused_attempt(&issue, attempt, resume_session_id, pass, cause);
            return;
        };
        let ssh_host = match self.place(&issue) {
            Placement::Here => None,
            Placement::Host(h) => Some(h),
            Placement::NoRoom => {
                self.no_host_room(&issue, attempt, pass);
                return;
            }
        };
        let dispatched_at_ms = pass.dispatched_at_ms;
        let hop_first = cause == DispatchCause::PollTick && attempt_route.lineage.is_some();
        self.note_picked_up(&issue.id);
        let dispatch_id = new_dispatch_id();
        let cancel = CancelToken::new();
        let (tokens_used_before, usage_before) = self.spent_before(&issue.id);
        self.state.held.remove(&issue.id);
        self.state.outcomes.remove(&issue.id);
        persist::clear_outcome(&self.store, &issue.id);
        let workspaces = self.workspaces();
        let job = SupervisorJob {
            dispatch_id: dispatch_id.clone(),
            issue: issue.clone(),
            attempt,
            resume_session_id: resume_session_id.clone(),
            workflow: self.workflow.clone(),
            template,
            stage: super::attempt::stage_values(&self.workflow.config.dispatch, &attempt_route),
            workspaces: workspaces.clone(),
            tracker: self.tracker.clone(),
            agent,
            cancel: cancel.clone(),
            clock: self.clock.clone(),
            tx: self.tx.clone(),
            metrics: self.metrics.clone(),
            reaction: reaction.as_ref().map(|r| supervisor::JobReaction {
                context: r.context.clone(),
            }),
            mcp_daemon: self.mcp_daemon.clone(),
            ssh_host: ssh_host.clone(),
        };
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            dispatch_id:% = dispatch_id,
            attempt:% = attempt,
            rule_name:% = attempt_route.rule_name,
            agent_kind:% = attempt_route.agent_kind,
            chain_id:% = attempt_route.chain_id,
            ssh_host:% = ssh_host.as_ref().map_or("", |h| h.name());
            "dispatching"
        );
        self.state
            .dispatch_index
            .insert(dispatch_id.clone(), issue.id.clone());
        let mut facts = RunFacts::started(
            issue.clone(),
            dispatch_id.clone(),
            attempt,
            now,
            cause,
            attempt_route.clone(),
        );
        facts.dispatched_at_ms = dispatched_at_ms;
        facts.session_id = resume_session_id;
        facts.tokens_used_before = tokens_used_before;
        facts.usage_before = usage_before;
        facts.ssh_host = ssh_host.as_ref().map(|h| h.name().to_string());
        facts.hop_first = hop_first;
        facts.reaction = reaction.map(|r| r.reaction);
        self.state.running.insert(
            issue.id.clone(),
            RunningEntry {
                facts,
                handles: RunHandles::new(cancel, workspaces, daemon_slot),
            },
        );
        self.start_session(job, attempt_route, dispatched_at_ms, cause, now);
    }

    /// What earlier runs of the issue spent: the tokens counted against `agent.max_tokens` and
    /// the cost counted against `agent.max_cost_usd`, each read once per dispatch and only when
    /// its budget is set. A failed cost read stops no session: the pre-dispatch check read the
    /// same spend.
    fn spent_before(&self, issue_id: &str) -> (u64, Option<crate::store::IssueUsage>) {
        let tokens_used_before = if self.workflow.config.agent.max_tokens.unwrap_or(0) > 0 {
            persist::uncached_tokens_for_issue(&self.store, issue_id).unwrap_or(0)
        } else {
            0
        };
        let usage_before = crate::orchestrator::features::spend::money_budget::ceiling(
            self.workflow.config.agent.max_cost_usd,
        )
        .and_then(|_| persist::usage_for_issue(&self.store, issue_id).ok());
        (tokens_used_before, usage_before)
    }

    /// Counts the dispatch and queues the session's row; its supervisor is spawned when the
    /// row has committed ([`Self::on_session_recorded`]). A session that cannot be recorded or
    /// spawned is undone ([`Self::unspawned`]).
    ///
    /// Ordering: the supervisor (and with it every process of the session) starts only on
    /// the writer's success reply, so a crash at any moment leaves no agent without its row,
    /// exactly as when this thread waited for the commit; meanwhile the loop goes on (the
    /// session is running, without a supervisor yet). The writer's FIFO puts every later
    /// write of the session behind the row. A cancel in between (reconcile, shutdown) reaches
    /// the supervisor through its token, already set when it starts.
    fn start_session(
        &mut self,
        job: SupervisorJob,
        attempt_route: crate::domain::stage::Route,
        dispatched_at_ms: i64,
        cause: DispatchCause,
        now: i64,
    ) {
        self.state.totals.dispatches += 1;
        // A poll-tick dispatch is where a claim's selection is resolved; retries and
        // continuations reuse the frozen one.
        if cause == DispatchCause::PollTick {
            self.metrics.dispatch_rule_match(&attempt_route.rule_name);
        }
        let start = Unstarted {
            job,
            route: attempt_route,
            dispatched_at_ms,
        };
        let Some(e) = self.state.running.get(&start.job.issue.id) else {
            self.spawn_supervisor(start);
            return;
        };
        let dispatch_id = start.job.dispatch_id.clone();
        let reply = RowReply(Some((self.tx.clone(), dispatch_id.clone())));
        let queued =
            persist::write_started_session(&self.store, e, &self.workflow, now, move |result| {
                reply.send(result)
            });
        match queued {
            Ok(()) => {
                self.unstarted.insert(dispatch_id, start);
            }
            Err(err) => self.unrecorded(start, &err),
        }
    }

    /// The writer's reply to a started-session row: spawns the waiting supervisor, or undoes
    /// the session when its row could not be committed.
    pub(crate) fn on_session_recorded(
        &mut self,
        dispatch_id: &str,
        result: Result<(), persist::PersistError>,
    ) {
        let Some(start) = self.unstarted.remove(dispatch_id) else {
            return;
        };
        match result {
            Ok(()) => self.spawn_supervisor(start),
            Err(err) => self.unrecorded(start, &err),
        }
    }

    /// The session's row was not committed: its agent is never started.
    fn unrecorded(&mut self, start: Unstarted, err: &persist::PersistError) {
        let issue = &start.job.issue;
        log::error!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            dispatch_id:% = start.job.dispatch_id,
            error:% = err.to_string();
            "session not recorded, agent not started"
        );
        self.metrics.dispatch("error");
        self.unspawned(
            issue,
            &start.job.dispatch_id,
            start.job.attempt,
            start.route,
            start.dispatched_at_ms,
        );
    }

    /// Posts the optional dispatch comment and spawns the session's supervisor.
    fn spawn_supervisor(&mut self, start: Unstarted) {
        let Unstarted {
            job,
            route,
            dispatched_at_ms,
        } = start;
        let issue = job.issue.clone();
        let dispatch_id = job.dispatch_id.clone();
        let attempt = job.attempt;
        if self.workflow.config.tracker.comments.on_dispatch {
            self.comment_dispatch(&issue, &dispatch_id);
        }
        let spawned = supervisor::spawn(job);
        self.metrics
            .dispatch(if spawned.is_ok() { "success" } else { "error" });
        if let Err(e) = spawned {
            log::error!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                error:% = e.to_string();
                "failed to spawn agent"
            );
            self.unspawned(&issue, &dispatch_id, attempt, route, dispatched_at_ms);
        }
    }

    /// Queues the optional dispatch comment.
    fn comment_dispatch(&self, issue: &Issue, dispatch_id: &str) {
        self.tracker_ops
            .submit(crate::orchestrator::core::tracker_ops::TrackerOp::Comment {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                lifecycle: Lifecycle::Dispatch,
                text: crate::orchestrator::core::tracker_ops::lifecycle_comment(
                    Lifecycle::Dispatch,
                    Some(dispatch_id),
                    0,
                    0,
                    None,
                    None,
                ),
            });
    }

    /// The supervisor thread could not start: drop the entry and retry like a failed run.
    fn unspawned(
        &mut self,
        issue: &Issue,
        dispatch_id: &str,
        attempt: u32,
        route: crate::domain::stage::Route,
        dispatched_at_ms: i64,
    ) {
        self.state.running.remove(&issue.id);
        self.state.dispatch_index.remove(dispatch_id);
        self.schedule_retry(
            issue,
            attempt + 1,
            failure_delay_ms(attempt + 1, self.backoff_cap()),
            RetryTrigger::Error,
            Some("failed to spawn agent".into()),
            None,
            Pass {
                dispatched_at_ms,
                route,
            },
        );
    }

    /// The pass counted room on the SSH hosts that placing found none of: the issue waits
    /// like a retry that found every host full.
    fn no_host_room(&mut self, issue: &Issue, attempt: u32, pass: Pass) {
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier;
            "no ssh host has room"
        );
        self.schedule_retry(
            issue,
            attempt + 1,
            failure_delay_ms(attempt + 1, self.backoff_cap()),
            RetryTrigger::Error,
            Some(crate::domain::RescheduleReason::NoSshHosts.as_str().into()),
            None,
            pass,
        );
    }

    /// A slot under the daemon-wide cap: `Ok(None)` without one, `Err` when another
    /// workflow took the room this pass counted on.
    fn daemon_slot(&self, now: i64) -> Result<Option<crate::orchestrator::core::slots::Slot>, ()> {
        match &self.daemon_slots {
            None => Ok(None),
            Some(d) => d.try_acquire(now).map(Some).ok_or(()),
        }
    }

    /// The shared cap filled between the pass and the dispatch: a poll-tick candidate is left
    /// unclaimed for the next pass; any other dispatch (a retry, a continuation) waits as a
    /// retry for a free slot, its attempt unchanged.
    fn no_daemon_slot(
        &mut self,
        issue: &Issue,
        attempt: u32,
        resume_session_id: Option<String>,
        pass: Pass,
        cause: DispatchCause,
    ) {
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            attempt:% = attempt;
            "shared agent slots taken by another workflow; not dispatched now"
        );
        if cause == DispatchCause::PollTick {
            return;
        }
        self.schedule_retry(
            issue,
            attempt,
            failure_delay_ms(attempt.max(1), self.backoff_cap()),
            RetryTrigger::Error,
            Some(crate::domain::RescheduleReason::NoSlots.as_str().into()),
            resume_session_id,
            pass,
        );
    }

    pub(crate) fn backoff_cap(&self) -> u64 {
        self.workflow.config.agent.max_retry_backoff_ms
    }
}
