//! One dispatch pass, as a pure function: sort the candidates, apply the eligibility gates in
//! order (shape, active state, claims, parks, budgets, spend windows, agent-kind holds, slot
//! limits, blockers), and say for
//! each candidate whether it is dispatched, held (and why, in the API's hold vocabulary) or
//! skipped. The orchestrator's tick and `--dry-run`
//! both use it, so what a dry run prints is what a tick would do.
//!
//! Blocker lists a tracker could not carry with its listing (`BlockersRead::Unread`) are read
//! through the caller's reader, lazily, in candidate order, exactly when an issue reaches the
//! blocker gate, and at most [`BLOCKER_READS_PER_PASS`] times per pass: a pass over a large
//! backlog costs a bounded number of tracker calls, and a full slot limit costs none.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};

use crate::domain::{BlockerRef, BlockersRead, HoldCode, Issue, state_in};
use crate::tracker::Blockers;

/// Blocker reads one pass may make; later issues whose list is unread wait for the next pass
/// (`blockers_not_read`).
pub const BLOCKER_READS_PER_PASS: usize = 4;

/// Why a reader gave no blocker list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockerMiss {
    /// The read failed (the reader logged why): no more reads this pass.
    Failed,
    /// The list was not read for this pass (it was read ahead of the pass, and this issue was
    /// not among the ones read): the issue waits for the next pass (`blockers_not_read`).
    NotRead,
}

/// Reads one issue's blockers for the pass.
pub type BlockerReader<'a> = dyn FnMut(&Issue) -> Result<Blockers, BlockerMiss> + 'a;

/// The reader of a pass over `tracker`: one `fetch_blockers` per call, a failure logged with
/// the issue and the error.
pub fn tracker_reader(
    tracker: &dyn crate::tracker::TrackerAdapter,
) -> impl FnMut(&Issue) -> Result<Blockers, BlockerMiss> + '_ {
    move |issue| {
        tracker.fetch_blockers(&issue.id).map_err(|e| {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                error:% = e.to_string();
                "blocker read failed"
            );
            BlockerMiss::Failed
        })
    }
}

/// Blocker lists read ahead of a pass, off the orchestrator thread: the pass runs over the
/// candidates with `input` and every list it asks for is read (and kept). The orchestrator
/// then runs the real pass over [`read_ahead_reader`], which answers from what was kept.
pub fn read_blockers_ahead<I: Borrow<Issue>>(
    candidates: &[I],
    input: &PassInput,
    tracker: &dyn crate::tracker::TrackerAdapter,
) -> BTreeMap<String, Result<Blockers, BlockerMiss>> {
    let mut kept = BTreeMap::new();
    // Only an unread list is ever read: a listing that carries every list needs no pre-pass.
    let unread = |i: &I| i.borrow().blockers_read == BlockersRead::Unread;
    if !candidates.iter().any(unread) {
        return kept;
    }
    let mut read = tracker_reader(tracker);
    plan(candidates, input, &mut |issue: &Issue| {
        let got = read(issue);
        kept.insert(issue.id.clone(), got.clone());
        got
    });
    kept
}

/// A reader over lists read ahead: a list that was not read is [`BlockerMiss::NotRead`].
pub fn read_ahead_reader(
    kept: &BTreeMap<String, Result<Blockers, BlockerMiss>>,
) -> impl FnMut(&Issue) -> Result<Blockers, BlockerMiss> + '_ {
    move |issue| {
        kept.get(&issue.id)
            .cloned()
            .unwrap_or(Err(BlockerMiss::NotRead))
    }
}

/// The blocker gate's per-pass memory: reads spent, and whether one failed (which ends reads
/// for the rest of the pass).
#[derive(Debug, Default)]
struct BlockerGate {
    reads: usize,
    failed: bool,
}

impl BlockerGate {
    /// The issue's hold at the blocker gate, if any; reads its list first when it is unread
    /// and the pass may still read.
    fn check(
        &mut self,
        issue: &Issue,
        terminal_states: &[String],
        read: &mut BlockerReader<'_>,
    ) -> Option<HoldReason> {
        let open = |list: &[BlockerRef]| -> Vec<BlockerRef> {
            list.iter()
                .filter(|b| b.state.trim().is_empty() || !state_in(&b.state, terminal_states))
                .cloned()
                .collect()
        };
        let known = open(&issue.blocked_by);
        if !known.is_empty() {
            return Some(HoldReason::BlockedBy(known));
        }
        match issue.blockers_read {
            BlockersRead::Complete => None,
            BlockersRead::Incomplete => Some(HoldReason::BlockersIncomplete),
            BlockersRead::Unread if self.failed => Some(HoldReason::BlockersUnresolved),
            BlockersRead::Unread if self.reads >= BLOCKER_READS_PER_PASS => {
                Some(HoldReason::BlockersNotRead)
            }
            BlockersRead::Unread => {
                self.reads += 1;
                match read(issue) {
                    Err(BlockerMiss::Failed) => {
                        self.failed = true;
                        Some(HoldReason::BlockersUnresolved)
                    }
                    Err(BlockerMiss::NotRead) => Some(HoldReason::BlockersNotRead),
                    Ok(b) => {
                        let open = open(&b.refs);
                        if !open.is_empty() {
                            Some(HoldReason::BlockedBy(open))
                        } else if !b.complete {
                            Some(HoldReason::BlockersIncomplete)
                        } else {
                            None
                        }
                    }
                }
            }
        }
    }
}

