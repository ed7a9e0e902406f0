//! The orchestrator thread: its loop, the poll tick, dispatch, agent events, exits and retries.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};

use crate::agent::status_file::DeclaredOutcome;
use crate::agent::{AgentAdapter, AgentEventKind, CancelReason, CancelToken};
use crate::clock::Clock;
use crate::config::{LoadOptions, Workflow};
use crate::domain::{Issue, state_in};
use crate::prompt::PromptTemplate;
use crate::store::Store;
use crate::tracker::TrackerAdapter;
use crate::workspace::WorkspaceManager;

use super::backoff::{CONTINUATION_DELAY_MS, failure_delay_ms};
use super::dispatch_pass::{Decision, PassInput, plan, sort_candidates};
use super::msg::{OrchMsg, RefreshOutcome, RetryNowOutcome, WorkerExit, WorkerResult};
use super::persist;
use super::snapshot::Snapshot;
use super::state::{BudgetHold, Held, Park, RetryInfo, RunningEntry, State};
use super::worker::{self, WorkerJob};

/// How long shutdown waits for workers to exit before abandoning them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Every this many ticks, sweep workspaces of terminal issues.
const SWEEP_EVERY_TICKS: u64 = 60;
/// The label a parked issue gets when the configuration names none.
pub const DEFAULT_PARKING_LABEL: &str = "needs-human";

/// What the orchestrator is built from.
pub struct OrchestratorDeps {
    pub workflow: Arc<Workflow>,
    pub template: Arc<PromptTemplate>,
    pub load_options: LoadOptions,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub agent: Arc<dyn AgentAdapter>,
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
}

/// The handle other threads hold.
#[derive(Clone)]
pub struct OrchestratorHandle {
    pub tx: Sender<OrchMsg>,
    pub snapshot: Arc<RwLock<Arc<Snapshot>>>,
}

impl OrchestratorHandle {
    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Queues an immediate tick (coalesced) and waits for the answer.
    pub fn refresh(&self, timeout: Duration) -> Option<RefreshOutcome> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.tx.send(OrchMsg::Refresh { reply: Some(tx) }).ok()?;
        rx.recv_timeout(timeout).ok()
    }
}

pub struct Orchestrator {
    workflow: Arc<Workflow>,
    template: Arc<PromptTemplate>,
    load_options: LoadOptions,
    tracker: Arc<dyn TrackerAdapter>,
    agent: Arc<dyn AgentAdapter>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    state: State,
    tx: Sender<OrchMsg>,
    rx: Receiver<OrchMsg>,
    published: Arc<RwLock<Arc<Snapshot>>>,
    next_tick_at: Instant,
    refresh_pending: bool,
    draining: Option<Instant>,
    tick_count: u64,
    started_at_ms: i64,
    tracker_ops: super::tracker_ops::TrackerOps,
}

