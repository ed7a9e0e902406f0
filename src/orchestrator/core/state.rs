//! Scheduling state owned by the orchestrator thread alone.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use crate::agent::{AgentEvent, AgentEventKind, CancelToken, TokenUsage};
use crate::domain::{BudgetReason, Issue, OutcomeKind, ParkReason, PollOutcome, RetryTrigger};

use crate::orchestrator::claim::dispatch_pass::HoldReason;
use crate::orchestrator::claim::retry_queue::RetryQueue;

/// A run keeps at most this many events in memory (newest kept)…
pub const RUN_EVENTS_MAX: usize = 1_000;
/// …within this many bytes of serialized events.
pub const RUN_EVENTS_MAX_BYTES: usize = 256 * 1024;

/// A finished session whose run record the database has not committed yet.
pub struct AwaitingRecord {
    pub entry: RunningEntry,
    pub result: crate::orchestrator::core::run_record::SupervisorResult,
}

/// A finished, recorded session whose exit waits for tracker calls (a hand-off, a park's
/// label, a stage hop) made off `orch`; its issue stays claimed until they come back.
pub struct Settling {
    pub entry: RunningEntry,
    pub result: crate::orchestrator::core::run_record::SupervisorResult,
    /// The exit's step, applied with what the calls answered.
    pub step: crate::orchestrator::claim::exit_step::ExitStep,
    pub since_ms: i64,
}

/// One live session: what is known about it, and how to stop it.
pub struct RunningEntry {
    pub facts: RunFacts,
    pub handles: RunHandles,
}

/// The plain facts of a live session. Published snapshots carry a copy of them, so a fact
/// added here is visible to every reader without a second list of fields.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub issue: Issue,
    pub dispatch_id: String,
    /// 0 on first dispatch.
    pub attempt: u32,
    pub started_at_ms: i64,
    /// When this pass was first picked up (kept across retries).
    pub dispatched_at_ms: i64,
    pub last_event_at_ms: Option<i64>,
    pub last_event_type: Option<String>,
    pub last_message: Option<String>,
    pub session_id: Option<String>,
    pub agent_pid: Option<u32>,
    pub turn: u32,
    /// When the current turn started (the dispatch until the first turn starts).
    pub turn_started_at_ms: i64,
    pub tokens: TokenUsage,
    pub tokens_measured: bool,
    pub api_request_count: u64,
    /// Whether the turn in progress has reported a usage figure yet.
    pub turn_had_usage: bool,
    /// Turns that reached the model without a usage figure (makes token sums lower bounds).
    pub turns_without_figure: u32,
    pub reported_model: Option<String>,
    /// Figures and requests per model the agent named (`""` for figures naming none).
    pub by_model: BTreeMap<String, ModelSpend>,
    /// Amounts in vendor units, summed per (unit, model) (the run's `vendor_amounts`).
    pub vendor_amounts: BTreeMap<(String, String), f64>,
    /// Reconciliation found the issue terminal: remove the workspace after the exit.
    pub pending_cleanup: bool,
    /// A budget stopped the session, with the figures behind the stop.
    pub budget_stop: Option<crate::orchestrator::claim::run_error::BudgetStop>,
    /// Uncached tokens of the issue's earlier runs, read at dispatch (for `agent.max_tokens`).
    pub tokens_used_before: u64,
    /// What the issue's earlier runs spent, read at dispatch while `agent.max_cost_usd` is set.
    pub usage_before: Option<crate::store::IssueUsage>,
    /// Shared with published snapshots and copied on write, so a publish copies one pointer.
    pub events: std::sync::Arc<EventRing>,
    pub workspace_path: Option<PathBuf>,
    /// The current agent process group and its leader's start time (`/proc/<pid>/stat` field
    /// 22), read when the agent reports its pid; stored on the session row so a restart after
    /// a crash stops exactly this group.
    pub agent_group: Option<(u32, u64)>,
    /// When the live session row was last queued, and whether figures arrived since.
    pub live_row_written_at_ms: i64,
    pub live_row_dirty: bool,
    /// What dispatched this run (the run record's `trigger`).
    pub cause: DispatchCause,
    /// The selection the claim runs on (rule, agent kind, template, stage chain).
    pub route: crate::domain::stage::Route,
    /// The SSH host the session runs on (`worker.ssh_hosts` entry); `None` runs here.
    pub ssh_host: Option<String>,
    /// This run is the first a stage hop's next stage dispatched (the run's `hop_first`).
    pub hop_first: bool,
    /// The pull-request reaction this run continues, if any.
    pub reaction: Option<crate::orchestrator::features::reactions::RunReaction>,
    /// The self-review audit trail, once the phase ended (the run's `review_metadata`; the
    /// phase's progress is the self-review feature's).
    pub review_metadata: Option<serde_json::Value>,
}

