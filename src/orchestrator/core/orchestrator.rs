//! The orchestrator thread: its state, its loop and its messages. The handlers live in the
//! claim/retry core (`claim/`) and the features (`features/<name>/`), one concern each; they
//! import this module's names with `use crate::orchestrator::core::orchestrator::*`.

pub(crate) use std::sync::{Arc, RwLock};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use crossbeam_channel::{Receiver, Sender, select};

pub(crate) use crate::agent::{AgentAdapter, AgentEventKind, CancelReason, CancelToken};
pub(crate) use crate::clock::Clock;
pub(crate) use crate::config::{LoadOptions, Workflow};
pub(crate) use crate::domain::{
    BudgetReason, Issue, OutcomeKind, ParkReason, PollOutcome, RescheduleReason, RetryTrigger,
    RunStatus, state_eq, state_in,
};
pub(crate) use crate::prompt::PromptTemplate;
pub(crate) use crate::store::Store;
pub(crate) use crate::tracker::TrackerAdapter;
pub(crate) use crate::workspace::WorkspaceManager;

pub(crate) use super::msg::{
    AckError, OrchMsg, RefreshOutcome, RetryNowOutcome, SupervisorExit, SupervisorResult,
    Unanswered,
};
pub(crate) use super::persist;
pub(crate) use super::snapshot::{PublishPacer, Snapshot};
pub(crate) use super::state::PreflightError;
pub(crate) use super::state::{
    AwaitingRecord, BudgetHold, Held, Park, Pass, RetryInfo, RunningEntry, State,
};
pub(crate) use super::supervisor::{self, SupervisorJob};
pub(crate) use super::tracker_ops::Lifecycle;
pub(crate) use crate::orchestrator::claim::backoff::{CONTINUATION_DELAY_MS, failure_delay_ms};
pub(crate) use crate::orchestrator::claim::dispatch_pass::{
    Decision, HoldReason, LiveClaims, PassInput, plan, probe_workspace_locks,
};

/// After a panic in the loop: how long supervisors get to report their stopped runs.
pub(crate) const PANIC_DRAIN_TIMEOUT: Duration = Duration::from_secs(15);
/// After a second signal: how long supervisors of killed agents get to report their runs (at
/// most; never past the drain deadline).
pub(crate) const ESCALATED_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Of the drain budget, what is kept after the sessions' deadline for the queued tracker
/// writes and the database flush.
pub(crate) const DRAIN_RESERVE: Duration = Duration::from_secs(3);
/// Every this many ticks, sweep workspaces of terminal issues.
pub(crate) const SWEEP_EVERY_TICKS: u64 = 60;

/// What the orchestrator is built from.
pub struct OrchestratorDeps {
    pub workflow: Arc<Workflow>,
    pub template: Arc<PromptTemplate>,
    pub load_options: LoadOptions,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub agent: Arc<dyn AgentAdapter>,
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    /// Prometheus counters and histograms, seeded from the persisted aggregates.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The rates in force; the orchestrator keeps its `token_rates` entries in step with the
    /// workflow it runs, the price-table sources keep its tables.
    pub prices: crate::pricing::PriceBoard,
}

/// The handle other threads hold.
#[derive(Clone)]
pub struct OrchestratorHandle {
    pub tx: Sender<OrchMsg>,
    pub snapshot: Arc<RwLock<Arc<Snapshot>>>,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub prices: crate::pricing::PriceBoard,
}

impl OrchestratorHandle {
    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Sends a request carrying its reply channel and waits up to `timeout` for the answer.
    /// A request that gets none was refused by the shutdown when the latest snapshot says
    /// draining: `orch` answers no request once its loop has ended, and one it never reads
    /// fails at once (its inbox is closed then).
    pub fn ask<T>(
        &self,
        timeout: Duration,
        msg: impl FnOnce(Sender<T>) -> OrchMsg,
    ) -> Result<T, Unanswered> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let answer = match self.tx.send(msg(tx)) {
            Ok(()) => rx.recv_timeout(timeout).ok(),
            Err(_) => None,
        };
        answer.ok_or_else(|| {
            if self.snapshot().draining {
                Unanswered::ShuttingDown
            } else {
                Unanswered::NotTaken
            }
        })
    }

    /// Queues an immediate tick (coalesced) and waits for the answer.
    pub fn refresh(&self, timeout: Duration) -> Result<RefreshOutcome, Unanswered> {
        self.ask(timeout, |tx| OrchMsg::Refresh { reply: Some(tx) })
    }
}

