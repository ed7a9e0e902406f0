//! The immutable view of scheduling state that the orchestrator publishes after each change.
//! HTTP handlers read it without ever blocking the orchestrator (ARCHITECTURE.md, "Threads").

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::agent::TokenUsage;
use crate::config::Workflow;
use crate::domain::Issue;

use super::state::{AgentTotals, BudgetHold, Health, Held, Park, RetryInfo, RunFacts, State};

/// One running session: a copy of its facts.
pub type RunningRow = RunFacts;

/// One queued retry: its retry-queue entry without the session to resume.
#[derive(Debug, Clone)]
pub struct RetryRow {
    pub issue: Issue,
    pub attempt: u32,
    pub due_at_ms: i64,
    pub error: Option<String>,
    pub trigger: crate::domain::RetryTrigger,
    pub dispatched_at_ms: i64,
    /// The selection frozen at the claim's first dispatch.
    pub route: crate::domain::stage::Route,
    /// The pull-request reaction the retry continues, if any.
    pub reaction: Option<crate::orchestrator::features::reactions::RunReaction>,
}

impl From<&RetryInfo> for RetryRow {
    fn from(r: &RetryInfo) -> RetryRow {
        RetryRow {
            issue: r.issue.clone(),
            attempt: r.attempt,
            due_at_ms: r.due_at_ms,
            error: r.error.clone(),
            trigger: r.trigger,
            dispatched_at_ms: r.dispatched_at_ms,
            route: r.route.clone(),
            reaction: r.reaction.clone(),
        }
    }
}

/// One held issue.
pub type HeldRow = Held;

/// One budget hold.
pub type BudgetRow = BudgetHold;

/// One parked issue.
pub type ParkedRow = Park;

/// One `between_stages[]` entry: the hop and the latest pass's hold of the issue.
#[derive(Debug, Clone)]
pub struct BetweenStagesRow {
    pub hop: crate::domain::stage::StageHop,
    pub hold: Option<Held>,
}

/// The configuration in force, as the state document's `config` serves it (no credentials).
#[derive(Debug, Clone, Default)]
pub struct ConfigView {
    pub tracker_kind: String,
    pub tracker_project: Option<String>,
    pub active_states: Vec<String>,
    pub terminal_states: Vec<String>,
    pub in_progress_state: Option<String>,
    pub handoff_state: Option<String>,
    pub no_change_state: Option<String>,
    pub poll_interval_ms: u64,
    pub agent_kind: String,
    /// `agent.command` in effect for new dispatches, masked; `None`: the kind's default.
    pub agent_command: Option<String>,
    pub max_turns: u32,
    pub stall_timeout_ms: Option<u64>,
    /// `agent.read_timeout_ms`: how long a turn may print nothing before its running row
    /// reads as waiting for the agent's first output.
    pub read_timeout_ms: u64,
    pub max_retry_backoff_ms: u64,
    pub max_sessions: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_concurrent_agents: u32,
    pub max_concurrent_agents_by_state: BTreeMap<String, u32>,
    /// Base name of the workflow file.
    pub workflow_file: String,
    /// The `model` of the agent kind's block; `None`: the runtime's default.
    pub configured_model: Option<String>,
    /// The `token_rates` entries in force.
    pub token_rates: crate::pricing::TokenRates,
    /// The pull-request reactions applied (`config.reactions`).
    pub reactions: crate::config::reactions::ReactionsConfig,
    /// `dispatch` as of the latest load: rules, chains, the hop ceiling (stage positions and
    /// `config.dispatch` are computed from it).
    pub dispatch: Arc<crate::config::dispatch::DispatchConfig>,
    /// `worker.ssh_hosts`, each once, as written.
    pub ssh_hosts: Vec<String>,
    /// `worker.max_concurrent_agents_per_host` when hosts are configured and it is positive.
    pub max_concurrent_agents_per_host: Option<u32>,
    /// `notifications` as of the latest load (the notification feed applies it).
    pub notifications: Arc<crate::config::notifications::NotificationsConfig>,
}