/// Sorts candidates in [`crate::domain::dispatch_order`]. Stable.
pub fn sort_candidates<I: Borrow<Issue>>(issues: &mut [I]) {
    issues.sort_by(|a, b| crate::domain::dispatch_order(a.borrow(), b.borrow()));
}

/// The scope of a full agent slot limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotScope {
    Global,
    /// The issue's state as the pass read it.
    State(String),
    /// The cap every workflow of the daemon shares (`sortie.yaml`), or this workflow's fair
    /// share of it while another workflow waits (`core::slots`).
    Daemon,
}

/// Why a pass held an issue back (the API's `hold.reason` values this build can produce).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldReason {
    /// Blockers whose state is empty or not terminal, in tracker order.
    BlockedBy(Vec<BlockerRef>),
    AgentSlotsFull {
        scope: SlotScope,
        used: usize,
        limit: usize,
    },
    /// Another session or process holds the issue's workspace lock (`.sortie/lock`); the pid
    /// it wrote there, when readable.
    WorkspaceLocked { holder_pid: Option<u32> },
    /// Another claimed issue (running or retry-queued) has the same identifier, and the
    /// workspace directory is named after the identifier: the two would share it.
    IdentifierInUse {
        /// The issue id that holds the identifier.
        by_issue_id: String,
    },
    /// A provider usage limit stops new sessions of the agent kind until it resets
    /// (`agent_holds::UsageHold`).
    UsageLimit {
        agent_kind: String,
        resets_at_ms: i64,
        model_only: bool,
        model: Option<String>,
    },
    /// The agent kind's login failed: no session of it can succeed until a person logs its
    /// CLI in (`agent_holds::AuthHold`).
    AgentAuthFailed { agent_kind: String },
    /// A spend window's spend reached its ceiling: no new session starts until it resets
    /// (`spend_ceiling`).
    SpendCeiling {
        window: crate::domain::SpendWindow,
        resets_at_ms: i64,
    },
    /// Reading the issue's blockers failed, or an earlier failure ended blocker reads for the
    /// pass.
    BlockersUnresolved,
    /// The pass's blocker-read budget was spent before it reached the issue.
    BlockersNotRead,
    /// The tracker declared the issue's blocker list incomplete.
    BlockersIncomplete,
    /// A person released the issue's park, and reading the comments its next run receives
    /// failed.
    ParkCommentsUnread,
    /// Every SSH host runs as many sessions as `worker.max_concurrent_agents_per_host` allows
    /// (a host out of service has no room).
    SshHostsFull,
    /// The failure breaker holds the issue until a person releases it
    /// (`failure_holds::FailureHold`): `cause` is a failure class or a repeated error code,
    /// `runs` the consecutive runs that ended with it.
    FailureHeld { cause: String, runs: u32 },
    /// A hold a feature words itself: a new hold of a feature is made in the feature's folder
    /// with its word of the `HoldCode` vocabulary, and the pass, the API, `--dry-run` and the
    /// retry path take it with no new arm.
    Feature(FeatureHold),
}

/// Everything the daemon says and does about a feature's hold, decided by the feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureHold {
    pub code: HoldCode,
    /// The held row's sentences as the API serves them: the reason, what releases it, and the
    /// long sentence.
    pub reason_text: String,
    pub release_text: String,
    pub full_text: String,
    /// What `sortie --dry-run` prints for it.
    pub dry_run_text: String,
    /// When the hold ends by itself, if it does (the API's `resets_at`).
    pub resets_at_ms: Option<i64>,
    /// What a due retry it stops does.
    pub on_retry: OnRetry,
}

/// What a due retry a feature's hold stops does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRetry {
    /// The claim is released; the next poll tick lists the hold and dispatches once it ends.
    Release,
    /// The retry waits in the queue until `due_at_ms`, keeping its attempt.
    WaitUntil {
        reason: crate::domain::RescheduleReason,
        due_at_ms: i64,
    },
}