pub struct Orchestrator {
    pub(crate) workflow: Arc<Workflow>,
    pub(crate) template: Arc<PromptTemplate>,
    pub(crate) load_options: LoadOptions,
    pub(crate) tracker: Arc<dyn TrackerAdapter>,
    pub(crate) agent: Arc<dyn AgentAdapter>,
    pub(crate) store: Arc<Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    pub(crate) prices: crate::pricing::PriceBoard,
    pub(crate) state: State,
    /// The converted features, each with its slice of state (`features::Features`).
    pub(crate) features: crate::orchestrator::features::Features,
    pub(crate) tx: Sender<OrchMsg>,
    pub(crate) rx: Receiver<OrchMsg>,
    pub(crate) published: Arc<RwLock<Arc<Snapshot>>>,
    pub(crate) pacer: PublishPacer,
    pub(crate) next_tick_at: Instant,
    pub(crate) refresh_pending: bool,
    /// When the latest poll started: the next one waits `polling.min_interval_ms` after it.
    pub(crate) last_poll_at: Option<Instant>,
    /// When the poll whose tracker reads are out started (`None`: none is out).
    pub(crate) poll_out: Option<Instant>,
    /// Issues whose exit's tracker calls (a hand-off's transition) came back while the poll
    /// out now was reading: its listing may predate them, so its pass leaves them to the next.
    pub(crate) settled_while_polling: std::collections::HashSet<String>,
    /// Ticks skipped while the current poll is out (logged when it comes back).
    pub(crate) skipped_while_out: u64,
    /// A database ping of its own (one not carried by a poll) is out.
    pub(crate) ping_out: bool,
    /// A terminal-workspace sweep is out.
    pub(crate) sweep_out: bool,
    /// The threads that make the tracker and forge calls.
    pub(crate) lanes: super::io::Lanes<Orchestrator>,
    /// The sessions' drain deadline (`None` until shutdown begins).
    pub(crate) draining: Option<Instant>,
    /// When the whole shutdown must be over: the drain deadline plus the reserve for the
    /// tracker writes and the database flush.
    pub(crate) shutdown_deadline: Option<Instant>,
    /// `shutdown.drain_timeout_ms` as read at start (the signal handler's watchdog holds the
    /// same figure, so a reload does not change it).
    pub(crate) drain_budget: Duration,
    pub(crate) tick_count: u64,
    pub(crate) started_at_ms: i64,
    pub(crate) tracker_ops: crate::orchestrator::core::tracker_ops::TrackerOps,
    /// The retry a retry-now request is firing, with the due time it had: a put-back of it
    /// keeps that time instead of a new backoff.
    pub(crate) retry_now: std::collections::BTreeMap<
        String,
        crate::orchestrator::claim::retry_queue::RetryNowPutBack,
    >,
    /// The pull-request provider reactions read and write; `None` while no reaction applies.
    pub(crate) scm: Option<Arc<dyn crate::scm::ScmAdapter>>,
    /// The reactions as captured at startup (a reload changes only `ci_failure`).
    pub(crate) reactions_cfg: crate::config::reactions::ReactionsConfig,
    /// What each session's MCP server learns about this process: the `.env` it loaded, and
    /// the HTTP API's base URL once the server listens (the server asks it for live figures).
    pub(crate) mcp_daemon: crate::agent::mcp_file::DaemonFacts,
    /// Dispatched sessions whose row is being committed, by dispatch id: each supervisor
    /// starts on the writer's reply (`claim::dispatch`).
    pub(crate) unstarted: std::collections::HashMap<String, supervisor::Unstarted>,
    /// The agent cap shared with the daemon's other workflows (`None`: this workflow's own
    /// caps only).
    pub(crate) daemon_slots: Option<crate::orchestrator::core::slots::DaemonSlots>,
    /// The database writer serves other workflows too: the shutdown flushes it, and the
    /// daemon stops it once every workflow has ended.
    pub(crate) store_shared: bool,
    /// Set once the shutdown is over: the watchdog the drain started stands down.
    pub(crate) watchdog_done: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl Orchestrator {
    /// Builds the orchestrator, restores persisted state (warm start) and returns it with
    /// its handle; call [`Orchestrator::run`] on its own thread.
    pub fn new(deps: OrchestratorDeps) -> (Orchestrator, OrchestratorHandle) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let env_file = deps.load_options.effective_env_file();
        let drain_budget = Duration::from_millis(deps.workflow.config.shutdown.drain_timeout_ms);
        let now = deps.clock.now_ms();
        let published = Arc::new(RwLock::new(Arc::new(Snapshot::default())));
        let mut state = State {
            revision: now.max(0) as u64,
            ..Default::default()
        };
        // The first poll is due at once.
        state.health.poll.next_at_ms = Some(now);
        deps.prices
            .set_token_rates(deps.workflow.config.token_rates.clone());
        deps.prices
            .apply_settings(deps.workflow.config.price_table.clone(), now);
        // Named only when the daemon serves several workflows (`''` is the single one).
        let workflow_name = Some(deps.store.workflow().to_string()).filter(|w| !w.is_empty());
        let mut o = Orchestrator {
            workflow: deps.workflow,
            template: deps.template,
            load_options: deps.load_options,
            tracker: deps.tracker.clone(),
            agent: deps.agent,
            store: deps.store,
            clock: deps.clock.clone(),
            state,
            features: Default::default(),
            tx: tx.clone(),
            rx,
            published: published.clone(),
            pacer: PublishPacer::default(),
            next_tick_at: deps.clock.instant(),
            refresh_pending: false,
            last_poll_at: None,
            poll_out: None,
            settled_while_polling: Default::default(),
            skipped_while_out: 0,
            ping_out: false,
            sweep_out: false,
            lanes: super::io::Lanes::spawn(),
            draining: None,
            shutdown_deadline: None,
            drain_budget,
            tick_count: 0,
            started_at_ms: now,
            retry_now: Default::default(),
            tracker_ops: crate::orchestrator::core::tracker_ops::TrackerOps::spawn(
                deps.tracker.clone(),
                deps.metrics.clone(),
            ),
            metrics: deps.metrics.clone(),
            prices: deps.prices.clone(),
            scm: None,
            reactions_cfg: Default::default(),
            mcp_daemon: crate::agent::mcp_file::DaemonFacts {
                api_url: None,
                env_file,
                workflow: workflow_name,
            },
            unstarted: Default::default(),
            daemon_slots: None,
            store_shared: false,
            watchdog_done: None,
        };
        o.scm = crate::orchestrator::core::adapters::build_scm(&o.workflow, o.clock.clone());
        if let Some(scm) = &o.scm {
            o.reactions_cfg = o.workflow.config.reactions.clone();
            o.state.health.scm = Some(crate::orchestrator::core::state::ScmHealth {
                provider: scm.kind().to_string(),
                check: Default::default(),
            });
        }
        o.warm_start();
        o.publish();
        (
            o,
            OrchestratorHandle {
                tx,
                snapshot: published,
                metrics: deps.metrics,
                prices: deps.prices,
            },
        )
    }