/// Wakes threads that follow published snapshots (the SSE streams) without polling: the
/// orchestrator calls [`notify_published`] after each publish.
static PUBLISHED: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

/// Signals that a new snapshot (or a shutdown) happened.
pub fn notify_published() {
    let (lock, cvar) = &PUBLISHED;
    let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
    *n = n.wrapping_add(1);
    cvar.notify_all();
}

/// The current publish counter, to pass to [`wait_published`].
pub fn published_count() -> u64 {
    *PUBLISHED.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until the publish counter moves past `seen` or `timeout` passes; returns the counter.
pub fn wait_published(seen: u64, timeout: Duration) -> u64 {
    let (lock, cvar) = &PUBLISHED;
    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    let (guard, _) = cvar
        .wait_timeout_while(guard, timeout, |n| *n == seen)
        .unwrap_or_else(|p| p.into_inner());
    *guard
}

/// The longest a deferrable change waits before it is published.
pub const PUBLISH_DELAY: Duration = Duration::from_millis(50);

/// When the orchestrator publishes. The rule: agent events and turn starts (the stream of a
/// running session, up to thousands a second) are deferrable, published at most
/// [`PUBLISH_DELAY`] after the first unpublished one, so a burst costs one snapshot; every
/// other change (dispatch, exit, retry scheduling, a tick, a refresh, an acknowledgement,
/// shutdown) is published at once, together with any deferred one. Times come from the
/// orchestrator's clock.
///
/// Stored token figures count as a deferred change too: when the writer has committed new ones
/// since the last publish ([`crate::store::live_figures::generation`]), the next loop pass
/// publishes them (the loop wakes at least once a second).
#[derive(Debug)]
pub struct PublishPacer {
    pending_since: Option<Instant>,
    /// The stored-figures generation the last publish saw, and where it is read.
    stored_seen: u64,
    stored_generation: fn() -> u64,
}

impl Default for PublishPacer {
    fn default() -> Self {
        PublishPacer {
            pending_since: None,
            stored_seen: 0,
            stored_generation: crate::store::live_figures::generation,
        }
    }
}

impl PublishPacer {
    /// A deferrable change happened at `now`.
    pub fn defer(&mut self, now: Instant) {
        self.pending_since.get_or_insert(now);
    }

    /// Whether a deferred change has waited long enough.
    pub fn due(&self, now: Instant) -> bool {
        self.pending_since
            .is_some_and(|since| now.saturating_duration_since(since) >= PUBLISH_DELAY)
            || self.stored_moved()
    }

    fn stored_moved(&self) -> bool {
        (self.stored_generation)() != self.stored_seen
    }

    /// How long until the deferred change is due; `None` when nothing waits.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        if self.stored_moved() {
            return Some(Duration::ZERO);
        }
        self.pending_since
            .map(|since| PUBLISH_DELAY.saturating_sub(now.saturating_duration_since(since)))
    }

    /// A snapshot was just published: nothing waits any more. (Figures committed while it was
    /// being built show with the next publish.)
    pub fn published(&mut self) {
        self.pending_since = None;
        self.stored_seen = (self.stored_generation)();
    }
}