impl RunFacts {
    /// The facts of a session dispatched at `now_ms`, before any event: the dispatch sets
    /// what else it knows (its pass, resumed session, budgets read, host, hop, reaction).
    pub fn started(
        issue: Issue,
        dispatch_id: String,
        attempt: u32,
        now_ms: i64,
        cause: DispatchCause,
        route: crate::domain::stage::Route,
    ) -> RunFacts {
        RunFacts {
            issue,
            dispatch_id,
            attempt,
            started_at_ms: now_ms,
            dispatched_at_ms: now_ms,
            last_event_at_ms: None,
            last_event_type: None,
            last_message: None,
            session_id: None,
            agent_pid: None,
            turn: 0,
            turn_started_at_ms: now_ms,
            tokens: Default::default(),
            tokens_measured: false,
            api_request_count: 0,
            turn_had_usage: false,
            turns_without_figure: 0,
            reported_model: None,
            by_model: Default::default(),
            vendor_amounts: Default::default(),
            pending_cleanup: false,
            budget_stop: None,
            tokens_used_before: 0,
            usage_before: None,
            events: Default::default(),
            workspace_path: None,
            agent_group: None,
            live_row_written_at_ms: now_ms,
            live_row_dirty: false,
            cause,
            route,
            ssh_host: None,
            hop_first: false,
            reaction: None,
            review_metadata: None,
        }
    }
}

/// What dispatched a run: the poll tick, or the fire of a retry with what first queued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchCause {
    PollTick,
    /// `None`: a retry restored after a restart whose first trigger was not stored.
    Retry(Option<RetryTrigger>),
}

impl DispatchCause {
    /// The run's `trigger` word: "" for a poll tick, `None` when not known.
    pub fn trigger_word(self) -> Option<&'static str> {
        match self {
            DispatchCause::PollTick => Some(""),
            DispatchCause::Retry(t) => t.map(RetryTrigger::as_str),
        }
    }
}

impl RunFacts {
    /// The supervisor's transition to the in-progress state succeeded: the issue is in
    /// `state` now (the dispatch read's labels stay, a transition changes none).
    pub fn moved_to(&mut self, state: String) {
        self.issue.state = state;
    }

    /// A turn started (turn numbers count every turn of the session, self-review's included).
    pub fn turn_started(&mut self, turn: u32, now_ms: i64) {
        self.turn = turn;
        self.turn_started_at_ms = now_ms;
    }

    /// The current turn has run `read_timeout_ms` or longer without any event from the agent
    /// (self-review's checks between turns are the feature's: `ReviewProgress`).
    pub fn waiting_for_first_output(&self, read_timeout_ms: u64, now_ms: i64) -> bool {
        let silent = self
            .last_event_at_ms
            .is_none_or(|t| t < self.turn_started_at_ms);
        let waited = now_ms.saturating_sub(self.turn_started_at_ms);
        read_timeout_ms > 0
            && self.turn > 0
            && silent
            && waited >= i64::try_from(read_timeout_ms).unwrap_or(i64::MAX)
    }