    pub(crate) fn workspaces(&self) -> Arc<WorkspaceManager> {
        Arc::new(super::adapters::workspace_manager(&self.workflow))
    }

    /// Restores retries, totals, parks, outcomes and usage holds from the database, then removes
    /// workspaces of issues that became terminal while sortie was down.
    pub(crate) fn warm_start(&mut self) {
        self.clear_live_passes();
        match persist::load_warm_start(&self.store) {
            Ok(ws) => {
                for r in ws.retries {
                    self.state.retry_queue.schedule(&r.issue.id, r.due_at_ms);
                    self.state.retries.insert(r.issue.id.clone(), r);
                }
                self.state.totals = ws.totals;
                for p in ws.parks {
                    self.state.parked.insert(p.issue.id.clone(), p);
                }
                self.state.outcomes = ws.outcomes;
                for a in ws.acks {
                    self.state.acks.insert(a.item_id.clone(), a);
                }
                self.features.agent_holds.restore(ws.usage_holds);
                for h in ws.failure_holds {
                    self.state.failure_held.insert(h.issue.id.clone(), h);
                }
                self.features.stages.restore(ws.stage_hops);
                self.state.handoff_absence.restore(ws.handoff_absence);
                self.rebuild_reactions(ws.reactions);
                log::info!(
                    retries:% = self.state.retries.len(),
                    parked:% = self.state.parked.len(),
                    stage_hops:% = self.features.stages.hop_count(),
                    usage_holds:% = self.features.agent_holds.usage_holds(),
                    failure_holds:% = self.state.failure_held.len(),
                    dispatches_total:% = self.state.totals.dispatches;
                    "warm start restored"
                );
            }
            Err(e) => log::warn!(error:% = e.to_string(); "warm start failed; starting empty"),
        }
        self.recover_interrupted_sessions();
        self.delete_orphaned_jobs();
        self.sweep_terminal_workspaces();
    }

    /// With `worker.kubernetes`, deletes the Jobs an earlier process of this daemon left (a
    /// SIGKILL gives its relays no chance to), before anything is dispatched. The calls carry
    /// the client's deadline; a cluster that cannot be reached is logged and the start goes on.
    fn delete_orphaned_jobs(&self) {
        let Some(k) = &self.workflow.config.worker.kubernetes else {
            return;
        };
        match crate::kube::relay::delete_orphans(&k.settings) {
            Ok(names) if names.is_empty() => {}
            Ok(names) => log::warn!(
                namespace:% = k.settings.namespace,
                jobs:% = names.join(","),
                count:% = names.len();
                "orphaned agent Jobs of an earlier process deleted"
            ),
            Err(e) => log::error!(
                namespace:% = k.settings.namespace,
                error:% = e.to_string();
                "orphaned agent Jobs not listed or deleted"
            ),
        }
    }