impl HoldReason {
    /// The API's `reason` code.
    pub fn code(&self) -> HoldCode {
        match self {
            HoldReason::BlockedBy(_) => HoldCode::BlockedBy,
            HoldReason::AgentSlotsFull { .. } => HoldCode::AgentSlotsFull,
            HoldReason::WorkspaceLocked { .. } => HoldCode::WorkspaceLocked,
            HoldReason::IdentifierInUse { .. } => HoldCode::IdentifierInUse,
            HoldReason::UsageLimit { .. } => HoldCode::UsageLimit,
            HoldReason::AgentAuthFailed { .. } => HoldCode::AgentAuthFailed,
            HoldReason::SpendCeiling { window, .. } => window.hold_reason().into(),
            HoldReason::BlockersUnresolved => HoldCode::BlockersUnresolved,
            HoldReason::BlockersNotRead => HoldCode::BlockersNotRead,
            HoldReason::BlockersIncomplete => HoldCode::BlockersIncomplete,
            HoldReason::ParkCommentsUnread => HoldCode::ParkCommentsUnread,
            HoldReason::SshHostsFull => HoldCode::SshHostsFull,
            HoldReason::FailureHeld { .. } => HoldCode::FailureHeld,
            HoldReason::Feature(h) => h.code,
        }
    }
}

/// Why the pass skipped a candidate outright (not listed as held). The text is what
/// `--dry-run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    MissingFields,
    StateNotActive,
    AlreadyClaimed,
    Parked,
    BudgetExhausted,
}

impl SkipReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::MissingFields => "missing id, identifier, title or state",
            SkipReason::StateNotActive => "state not active",
            SkipReason::AlreadyClaimed => "already claimed",
            SkipReason::Parked => "parked",
            SkipReason::BudgetExhausted => "budget exhausted",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One standing gate's holds in a pass (a feature's, the failure breaker's, a stage hop's):
/// on every candidate the earlier gates let through, or on some issues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Every(HoldReason),
    /// Issue id → its hold.
    Issues(BTreeMap<String, HoldReason>),
}

impl Gate {
    /// The hold this gate puts on the issue, if any.
    pub fn hold(&self, issue_id: &str) -> Option<&HoldReason> {
        match self {
            Gate::Every(hold) => Some(hold),
            Gate::Issues(holds) => holds.get(issue_id),
        }
    }
}

/// What the pass decided for one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Dispatch,
    Held(HoldReason),
    /// Not eligible at all (shape, state, already claimed, budget-held, parked): not listed as held.
    Skip(SkipReason),
}

impl Decision {
    /// The decision as a log field value: `dispatch`, the hold code, or the skip reason.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Dispatch => "dispatch",
            Decision::Held(r) => r.code().as_str(),
            Decision::Skip(s) => s.as_str(),
        }
    }
}

/// What the pass needs to know besides the candidates.
#[derive(Debug, Clone, Default)]
pub struct PassInput {
    pub active_states: Vec<String>,
    pub terminal_states: Vec<String>,
    pub max_concurrent_agents: usize,
    /// Lowercased state → limit.
    pub max_by_state: BTreeMap<String, usize>,
    /// Running sessions in total.
    pub running_total: usize,
    /// Lowercased state → running sessions in that state.
    pub running_by_state: BTreeMap<String, usize>,
    /// Issue ids that are running, retry-queued or being dispatched.
    pub claimed: HashSet<String>,
    /// Issue ids held by a budget (listed in `budget_exhausted`, not in `held`).
    pub budget_held: HashSet<String>,
    /// Issue ids parked until a person acts.
    pub parked: HashSet<String>,
    /// Issue ids whose workspace lock another holder has → the pid it wrote (see
    /// [`probe_workspace_locks`]).
    pub workspace_locked: BTreeMap<String, Option<u32>>,
    /// Identifier → issue id of every claimed issue (one workspace directory per identifier).
    pub claimed_identifiers: BTreeMap<String, String>,
    /// The standing gates' holds, in the order their reasons win: the caller asks each gate
    /// in its declared order (`features::Features`), and an issue takes the first hold it
    /// meets. Empty for a dry run.
    pub gates: Vec<Gate>,
    /// How many more sessions the SSH hosts take (`host_pool::HostPool::room`); `None` when
    /// sessions run here.
    pub ssh_room: Option<usize>,
    /// What the daemon-wide cap leaves this workflow now (`core::slots`); `None` without one.
    pub daemon: Option<DaemonRoom>,
}