    /// The session's token figures, `None` while it has reported none.
    pub fn measured_tokens(&self) -> Option<TokenUsage> {
        self.tokens_measured.then_some(self.tokens)
    }

    /// The kept events, oldest first: `(seq, event)`.
    pub fn recent_events(
        &self,
    ) -> impl ExactSizeIterator<Item = (u64, &std::sync::Arc<AgentEvent>)> + DoubleEndedIterator
    {
        self.events.events.iter().map(|(seq, ev, _)| (*seq, ev))
    }
}

/// The pass a claim belongs to: when its first run was dispatched and the selection it runs
/// on. Retries, continuations and restarts carry it over unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    pub dispatched_at_ms: i64,
    pub route: crate::domain::stage::Route,
}

impl RunFacts {
    /// The pass this run belongs to.
    pub fn pass(&self) -> Pass {
        Pass {
            dispatched_at_ms: self.dispatched_at_ms,
            route: self.route.clone(),
        }
    }
}

impl RetryInfo {
    /// The pass this retry continues.
    pub fn pass(&self) -> Pass {
        Pass {
            dispatched_at_ms: self.dispatched_at_ms,
            route: self.route.clone(),
        }
    }
}

/// One model's part of a session's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelSpend {
    pub tokens: TokenUsage,
    /// Usage figures received, one per API request.
    pub requests: u64,
}

/// What controls a live session (never copied into a snapshot).
pub struct RunHandles {
    /// Stops the supervisor and its agent.
    pub cancel: CancelToken,
    /// The workspace manager the session was dispatched with: its root and hooks, so a
    /// reload that moves `workspace.root` does not strand the cleanup of this workspace.
    pub workspaces: std::sync::Arc<crate::workspace::WorkspaceManager>,
    /// The session's slot under the daemon-wide cap, given back when the entry is dropped
    /// (its exit applied).
    pub daemon_slot: Option<crate::orchestrator::core::slots::Slot>,
}

impl RunHandles {
    pub fn new(
        cancel: CancelToken,
        workspaces: std::sync::Arc<crate::workspace::WorkspaceManager>,
        daemon_slot: Option<crate::orchestrator::core::slots::Slot>,
    ) -> RunHandles {
        RunHandles {
            cancel,
            workspaces,
            daemon_slot,
        }
    }
}

/// The in-memory event list of a live run: the events the API serves and that are stored with
/// the run. Token usage events (totals ride on the run), blank heartbeats and repeats of the
/// newest kept message are not kept: they would crowd out the events a person reads.
#[derive(Debug, Clone, Default)]
pub struct EventRing {
    /// `(seq, event, serialized size)`; events are shared with published snapshots, so a
    /// publish copies pointers, not event text.
    pub events: VecDeque<(u64, std::sync::Arc<AgentEvent>, usize)>,
    pub bytes: usize,
    pub next_seq: u64,
    pub dropped: u64,
}

impl EventRing {
    /// Adds an event if it is one the API keeps; returns its sequence number.
    pub fn push(&mut self, event: &AgentEvent) -> Option<u64> {
        self.keeps(event)?;
        self.push_kept(event.clone())
    }

    /// Like [`EventRing::push`], taking the event without copying it.
    pub fn push_owned(&mut self, event: AgentEvent) -> Option<u64> {
        self.keeps(&event)?;
        self.push_kept(event)
    }

    /// `Some` when the event is one the ring keeps.
    fn keeps(&self, event: &AgentEvent) -> Option<()> {
        let msg = event.kind.message();
        match &event.kind {
            AgentEventKind::TokenUsage { .. } | AgentEventKind::VendorAmount { .. } => return None,
            AgentEventKind::Notification { .. }
            | AgentEventKind::OtherMessage { .. }
            | AgentEventKind::Malformed { .. } => {
                if msg.trim().is_empty() {
                    return None;
                }
                if let Some((_, last, _)) = self.events.back()
                    && last.kind.type_name() == event.kind.type_name()
                    && last.kind.message() == msg
                {
                    return None;
                }
            }
            _ => {}
        }
        Some(())
    }