    /// Sessions the previous process left running (recorded at open as `cancelled` runs with
    /// the error `interrupted: sortie restarted`, see `store::aggregates::absorb_lost_sessions`):
    /// before anything is dispatched, stops the agent process group each one left if its
    /// leader is still the recorded process (pid and start time), kills what escaped the group
    /// carrying the dead instance's token, and queues a retry due now that resumes the agent
    /// session when its id is known (budgets apply as to any retry). Runs on the `orch` side
    /// of the start, before the first tick.
    pub(crate) fn recover_interrupted_sessions(&mut self) {
        use crate::process_signal::{GroupStop, orphans, stop_recorded_group};
        let sessions = match persist::interrupted_sessions(&self.store) {
            Ok(s) => s,
            Err(e) => {
                log::error!(error:% = e.to_string(); "interrupted sessions not read");
                return;
            }
        };
        let mut instances = std::collections::BTreeSet::new();
        for s in &sessions {
            let group = s
                .agent_pgid
                .and_then(|p| u32::try_from(p).ok())
                .zip(s.agent_start_ticks.and_then(|t| u64::try_from(t).ok()));
            let stopped = match group {
                Some((pgid, ticks)) => {
                    match stop_recorded_group(pgid, ticks, crate::agent::process::DEFAULT_GRACE) {
                        Ok(GroupStop::NotRunning) => "not_running",
                        Ok(GroupStop::Terminated) => "terminated",
                        Ok(GroupStop::Killed) => "killed",
                        Err(e) => {
                            log::error!(
                                issue_id:% = s.issue_id,
                                issue_identifier:% = s.identifier,
                                pgid:% = pgid,
                                error:% = e.to_string();
                                "agent group of an interrupted session not stopped"
                            );
                            "error"
                        }
                    }
                }
                None => "unknown_group",
            };
            if !s.sortie_instance.is_empty() && instances.insert(s.sortie_instance.clone()) {
                let n = orphans::kill_instance(&s.sortie_instance);
                if n > 0 {
                    log::warn!(
                        instance:% = s.sortie_instance,
                        count:% = n;
                        "escaped agent processes of the previous sortie killed"
                    );
                }
            }
            log::warn!(
                issue_id:% = s.issue_id,
                issue_identifier:% = s.identifier,
                attempt:% = s.attempt + 1,
                session_id:% = s.session_id,
                agent_pgid:% = s.agent_pgid.map(|p| p.to_string()).unwrap_or_default(),
                agent_group:% = stopped;
                "session interrupted by a restart"
            );
            if !s.session_id.is_empty()
                && !self.state.retries.contains_key(&s.issue_id)
                && !self.state.parked.contains_key(&s.issue_id)
            {
                let issue = Issue {
                    id: s.issue_id.clone(),
                    identifier: s.identifier.clone(),
                    ..Default::default()
                };
                let attempt = u32::try_from(s.attempt + 1).unwrap_or(1);
                let dispatched = s.started_at_ms.unwrap_or(s.updated_at_ms);
                self.schedule_retry(
                    &issue,
                    attempt,
                    0,
                    RetryTrigger::Error,
                    Some(crate::store::INTERRUPTED_ERROR.to_string()),
                    Some(s.session_id.clone()),
                    Pass {
                        dispatched_at_ms: dispatched,
                        route: crate::domain::stage::Route {
                            agent_kind: s.agent_kind.clone(),
                            ..Default::default()
                        },
                    },
                );
            }
            persist::session_recovered(&self.store, &s.issue_id);
        }
    }

    /// Records where the HTTP API listens (set before [`Orchestrator::run`], since the
    /// server starts after the orchestrator is built); sessions dispatched from then on give
    /// it to their MCP server.
    pub fn set_api_url(&mut self, url: Option<String>) {
        self.mcp_daemon.api_url = url;
    }

    /// Puts this workflow under the cap the daemon's workflows share (set before
    /// [`Orchestrator::run`]).
    pub fn set_daemon_slots(&mut self, slots: crate::orchestrator::core::slots::DaemonSlots) {
        self.daemon_slots = Some(slots);
    }

    /// Puts this workflow under the spend ceilings the daemon's workflows share (set before
    /// [`Orchestrator::run`]).
    pub fn set_daemon_spend(
        &mut self,
        spend: crate::orchestrator::features::spend::daemon::DaemonSpend,
    ) {
        self.features.spend.set_daemon(spend);
    }

    /// Says that other workflows write through the same database writer (set before
    /// [`Orchestrator::run`]): the shutdown flushes it instead of stopping it.
    pub fn set_store_shared(&mut self) {
        self.store_shared = true;
    }