/// This workflow's room under the daemon-wide agent cap, as the pass starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaemonRoom {
    /// More sessions this workflow may start now (its fair share, `core::slots`).
    pub room: usize,
    /// Sessions running in every workflow.
    pub used: usize,
    /// The cap.
    pub cap: usize,
}

/// What is live when a pass runs. A dry run has nothing live (`LiveClaims::default()`).
#[derive(Debug, Clone, Default)]
pub struct LiveClaims {
    /// The tracker state of each running session.
    pub running_states: Vec<String>,
    /// Issue ids that are running, retry-queued or being dispatched.
    pub claimed: HashSet<String>,
    pub budget_held: HashSet<String>,
    pub parked: HashSet<String>,
    /// Identifier → issue id of the running and retry-queued issues.
    pub claimed_identifiers: BTreeMap<String, String>,
}

impl PassInput {
    /// The one builder of a pass's input, from the configured states and slot limits and what
    /// is live; the tick, a due retry and `--dry-run` all build it here, so a dry run sees the
    /// gates a tick sees.
    pub fn new(cfg: &crate::config::ServiceConfig, live: LiveClaims) -> PassInput {
        let mut running_by_state = BTreeMap::new();
        for state in &live.running_states {
            *running_by_state
                .entry(crate::domain::state_key(state))
                .or_insert(0) += 1;
        }
        PassInput {
            running_total: live.running_states.len(),
            running_by_state,
            claimed: live.claimed,
            budget_held: live.budget_held,
            parked: live.parked,
            workspace_locked: BTreeMap::new(),
            claimed_identifiers: live.claimed_identifiers,
            gates: Vec::new(),
            ssh_room: None,
            daemon: None,
            active_states: cfg.tracker.active_states.clone(),
            terminal_states: cfg.tracker.terminal_states.clone(),
            max_concurrent_agents: cfg.agent.max_concurrent_agents as usize,
            max_by_state: cfg
                .agent
                .max_concurrent_agents_by_state
                .iter()
                .map(|(k, v)| (crate::domain::state_key(k), *v as usize))
                .collect(),
        }
    }
}

impl PassInput {
    /// Counts a dispatch made after the input was built (its slot, claim and identifier), so
    /// one input serves several retries fired in the same pass.
    pub fn note_dispatched(&mut self, issue: &Issue) {
        self.running_total += 1;
        *self
            .running_by_state
            .entry(crate::domain::state_key(&issue.state))
            .or_insert(0) += 1;
        self.claimed.insert(issue.id.clone());
        self.claimed_identifiers
            .insert(issue.identifier.clone(), issue.id.clone());
        if let Some(room) = &mut self.ssh_room {
            *room = room.saturating_sub(1);
        }
        if let Some(d) = &mut self.daemon {
            d.room = d.room.saturating_sub(1);
            d.used += 1;
        }
    }

    /// Counts a retry put back in the queue after the input was built: it claims its issue
    /// and its identifier (a running issue keeps an identifier it already has).
    pub fn note_queued(&mut self, id: &str, identifier: &str) {
        self.claimed.insert(id.to_string());
        self.claimed_identifiers
            .entry(identifier.to_string())
            .or_insert_with(|| id.to_string());
    }
}

/// Fills `input.workspace_locked` for the candidates a pass could dispatch (right shape,
/// active, unclaimed): `holder(identifier)` says whether someone else holds that workspace's
/// lock. Claimed issues are never probed: their lock is this process's own supervisor's.
pub fn probe_workspace_locks<I: Borrow<Issue>>(
    candidates: &[I],
    input: &mut PassInput,
    holder: impl Fn(&str) -> Option<Option<u32>>,
) {
    input.workspace_locked = candidates
        .iter()
        .map(Borrow::borrow)
        .filter(|i: &&Issue| {
            i.is_dispatchable_shape()
                && state_in(&i.state, &input.active_states)
                && !state_in(&i.state, &input.terminal_states)
                && !input.claimed.contains(&i.id)
        })
        .filter_map(|i| holder(&i.identifier).map(|pid| (i.id.clone(), pid)))
        .collect();
}