/// The published state.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Increases with every published change; seeded from the clock at start so a restarted
    /// daemon never repeats an earlier process's revision.
    pub revision: u64,
    /// The revision of the latest full publish (a scheduling change); a publish of agent
    /// events alone keeps it. 0 in a snapshot built by hand.
    pub schedule_revision: u64,
    pub generated_at_ms: i64,
    pub started_at_ms: i64,
    pub draining: bool,
    /// Copies of the running sessions' facts; their event rings are shared, not copied.
    pub running: Vec<RunningRow>,
    // The lists below change only with scheduling decisions, never with agent events, so a
    // publish of agent events shares them with the previous snapshot (`Snapshot::with_running`).
    pub retrying: Arc<Vec<RetryRow>>,
    pub held: Arc<Vec<HeldRow>>,
    pub budget_exhausted: Arc<Vec<BudgetRow>>,
    pub parked: Arc<Vec<ParkedRow>>,
    /// Pending pull-request reactions, sorted by identifier, issue id, kind.
    pub pending_reactions: Arc<Vec<crate::orchestrator::features::reactions::ReactionRow>>,
    /// Sorted by identifier, then issue id.
    pub between_stages: Arc<Vec<BetweenStagesRow>>,
    /// Each issue's consecutive automatic hops (issue id → count; absent: 0).
    pub hop_counts: Arc<BTreeMap<String, u32>>,
    pub totals: AgentTotals,
    pub health: Health,
    /// Usage limits the agents reported (changed by agent events).
    pub rate_limits: Arc<crate::orchestrator::features::agent_holds::rate_limits::RateLimits>,
    /// Agent kinds held because their login failed (a turn that completes lifts one, so agent
    /// events change it).
    pub auth_holds: Arc<Vec<crate::orchestrator::features::agent_holds::AuthHold>>,
    /// Issues the failure breaker holds.
    pub failure_held: Arc<Vec<crate::orchestrator::claim::failure_holds::FailureHold>>,
    /// Attention acknowledgements by item id.
    pub acks: Arc<BTreeMap<String, crate::store::AttentionAck>>,
    /// The spend windows as of the latest poll tick or retry check (`None`: no ceiling set).
    pub spend_ceiling: Option<crate::orchestrator::features::spend::ceiling::SpendCeilings>,
    /// issue id → (outcome, state).
    pub outcomes: Arc<BTreeMap<String, (crate::domain::OutcomeKind, String)>>,
    pub workflow_path: String,
    pub tracker_kind: String,
    pub agent_kind: String,
    pub poll_interval_ms: u64,
    pub max_concurrent_agents: u32,
    pub config: ConfigView,
    /// The running sessions' spend priced under the rates in force when the snapshot was
    /// published, by dispatch id (priced once per publish, never per request).
    pub running_costs: Arc<BTreeMap<String, crate::pricing::RunPrice>>,
    /// Whether a rate source was in force: the live cost keys are served exactly then.
    pub has_rate_source: bool,
    /// SSH hosts out of service as of the last scheduling change → until when (epoch ms).
    pub ssh_hosts_out: Arc<Vec<(String, i64)>>,
    /// The running sessions' self-review progress by dispatch id (absent: never in the phase).
    pub self_review:
        Arc<BTreeMap<String, crate::orchestrator::features::self_review::progress::ReviewProgress>>,
}

impl ConfigView {
    fn from_workflow(workflow: &Workflow) -> ConfigView {
        let cfg = &workflow.config;
        let positive = |v: Option<u64>| v.filter(|n| *n > 0);
        ConfigView {
            tracker_kind: cfg.tracker.kind.clone(),
            tracker_project: cfg.tracker.project.clone().filter(|p| !p.is_empty()),
            active_states: cfg.tracker.active_states.clone(),
            terminal_states: cfg.tracker.terminal_states.clone(),
            in_progress_state: cfg.tracker.in_progress_state.clone(),
            handoff_state: cfg.tracker.handoff_state.clone(),
            no_change_state: cfg.tracker.no_change_state.clone(),
            poll_interval_ms: cfg.polling.interval_ms,
            agent_kind: cfg.agent.kind.clone(),
            agent_command: cfg
                .agent
                .command
                .as_deref()
                .filter(|c| !c.trim().is_empty())
                .map(crate::mask::mask),
            max_turns: cfg.agent.max_turns.max(1),
            stall_timeout_ms: positive(cfg.agent.stall_timeout_ms),
            read_timeout_ms: cfg.agent.read_timeout_ms,
            max_retry_backoff_ms: cfg.agent.max_retry_backoff_ms,
            max_sessions: positive(cfg.agent.max_sessions),
            max_tokens: positive(cfg.agent.max_tokens),
            max_cost_usd: cfg.agent.max_cost_usd.filter(|c| *c > 0.0),
            max_concurrent_agents: cfg.agent.max_concurrent_agents,
            max_concurrent_agents_by_state: cfg
                .agent
                .max_concurrent_agents_by_state
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(|(k, v)| (k.to_lowercase(), *v))
                .collect(),
            workflow_file: workflow
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            configured_model: cfg
                .adapter_block(&cfg.agent.kind)
                .and_then(|b| b.get("model"))
                .and_then(serde_json::Value::as_str)
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string),
            token_rates: cfg.token_rates.clone(),
            reactions: cfg.reactions.clone(),
            dispatch: Arc::new(cfg.dispatch.clone()),
            notifications: Arc::new(cfg.notifications.clone()),
            ssh_hosts: cfg
                .worker
                .hosts
                .iter()
                .map(|h| h.name().to_string())
                .collect(),
            max_concurrent_agents_per_host: cfg.worker.max_per_host.filter(|_| cfg.worker.remote()),
        }
    }
}