    /// The loop: messages, due retries and ticks, until shutdown completes. A panic in the
    /// loop stops every running agent first (cancel, then wait up to the drain timeout for the
    /// supervisors to report) and then continues unwinding, so the thread's join sees it and
    /// the process exits non-zero (`cli::run`).
    pub fn run(mut self) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_loop()));
        if let Err(payload) = outcome {
            self.stop_agents_after_panic();
            std::panic::resume_unwind(payload);
        }
    }

    /// After a panic in the loop: cancels every running session and waits (bounded) for the
    /// supervisors' exits, whose agents are stopped like on shutdown. Nothing is scheduled.
    pub(crate) fn stop_agents_after_panic(&mut self) {
        log::error!(
            running:% = self.state.running.len();
            "orchestrator panicked; stopping running sessions"
        );
        for e in self.state.running.values() {
            e.handles.cancel.cancel(CancelReason::Shutdown);
        }
        // A session whose row is still being committed has no supervisor to report.
        for start in std::mem::take(&mut self.unstarted).into_values() {
            self.state.running.remove(start.issue_id());
        }
        let deadline = Instant::now() + PANIC_DRAIN_TIMEOUT;
        while !self.state.running.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(OrchMsg::Exit(result)) => {
                    self.state.running.remove(&result.issue_id);
                }
                Ok(_) => {}
                Err(_) => {
                    log::warn!(
                        remaining:% = self.state.running.len();
                        "sessions not stopped after orchestrator panic"
                    );
                    break;
                }
            }
        }
    }

    pub(crate) fn run_loop(&mut self) {
        loop {
            let timeout = self.next_wakeup();
            let mut changed = Changed::default();
            select! {
                recv(self.rx) -> msg => match msg {
                    Ok(m) => changed.note(self.handle_counted(m)),
                    Err(_) => break,
                },
                recv(self.lanes.rx) -> apply => {
                    if let Ok(apply) = apply {
                        apply(self);
                        changed.note(false);
                    }
                },
                default(timeout) => {}
            }
            // Drain what else is queued before timers, so exits are seen promptly; bounded, so
            // a flood of agent events cannot starve the timers.
            for _ in 0..DRAIN_BATCH {
                let Ok(m) = self.rx.try_recv() else { break };
                changed.note(self.handle_counted(m));
            }
            while let Ok(apply) = self.lanes.rx.try_recv() {
                apply(self);
                changed.note(false);
            }
            if let Some(deadline) = self.draining {
                // A thousand sessions stopping end a thousand passes: their changes are
                // published together, at most one snapshot per publish delay.
                let now = self.clock.instant();
                if changed.any() {
                    self.pacer.defer(now);
                }
                if self.pacer.due(now) {
                    self.publish();
                }
                if self.state.running.is_empty() && self.state.settling.is_empty() {
                    if self.pacer.wait(now).is_some() {
                        self.publish();
                    }
                    break;
                }
                if self.clock.instant() >= deadline {
                    log::warn!(
                        remaining:% = self.state.running.len(),
                        settling:% = self.state.settling.len();
                        "drain timeout exceeded, abandoning workers"
                    );
                    self.record_abandoned();
                    break;
                }
                continue;
            }
            changed.urgent |= self.run_timers();
            let now = self.clock.instant();
            if changed.deferred {
                self.pacer.defer(now);
            }
            // Every other change publishes at once, so when only the pacer is due, nothing but
            // running sessions and totals changed since the last publish.
            if changed.urgent {
                self.publish();
            } else if self.pacer.due(now) {
                self.publish_running();
            }
        }
        self.close_inbox();
        self.finish_shutdown();
    }

    /// After the loop: the queued tracker writes get what is left of the shutdown budget, the
    /// calls still out are logged as lost, and the database is flushed.
    pub(crate) fn finish_shutdown(&mut self) {
        let left = self
            .shutdown_deadline
            .map(|d| d.saturating_duration_since(self.clock.instant()))
            .unwrap_or(crate::orchestrator::core::tracker_ops::DRAIN_TIMEOUT);
        self.tracker_ops.drain(left);
        self.abandon_io();
        for s in self.state.settling.values() {
            log::warn!(
                issue_id:% = s.entry.facts.issue.id,
                issue_identifier:% = s.entry.facts.issue.identifier,
                step:% = s.step.word();
                "exit not applied at shutdown; the issue is read again at the next start"
            );
        }
        if self.store_shared {
            persist::flush(&self.store);
        } else {
            persist::shutdown(&self.store);
        }
        if let Some(done) = &self.watchdog_done {
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        log::info!("shutting down");
    }

    /// Once the loop has ended nothing reads the inbox: dropping its only receiver drops the
    /// requests still queued and makes later sends fail, so their callers learn at once that
    /// the shutdown refused them instead of waiting out their deadline.
    pub(crate) fn close_inbox(&mut self) {
        drop(std::mem::replace(&mut self.rx, crossbeam_channel::never()));
        log::info!("orchestrator takes no more requests");
    }

    /// Handles one message and says whether its change may wait for the publish timer.
    pub(crate) fn handle_counted(&mut self, m: OrchMsg) -> bool {
        let deferrable = matches!(
            m,
            OrchMsg::Agent { .. }
                | OrchMsg::AgentBatch { .. }
                | OrchMsg::TurnStarted { .. }
                | OrchMsg::WorkspaceReady { .. }
                | OrchMsg::SelfReview { .. }
        );
        self.handle(m);
        deferrable
    }

    /// Stops stalled sessions, fires due retries and runs the tick when it is due (or
    /// requested) and the poll floor allows; true if anything ran.
    pub(crate) fn run_timers(&mut self) -> bool {
        self.flush_live_rows();
        let stalled = self.stop_stalled();
        let fired = self.fire_due_retries();
        self.run_tick_if_due() || stalled || fired
    }

    /// The tick, when the timer is due, or when a refresh asked for one and the latest poll
    /// began at least `polling.min_interval_ms` ago (the floor binds refreshes and webhook
    /// deliveries, not the configured interval). A refresh while a poll's reads are out waits
    /// for them; a timer tick then is skipped (and counted by [`Orchestrator::tick`]).
    pub(crate) fn run_tick_if_due(&mut self) -> bool {
        let now = self.clock.instant();
        let timer_due = now >= self.next_tick_at;
        let refresh_due = self.refresh_pending && self.floor_at().is_none_or(|f| now >= f);
        if !(timer_due || refresh_due) {
            return false;
        }
        if timer_due {
            let interval = self.workflow.config.polling.interval_ms.max(1);
            self.next_tick_at = now + Duration::from_millis(interval);
            self.state.health.poll.next_at_ms = Some(self.clock.now_ms() + interval as i64);
        } else if self.poll_out.is_some() {
            return false;
        }
        // A refresh polls now and leaves the timer where it was.
        if self.poll_out.is_none() {
            self.refresh_pending = false;
            self.last_poll_at = Some(now);
        }
        self.tick();
        true
    }

    /// When the next poll may start: `polling.min_interval_ms` after the latest one began.
    pub(crate) fn floor_at(&self) -> Option<Instant> {
        let floor = Duration::from_millis(self.workflow.config.polling.min_interval_ms);
        self.last_poll_at.map(|at| at + floor)
    }

    /// Test driver: handles every message that arrives within `wait` (returning early once
    /// one has arrived and the queue is empty), then runs due timers and publishes. Tracker
    /// calls the step starts are waited for (up to 10 s) and applied in the order the loop
    /// would start them (due retries before the tick), so a test with a manual clock sees a
    /// step's whole effect.
    pub fn step(&mut self, wait: Duration) {
        const SETTLE: Duration = Duration::from_secs(10);
        if let Ok(m) = self.rx.recv_timeout(wait) {
            self.handle(m);
        }
        while let Ok(m) = self.rx.try_recv() {
            self.handle(m);
        }
        self.settle_io(SETTLE);
        self.flush_live_rows();
        self.stop_stalled();
        self.fire_due_retries();
        self.settle_io(SETTLE);
        self.run_tick_if_due();
        self.settle_io(SETTLE);
        self.publish();
    }

    /// The latest snapshot, rebuilt now.
    pub fn snapshot_now(&mut self) -> Arc<Snapshot> {
        self.publish();
        self.published
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    pub(crate) fn next_wakeup(&mut self) -> Duration {
        let now = self.clock.instant();
        if let Some(deadline) = self.draining {
            let publish = self.pacer.wait(now).unwrap_or(Duration::from_millis(200));
            return deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(200))
                .min(publish);
        }
        let mut wait = self.next_tick_at.saturating_duration_since(now);
        // A refresh waits for the floor (one during an outstanding poll is woken by the poll's
        // result).
        if self.refresh_pending {
            let floor = self
                .floor_at()
                .map_or(Duration::ZERO, |f| f.saturating_duration_since(now));
            wait = wait.min(floor);
        }
        if let Some(publish) = self.pacer.wait(now) {
            wait = wait.min(publish);
        }
        if let Some(due) = self.state.retry_queue.next_due() {
            let ms = (due - self.clock.now_ms()).max(0) as u64;
            wait = wait.min(Duration::from_millis(ms));
        }
        // The first session to pass its stall limit is stopped as it does (a millisecond
        // later, so the check sees it past).
        if let Some(due) = self.next_stall_ms() {
            let ms = (due + 1 - self.clock.now_ms()).max(0) as u64;
            wait = wait.min(Duration::from_millis(ms));
        }
        // Wake at least once a second so budgets stay timely.
        wait.min(Duration::from_secs(1))
    }

    pub(crate) fn handle(&mut self, msg: OrchMsg) {
        match msg {
            // The events' gate slots go with the rest of the message, once they are handled.
            OrchMsg::Agent {
                dispatch_id, event, ..
            } => self.on_agent_event(&dispatch_id, event),
            OrchMsg::AgentBatch {
                dispatch_id,
                events,
                ..
            } => self.on_agent_events(&dispatch_id, events),
            OrchMsg::WorkspaceReady { dispatch_id, path } => {
                if let Some(e) = self.running_by_dispatch(&dispatch_id) {
                    e.facts.workspace_path = Some(path);
                    // The live session row names the workspace from now on.
                    e.facts.live_row_dirty = true;
                }
            }
            OrchMsg::IssueMoved { dispatch_id, state } => {
                if let Some(e) = self.running_by_dispatch(&dispatch_id) {
                    e.facts.moved_to(state);
                }
            }
            OrchMsg::TurnStarted { dispatch_id, turn } => {
                let now = self.clock.now_ms();
                if let Some(e) = self.running_by_dispatch(&dispatch_id) {
                    e.facts.turn_started(turn, now);
                    self.features.self_review.turn_started(&dispatch_id, now);
                }
            }
            OrchMsg::SelfReview { dispatch_id, phase } => {
                if self.running_by_dispatch(&dispatch_id).is_some() {
                    let effects = self.features.self_review.report(&dispatch_id, phase);
                    self.apply(effects);
                }
            }
            OrchMsg::Exit(result) => self.on_exit(*result),
            OrchMsg::RunRecorded { dispatch_id } => self.on_run_recorded(&dispatch_id),
            OrchMsg::SessionRecorded {
                dispatch_id,
                result,
            } => self.on_session_recorded(&dispatch_id, result),
            OrchMsg::Refresh { reply } => {
                let outcome = if self.draining.is_some() {
                    RefreshOutcome::Draining
                } else if self.refresh_pending {
                    RefreshOutcome::Coalesced
                } else {
                    self.refresh_pending = true;
                    RefreshOutcome::Queued
                };
                if let Some(r) = reply {
                    let _ = r.try_send(outcome);
                }
            }
            OrchMsg::RetryNow { identifier, reply } => self.retry_now(&identifier, reply),
            OrchMsg::ReactionCheck {
                identifier,
                kind,
                reply,
            } => {
                let _ = reply.try_send(self.reaction_check(&identifier, kind));
            }
            OrchMsg::Acknowledge {
                ack,
                release_issue,
                reply,
            } => {
                let result = if self.draining.is_some() {
                    Err(AckError::Draining)
                } else {
                    persist::acknowledge(&self.store, ack).map_err(AckError::NotSaved)
                };
                if let Ok(stored) = &result {
                    log::info!(
                        item_id:% = stored.item_id,
                        kind:% = stored.kind;
                        "attention item acknowledged"
                    );
                    self.state
                        .acks
                        .insert(stored.item_id.clone(), stored.clone());
                    if let Some(id) = &release_issue {
                        self.release_failure_hold(id, "acknowledged");
                    }
                }
                let _ = reply.try_send(result);
            }
            OrchMsg::WorkflowChanged => {
                self.reload_workflow_on(true);
            }
            OrchMsg::Shutdown => self.begin_shutdown(),
            OrchMsg::ShutdownNow => self.shutdown_now(),
        }
    }

    /// A second signal: the drain goes on (runs are still recorded), but every agent still in
    /// its SIGTERM grace is killed now, and so is any stopped later.
    pub(crate) fn shutdown_now(&mut self) {
        self.begin_shutdown();
        log::warn!(
            running:% = self.state.running.len();
            "shutdown escalated: killing agent process groups"
        );
        for e in self.state.running.values() {
            e.handles.cancel.escalate(CancelReason::Shutdown);
        }
        let soon = self.clock.instant() + ESCALATED_DRAIN_TIMEOUT;
        self.draining = self.draining.map(|d| d.min(soon)).or(Some(soon));
    }

    /// The first signal: every session is cancelled and has until the drain deadline to
    /// report its run; the whole shutdown is over within `shutdown.drain_timeout_ms`.
    pub(crate) fn begin_shutdown(&mut self) {
        if self.draining.is_some() {
            return;
        }
        let budget = self.drain_budget;
        let reserve = DRAIN_RESERVE.min(budget / 4);
        let now = self.clock.instant();
        log::info!(
            running:% = self.state.running.len(),
            drain_timeout_ms:% = budget.as_millis();
            "draining: cancelling running sessions"
        );
        self.shutdown_deadline = Some(now + budget);
        self.draining = Some(now + budget.saturating_sub(reserve));
        self.watchdog_done = Some(spawn_shutdown_watchdog(budget + WATCHDOG_MARGIN));
        for e in self.state.running.values() {
            e.handles.cancel.cancel(CancelReason::Shutdown);
        }
        for cancel in self.features.reactions.triage_runs.values() {
            cancel.cancel(CancelReason::Shutdown);
        }
        self.publish();
    }

    /// At the drain deadline: kills what is left of every agent group and records the
    /// sessions whose supervisors did not report in time as cancelled runs, so no run is lost.
    pub(crate) fn record_abandoned(&mut self) {
        let now = self.clock.now_ms();
        let entries: Vec<RunningEntry> = std::mem::take(&mut self.state.running)
            .into_values()
            .collect();
        self.state.dispatch_index.clear();
        for entry in entries {
            entry.handles.cancel.escalate(CancelReason::Shutdown);
            let result = SupervisorResult {
                dispatch_id: entry.facts.dispatch_id.clone(),
                issue_id: entry.facts.issue.id.clone(),
                exit: SupervisorExit::Cancelled {
                    reason: CancelReason::Shutdown,
                },
                turns_completed: entry.facts.turn.saturating_sub(1),
                session_id: entry.facts.session_id.clone(),
                workspace_path: entry.facts.workspace_path.clone(),
                ended_at_ms: now,
                pr_record: None,
                evidence: None,
            };
            log::warn!(
                issue_id:% = entry.facts.issue.id,
                issue_identifier:% = entry.facts.issue.identifier,
                dispatch_id:% = entry.facts.dispatch_id;
                "recording abandoned run"
            );
            // Shutting down: a record the writer keeps is retried once more at its flush.
            let _ = self.record_exit(&entry, &result);
        }
    }

    pub(crate) fn running_by_dispatch(&mut self, dispatch_id: &str) -> Option<&mut RunningEntry> {
        let issue_id = self.state.dispatch_index.get(dispatch_id)?.clone();
        self.state.running.get_mut(&issue_id)
    }

    // ---- snapshot -----------------------------------------------------------------------

    /// Publishes a snapshot rebuilt from the whole state.
    pub(crate) fn publish(&mut self) {
        self.sync_live_passes();
        self.state.revision += 1;
        let mut snap = Snapshot::build(
            &self.state,
            &self.workflow,
            self.clock.now_ms(),
            self.started_at_ms,
            self.draining.is_some(),
        )
        .price_running(&self.prices.current());
        let now = self.clock.now_ms();
        for feature in self.features.in_order() {
            feature.snapshot(&mut snap, now);
        }
        // `config.reactions` serves what the process applies, not what a reload says.
        snap.config.reactions = self.reaction_config();
        self.store_snapshot(snap);
    }

    /// Publishes deferred agent events: only running sessions and totals changed since the
    /// last publish, so every other list is shared with it.
    pub(crate) fn publish_running(&mut self) {
        let prev = self
            .published
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()));
        self.state.revision += 1;
        let mut snap = Snapshot::with_running(&prev, &self.state, self.clock.now_ms())
            .price_running(&self.prices.current());
        for feature in self.features.in_order() {
            feature.snapshot_running(&mut snap);
        }
        self.store_snapshot(snap);
    }

    pub(crate) fn store_snapshot(&mut self, snap: Snapshot) {
        self.pacer.published();
        if let Ok(mut w) = self.published.write() {
            *w = Arc::new(snap);
        }
        super::snapshot::notify_published();
    }
}