/// The gates that depend on the issue and the pass's input alone, not on what the pass
/// already dispatched: shape, state, claims, parks, budgets and the standing holds, in the
/// order their reasons win.
fn standing_gate(issue: &Issue, input: &PassInput) -> Option<Decision> {
    if !issue.is_dispatchable_shape() {
        return Some(Decision::Skip(SkipReason::MissingFields));
    }
    if !state_in(&issue.state, &input.active_states)
        || state_in(&issue.state, &input.terminal_states)
    {
        return Some(Decision::Skip(SkipReason::StateNotActive));
    }
    if input.claimed.contains(&issue.id) {
        return Some(Decision::Skip(SkipReason::AlreadyClaimed));
    }
    if input.parked.contains(&issue.id) {
        return Some(Decision::Skip(SkipReason::Parked));
    }
    if input.budget_held.contains(&issue.id) {
        return Some(Decision::Skip(SkipReason::BudgetExhausted));
    }
    // The standing gates, in their declared order: a freed slot, host or closed blocker
    // would not dispatch an issue one of them holds, so their reasons win over those.
    if let Some(hold) = input.gates.iter().find_map(|g| g.hold(&issue.id)) {
        return Some(Decision::Held(hold.clone()));
    }
    // A session elsewhere holds the workspace: never a second one in it (takes no slot).
    if let Some(pid) = input.workspace_locked.get(&issue.id) {
        return Some(Decision::Held(HoldReason::WorkspaceLocked {
            holder_pid: *pid,
        }));
    }
    None
}