impl Snapshot {
    /// Prices the running sessions under `book`, for the live estimates.
    pub fn price_running(mut self, book: &crate::pricing::RateBook) -> Snapshot {
        let costs = self
            .running
            .iter()
            .map(|r| {
                let price = crate::orchestrator::features::spend::session_cost::session_price(
                    r,
                    &self.agent_kind,
                    book,
                );
                (r.dispatch_id.clone(), price)
            })
            .collect();
        self.running_costs = Arc::new(costs);
        self.has_rate_source = book.has_rate_source();
        self
    }

    /// Whether `self` and `other` differ at most by agent events (running rows, totals):
    /// both come from the same full publish.
    pub fn same_schedule(&self, other: &Snapshot) -> bool {
        self.schedule_revision != 0 && self.schedule_revision == other.schedule_revision
    }

    /// The self-review progress of the running session `dispatch_id`.
    pub fn self_review_of(
        &self,
        dispatch_id: &str,
    ) -> crate::orchestrator::features::self_review::progress::ReviewProgress {
        self.self_review
            .get(dispatch_id)
            .copied()
            .unwrap_or_default()
    }

    /// The live price of a running session.
    pub fn running_cost(&self, dispatch_id: &str) -> Option<&crate::pricing::RunPrice> {
        self.running_costs.get(dispatch_id)
    }

    /// The scrape-time gauge inputs: counts, the slot limit and Σ(now − started) over running
    /// sessions.
    pub fn gauge_values(&self, now_ms: i64) -> crate::metrics::GaugeValues {
        crate::metrics::GaugeValues {
            running: self.running.len(),
            retrying: self.retrying.len(),
            max_concurrent_agents: self.max_concurrent_agents,
            elapsed_seconds: crate::metrics::elapsed_seconds(
                self.running.iter().map(|r| r.started_at_ms),
                now_ms,
            ),
            ssh_host_usage: self.ssh_host_usage(),
        }
    }

    /// Sessions on each SSH host: the configured hosts in order (0 when idle), then any host
    /// a session still runs on that a reload removed.
    pub fn ssh_host_usage(&self) -> Vec<(String, u32)> {
        let mut usage: Vec<(String, u32)> = self
            .config
            .ssh_hosts
            .iter()
            .map(|h| (h.clone(), 0))
            .collect();
        for host in self.running.iter().filter_map(|r| r.ssh_host.as_ref()) {
            match usage.iter_mut().find(|(h, _)| h == host) {
                Some((_, n)) => *n += 1,
                None => usage.push((host.clone(), 1)),
            }
        }
        usage
    }