/// How long past the shutdown budget the watchdog waits before it ends the process.
pub(crate) const WATCHDOG_MARGIN: Duration = Duration::from_secs(2);

/// Ends the process (exit 1) if it is still alive `after` from now: the drain abandons what
/// does not finish in time, so only a wedged dependency (a disk that does not answer, a
/// thread that never returns) reaches it, and a service manager's stop timeout is never what
/// ends sortie.
pub fn spawn_shutdown_watchdog(after: Duration) -> Arc<std::sync::atomic::AtomicBool> {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = done.clone();
    let spawned = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(after);
            // An orchestrator that finished its drain (one workflow of several removed, say)
            // is no reason to end the process.
            if seen.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            log::error!(
                budget_ms:% = after.as_millis();
                "shutdown did not finish within its budget; exiting now"
            );
            std::process::exit(1);
        });
    if let Err(e) = spawned {
        log::error!(error:% = e.to_string(); "shutdown watchdog not started");
    }
    done
}

/// Messages handled before timers get their turn.
pub(crate) const DRAIN_BATCH: usize = 1_024;

/// What one loop pass changed: `urgent` is published at once, `deferred` on the pacer.
#[derive(Default)]
pub(crate) struct Changed {
    pub(crate) urgent: bool,
    pub(crate) deferred: bool,
}