impl Orchestrator {
    /// Builds the orchestrator, restores persisted state (warm start) and returns it with
    /// its handle; call [`Orchestrator::run`] on its own thread.
    pub fn new(deps: OrchestratorDeps) -> (Orchestrator, OrchestratorHandle) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let now = deps.clock.now_ms();
        let published = Arc::new(RwLock::new(Arc::new(Snapshot::default())));
        let state = State {
            revision: now.max(0) as u64,
            ..Default::default()
        };
        let mut o = Orchestrator {
            workflow: deps.workflow,
            template: deps.template,
            load_options: deps.load_options,
            tracker: deps.tracker.clone(),
            agent: deps.agent,
            store: deps.store,
            clock: deps.clock.clone(),
            state,
            tx: tx.clone(),
            rx,
            published: published.clone(),
            next_tick_at: deps.clock.instant(),
            refresh_pending: false,
            draining: None,
            tick_count: 0,
            started_at_ms: now,
            tracker_ops: super::tracker_ops::TrackerOps::spawn(deps.tracker.clone()),
        };
        o.warm_start();
        o.publish();
        (
            o,
            OrchestratorHandle {
                tx,
                snapshot: published,
            },
        )
    }

    fn workspaces(&self) -> Arc<WorkspaceManager> {
        Arc::new(persist::workspace_manager(&self.workflow))
    }

    /// Restores retries, totals, parks and outcomes from the database, then removes
    /// workspaces of issues that became terminal while sortie was down.
    fn warm_start(&mut self) {
        let now = self.clock.now_ms();
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
                log::info!(
                    "warm start restored retries={} parked={} dispatches_total={}",
                    self.state.retries.len(),
                    self.state.parked.len(),
                    self.state.totals.dispatches
                );
            }
            Err(e) => log::warn!("warm start failed; starting empty error=\"{e}\""),
        }
        self.sweep_terminal_workspaces();
        let _ = now;
    }

    /// The loop: messages, due retries and ticks, until shutdown completes.
    pub fn run(mut self) {
        loop {
            let timeout = self.next_wakeup();
            let mut changed = false;
            select! {
                recv(self.rx) -> msg => match msg {
                    Ok(m) => {
                        self.handle(m);
                        changed = true;
                    }
                    Err(_) => break,
                },
                default(timeout) => {}
            }
            // Drain whatever else is queued before timers, so exits are seen promptly.
            while let Ok(m) = self.rx.try_recv() {
                self.handle(m);
                changed = true;
            }
            if let Some(deadline) = self.draining {
                if changed {
                    self.publish();
                }
                if self.state.running.is_empty() {
                    break;
                }
                if self.clock.instant() >= deadline {
                    log::warn!(
                        "drain timeout exceeded, abandoning workers remaining={}",
                        self.state.running.len()
                    );
                    break;
                }
                continue;
            }
            changed |= self.run_timers();
            if changed {
                self.publish();
            }
        }
        self.tracker_ops.drain(super::tracker_ops::DRAIN_TIMEOUT);
        persist::shutdown(&self.store);
        log::info!("shutting down");
    }

    /// Fires due retries and runs the tick when it is due (or requested); true if anything ran.
    fn run_timers(&mut self) -> bool {
        let fired = self.fire_due_retries();
        if self.refresh_pending || self.clock.instant() >= self.next_tick_at {
            self.refresh_pending = false;
            self.tick();
            let interval = self.workflow.config.polling.interval_ms.max(1);
            self.next_tick_at = self.clock.instant() + Duration::from_millis(interval);
            return true;
        }
        fired
    }

    /// Test driver: handles every message that arrives within `wait` (returning early once
    /// one has arrived and the queue is empty), then runs due timers and publishes. Lets tests
    /// drive the orchestrator with a manual clock instead of real time.
    pub fn step(&mut self, wait: Duration) {
        if let Ok(m) = self.rx.recv_timeout(wait) {
            self.handle(m);
        }
        while let Ok(m) = self.rx.try_recv() {
            self.handle(m);
        }
        self.run_timers();
        self.publish();
    }

    /// Number of running sessions (for tests and diagnostics).
    pub fn running_count(&self) -> usize {
        self.state.running.len()
    }

    /// The latest snapshot, rebuilt now.
    pub fn snapshot_now(&mut self) -> Arc<Snapshot> {
        self.publish();
        self.published
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    fn next_wakeup(&mut self) -> Duration {
        let now = self.clock.instant();
        if let Some(deadline) = self.draining {
            return deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(200));
        }
        if self.refresh_pending {
            return Duration::ZERO;
        }
        let mut wait = self.next_tick_at.saturating_duration_since(now);
        if let Some(due) = self.state.retry_queue.next_due() {
            let ms = (due - self.clock.now_ms()).max(0) as u64;
            wait = wait.min(Duration::from_millis(ms));
        }
        // Wake at least once a second so stall checks and budgets stay timely.
        wait.min(Duration::from_secs(1))
    }

    fn handle(&mut self, msg: OrchMsg) {
        match msg {
            OrchMsg::Agent { dispatch_id, event } => self.on_agent_event(&dispatch_id, event),
            OrchMsg::TurnStarted { dispatch_id, turn } => {
                if let Some(e) = self.running_by_dispatch(&dispatch_id) {
                    e.turn = turn;
                    e.turn_had_usage = false;
                }
            }
            OrchMsg::Exit(result) => self.on_exit(*result),
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
            OrchMsg::RetryNow { identifier, reply } => {
                let outcome = self.retry_now(&identifier);
                let _ = reply.try_send(outcome);
            }
            OrchMsg::Acknowledge { ack, reply } => {
                let result = if self.draining.is_some() {
                    Err("draining".to_string())
                } else {
                    persist::acknowledge(&self.store, ack)
                };
                if let Ok(stored) = &result {
                    log::info!(
                        "attention item acknowledged item_id={} kind={}",
                        stored.item_id,
                        stored.kind
                    );
                    self.state
                        .acks
                        .insert(stored.item_id.clone(), stored.clone());
                }
                let _ = reply.try_send(result);
            }
            OrchMsg::WorkflowChanged => {
                self.reload_workflow();
            }
            OrchMsg::Shutdown => self.begin_shutdown(),
        }
    }

    fn begin_shutdown(&mut self) {
        if self.draining.is_some() {
            return;
        }
        log::info!(
            "draining: cancelling running sessions running={}",
            self.state.running.len()
        );
        self.draining = Some(self.clock.instant() + DRAIN_TIMEOUT);
        for e in self.state.running.values() {
            e.cancel.cancel(CancelReason::Shutdown);
        }
        self.publish();
    }

    fn running_by_dispatch(&mut self, dispatch_id: &str) -> Option<&mut RunningEntry> {
        let issue_id = self.state.dispatch_index.get(dispatch_id)?.clone();
        self.state.running.get_mut(&issue_id)
    }

    // ---- agent events -------------------------------------------------------------------

    fn on_agent_event(&mut self, dispatch_id: &str, event: crate::agent::AgentEvent) {
        let max_tokens = self.workflow.config.agent.max_tokens.unwrap_or(0);
        let Some(issue_id) = self.state.dispatch_index.get(dispatch_id).cloned() else {
            return;
        };
        let Some(e) = self.state.running.get_mut(&issue_id) else {
            return;
        };
        e.last_event_at_ms = Some(event.at_ms);
        e.last_event_type = Some(event.kind.type_name().to_string());
        let msg = event.kind.message();
        if !msg.trim().is_empty() {
            e.last_message = Some(crate::mask::mask(msg));
        }
        match &event.kind {
            AgentEventKind::SessionStarted {
                session_id,
                agent_pid,
            } => {
                e.session_id = Some(session_id.clone());
                e.agent_pid = *agent_pid;
            }
            AgentEventKind::TokenUsage { usage, model, .. } => {
                e.tokens = e.tokens.plus(usage);
                e.tokens_measured = true;
                e.turn_had_usage = true;
                e.api_request_count += 1;
                if model.is_some() {
                    e.reported_model = model.clone();
                }
                let t = &mut self.state.totals;
                t.input_tokens += usage.input_tokens;
                t.output_tokens += usage.output_tokens;
                t.total_tokens += usage.total_tokens;
                t.cache_read_tokens += usage.cache_read_tokens;
                t.cache_write_tokens += usage.cache_write_tokens;
                let used_before = e.tokens_used_before;
                if max_tokens > 0
                    && !e.budget_stopped
                    && used_before + e.tokens.uncached_tokens() >= max_tokens
                {
                    e.budget_stopped = true;
                    log::warn!(
                        "token budget reached, stopping session issue_id={} issue_identifier={} used_tokens={} budget_tokens={}",
                        e.issue.id,
                        e.issue.identifier,
                        used_before + e.tokens.uncached_tokens(),
                        max_tokens
                    );
                    e.cancel.cancel(CancelReason::Budget);
                }
            }
            k if k.is_terminal() && !e.turn_had_usage => {
                e.turns_without_figure += 1;
            }
            _ => {}
        }
        e.events.push(&event);
    }

    // ---- the tick -----------------------------------------------------------------------

    fn reload_workflow(&mut self) -> bool {
        let now = self.clock.now_ms();
        match persist::reload(&self.workflow.path, &self.load_options) {
            Ok((wf, template)) => {
                if wf.config != self.workflow.config
                    || wf.prompt_template != self.workflow.prompt_template
                {
                    log::info!("workflow reloaded path={}", wf.path.display());
                }
                self.workflow = Arc::new(wf);
                self.template = Arc::new(template);
                self.state.health.workflow.record(now, Ok(()));
                true
            }
            Err(e) => {
                log::warn!(
                    "workflow reload failed path={} error=\"{}\"",
                    self.workflow.path.display(),
                    e
                );
                self.state.health.workflow.record(now, Err(e));
                false
            }
        }
    }

    fn preflight(&mut self) -> Result<(), String> {
        let mut problems = self.workflow.config.config_preflight();
        if let Err(e) = self.workspaces().preflight_root_writable() {
            problems.push(format!("workspace.root_writable: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "dispatch preflight failed: {}",
                problems.join("; ")
            ))
        }
    }

    fn tick(&mut self) {
        self.tick_count += 1;
        let now = self.clock.now_ms();
        // 1. Reload (failure keeps the last good workflow).
        let loaded = self.reload_workflow();
        // 2. Database ping and preflight.
        let db = persist::ping(&self.store);
        self.state.health.database.record(now, db);
        let preflight = if loaded {
            self.preflight()
        } else {
            Err(format!(
                "dispatch preflight failed: workflow file cannot be loaded: {}",
                self.state.health.workflow.error.clone().unwrap_or_default()
            ))
        };
        self.state.health.preflight.record(now, preflight.clone());
        // 4. Reconcile running sessions.
        self.reconcile();
        // 5. Periodic sweep.
        if self.tick_count.is_multiple_of(SWEEP_EVERY_TICKS) {
            self.sweep_terminal_workspaces();
        }
        if let Err(e) = preflight {
            log::warn!("{e}");
            self.state.health.poll = super::state::PollHealth {
                at_ms: Some(now),
                outcome: "preflight_failed".into(),
                error: Some(crate::mask::mask(&e)),
                candidates: 0,
                dispatched: 0,
            };
            return;
        }
        // 7. Candidates.
        let mut candidates = match self.tracker.fetch_candidate_issues() {
            Ok(c) => c,
            Err(e) => {
                log::warn!("failed to fetch candidate issues error=\"{e}\"");
                self.state.health.poll = super::state::PollHealth {
                    at_ms: Some(now),
                    outcome: "tracker_failed".into(),
                    error: Some(crate::mask::mask(&e.to_string())),
                    candidates: 0,
                    dispatched: 0,
                };
                return;
            }
        };
        sort_candidates(&mut candidates);
        // 9. Budget holds and park releases.
        self.rebuild_budget_holds(&candidates);
        self.release_parks(&candidates);
        // 11. The dispatch pass.
        let input = self.pass_input();
        let decisions = plan(&candidates, &input);
        let mut dispatched = 0;
        let mut held = std::collections::BTreeMap::new();
        for (issue, decision) in candidates.iter().zip(decisions) {
            match decision {
                Decision::Dispatch => {
                    let dispatched_at = now;
                    self.dispatch(issue.clone(), 0, None, dispatched_at);
                    dispatched += 1;
                }
                Decision::Held(reason) => {
                    let since = self
                        .state
                        .held
                        .get(&issue.id)
                        .map(|h| h.since_ms)
                        .unwrap_or(now);
                    held.insert(
                        issue.id.clone(),
                        Held {
                            issue: issue.clone(),
                            reason,
                            since_ms: since,
                        },
                    );
                }
                Decision::Skip(_) => {}
            }
        }
        self.state.held = held;
        self.state.health.poll = super::state::PollHealth {
            at_ms: Some(now),
            outcome: "ok".into(),
            error: None,
            candidates: candidates.len(),
            dispatched,
        };
        log::info!(
            "tick completed candidates={} dispatched={} running={} retrying={}",
            candidates.len(),
            dispatched,
            self.state.running.len(),
            self.state.retries.len()
        );
    }

    fn pass_input(&self) -> PassInput {
        let cfg = &self.workflow.config;
        let mut running_by_state = std::collections::BTreeMap::new();
        for e in self.state.running.values() {
            *running_by_state
                .entry(e.issue.state.trim().to_lowercase())
                .or_insert(0) += 1;
        }
        PassInput {
            active_states: cfg.tracker.active_states.clone(),
            terminal_states: cfg.tracker.terminal_states.clone(),
            max_concurrent_agents: cfg.agent.max_concurrent_agents as usize,
            max_by_state: cfg
                .agent
                .max_concurrent_agents_by_state
                .iter()
                .map(|(k, v)| (k.clone(), *v as usize))
                .collect(),
            running_total: self.state.running.len(),
            running_by_state,
            claimed: self.state.claimed(),
            budget_held: self.state.budget_held.keys().cloned().collect(),
            parked: self.state.parked.keys().cloned().collect(),
        }
    }

    /// The budget hold of one issue, if a per-issue ceiling is reached. `usage` is what the
    /// issue spent according to run history (`None`: read it now).
    fn budget_hold_for(
        &self,
        issue: &Issue,
        usage: Option<crate::store::IssueUsage>,
    ) -> Option<BudgetHold> {
        let cfg = &self.workflow.config.agent;
        let max_tokens = cfg.max_tokens.filter(|l| *l > 0);
        let max_sessions = cfg.max_sessions.filter(|l| *l > 0);
        if max_tokens.is_none() && max_sessions.is_none() {
            return None;
        }
        let usage = match usage {
            Some(u) => u,
            None => {
                let sessions = persist::count_sessions(&self.store, &issue.id);
                let tokens = persist::uncached_tokens_for_issue(&self.store, &issue.id);
                match (sessions, tokens) {
                    (Ok(s), Ok(t)) => crate::store::IssueUsage {
                        sessions: s as i64,
                        uncached_tokens: t as i64,
                    },
                    (Err(e), _) | (_, Err(e)) => {
                        // Fail open: a budget read failure must not stop all work.
                        log::warn!("budget read failed issue_id={} error=\"{e}\"", issue.id);
                        return None;
                    }
                }
            }
        };
        let now = self.clock.now_ms();
        let hold = |reason, used: i64, limit| BudgetHold {
            issue: issue.clone(),
            reason,
            used: used.max(0) as u64,
            limit,
            since_ms: now,
        };
        if let Some(limit) = max_tokens
            && usage.uncached_tokens.max(0) as u64 >= limit
        {
            return Some(hold("token_budget", usage.uncached_tokens, limit));
        }
        if let Some(limit) = max_sessions
            && usage.sessions.max(0) as u64 >= limit
        {
            return Some(hold("session_budget", usage.sessions, limit));
        }
        None
    }

    fn rebuild_budget_holds(&mut self, candidates: &[Issue]) {
        let cfg = &self.workflow.config.agent;
        if cfg.max_tokens.unwrap_or(0) == 0 && cfg.max_sessions.unwrap_or(0) == 0 {
            self.state.budget_held.clear();
            return;
        }
        let usage = match persist::usage_by_issue(&self.store) {
            Ok(u) => u,
            Err(e) => {
                log::warn!("budget read failed; keeping the previous holds error=\"{e}\"");
                return;
            }
        };
        let mut holds = std::collections::BTreeMap::new();
        for issue in candidates {
            if self.state.running.contains_key(&issue.id) {
                continue;
            }
            let used = usage.get(&issue.id).copied().unwrap_or_default();
            if let Some(mut h) = self.budget_hold_for(issue, Some(used)) {
                if let Some(prev) = self.state.budget_held.get(&issue.id) {
                    h.since_ms = prev.since_ms;
                } else {
                    log::warn!(
                        "effort budget exhausted, blocking re-dispatch issue_id={} issue_identifier={} reason={} used={} limit={}",
                        issue.id,
                        issue.identifier,
                        h.reason,
                        h.used,
                        h.limit
                    );
                }
                holds.insert(issue.id.clone(), h);
            }
        }
        self.state.budget_held = holds;
    }

    /// A park lifts when the issue's state changed since it was parked, or when a person
    /// removed the label Sortie applied.
    fn release_parks(&mut self, candidates: &[Issue]) {
        let mut lifted = Vec::new();
        for issue in candidates {
            if let Some(p) = self.state.parked.get(&issue.id) {
                let state_moved = !crate::domain::state_eq(&p.parked_state, &issue.state);
                let label_removed = p.label_applied
                    && !issue
                        .labels
                        .iter()
                        .any(|l| l.eq_ignore_ascii_case(&p.label));
                if state_moved || label_removed {
                    lifted.push(issue.id.clone());
                }
            }
        }
        for id in lifted {
            if let Some(p) = self.state.parked.remove(&id) {
                log::info!(
                    "park lifted issue_id={} issue_identifier={}",
                    p.issue.id,
                    p.issue.identifier
                );
                persist::unpark(&self.store, &id);
            }
        }
    }

    // ---- dispatch -----------------------------------------------------------------------

    fn dispatch(
        &mut self,
        issue: Issue,
        attempt: u32,
        resume_session_id: Option<String>,
        dispatched_at_ms: i64,
    ) {
        let now = self.clock.now_ms();
        let dispatch_id = new_dispatch_id();
        let cancel = CancelToken::new();
        // What earlier runs spent counts against `agent.max_tokens`; read once per dispatch.
        let tokens_used_before = if self.workflow.config.agent.max_tokens.unwrap_or(0) > 0 {
            persist::uncached_tokens_for_issue(&self.store, &issue.id).unwrap_or(0)
        } else {
            0
        };
        self.state.held.remove(&issue.id);
        self.state.outcomes.remove(&issue.id);
        persist::clear_outcome(&self.store, &issue.id);
        let job = WorkerJob {
            dispatch_id: dispatch_id.clone(),
            issue: issue.clone(),
            attempt,
            resume_session_id: resume_session_id.clone(),
            workflow: self.workflow.clone(),
            template: self.template.clone(),
            workspaces: self.workspaces(),
            tracker: self.tracker.clone(),
            agent: self.agent.clone(),
            cancel: cancel.clone(),
            clock: self.clock.clone(),
            tx: self.tx.clone(),
        };
        log::info!(
            "dispatching issue_id={} issue_identifier={} dispatch_id={} attempt={}",
            issue.id,
            issue.identifier,
            dispatch_id,
            attempt
        );
        self.state
            .dispatch_index
            .insert(dispatch_id.clone(), issue.id.clone());
        self.state.running.insert(
            issue.id.clone(),
            RunningEntry {
                issue: issue.clone(),
                dispatch_id: dispatch_id.clone(),
                attempt,
                started_at_ms: now,
                dispatched_at_ms,
                last_event_at_ms: None,
                last_event_type: None,
                last_message: None,
                session_id: resume_session_id,
                agent_pid: None,
                turn: 0,
                tokens: Default::default(),
                tokens_measured: false,
                api_request_count: 0,
                turn_had_usage: false,
                turns_without_figure: 0,
                reported_model: None,
                cancel,
                pending_cleanup: false,
                budget_stopped: false,
                tokens_used_before,
                events: Default::default(),
                workspace_path: None,
            },
        );
        self.state.totals.dispatches += 1;
        if self.workflow.config.tracker.comments.on_dispatch {
            self.tracker_ops
                .submit(super::tracker_ops::TrackerOp::Comment {
                    issue_id: issue.id.clone(),
                    issue_identifier: issue.identifier.clone(),
                    lifecycle: "dispatch",
                    text: super::tracker_ops::lifecycle_comment(
                        "dispatch",
                        Some(&dispatch_id),
                        0,
                        0,
                        None,
                        None,
                    ),
                });
        }
        if let Err(e) = worker::spawn(job) {
            log::error!(
                "failed to spawn agent issue_id={} issue_identifier={} error=\"{e}\"",
                issue.id,
                issue.identifier
            );
            self.state.running.remove(&issue.id);
            self.state.dispatch_index.remove(&dispatch_id);
            self.schedule_retry(
                &issue,
                attempt + 1,
                failure_delay_ms(attempt + 1, self.backoff_cap()),
                "error",
                Some("failed to spawn agent".into()),
                None,
                dispatched_at_ms,
            );
        }
    }

    fn backoff_cap(&self) -> u64 {
        self.workflow.config.agent.max_retry_backoff_ms
    }

    // ---- reconciliation -----------------------------------------------------------------

    fn reconcile(&mut self) {
        let now = self.clock.now_ms();
        // Stall detection.
        if let Some(stall) = self
            .workflow
            .config
            .agent
            .stall_timeout_ms
            .filter(|s| *s > 0)
        {
            let mut stalled = Vec::new();
            for e in self.state.running.values() {
                let reference = e.last_event_at_ms.unwrap_or(e.started_at_ms);
                let elapsed = now - reference;
                if elapsed > stall as i64 && e.cancel.reason().is_none() {
                    log::warn!(
                        "stall detected, cancelling worker issue_id={} issue_identifier={} elapsed_ms={} stall_timeout_ms={}",
                        e.issue.id,
                        e.issue.identifier,
                        elapsed,
                        stall
                    );
                    stalled.push(e.issue.id.clone());
                }
            }
            for id in stalled {
                let Some(e) = self.state.running.get(&id) else {
                    continue;
                };
                e.cancel.cancel(CancelReason::Stall);
                let issue = e.issue.clone();
                let next = e.attempt + 1;
                let dispatched_at = e.dispatched_at_ms;
                self.schedule_retry(
                    &issue,
                    next,
                    failure_delay_ms(next, self.backoff_cap()),
                    "stall",
                    Some("stall timeout exceeded".into()),
                    None,
                    dispatched_at,
                );
            }
        }
        // Tracker state refresh.
        if self.state.running.is_empty() {
            return;
        }
        let ids: Vec<String> = self.state.running.keys().cloned().collect();
        let states = match self.tracker.fetch_issue_states_by_ids(&ids) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("reconcile state refresh failed; keeping workers error=\"{e}\"");
                return;
            }
        };
        let cfg = self.workflow.config.clone();
        for id in ids {
            let state = states.get(&id).cloned().unwrap_or_default();
            let terminal = state_in(&state, &cfg.tracker.terminal_states);
            let active = state_in(&state, &cfg.tracker.active_states);
            let Some(e) = self.state.running.get_mut(&id) else {
                continue;
            };
            if active && !terminal {
                e.issue.state = state;
                continue;
            }
            if terminal {
                log::info!(
                    "stopping worker for terminal issue issue_id={} issue_identifier={} state=\"{}\"",
                    e.issue.id,
                    e.issue.identifier,
                    state
                );
                e.pending_cleanup = true;
            } else {
                log::info!(
                    "stopping worker for inactive issue issue_id={} issue_identifier={} state=\"{}\"",
                    e.issue.id,
                    e.issue.identifier,
                    state
                );
            }
            e.cancel.cancel(CancelReason::Reconcile);
            if terminal {
                let identifier = e.issue.identifier.clone();
                self.state
                    .outcomes
                    .insert(id.clone(), ("terminal".into(), state.clone()));
                persist::set_outcome(&self.store, &id, &identifier, "terminal", &state);
            }
            self.cancel_retry(&id);
        }
    }

    fn sweep_terminal_workspaces(&mut self) {
        let ws = self.workspaces();
        let owned: std::collections::HashSet<String> = self
            .state
            .running
            .values()
            .map(|e| e.issue.identifier.clone())
            .chain(
                self.state
                    .retries
                    .values()
                    .map(|r| r.issue.identifier.clone()),
            )
            .collect();
        let dirs: Vec<String> = ws
            .list_workspace_dirs()
            .into_iter()
            .filter(|d| !owned.contains(d))
            .collect();
        if dirs.is_empty() {
            return;
        }
        match self.tracker.fetch_issue_states_by_identifiers(&dirs) {
            Ok(states) => {
                let terminal: Vec<String> = states
                    .into_iter()
                    .filter(|(_, s)| state_in(s, &self.workflow.config.tracker.terminal_states))
                    .map(|(k, _)| k)
                    .collect();
                let removed = ws.cleanup_terminal(&terminal);
                if removed > 0 {
                    log::info!("removed workspaces of terminal issues count={removed}");
                }
            }
            Err(e) => log::warn!("terminal workspace sweep failed error=\"{e}\""),
        }
    }

    // ---- retries ------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn schedule_retry(
        &mut self,
        issue: &Issue,
        attempt: u32,
        delay_ms: u64,
        trigger: &str,
        error: Option<String>,
        session_id: Option<String>,
        dispatched_at_ms: i64,
    ) {
        let due = self.clock.now_ms() + delay_ms as i64;
        if let Some(existing) = self.state.retries.get(&issue.id)
            && existing.attempt >= attempt
        {
            return;
        }
        let info = RetryInfo {
            issue: issue.clone(),
            attempt,
            due_at_ms: due,
            error: error.map(|e| crate::mask::mask(&e)),
            session_id,
            trigger: trigger.to_string(),
            dispatched_at_ms,
        };
        log::info!(
            "retry scheduled issue_id={} issue_identifier={} attempt={} delay_ms={} trigger={}",
            issue.id,
            issue.identifier,
            attempt,
            delay_ms,
            trigger
        );
        persist::save_retry(&self.store, &info, &self.workflow);
        self.state.retry_queue.schedule(&issue.id, due);
        self.state.retries.insert(issue.id.clone(), info);
    }

    fn cancel_retry(&mut self, issue_id: &str) {
        if self.state.retries.remove(issue_id).is_some() {
            self.state.retry_queue.cancel(issue_id);
            persist::delete_retry(&self.store, issue_id);
        }
    }

    fn release(&mut self, issue_id: &str) {
        self.cancel_retry(issue_id);
        self.state.completed.insert(issue_id.to_string());
    }

    fn fire_due_retries(&mut self) -> bool {
        let now = self.clock.now_ms();
        let due = self.state.retry_queue.pop_due(now);
        let fired = !due.is_empty();
        for id in due {
            let Some(info) = self.state.retries.remove(&id) else {
                continue;
            };
            self.fire_retry(info);
        }
        fired
    }

    fn reschedule(&mut self, mut info: RetryInfo, attempt: u32, reason: &str) {
        let delay = failure_delay_ms(attempt, self.backoff_cap());
        info.attempt = attempt;
        info.due_at_ms = self.clock.now_ms() + delay as i64;
        info.error = Some(reason.to_string());
        info.trigger = "timer".into();
        log::info!(
            "retry rescheduled issue_id={} issue_identifier={} attempt={} delay_ms={} reason=\"{}\"",
            info.issue.id,
            info.issue.identifier,
            attempt,
            delay,
            reason
        );
        persist::save_retry(&self.store, &info, &self.workflow);
        self.state
            .retry_queue
            .schedule(&info.issue.id, info.due_at_ms);
        self.state.retries.insert(info.issue.id.clone(), info);
    }

    fn fire_retry(&mut self, info: RetryInfo) {
        let id = info.issue.id.clone();
        if self.state.running.contains_key(&id) {
            let a = info.attempt;
            self.reschedule(info, a, "worker still running");
            return;
        }
        if let Some(h) = self.budget_hold_for(&info.issue, None) {
            self.state.budget_held.insert(id.clone(), h);
            persist::delete_retry(&self.store, &id);
            return;
        }
        let issue = match self.tracker.fetch_issue_by_id(&id) {
            Ok(i) => i,
            Err(e) if e.kind == crate::tracker::TrackerErrorKind::NotFound => {
                persist::delete_retry(&self.store, &id);
                return;
            }
            Err(e) => {
                log::warn!("retry issue fetch failed issue_id={} error=\"{e}\"", id);
                let a = info.attempt + 1;
                self.reschedule(info, a, "retry issue fetch failed");
                return;
            }
        };
        let cfg = &self.workflow.config.tracker;
        if !issue.is_dispatchable_shape()
            || !state_in(&issue.state, &cfg.active_states)
            || state_in(&issue.state, &cfg.terminal_states)
        {
            persist::delete_retry(&self.store, &id);
            return;
        }
        let mut input = self.pass_input();
        input.claimed.remove(&id);
        match plan(std::slice::from_ref(&issue), &input)
            .into_iter()
            .next()
        {
            Some(Decision::Dispatch) => {
                persist::delete_retry(&self.store, &id);
                self.dispatch(
                    issue,
                    info.attempt,
                    info.session_id.clone(),
                    info.dispatched_at_ms,
                );
            }
            Some(Decision::Held(super::dispatch_pass::HoldReason::AgentSlotsFull { .. })) => {
                let a = info.attempt + 1;
                self.reschedule(info, a, "no available orchestrator slots");
            }
            _ => {
                // Blocked, parked or otherwise ineligible: release the claim.
                persist::delete_retry(&self.store, &id);
            }
        }
    }

    /// Makes a queued retry due now through the timer path. A retry that still cannot start
    /// goes back at its previous attempt and due time (due at once if that has passed).
    fn retry_now(&mut self, identifier: &str) -> RetryNowOutcome {
        if self.draining.is_some() {
            return RetryNowOutcome::Draining;
        }
        let Some(id) = self
            .state
            .retries
            .values()
            .find(|r| r.issue.identifier == identifier)
            .map(|r| r.issue.id.clone())
        else {
            return RetryNowOutcome::NotFound;
        };
        let Some(before) = self.state.retries.remove(&id) else {
            return RetryNowOutcome::NotFound;
        };
        self.state.retry_queue.cancel(&id);
        log::info!(
            "retry made due on request issue_id={} issue_identifier={} attempt={} replaced_due_at_ms={}",
            before.issue.id,
            before.issue.identifier,
            before.attempt,
            before.due_at_ms
        );
        self.fire_retry(before.clone());
        if let Some(e) = self.state.running.get(&id) {
            return RetryNowOutcome::Started {
                dispatch_id: e.dispatch_id.clone(),
            };
        }
        let reason = self
            .state
            .retries
            .get(&id)
            .and_then(|r| r.error.clone())
            .unwrap_or_else(|| "the issue is no longer eligible".into());
        if self.state.retries.contains_key(&id) {
            let mut restored = before;
            restored.due_at_ms = restored.due_at_ms.max(self.clock.now_ms());
            persist::save_retry(&self.store, &restored, &self.workflow);
            self.state.retry_queue.schedule(&id, restored.due_at_ms);
            let due = restored.due_at_ms;
            self.state.retries.insert(id, restored);
            RetryNowOutcome::StillWaiting {
                reason,
                due_at_ms: due,
            }
        } else {
            RetryNowOutcome::StillWaiting {
                reason,
                due_at_ms: self.clock.now_ms(),
            }
        }
    }

    // ---- exits --------------------------------------------------------------------------

    fn on_exit(&mut self, result: WorkerResult) {
        let Some(issue_id) = self.state.dispatch_index.remove(&result.dispatch_id) else {
            return;
        };
        let Some(mut entry) = self.state.running.remove(&issue_id) else {
            return;
        };
        if entry.workspace_path.is_none() {
            entry.workspace_path = result.workspace_path.clone();
        }
        if result.session_id.is_some() {
            entry.session_id = result.session_id.clone();
        }
        let now = self.clock.now_ms();
        let seconds = ((now - entry.started_at_ms).max(0) as f64) / 1000.0;
        self.state.totals.seconds_running += seconds;
        if !entry.tokens_measured {
            self.state.totals.unmeasured_sessions += 1;
        }
        let status = run_status(&result.exit, entry.budget_stopped);
        // Persist the run before any retry is scheduled.
        if let Err(e) = persist::record_run(
            &self.store,
            &self.workflow,
            &entry,
            &result,
            status,
            &self.state.totals,
        ) {
            log::error!(
                "failed to record run issue_id={} issue_identifier={} error=\"{e}\"",
                entry.issue.id,
                entry.issue.identifier
            );
        }
        if entry.pending_cleanup {
            let ws = self.workspaces();
            let removed = match &entry.workspace_path {
                Some(p) => ws.remove_path(&entry.issue.id, &entry.issue.identifier, p),
                None => ws.remove(&entry.issue.id, &entry.issue.identifier),
            };
            if let Err(e) = removed {
                log::warn!(
                    "workspace cleanup failed issue_id={} issue_identifier={} error=\"{e}\"",
                    entry.issue.id,
                    entry.issue.identifier
                );
            }
        }
        if self.draining.is_some() {
            return;
        }
        let issue = entry.issue.clone();
        let next_attempt = entry.attempt + 1;
        let exit_for_comment = result.exit.clone();
        let duration_ms = result.ended_at_ms - entry.started_at_ms;
        let turns = result.turns_completed;
        let session_for_comment = entry.session_id.clone();
        match result.exit {
            WorkerExit::Cancelled { .. } => {
                // A stall schedules its own retry; other cancellations release the claim.
                if !self.state.retries.contains_key(&issue.id) {
                    self.release(&issue.id);
                }
            }
            WorkerExit::Error {
                code,
                message,
                retryable,
            } => {
                if retryable {
                    let delay = failure_delay_ms(next_attempt, self.backoff_cap());
                    log::warn!(
                        "worker run failed, scheduling retry issue_id={} issue_identifier={} next_attempt={} delay_ms={} error=\"{}: {}\"",
                        issue.id,
                        issue.identifier,
                        next_attempt,
                        delay,
                        code,
                        message
                    );
                    self.schedule_retry(
                        &issue,
                        next_attempt,
                        delay,
                        "error",
                        Some(format!("worker exited: {code}: {message}")),
                        None,
                        entry.dispatched_at_ms,
                    );
                } else {
                    log::error!(
                        "worker run failed, non-retryable, releasing claim issue_id={} issue_identifier={} error=\"{}: {}\"",
                        issue.id,
                        issue.identifier,
                        code,
                        message
                    );
                    self.release(&issue.id);
                }
            }
            WorkerExit::Normal {
                declared,
                statement: _,
            } => self.on_normal_exit(&entry, declared, result.session_id),
        }
        self.lifecycle_comment_at_exit(
            &issue,
            &exit_for_comment,
            session_for_comment.as_deref(),
            duration_ms,
            turns,
        );
    }

    /// Queues the optional completion/failure comment (never for cancellations).
    fn lifecycle_comment_at_exit(
        &self,
        issue: &Issue,
        exit: &WorkerExit,
        session_id: Option<&str>,
        duration_ms: i64,
        turns: u32,
    ) {
        let c = &self.workflow.config.tracker.comments;
        let retry = self.state.retries.get(&issue.id).map(|r| {
            format!(
                "attempt {} in {}s",
                r.attempt,
                ((r.due_at_ms - self.clock.now_ms()).max(0) + 999) / 1000
            )
        });
        let (lifecycle, error) = match exit {
            WorkerExit::Normal { .. } if c.on_completion => ("completion", None),
            WorkerExit::Error { code, message, .. } if c.on_failure => {
                ("failure", Some(format!("{code}: {message}")))
            }
            _ => return,
        };
        self.tracker_ops
            .submit(super::tracker_ops::TrackerOp::Comment {
                issue_id: issue.id.clone(),
                issue_identifier: issue.identifier.clone(),
                lifecycle,
                text: super::tracker_ops::lifecycle_comment(
                    lifecycle,
                    session_id,
                    duration_ms,
                    turns,
                    error.as_deref(),
                    retry.as_deref(),
                ),
            });
    }

    fn on_normal_exit(
        &mut self,
        entry: &RunningEntry,
        declared: Option<DeclaredOutcome>,
        session_id: Option<String>,
    ) {
        let issue = &entry.issue;
        let cfg = self.workflow.config.tracker.clone();
        match declared {
            Some(DeclaredOutcome::Blocked) => {
                let label = DEFAULT_PARKING_LABEL.to_string();
                let label_applied = match self.tracker.add_label(&issue.id, &label) {
                    Ok(()) => true,
                    Err(e) => {
                        log::warn!(
                            "parking label failed issue_id={} issue_identifier={} error=\"{e}\"",
                            issue.id,
                            issue.identifier
                        );
                        false
                    }
                };
                let park = Park {
                    issue: issue.clone(),
                    reason: "agent_blocked".into(),
                    parked_at_ms: self.clock.now_ms() / 1000 * 1000,
                    parked_state: issue.state.clone(),
                    label,
                    label_applied,
                };
                log::info!(
                    "issue parked issue_id={} issue_identifier={} reason=agent_blocked",
                    issue.id,
                    issue.identifier
                );
                persist::park(&self.store, &park);
                self.state.parked.insert(issue.id.clone(), park);
                self.release(&issue.id);
            }
            Some(DeclaredOutcome::NoChangeNeeded) => {
                if let Some(state) = cfg.no_change_state.as_deref() {
                    self.transition_and_record(issue, state);
                }
                self.release(&issue.id);
            }
            Some(DeclaredOutcome::NeedsHumanReview) => {
                if let Some(state) = cfg.handoff_state.as_deref() {
                    self.transition_and_record(issue, state);
                }
                self.release(&issue.id);
            }
            None => {
                let current = self
                    .tracker
                    .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
                    .ok()
                    .and_then(|m| m.get(&issue.id).cloned());
                let still_active = match &current {
                    Some(s) => {
                        state_in(s, &cfg.active_states) && !state_in(s, &cfg.terminal_states)
                    }
                    // Unknown (read failed): assume still active, as the worker last saw it.
                    None => true,
                };
                if !still_active {
                    self.release(&issue.id);
                    return;
                }
                if let Some(state) = cfg.handoff_state.as_deref()
                    && self.transition_and_record(issue, state)
                {
                    log::info!(
                        "handoff transition succeeded, releasing claim issue_id={} issue_identifier={} state=\"{}\"",
                        issue.id,
                        issue.identifier,
                        state
                    );
                    self.release(&issue.id);
                    return;
                }
                self.schedule_retry(
                    issue,
                    entry.attempt + 1,
                    CONTINUATION_DELAY_MS,
                    "continuation",
                    None,
                    session_id,
                    entry.dispatched_at_ms,
                );
            }
        }
    }

    fn transition_and_record(&mut self, issue: &Issue, state: &str) -> bool {
        match self.tracker.transition_issue(&issue.id, state) {
            Ok(()) => {
                self.state
                    .outcomes
                    .insert(issue.id.clone(), ("handed_off".into(), state.to_string()));
                persist::set_outcome(
                    &self.store,
                    &issue.id,
                    &issue.identifier,
                    "handed_off",
                    state,
                );
                true
            }
            Err(e) => {
                log::warn!(
                    "handoff transition failed issue_id={} issue_identifier={} state=\"{}\" error=\"{e}\"",
                    issue.id,
                    issue.identifier,
                    state
                );
                false
            }
        }
    }

    // ---- snapshot -----------------------------------------------------------------------

    fn publish(&mut self) {
        self.state.revision += 1;
        let snap = Snapshot::build(
            &self.state,
            &self.workflow,
            self.clock.now_ms(),
            self.started_at_ms,
            self.draining.is_some(),
        );
        if let Ok(mut w) = self.published.write() {
            *w = Arc::new(snap);
        }
        super::snapshot::notify_published();
    }

    /// The workflow file this orchestrator runs.
    pub fn workflow_path(&self) -> PathBuf {
        self.workflow.path.clone()
    }
}

/// The run status the seed defines for an exit.
fn run_status(exit: &WorkerExit, budget_stopped: bool) -> &'static str {
    match exit {
        WorkerExit::Normal { .. } => "succeeded",
        WorkerExit::Error { .. } => "failed",
        WorkerExit::Cancelled { .. } if budget_stopped => "budget_stopped",
        WorkerExit::Cancelled { .. } => "cancelled",
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