    fn push_kept(&mut self, event: AgentEvent) -> Option<u64> {
        self.next_seq += 1;
        let size = serialized_len(&event);
        self.events
            .push_back((self.next_seq, std::sync::Arc::new(event), size));
        self.bytes += size;
        while self.events.len() > RUN_EVENTS_MAX || self.bytes > RUN_EVENTS_MAX_BYTES {
            match self.events.pop_front() {
                Some((_, _, s)) => {
                    self.bytes -= s;
                    self.dropped += 1;
                }
                None => break,
            }
        }
        Some(self.next_seq)
    }
}

/// The length of an event's JSON without building the text (0 if it does not serialize).
fn serialized_len(event: &AgentEvent) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, event) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// A queued retry, in memory (mirrors its `retry_entries` row).
#[derive(Debug, Clone)]
pub struct RetryInfo {
    pub issue: Issue,
    /// The attempt this retry dispatches (1-based).
    pub attempt: u32,
    pub due_at_ms: i64,
    pub error: Option<String>,
    pub session_id: Option<String>,
    pub trigger: RetryTrigger,
    /// What first queued this retry; a put-back keeps it while `trigger` reads `timer`.
    /// `None` for a restored put-back (the first trigger is not stored).
    pub started_by: Option<RetryTrigger>,
    pub dispatched_at_ms: i64,
    /// The selection frozen at the claim's first dispatch.
    pub route: crate::domain::stage::Route,
    /// The pull-request reaction the retry continues, if any, and its prompt context.
    pub reaction: Option<crate::orchestrator::features::reactions::RunReaction>,
    pub reaction_context: Option<crate::orchestrator::features::reactions::FixContext>,
}

/// A budget hold.
#[derive(Debug, Clone)]
pub struct BudgetHold {
    pub issue: Issue,
    pub reason: BudgetReason,
    pub used: u64,
    pub limit: u64,
    pub since_ms: i64,
    /// When the pass of the blocked dispatch was first dispatched; `None` when the hold has
    /// no dispatch context or the pass cannot be dated.
    pub dispatched_at_ms: Option<i64>,
    /// The issue's spend as the token ceiling read it; `None` when it was not evaluated.
    pub spend: Option<HoldSpend>,
    /// The issue's estimated cost as the money ceiling read it; `None` when not evaluated.
    pub money: Option<HoldMoney>,
    /// The selection of the blocked dispatch; `None` without a dispatch context.
    pub route: Option<crate::domain::stage::Route>,
}

impl BudgetHold {
    /// What the hold's reason counts, for logs: US dollars for a money hold.
    pub fn used_text(&self) -> String {
        match (self.reason, self.money) {
            (BudgetReason::Money, Some(m)) => m.used_usd.map(|u| u.to_string()).unwrap_or_default(),
            _ => self.used.to_string(),
        }
    }

    /// The ceiling the hold's reason names, for logs.
    pub fn limit_text(&self) -> String {
        match (self.reason, self.money) {
            (BudgetReason::Money, Some(m)) => m.budget_usd.to_string(),
            _ => self.limit.to_string(),
        }
    }
}

/// An issue's estimated cost behind a budget hold, against `agent.max_cost_usd` then.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldMoney {
    /// `None` when no part of the issue's spend is priced.
    pub used_usd: Option<f64>,
    /// `used_usd` is the whole spend, not a lower bound.
    pub complete: bool,
    pub budget_usd: f64,
}

/// An issue's recorded spend behind a budget hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldSpend {
    /// Uncached tokens of the measured sessions.
    pub uncached_tokens: u64,
    /// Sessions whose agent reported no token usage.
    pub unmeasured_sessions: u64,
    /// Sessions that recorded a turn no figure covered.
    pub lower_bound_sessions: u64,
    /// Sessions a budget ceiling stopped while they ran.
    pub stopped_in_flight: u64,
}