impl Changed {
    pub(crate) fn note(&mut self, deferrable: bool) {
        if deferrable {
            self.deferred = true;
        } else {
            self.urgent = true;
        }
    }

    pub(crate) fn any(&self) -> bool {
        self.urgent || self.deferred
    }
}

/// The recorded status of an exit; a cancellation by the budget is told apart.
pub(crate) fn run_status(exit: &SupervisorExit, budget_stopped: bool) -> RunStatus {
    match exit {
        SupervisorExit::Normal { .. } => RunStatus::Succeeded,
        SupervisorExit::Error { .. } | SupervisorExit::HandoffWithheld { .. } => RunStatus::Failed,
        SupervisorExit::Cancelled { .. } if budget_stopped => RunStatus::BudgetStopped,
        SupervisorExit::Cancelled { .. } => RunStatus::Cancelled,
        SupervisorExit::UsageLimited(_) => RunStatus::UsageLimited,
    }
}

/// A new dispatch id: 16 random bytes, base32 (A–Z2–7) without padding.
pub fn new_dispatch_id() -> String {
    let mut bytes = [0u8; 10];
    if getrandom::fill(&mut bytes).is_err() {
        // Fall back to time-derived bytes; ids only need to be unique within this database.
        let t = crate::clock::SystemClock.now_ms().to_be_bytes();
        bytes[..8].copy_from_slice(&t);
    }
    data_encoding::BASE32_NOPAD.encode(&bytes)
}