    /// The spend ceiling gauges: one per window that has a ceiling.
    pub fn spend_gauges(&self) -> Vec<crate::metrics::SpendGauge> {
        self.spend_ceiling
            .iter()
            .flat_map(|s| s.windows())
            .map(|w| crate::metrics::SpendGauge {
                window: w.window.as_str(),
                used_usd: w.used_usd,
                budget_usd: w.budget_usd,
                holding: w.holds_dispatch,
            })
            .collect()
    }

    pub fn build(
        state: &State,
        workflow: &Workflow,
        now_ms: i64,
        started_at_ms: i64,
        draining: bool,
    ) -> Snapshot {
        let cfg = &workflow.config;
        let mut retrying: Vec<RetryRow> = state.retries.values().map(RetryRow::from).collect();
        retrying.sort_by(|a, b| {
            a.due_at_ms
                .cmp(&b.due_at_ms)
                .then_with(|| a.issue.identifier.cmp(&b.issue.identifier))
        });
        Snapshot {
            revision: state.revision,
            schedule_revision: state.revision,
            acks: Arc::new(state.acks.clone()),
            generated_at_ms: now_ms,
            started_at_ms,
            draining,
            running: running_rows(state),
            retrying: Arc::new(retrying),
            held: state.held.rows(),
            budget_exhausted: Arc::new(state.budget_held.values().cloned().collect()),
            failure_held: Arc::new(state.failure_held.values().cloned().collect()),
            parked: Arc::new(state.parked.values().cloned().collect()),
            // The reactions and stages features' parts (`Feature::snapshot`).
            pending_reactions: Arc::default(),
            between_stages: Arc::default(),
            hop_counts: Arc::default(),
            totals: served_totals(state),
            health: state.health.clone(),
            rate_limits: Arc::default(),
            auth_holds: Arc::default(),
            spend_ceiling: None,
            outcomes: Arc::new(
                state
                    .outcomes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            workflow_path: workflow.path.display().to_string(),
            tracker_kind: cfg.tracker.kind.clone(),
            agent_kind: cfg.agent.kind.clone(),
            poll_interval_ms: cfg.polling.interval_ms,
            max_concurrent_agents: cfg.agent.max_concurrent_agents,
            config: ConfigView::from_workflow(workflow),
            running_costs: Arc::default(),
            has_rate_source: false,
            ssh_hosts_out: Arc::default(),
            self_review: Arc::default(),
        }
    }

    /// The next snapshot after changes that touched only running sessions and totals (agent
    /// events, turn starts): everything else is shared with `prev`, not copied.
    pub fn with_running(prev: &Snapshot, state: &State, now_ms: i64) -> Snapshot {
        Snapshot {
            revision: state.revision,
            schedule_revision: prev.schedule_revision,
            generated_at_ms: now_ms,
            started_at_ms: prev.started_at_ms,
            draining: prev.draining,
            running: running_rows(state),
            retrying: Arc::clone(&prev.retrying),
            held: Arc::clone(&prev.held),
            budget_exhausted: Arc::clone(&prev.budget_exhausted),
            failure_held: Arc::clone(&prev.failure_held),
            parked: Arc::clone(&prev.parked),
            pending_reactions: Arc::clone(&prev.pending_reactions),
            between_stages: Arc::clone(&prev.between_stages),
            hop_counts: Arc::clone(&prev.hop_counts),
            totals: served_totals(state),
            health: prev.health.clone(),
            rate_limits: Arc::clone(&prev.rate_limits),
            auth_holds: Arc::clone(&prev.auth_holds),
            acks: Arc::clone(&prev.acks),
            spend_ceiling: prev.spend_ceiling.clone(),
            outcomes: Arc::clone(&prev.outcomes),
            workflow_path: prev.workflow_path.clone(),
            tracker_kind: prev.tracker_kind.clone(),
            agent_kind: prev.agent_kind.clone(),
            poll_interval_ms: prev.poll_interval_ms,
            max_concurrent_agents: prev.max_concurrent_agents,
            config: prev.config.clone(),
            running_costs: Arc::default(),
            has_rate_source: false,
            ssh_hosts_out: Arc::clone(&prev.ssh_hosts_out),
            self_review: Arc::clone(&prev.self_review),
        }
    }
}

/// The running sessions' facts by identifier; each copy shares its event ring.
fn running_rows(state: &State) -> Vec<RunningRow> {
    let mut running: Vec<RunningRow> = state.running.values().map(|e| e.facts.clone()).collect();
    running.sort_by(|a, b| a.issue.identifier.cmp(&b.issue.identifier));
    running
}

/// A live session's token figures as its committed session row holds them (never above the
/// live ones): what a daemon killed now would restart with (`store::live_figures`).
fn stored_tokens(f: &RunFacts) -> TokenUsage {
    let stored = crate::store::live_figures::committed(&f.dispatch_id).unwrap_or_default();
    let live = &f.tokens;
    TokenUsage {
        input_tokens: stored.input_tokens.min(live.input_tokens),
        output_tokens: stored.output_tokens.min(live.output_tokens),
        total_tokens: stored.total_tokens.min(live.total_tokens),
        cache_read_tokens: stored.cache_read_tokens.min(live.cache_read_tokens),
        cache_write_tokens: stored.cache_write_tokens.min(live.cache_write_tokens),
    }
}

/// The cumulative totals as stored: the orchestrator's totals include every usage event at
/// once, so the part of each live session (and of each session whose run record waits for the
/// database) not yet on its committed row is left out. Served totals are thus stored totals
/// and never go down across a crash and restart; they trail the live figures by at most the
/// row's batching interval (about a second) and a commit. A running row itself shows its
/// session's live figures (its tokens, cost and budget use agree with each other).
fn served_totals(state: &State) -> AgentTotals {
    let mut t = state.totals.clone();
    let live = state
        .running
        .values()
        .chain(state.awaiting_record.values().map(|a| &a.entry))
        .map(|e| &e.facts);
    for f in live {
        let stored = stored_tokens(f);
        let unstored = |live: u64, stored: u64| live.saturating_sub(stored);
        t.input_tokens = t
            .input_tokens
            .saturating_sub(unstored(f.tokens.input_tokens, stored.input_tokens));
        t.output_tokens = t
            .output_tokens
            .saturating_sub(unstored(f.tokens.output_tokens, stored.output_tokens));
        t.total_tokens = t
            .total_tokens
            .saturating_sub(unstored(f.tokens.total_tokens, stored.total_tokens));
        t.cache_read_tokens = t.cache_read_tokens.saturating_sub(unstored(
            f.tokens.cache_read_tokens,
            stored.cache_read_tokens,
        ));
        t.cache_write_tokens = t.cache_write_tokens.saturating_sub(unstored(
            f.tokens.cache_write_tokens,
            stored.cache_write_tokens,
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    #[test]
    fn a_burst_of_deferrable_changes_is_published_once_after_the_delay() {
        let clock = ManualClock::new(0);
        let mut pacer = PublishPacer {
            stored_generation: || 7,
            ..PublishPacer::default()
        };
        assert!(
            pacer.due(clock.instant()),
            "stored figures not yet published"
        );
        pacer.published();
        let mut publishes = 0;
        for _ in 0..1_000 {
            pacer.defer(clock.instant());
            if pacer.due(clock.instant()) {
                pacer.published();
                publishes += 1;
            }
            clock.advance(Duration::from_micros(100));
        }
        // 100 ms of events: one publish per elapsed delay, not one per event.
        assert!(publishes <= 2, "publishes={publishes}");
        assert!(
            pacer.wait(clock.instant()).is_some(),
            "the last change still waits"
        );
        clock.advance(PUBLISH_DELAY);
        assert!(pacer.due(clock.instant()), "the last change is published");
        pacer.published();
        assert_eq!(pacer.wait(clock.instant()), None);
    }
}