/// A parked issue (the agent reported itself blocked).
#[derive(Debug, Clone)]
pub struct Park {
    pub issue: Issue,
    pub reason: ParkReason,
    pub parked_at_ms: i64,
    pub parked_state: String,
    pub label: String,
    pub label_applied: bool,
    /// When the pass of the run the park follows was first dispatched.
    pub dispatched_at_ms: Option<i64>,
    /// The selection of the run the park follows; `None` when it follows no run.
    pub route: Option<crate::domain::stage::Route>,
}

/// A pass's hold of one issue.
#[derive(Debug, Clone)]
pub struct Held {
    /// Shared: the served list and the next pass's copy of an unchanged hold point at it.
    pub issue: std::sync::Arc<Issue>,
    pub reason: HoldReason,
    pub since_ms: i64,
}

/// The pass holds by issue id, and the list of them a snapshot serves, built on first demand
/// and kept until a hold changes: a tick over a large backlog that holds the same issues for
/// the same reasons publishes the previous list instead of a copy of every held issue.
#[derive(Debug, Default)]
pub struct HeldMap {
    /// Hashed: a pass looks up every candidate's previous hold.
    map: HashMap<String, Held>,
    rows: std::sync::OnceLock<std::sync::Arc<Vec<Held>>>,
}

impl std::ops::Deref for HeldMap {
    type Target = HashMap<String, Held>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl HeldMap {
    pub fn insert(&mut self, id: String, hold: Held) -> Option<Held> {
        self.rows = Default::default();
        self.map.insert(id, hold)
    }

    pub fn remove(&mut self, id: &str) -> Option<Held> {
        let removed = self.map.remove(id);
        if removed.is_some() {
            self.rows = Default::default();
        }
        removed
    }

    /// Takes every hold out for a pass to rebuild; [`HeldMap::replace`] puts the result back.
    pub fn take(&mut self) -> (HashMap<String, Held>, HeldRows) {
        (
            std::mem::take(&mut self.map),
            HeldRows(std::mem::take(&mut self.rows)),
        )
    }

    /// Installs a pass's holds; `unchanged` when they equal the ones [`HeldMap::take`] gave
    /// (same issues, reasons and times), whose served list `rows` is then kept.
    pub fn replace(&mut self, map: HashMap<String, Held>, rows: HeldRows, unchanged: bool) {
        self.map = map;
        self.rows = if unchanged {
            rows.0
        } else {
            Default::default()
        };
    }

    /// The holds in issue-id order, shared until one changes.
    pub fn rows(&self) -> std::sync::Arc<Vec<Held>> {
        std::sync::Arc::clone(self.rows.get_or_init(|| {
            let mut by_id: Vec<(&String, &Held)> = self.map.iter().collect();
            by_id.sort_unstable_by(|a, b| a.0.cmp(b.0));
            std::sync::Arc::new(by_id.into_iter().map(|(_, h)| h.clone()).collect())
        }))
    }
}

impl FromIterator<(String, Held)> for HeldMap {
    fn from_iter<I: IntoIterator<Item = (String, Held)>>(iter: I) -> HeldMap {
        HeldMap {
            map: iter.into_iter().collect(),
            rows: Default::default(),
        }
    }
}

/// The served list of holds a pass took out with them ([`HeldMap::take`]).
#[derive(Debug, Default)]
pub struct HeldRows(std::sync::OnceLock<std::sync::Arc<Vec<Held>>>);

/// Outcome of one of the orchestrator's own checks. `E` is the check's typed error: the latest
/// one is kept as `failure`, so readers decide by its variant, never by its text.
#[derive(Debug, Clone)]
pub struct CheckHealth<E> {
    pub ok: bool,
    pub checked_at_ms: Option<i64>,
    /// The latest failure, masked, as the API serves it.
    pub error: Option<String>,
    /// The latest failure while failing.
    pub failure: Option<E>,
    /// Consecutive failures.
    pub failing_streak: u32,
    pub since_ms: Option<i64>,
    /// When a run last passed (the API's `last_success_at`).
    pub last_success_ms: Option<i64>,
}

impl<E> Default for CheckHealth<E> {
    fn default() -> Self {
        CheckHealth {
            ok: false,
            checked_at_ms: None,
            error: None,
            failure: None,
            failing_streak: 0,
            since_ms: None,
            last_success_ms: None,
        }
    }
}

impl<E: std::fmt::Display> CheckHealth<E> {
    pub fn record(&mut self, now_ms: i64, result: Result<(), E>) {
        let was_ok = self.ok || self.checked_at_ms.is_none();
        self.checked_at_ms = Some(now_ms);
        match result {
            Ok(()) => {
                if !self.ok {
                    self.since_ms = Some(now_ms);
                }
                self.ok = true;
                self.error = None;
                self.failure = None;
                self.failing_streak = 0;
                self.last_success_ms = Some(now_ms);
            }
            Err(e) => {
                if was_ok {
                    self.since_ms = Some(now_ms);
                }
                self.ok = false;
                self.error = Some(crate::mask::mask(&e.to_string()));
                self.failure = Some(e);
                self.failing_streak += 1;
            }
        }
    }
}

/// The last poll's outcome.
#[derive(Debug, Clone, Default)]
pub struct PollHealth {
    pub at_ms: Option<i64>,
    /// `None` before the first poll.
    pub outcome: Option<PollOutcome>,
    pub error: Option<String>,
    pub candidates: usize,
    pub dispatched: usize,
    /// Consecutive polls that did not read the tracker successfully.
    pub failing_streak: u32,
    /// When the current failing streak began.
    pub failing_since_ms: Option<i64>,
    /// When a poll last read the tracker successfully.
    pub last_success_ms: Option<i64>,
    /// When the poll timer fires next; a refresh's poll does not move it.
    pub next_at_ms: Option<i64>,
    /// When the poll whose tracker reads are still out began (`None`: none is out): a slow
    /// tracker shows here before its reads time out.
    pub in_flight_since_ms: Option<i64>,
    /// Timer ticks skipped because the previous poll's reads were still out.
    pub ticks_skipped: u64,
}

impl PollHealth {
    /// Records one poll's outcome.
    pub fn record(
        &mut self,
        now_ms: i64,
        outcome: PollOutcome,
        error: Option<String>,
        candidates: usize,
        dispatched: usize,
    ) {
        let ok = match outcome {
            PollOutcome::Ok => true,
            PollOutcome::PreflightFailed | PollOutcome::TrackerFailed => false,
        };
        if ok {
            self.failing_streak = 0;
            self.failing_since_ms = None;
            self.last_success_ms = Some(now_ms);
        } else {
            if self.failing_streak == 0 {
                self.failing_since_ms = Some(now_ms);
            }
            self.failing_streak += 1;
        }
        self.at_ms = Some(now_ms);
        self.outcome = Some(outcome);
        self.error = error.map(|e| crate::mask::mask(&e));
        self.candidates = candidates;
        self.dispatched = dispatched;
    }
}

/// Health of the orchestrator's own checks.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// The database answers and takes writes, and budget reads succeed.
    pub database: CheckHealth<crate::orchestrator::core::run_record::PersistError>,
    /// The last budget read's failure, until a budget read succeeds; the next tick's database
    /// check fails with it, so the check does not pass between two failed budget reads.
    pub budget_read_failure: Option<crate::orchestrator::core::run_record::PersistError>,
    pub preflight: CheckHealth<PreflightError>,
    pub workflow: CheckHealth<super::reload::ReloadError>,
    pub poll: PollHealth,
    /// The tracker's rate-limit figures after the latest poll; `None` for a tracker that
    /// reports none (the file tracker) or before it answered.
    pub tracker_rate_limit: Option<crate::http_client::RateLimitStatus>,
    /// Reads of the pull-request provider (`health.scm`); `None` while no reaction uses one.
    pub scm: Option<ScmHealth>,
}