/// Runs the gates over already-sorted candidates. Slots are consumed as issues are dispatched,
/// so the result is exactly what a tick would do with this input. `read` resolves unread
/// blocker lists (see the module docs).
pub fn plan<I: Borrow<Issue>>(
    candidates: &[I],
    input: &PassInput,
    read: &mut BlockerReader<'_>,
) -> Vec<Decision> {
    let mut gate = BlockerGate::default();
    let mut running_total = input.running_total;
    let mut by_state = input.running_by_state.clone();
    let mut global_full = false;
    let mut ssh_room = input.ssh_room;
    let mut daemon = input.daemon;
    let mut identifiers = input.claimed_identifiers.clone();
    let mut out = Vec::with_capacity(candidates.len());
    for issue in candidates.iter().map(Borrow::borrow) {
        if let Some(d) = standing_gate(issue, input) {
            out.push(d);
            continue;
        }
        // One workspace per identifier: a second issue with a claimed identifier waits.
        if let Some(owner) = identifiers.get(&issue.identifier)
            && owner != &issue.id
        {
            out.push(Decision::Held(HoldReason::IdentifierInUse {
                by_issue_id: owner.clone(),
            }));
            continue;
        }
        // A full global limit stops the pass: nothing after it is dispatched and no blockers
        // are read for the rest, so they show the capacity reason.
        if global_full || running_total >= input.max_concurrent_agents {
            global_full = true;
            out.push(Decision::Held(HoldReason::AgentSlotsFull {
                scope: SlotScope::Global,
                used: running_total,
                limit: input.max_concurrent_agents,
            }));
            continue;
        }
        // No SSH host with room stops the pass like a full global limit.
        if ssh_room == Some(0) {
            out.push(Decision::Held(HoldReason::SshHostsFull));
            continue;
        }
        // Nor does the daemon-wide cap (or this workflow's fair share of it).
        if let Some(d) = daemon.filter(|d| d.room == 0) {
            out.push(Decision::Held(HoldReason::AgentSlotsFull {
                scope: SlotScope::Daemon,
                used: d.used,
                limit: d.cap,
            }));
            continue;
        }
        let state_key = crate::domain::state_key(&issue.state);
        if let Some(&limit) = input.max_by_state.get(&state_key) {
            let used = by_state.get(&state_key).copied().unwrap_or(0);
            if used >= limit {
                out.push(Decision::Held(HoldReason::AgentSlotsFull {
                    scope: SlotScope::State(issue.state.clone()),
                    used,
                    limit,
                }));
                continue;
            }
        }
        if let Some(hold) = gate.check(issue, &input.terminal_states, read) {
            out.push(Decision::Held(hold));
            continue;
        }
        running_total += 1;
        if let Some(room) = &mut ssh_room {
            *room = room.saturating_sub(1);
        }
        if let Some(d) = &mut daemon {
            d.room = d.room.saturating_sub(1);
            d.used += 1;
        }
        *by_state.entry(state_key).or_insert(0) += 1;
        identifiers.insert(issue.identifier.clone(), issue.id.clone());
        out.push(Decision::Dispatch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader for issues whose lists are all complete: it must never be asked.
    fn unread(i: &Issue) -> Result<Blockers, BlockerMiss> {
        panic!("unexpected blocker read of {}", i.id)
    }

    fn issue(id: &str, pri: Option<i64>, created: &str) -> Issue {
        Issue {
            id: id.into(),
            identifier: format!("T-{id}"),
            title: "t".into(),
            state: "To Do".into(),
            priority: pri,
            created_at: created.into(),
            ..Default::default()
        }
    }

    fn input(max: usize) -> PassInput {
        PassInput {
            active_states: vec!["To Do".into(), "In Progress".into()],
            terminal_states: vec!["Done".into()],
            max_concurrent_agents: max,
            ..Default::default()
        }
    }

    #[test]
    fn sorts_by_priority_then_oldest_then_identifier() {
        let mut v = vec![
            issue("4", None, "2026-01-01"),
            issue("3", Some(2), ""),
            issue("2", Some(1), "2026-02-01"),
            issue("1", Some(1), "2026-01-01"),
            issue("0", Some(2), "2026-03-01"),
        ];
        sort_candidates(&mut v);
        let ids: Vec<&str> = v.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, vec!["1", "2", "0", "3", "4"]);
    }

    #[test]
    fn full_ssh_hosts_hold_the_rest_before_blockers_are_read() {
        let mut v = vec![
            issue("1", Some(1), ""),
            issue("2", Some(2), ""),
            issue("3", Some(3), ""),
        ];
        v[2].blocked_by = vec![BlockerRef {
            id: "9".into(),
            identifier: "T-9".into(),
            state: "To Do".into(),
        }];
        let mut inp = input(10);
        inp.ssh_room = Some(1);
        let d = plan(&v, &inp, &mut unread);
        assert_eq!(d[0], Decision::Dispatch);
        assert_eq!(d[1], Decision::Held(HoldReason::SshHostsFull));
        assert_eq!(d[2], Decision::Held(HoldReason::SshHostsFull));
        // A full global limit is named first; hosts with room change nothing.
        inp.ssh_room = Some(0);
        let d = plan(&v, &input(0), &mut unread);
        assert!(matches!(
            d[0],
            Decision::Held(HoldReason::AgentSlotsFull { .. })
        ));
        inp.ssh_room = Some(usize::MAX);
        let d = plan(&v[..2], &inp, &mut unread);
        assert_eq!(d, vec![Decision::Dispatch, Decision::Dispatch]);
        // A dispatch counted after the input was built takes host room too.
        inp.ssh_room = Some(1);
        inp.note_dispatched(&issue("7", None, ""));
        assert_eq!(inp.ssh_room, Some(0));
        assert_eq!(HoldReason::SshHostsFull.code().as_str(), "ssh_hosts_full");
    }

    #[test]
    fn global_limit_holds_the_rest_with_capacity_reason() {
        let mut v = vec![issue("1", Some(1), ""), issue("2", Some(2), "")];
        v[1].blocked_by = vec![BlockerRef {
            id: "9".into(),
            identifier: "T-9".into(),
            state: "To Do".into(),
        }];
        let d = plan(&v, &input(1), &mut unread);
        assert_eq!(d[0], Decision::Dispatch);
        assert_eq!(
            d[1],
            Decision::Held(HoldReason::AgentSlotsFull {
                scope: SlotScope::Global,
                used: 1,
                limit: 1
            })
        );
    }

    #[test]
    fn blockers_hold_unless_terminal() {
        let mut v = vec![issue("1", None, ""), issue("2", None, "")];
        v[0].blocked_by = vec![
            BlockerRef {
                id: "8".into(),
                identifier: "T-8".into(),
                state: "done".into(),
            },
            BlockerRef {
                id: "9".into(),
                identifier: "T-9".into(),
                state: "".into(),
            },
        ];
        v[1].blocked_by = vec![BlockerRef {
            id: "8".into(),
            identifier: "T-8".into(),
            state: "Done".into(),
        }];
        let d = plan(&v, &input(5), &mut unread);
        match &d[0] {
            Decision::Held(HoldReason::BlockedBy(b)) => assert_eq!(b.len(), 1),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(d[1], Decision::Dispatch);
    }

    #[test]
    fn per_state_limit_holds_only_that_state() {
        let mut v = vec![
            issue("1", None, ""),
            issue("2", None, ""),
            issue("3", None, ""),
        ];
        v[2].state = "In Progress".into();
        let mut inp = input(10);
        inp.max_by_state.insert("to do".into(), 1);
        let d = plan(&v, &inp, &mut unread);
        assert_eq!(d[0], Decision::Dispatch);
        assert!(matches!(
            &d[1],
            Decision::Held(HoldReason::AgentSlotsFull {
                scope: SlotScope::State(_),
                used: 1,
                limit: 1
            })
        ));
        assert_eq!(d[2], Decision::Dispatch);
    }

    #[test]
    fn a_locked_workspace_holds_without_taking_a_slot() {
        let v = vec![issue("1", None, ""), issue("2", None, "")];
        let mut inp = input(1);
        inp.claimed.insert("9".into());
        probe_workspace_locks(&v, &mut inp, |ident| (ident == "T-1").then_some(Some(42)));
        let d = plan(&v, &inp, &mut unread);
        assert_eq!(
            d[0],
            Decision::Held(HoldReason::WorkspaceLocked {
                holder_pid: Some(42)
            })
        );
        assert_eq!(d[1], Decision::Dispatch);
        // A claimed issue is never probed.
        let mut inp = input(1);
        inp.claimed.insert("1".into());
        probe_workspace_locks(&v, &mut inp, |_| Some(None));
        assert!(!inp.workspace_locked.contains_key("1"));
        assert!(inp.workspace_locked.contains_key("2"));
    }

    #[test]
    fn claimed_parked_budget_and_inactive_are_skipped() {
        let mut v = vec![
            issue("1", None, ""),
            issue("2", None, ""),
            issue("3", None, ""),
            issue("4", None, ""),
            issue("5", None, ""),
        ];
        v[3].state = "Done".into();
        v[4].title.clear();
        let mut inp = input(10);
        inp.claimed.insert("1".into());
        inp.parked.insert("2".into());
        inp.budget_held.insert("3".into());
        let d = plan(&v, &inp, &mut unread);
        assert!(d.iter().all(|x| matches!(x, Decision::Skip(_))), "{d:?}");
    }

    #[test]
    fn a_spend_window_holds_every_candidate_before_capacity_and_blockers() {
        let mut v = vec![issue("1", None, ""), issue("2", None, "")];
        v[1].blocked_by = vec![BlockerRef {
            id: "9".into(),
            identifier: "T-9".into(),
            state: "To Do".into(),
        }];
        let mut inp = input(0);
        inp.budget_held.insert("3".into());
        let hold = HoldReason::SpendCeiling {
            window: crate::domain::SpendWindow::Daily,
            resets_at_ms: 5,
        };
        inp.gates = vec![Gate::Every(hold.clone())];
        v.push(issue("3", None, ""));
        let d = plan(&v, &inp, &mut unread);
        assert_eq!(d[0], Decision::Held(hold.clone()));
        assert_eq!(d[1], Decision::Held(hold.clone()));
        assert_eq!(d[2], Decision::Skip(SkipReason::BudgetExhausted));
        assert_eq!(hold.code().as_str(), "daily_spend_ceiling");
    }

    #[test]
    fn standing_gates_hold_in_their_declared_order_and_a_feature_hold_keeps_its_code() {
        let v = vec![issue("1", None, ""), issue("2", None, "")];
        let feature = HoldReason::Feature(FeatureHold {
            code: HoldCode::StageHopUnconfirmed,
            reason_text: String::new(),
            release_text: String::new(),
            full_text: String::new(),
            dry_run_text: String::new(),
            resets_at_ms: None,
            on_retry: OnRetry::Release,
        });
        let mut inp = input(5);
        inp.gates = vec![
            Gate::Issues(BTreeMap::from([(
                "2".to_string(),
                HoldReason::ParkCommentsUnread,
            )])),
            Gate::Every(feature.clone()),
        ];
        let d = plan(&v, &inp, &mut unread);
        assert_eq!(d[0], Decision::Held(feature.clone()));
        assert_eq!(d[1], Decision::Held(HoldReason::ParkCommentsUnread));
        assert_eq!(feature.code().as_str(), "stage_hop_unconfirmed");
        assert_eq!(d[0].word(), "stage_hop_unconfirmed");
    }

    #[test]
    fn a_second_issue_with_a_claimed_identifier_is_held() {
        let twin = |id: &str| Issue {
            identifier: "C-1".into(),
            ..issue(id, None, "")
        };
        let got = plan(&[twin("a"), twin("b")], &input(5), &mut unread);
        assert_eq!(got[0], Decision::Dispatch);
        assert_eq!(
            got[1],
            Decision::Held(HoldReason::IdentifierInUse {
                by_issue_id: "a".into()
            })
        );
        let mut live = input(5);
        live.claimed_identifiers.insert("C-1".into(), "b".into());
        let got = plan(&[twin("a")], &live, &mut unread);
        assert_eq!(
            got[0].clone(),
            Decision::Held(HoldReason::IdentifierInUse {
                by_issue_id: "b".into()
            })
        );
    }

    fn unread_issue(id: &str) -> Issue {
        Issue {
            blockers_read: BlockersRead::Unread,
            ..issue(id, None, &format!("2026-01-0{id}"))
        }
    }

    fn blocker(id: &str, state: &str) -> BlockerRef {
        BlockerRef {
            id: id.into(),
            identifier: format!("T-{id}"),
            state: state.into(),
        }
    }

    /// A scripted reader: answers by issue id, records what it was asked, in order.
    struct Script {
        answers: BTreeMap<String, Result<Blockers, BlockerMiss>>,
        asked: Vec<String>,
    }

    impl Script {
        fn new(answers: &[(&str, Result<Blockers, BlockerMiss>)]) -> Script {
            Script {
                answers: answers
                    .iter()
                    .map(|(id, a)| (id.to_string(), a.clone()))
                    .collect(),
                asked: Vec::new(),
            }
        }

        fn read(&mut self, i: &Issue) -> Result<Blockers, BlockerMiss> {
            self.asked.push(i.id.clone());
            self.answers.get(&i.id).cloned().unwrap_or(Ok(Blockers {
                refs: Vec::new(),
                complete: true,
            }))
        }
    }

    fn plan_with(v: &[Issue], inp: &PassInput, script: &mut Script) -> Vec<Decision> {
        plan(v, inp, &mut |i: &Issue| script.read(i))
    }

    #[test]
    fn unread_lists_are_read_in_order_within_the_budget() {
        let v: Vec<Issue> = (1..=6).map(|n| unread_issue(&n.to_string())).collect();
        let open = Blockers {
            refs: vec![blocker("8", "Done"), blocker("9", "In Progress")],
            complete: true,
        };
        let mut script = Script::new(&[("1", Ok(open))]);
        let d = plan_with(&v, &input(10), &mut script);
        assert_eq!(script.asked, vec!["1", "2", "3", "4"]);
        assert_eq!(
            d[0],
            Decision::Held(HoldReason::BlockedBy(vec![blocker("9", "In Progress")]))
        );
        assert_eq!(
            &d[1..4],
            &[Decision::Dispatch, Decision::Dispatch, Decision::Dispatch]
        );
        assert_eq!(d[4], Decision::Held(HoldReason::BlockersNotRead));
        assert_eq!(d[5], Decision::Held(HoldReason::BlockersNotRead));
    }

    #[test]
    fn a_failed_read_ends_reads_for_the_rest_of_the_pass() {
        let mut v: Vec<Issue> = (1..=4).map(|n| unread_issue(&n.to_string())).collect();
        // A complete list needs no read and still dispatches after the failure.
        v[2].blockers_read = BlockersRead::Complete;
        let mut script = Script::new(&[("2", Err(BlockerMiss::Failed))]);
        let d = plan_with(&v, &input(10), &mut script);
        assert_eq!(script.asked, vec!["1", "2"]);
        assert_eq!(
            d,
            vec![
                Decision::Dispatch,
                Decision::Held(HoldReason::BlockersUnresolved),
                Decision::Dispatch,
                Decision::Held(HoldReason::BlockersUnresolved),
            ]
        );
    }

    #[test]
    fn a_full_slot_limit_holds_for_capacity_before_any_read() {
        let mut v: Vec<Issue> = (1..=3).map(|n| unread_issue(&n.to_string())).collect();
        v[2].state = "In Progress".into();
        let mut inp = input(3);
        inp.max_by_state.insert("in progress".into(), 0);
        let mut script = Script::new(&[]);
        let d = plan_with(&v, &inp, &mut script);
        // The per-state limit reads nothing for its issue; the global limit stops the pass.
        let mut script2 = Script::new(&[]);
        let full = plan_with(&v, &input(0), &mut script2);
        assert_eq!(script.asked, vec!["1", "2"]);
        assert_eq!(&d[..2], &[Decision::Dispatch, Decision::Dispatch]);
        assert!(
            matches!(&d[2], Decision::Held(HoldReason::AgentSlotsFull { .. })),
            "{d:?}"
        );
        assert!(script2.asked.is_empty());
        assert!(full.iter().all(|x| matches!(
            x,
            Decision::Held(HoldReason::AgentSlotsFull {
                scope: SlotScope::Global,
                ..
            })
        )));
    }

    #[test]
    fn an_incomplete_list_holds_unless_a_known_blocker_is_open() {
        let mut v = vec![
            issue("1", None, ""),
            issue("2", None, ""),
            unread_issue("3"),
        ];
        v[0].blockers_read = BlockersRead::Incomplete;
        v[1].blockers_read = BlockersRead::Incomplete;
        v[1].blocked_by = vec![blocker("9", "")];
        let incomplete = Blockers {
            refs: vec![blocker("8", "Done")],
            complete: false,
        };
        let mut script = Script::new(&[("3", Ok(incomplete))]);
        let d = plan_with(&v, &input(10), &mut script);
        assert_eq!(script.asked, vec!["3"]);
        assert_eq!(d[0], Decision::Held(HoldReason::BlockersIncomplete));
        assert_eq!(
            d[1],
            Decision::Held(HoldReason::BlockedBy(vec![blocker("9", "")]))
        );
        assert_eq!(d[2], Decision::Held(HoldReason::BlockersIncomplete));
    }
}