/// `health.scm`: the provider kind and the streak of its most recent reads.
#[derive(Debug, Clone)]
pub struct ScmHealth {
    pub provider: String,
    pub check: CheckHealth<crate::scm::ScmError>,
}

/// Why the dispatch preflight failed. The text is what the API serves as the check's error.
/// A workflow that does not reload is not a preflight failure: the preflight runs on the last
/// good workflow, and the workflow check reports the reload error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightError {
    /// Configuration or workspace problems, in check order.
    Checks { problems: Vec<String> },
}

impl std::fmt::Display for PreflightError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PreflightError::Checks { problems } => {
                write!(f, "dispatch preflight failed: {}", problems.join("; "))
            }
        }
    }
}

impl std::error::Error for PreflightError {}

/// Cumulative totals (seeded from the aggregate row at start).
#[derive(Debug, Clone, Default)]
pub struct AgentTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub dispatches: u64,
    pub seconds_running: f64,
    pub unmeasured_sessions: u64,
}

/// Everything the orchestrator owns.
#[derive(Default)]
pub struct State {
    /// Keyed by issue id.
    pub running: HashMap<String, RunningEntry>,
    /// dispatch id → issue id.
    pub dispatch_index: HashMap<String, String>,
    pub retries: HashMap<String, RetryInfo>,
    /// Retries whose issues are being read before they start: still in `retries` (claimed and
    /// listed), no longer in `retry_queue`.
    pub retries_firing: std::collections::BTreeSet<String>,
    pub retry_queue: RetryQueue,
    pub budget_held: BTreeMap<String, BudgetHold>,
    pub parked: BTreeMap<String, Park>,
    pub held: HeldMap,
    /// Sessions that ended while the database could not take their run record: dispatch id →
    /// the exit, applied (hand-off, retry, park…) once the writer reports the record committed.
    /// Their issues stay claimed meanwhile.
    pub awaiting_record: BTreeMap<String, AwaitingRecord>,
    /// Recorded exits whose tracker calls are out, by issue id: still claimed.
    pub settling: BTreeMap<String, Settling>,
    pub totals: AgentTotals,
    pub health: Health,
    /// Issue outcomes: issue id → (kind, tracker state).
    pub outcomes: HashMap<String, (OutcomeKind, String)>,
    /// Attention acknowledgements by item id.
    pub acks: BTreeMap<String, crate::store::AttentionAck>,
    /// Bumped on every published change (the SSE `change` revision).
    pub revision: u64,
    /// Issues the failure breaker holds, by issue id.
    pub failure_held: BTreeMap<String, crate::orchestrator::claim::failure_holds::FailureHold>,
    /// Each issue's streak of failed runs with one cause.
    pub failure_streaks: crate::orchestrator::claim::failure_holds::Streaks,
    /// Each issue's count of withheld handoffs in a row.
    pub handoff_absence: crate::orchestrator::claim::handoff_evidence::AbsenceStreaks,
    /// Issues whose park a person released and whose next run has not been dispatched yet:
    /// the pass reads their comments first (`park_comments_unread` when that read fails).
    pub park_released: std::collections::BTreeSet<String>,
}

impl State {
    /// Running, retry-queued, or being dispatched.
    pub fn claimed(&self) -> HashSet<String> {
        self.running
            .keys()
            .chain(self.retries.keys())
            .chain(
                self.awaiting_record
                    .values()
                    .map(|a| &a.entry.facts.issue.id),
            )
            .chain(self.settling.keys())
            .cloned()
            .collect()
    }

    /// Sessions running on each SSH host.
    pub fn host_usage(&self) -> crate::orchestrator::features::hosts::pool::HostUsage {
        let mut usage = crate::orchestrator::features::hosts::pool::HostUsage::new();
        for h in self
            .running
            .values()
            .filter_map(|e| e.facts.ssh_host.as_ref())
        {
            *usage.entry(h.clone()).or_insert(0) += 1;
        }
        usage
    }

    /// Identifier → issue id of every running or retry-queued issue: a workspace directory is
    /// named after the identifier, so no second issue with one of these may be dispatched.
    pub fn claimed_identifiers(&self) -> std::collections::BTreeMap<String, String> {
        let running = self
            .running
            .iter()
            .map(|(id, e)| (e.facts.issue.identifier.clone(), id.clone()));
        let queued = self
            .retries
            .iter()
            .map(|(id, r)| (r.issue.identifier.clone(), id.clone()));
        queued.chain(running).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(id: &str) -> Held {
        Held {
            issue: std::sync::Arc::new(Issue {
                id: id.into(),
                ..Default::default()
            }),
            reason: HoldReason::BlockersNotRead,
            since_ms: 1,
        }
    }

    #[test]
    fn the_served_hold_list_is_shared_until_a_hold_changes() {
        use std::sync::Arc;
        let mut m: HeldMap = [("1".to_string(), hold("1"))].into_iter().collect();
        let a = m.rows();
        assert!(Arc::ptr_eq(&a, &m.rows()));
        // A pass that kept every hold as it was keeps the list.
        let (map, rows) = m.take();
        m.replace(map, rows, true);
        assert!(Arc::ptr_eq(&a, &m.rows()));
        // One that changed any builds it again.
        let (map, rows) = m.take();
        m.replace(map, rows, false);
        let b = m.rows();
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.len(), 1);
        m.insert("2".into(), hold("2"));
        let c = m.rows();
        assert_eq!(
            c.iter().map(|h| h.issue.id.as_str()).collect::<Vec<_>>(),
            ["1", "2"]
        );
        // Removing an issue that is not held changes nothing; removing a held one does.
        assert!(m.remove("9").is_none());
        assert!(Arc::ptr_eq(&c, &m.rows()));
        assert!(m.remove("1").is_some());
        assert_eq!(m.rows().len(), 1);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn poll_health_tracks_streaks_and_last_success() {
        let mut p = PollHealth::default();
        p.record(1_000, PollOutcome::Ok, None, 3, 1);
        assert_eq!((p.failing_streak, p.last_success_ms), (0, Some(1_000)));
        p.record(2_000, PollOutcome::TrackerFailed, Some("boom".into()), 0, 0);
        p.record(
            3_000,
            PollOutcome::PreflightFailed,
            Some("bad".into()),
            0,
            0,
        );
        assert_eq!(p.failing_streak, 2);
        assert_eq!(p.failing_since_ms, Some(2_000));
        assert_eq!(p.last_success_ms, Some(1_000));
        assert_eq!(p.error.as_deref(), Some("bad"));
        p.record(4_000, PollOutcome::Ok, None, 0, 0);
        assert_eq!((p.failing_streak, p.failing_since_ms), (0, None));
        assert_eq!(p.error, None);
    }

    #[test]
    fn event_ring_keeps_the_newest_and_skips_repeats_and_usage() {
        use crate::agent::{AgentEvent, AgentEventKind, TokenUsage};
        let mut ring = EventRing::default();
        let note = |m: &str| {
            AgentEvent::new(
                0,
                AgentEventKind::Notification {
                    message: m.to_string(),
                },
            )
        };
        assert_eq!(ring.push(&note("a")), Some(1));
        assert_eq!(ring.push(&note("a")), None, "a repeat is not kept");
        assert_eq!(ring.push(&note("  ")), None, "a heartbeat is not kept");
        let usage = AgentEvent::new(
            0,
            AgentEventKind::TokenUsage {
                usage: TokenUsage::new(1, 1, 0, 0),
                model: None,
                api_duration_ms: None,
            },
        );
        assert_eq!(ring.push(&usage), None);
        for i in 0..(RUN_EVENTS_MAX + 5) {
            ring.push(&note(&format!("n{i}")));
        }
        assert_eq!(ring.events.len(), RUN_EVENTS_MAX);
        assert_eq!(ring.events.front().map(|e| e.0), Some(7));
        assert!(ring.dropped >= 5);
    }
}
