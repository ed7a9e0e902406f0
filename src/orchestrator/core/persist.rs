//! The orchestrator's side of persistence: converts its in-memory records into store rows
//! and back. Durable writes go through the store's single writer thread (FIFO); a run is
//! recorded (row, events, aggregates, session) in one transaction before any retry for it is
//! scheduled.

use crate::domain::stage::{Route, StageLineage, StageOutcome};
use std::collections::HashMap;

use crate::agent::status_file::DeclaredOutcome;
use crate::clock::Clock;
use crate::config::Workflow;
use crate::domain::{Issue, OutcomeKind, RetryTrigger, RunStatus};
use crate::store::{
    IssueOutcome, ParkedIssue, RetryEntry, RunRecord, RunWrite, SessionMeta, Store, StoreError,
    StoredEvent,
};

use crate::pricing::RunPrice;

use super::state::{AgentTotals, Park, RetryInfo, RunningEntry};
use crate::orchestrator::claim::run_error::{BudgetStop, RunError};
pub use crate::orchestrator::core::run_record::PersistError;
use crate::orchestrator::core::run_record::{SupervisorExit, SupervisorResult};
use crate::orchestrator::features::agent_holds::UsageHold;
use crate::orchestrator::features::reactions::step::StoredRetryReaction;

/// What the warm start restores.
pub struct WarmStart {
    /// What pending reactions are rebuilt from.
    pub reactions: crate::store::ReactionsSnapshot,
    pub retries: Vec<RetryInfo>,
    pub totals: AgentTotals,
    pub parks: Vec<Park>,
    pub outcomes: HashMap<String, (OutcomeKind, String)>,
    pub acks: Vec<crate::store::AttentionAck>,
    pub usage_holds: Vec<UsageHold>,
    pub failure_holds: Vec<crate::orchestrator::claim::failure_holds::FailureHold>,
    pub stage_hops: Vec<crate::domain::stage::StageHop>,
    /// Each issue's count of withheld handoffs in a row.
    pub handoff_absence: Vec<(String, u32)>,
}

pub(crate) fn issue_from_parts(
    id: &str,
    identifier: &str,
    title: &str,
    url: &str,
    issue_type: &str,
    labels: &[String],
    state: &str,
) -> Issue {
    Issue {
        id: id.to_string(),
        identifier: identifier.to_string(),
        title: title.to_string(),
        url: url.to_string(),
        issue_type: issue_type.to_string(),
        labels: labels.to_vec(),
        state: state.to_string(),
        ..Default::default()
    }
}

/// A stored retry as the queue holds it.
fn retry_info_of(r: RetryEntry) -> RetryInfo {
    let stored = stored_reaction(&r);
    let route = route_of_retry(&r);
    RetryInfo {
        issue: issue_from_parts(
            &r.issue_id,
            &r.identifier,
            &r.issue_title,
            &r.issue_url,
            &r.issue_type,
            &r.issue_labels,
            &r.issue_state,
        ),
        attempt: r.attempt.max(0) as u32,
        due_at_ms: r.due_at_ms,
        error: r.error,
        session_id: r.session_id,
        // Rows written before triggers were recorded came from failed runs.
        trigger: r.trigger.unwrap_or(RetryTrigger::Error),
        // A put-back row reads `timer`; what first queued it is not stored.
        started_by: Some(r.trigger.unwrap_or(RetryTrigger::Error))
            .filter(|t| *t != RetryTrigger::Timer),
        dispatched_at_ms: r.dispatched_at_ms.unwrap_or(r.due_at_ms),
        route,
        reaction: stored.as_ref().map(|x| x.reaction()),
        reaction_context: stored.and_then(|x| x.context),
    }
}

pub fn load_warm_start(store: &Store) -> Result<WarmStart, PersistError> {
    let read = store
        .read_conn()
        .map_err(PersistError::store("open read connection"))?;
    let snap = read
        .warm_start_snapshot()
        .map_err(PersistError::store("read warm start"))?;
    let retries = snap.retries.into_iter().map(retry_info_of).collect();
    let t = snap.totals;
    let totals = AgentTotals {
        input_tokens: t.input_tokens.max(0) as u64,
        output_tokens: t.output_tokens.max(0) as u64,
        total_tokens: t.total_tokens.max(0) as u64,
        cache_read_tokens: t.cache_read_tokens.max(0) as u64,
        cache_write_tokens: t.cache_write_tokens.max(0) as u64,
        dispatches: t.dispatches.max(0) as u64,
        seconds_running: t.seconds_running,
        unmeasured_sessions: t.unmeasured_sessions.max(0) as u64,
    };
    let parks = snap
        .parks
        .into_iter()
        .map(|p| Park {
            issue: issue_from_parts(
                &p.issue_id,
                &p.identifier,
                &p.issue_title,
                &p.issue_url,
                &p.issue_type,
                &p.issue_labels,
                &p.parked_state,
            ),
            reason: p.reason,
            parked_at_ms: p.parked_at_ms,
            parked_state: p.parked_state,
            label: p.label,
            label_applied: p.label_applied,
            dispatched_at_ms: p.dispatched_at_ms,
            route: (!p.agent_kind.is_empty()).then(|| Route {
                rule_name: p.rule_name.clone(),
                agent_kind: p.agent_kind.clone(),
                configured_model: p.configured_model.clone(),
                ..Default::default()
            }),
        })
        .collect();
    let outcomes = snap
        .outcomes
        .into_iter()
        .map(|o| (o.issue_id, (o.kind, o.state)))
        .collect();
    let usage_holds = snap
        .usage_holds
        .into_iter()
        .map(|h| UsageHold {
            agent_kind: h.agent_kind,
            model_only: h.model_only,
            model: Some(h.model).filter(|m| !m.is_empty()),
            resets_at_ms: h.resets_at_ms,
            since_ms: h.since_ms,
        })
        .collect();
    let failure_holds = snap
        .failure_holds
        .into_iter()
        .map(failure_hold_of)
        .collect();
    Ok(WarmStart {
        failure_holds,
        reactions: snap.reactions,
        stage_hops: snap.stage_hops,
        handoff_absence: snap.handoff_absence,
        retries,
        totals,
        parks,
        outcomes,
        acks: snap.acknowledgements,
        usage_holds,
    })
}

/// A restored retry's reaction; an unreadable one is dropped with a warning (the retry then
/// runs as a plain continuation).
fn stored_reaction(r: &RetryEntry) -> Option<StoredRetryReaction> {
    let text = r.reaction_context.as_deref()?;
    match serde_json::from_str(text) {
        Ok(x) => Some(x),
        Err(e) => {
            log::warn!(
                issue_id:% = r.issue_id,
                issue_identifier:% = r.identifier,
                error:% = e.to_string();
                "stored reaction of a retry unreadable"
            );
            None
        }
    }
}

/// The agent kind a route runs: its own, or the workflow's for a route recorded without one.
pub(crate) fn route_kind<'a>(route: &'a Route, wf: &'a Workflow) -> &'a str {
    if route.agent_kind.is_empty() {
        &wf.config.agent.kind
    } else {
        &route.agent_kind
    }
}

fn lineage_previous(route: &Route) -> String {
    route
        .lineage
        .as_ref()
        .map(|l| l.previous.clone())
        .unwrap_or_default()
}

fn lineage_outcome(route: &Route) -> String {
    route
        .lineage
        .as_ref()
        .map(|l| l.previous_outcome.as_str().to_string())
        .unwrap_or_default()
}

/// The selection a stored retry carries (its lineage only when both members were stored).
fn route_of_retry(r: &RetryEntry) -> Route {
    let lineage = StageOutcome::parse(&r.stage_previous_outcome)
        .filter(|_| !r.stage_previous.is_empty())
        .map(|o| StageLineage {
            previous: r.stage_previous.clone(),
            previous_outcome: o,
        });
    Route {
        rule_name: r.rule_name.clone(),
        agent_kind: r.agent_kind.clone(),
        template: r.template.clone(),
        configured_model: r.configured_model.clone(),
        chain_id: r.chain_id.clone(),
        lineage,
    }
}

fn warn_on_err<T>(what: &str, r: Result<T, crate::store::StoreError>) {
    if let Err(e) = r {
        log::error!(op:% = what, error:% = e.to_string(); "database write failed");
    }
}

pub fn save_retry(store: &Store, r: &RetryInfo, wf: &Workflow) {
    let entry = RetryEntry {
        issue_id: r.issue.id.clone(),
        identifier: r.issue.identifier.clone(),
        display_identifier: r.issue.display_identifier.clone(),
        attempt: i64::from(r.attempt),
        due_at_ms: r.due_at_ms,
        error: r.error.clone(),
        session_id: r.session_id.clone(),
        agent_kind: route_kind(&r.route, wf).to_string(),
        template: r.route.template.clone(),
        rule_name: r.route.rule_name.clone(),
        configured_model: r.route.configured_model.clone(),
        chain_id: r.route.chain_id.clone(),
        stage_previous: lineage_previous(&r.route),
        stage_previous_outcome: lineage_outcome(&r.route),
        trigger: Some(r.trigger),
        issue_title: r.issue.title.clone(),
        issue_url: r.issue.url.clone(),
        issue_type: r.issue.issue_type.clone(),
        issue_labels: r.issue.labels.clone(),
        issue_state: r.issue.state.clone(),
        dispatched_at_ms: Some(r.dispatched_at_ms),
        reaction_kind: r
            .reaction
            .as_ref()
            .map(|x| x.kind.as_str().to_string())
            .unwrap_or_default(),
        reaction_config_key: r
            .reaction
            .as_ref()
            .map(|x| x.kind.config_key().to_string())
            .unwrap_or_default(),
        reaction_context: r.reaction.as_ref().and_then(|x| {
            let stored = StoredRetryReaction::new(x, r.reaction_context.as_ref());
            serde_json::to_string(&stored).ok()
        }),
    };
    warn_on_err("upsert_retry", store.writer().upsert_retry(entry));
}

pub fn delete_retry(store: &Store, issue_id: &str) {
    warn_on_err("delete_retry", store.writer().delete_retry(issue_id));
}

pub fn uncached_tokens_for_issue(store: &Store, issue_id: &str) -> Result<u64, PersistError> {
    store
        .writer()
        .uncached_tokens_for_issue(issue_id)
        .map(|n| n.max(0) as u64)
        .map_err(PersistError::store("sum uncached tokens"))
}

pub fn ping(store: &Store) -> Result<(), PersistError> {
    store.writer().ping().map_err(PersistError::store("ping"))
}

/// A database ping queued behind the writes before it; [`PendingPing::wait`] gives its answer.
pub struct PendingPing(Result<crossbeam_channel::Receiver<Result<(), StoreError>>, StoreError>);

/// Queues a ping without waiting for it: the writer answers once the writes queued before it
/// are applied, which may take a while when many are queued.
pub fn ping_queued(store: &Store) -> PendingPing {
    PendingPing(store.writer().ping_queued())
}

impl PendingPing {
    /// Waits for the writer's answer (a writer that ended answers `WriterGone`).
    pub fn wait(self) -> Result<(), PersistError> {
        let answer = match self.0 {
            Ok(rx) => rx.recv().unwrap_or(Err(StoreError::WriterGone)),
            Err(e) => Err(e),
        };
        answer.map_err(PersistError::store("ping"))
    }
}

pub fn shutdown(store: &Store) {
    warn_on_err("flush", store.writer().flush());
    warn_on_err("shutdown", store.writer().shutdown());
}

/// Applies every queued write, leaving the writer running for the other workflows that
/// share it.
pub fn flush(store: &Store) {
    warn_on_err("flush", store.writer().flush());
}

pub fn park(store: &Store, p: &Park) {
    warn_on_err(
        "park",
        store.writer().park(ParkedIssue {
            identifier: p.issue.identifier.clone(),
            label: p.label.clone(),
            label_applied: p.label_applied,
            parked_state: p.parked_state.clone(),
            parked_at_ms: p.parked_at_ms,
            issue_title: p.issue.title.clone(),
            issue_url: p.issue.url.clone(),
            issue_type: p.issue.issue_type.clone(),
            issue_labels: p.issue.labels.clone(),
            dispatched_at_ms: p.dispatched_at_ms,
            rule_name: p
                .route
                .as_ref()
                .map(|r| r.rule_name.clone())
                .unwrap_or_default(),
            agent_kind: p
                .route
                .as_ref()
                .map(|r| r.agent_kind.clone())
                .unwrap_or_default(),
            configured_model: p
                .route
                .as_ref()
                .map(|r| r.configured_model.clone())
                .unwrap_or_default(),
            ..ParkedIssue::new(p.issue.id.clone(), p.reason)
        }),
    );
}

fn failure_hold_of(
    r: crate::store::FailureHoldRow,
) -> crate::orchestrator::claim::failure_holds::FailureHold {
    crate::orchestrator::claim::failure_holds::FailureHold {
        issue: issue_from_parts(
            &r.issue_id,
            &r.identifier,
            &r.issue_title,
            &r.issue_url,
            "",
            &[],
            &r.issue_state,
        ),
        agent_kind: r.agent_kind,
        cause: r.cause,
        classified: r.classified,
        runs: r.runs,
        message: r.message,
        since_ms: r.since_ms,
    }
}

/// Stores a failure hold, so a restart keeps holding the issue.
pub fn save_failure_hold(
    store: &Store,
    h: &crate::orchestrator::claim::failure_holds::FailureHold,
) {
    let row = crate::store::FailureHoldRow {
        issue_id: h.issue.id.clone(),
        identifier: h.issue.identifier.clone(),
        issue_title: h.issue.title.clone(),
        issue_url: h.issue.url.clone(),
        issue_state: h.issue.state.clone(),
        agent_kind: h.agent_kind.clone(),
        cause: h.cause.clone(),
        classified: h.classified,
        runs: h.runs,
        message: crate::mask::mask(&h.message),
        since_ms: h.since_ms,
    };
    warn_on_err("save_failure_hold", store.writer().upsert_failure_hold(row));
}

/// Stores an issue's count of withheld handoffs in a row (0 removes it).
pub fn save_handoff_absence(store: &Store, issue_id: &str, withheld_in_a_row: u32, now_ms: i64) {
    warn_on_err(
        "save_handoff_absence",
        store
            .writer()
            .handoff_absence(crate::store::HandoffAbsenceWrite {
                issue_id: issue_id.to_string(),
                withheld_in_a_row,
                at_ms: now_ms,
            }),
    );
}

pub fn delete_failure_hold(store: &Store, issue_id: &str) {
    warn_on_err(
        "delete_failure_hold",
        store.writer().delete_failure_hold(issue_id.to_string()),
    );
}

pub fn unpark(store: &Store, issue_id: &str) {
    warn_on_err("unpark", store.writer().unpark(issue_id));
}

pub fn set_outcome(store: &Store, issue_id: &str, kind: OutcomeKind, state: &str) {
    warn_on_err(
        "set_outcome",
        store.writer().set_outcome(IssueOutcome {
            observed_at_ms: crate::clock::SystemClock.now_ms(),
            state: state.to_string(),
            ..IssueOutcome::new(issue_id, kind)
        }),
    );
}

pub fn clear_outcome(store: &Store, issue_id: &str) {
    warn_on_err("clear_outcome", store.writer().clear_outcome(issue_id));
}

/// What became of a run record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRecorded {
    /// Committed, with its run id.
    Committed(i64),
    /// The database could not take it; the writer keeps it in order and calls `on_commit`
    /// once it has committed. The text is the database's error.
    Kept(String),
}

/// Records a finished run with its events and session row; returns once committed, or once
/// kept for retry ([`RunRecorded::Kept`], `on_commit` runs when it commits). Any other
/// failure is an error: the record will never be written.
pub fn record_run_or_keep(
    store: &Store,
    wf: &Workflow,
    e: &RunningEntry,
    result: &SupervisorResult,
    status: RunStatus,
    price: &RunPrice,
    on_commit: crate::store::OnCommit,
) -> Result<RunRecorded, PersistError> {
    match store
        .writer()
        .record_or_keep(run_write(wf, e, result, status, price), on_commit)
    {
        Ok(o) => Ok(RunRecorded::Committed(o.run_id)),
        Err(StoreError::WriteKept { error }) => Ok(RunRecorded::Kept(error)),
        Err(e) => Err(PersistError::store("record run")(e)),
    }
}

/// The run's row, events and session row as one write; `price` is the session's spend priced
/// under the rates in force now, frozen on the row.
fn run_write(
    wf: &Workflow,
    e: &RunningEntry,
    result: &SupervisorResult,
    status: RunStatus,
    price: &RunPrice,
) -> RunWrite {
    let (error, declared, statement) = exit_fields(&result.exit, e.facts.budget_stop);
    let measured = e.facts.tokens_measured;
    let t = &e.facts.tokens;
    let n = |v: u64| if measured { v as i64 } else { 0 };
    let workspace = e
        .facts
        .workspace_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let run = RunRecord {
        issue_id: e.facts.issue.id.clone(),
        identifier: e.facts.issue.identifier.clone(),
        display_identifier: e.facts.issue.display_identifier.clone(),
        issue_title: e.facts.issue.title.clone(),
        issue_url: e.facts.issue.url.clone(),
        attempt: i64::from(e.facts.attempt) + 1,
        error: error.map(|s| crate::mask::mask(&s)),
        declared_outcome: declared.map(|d| d.token().to_string()),
        agent_text: statement.map(|s| crate::mask::mask(&s)),
        started_at_ms: e.facts.started_at_ms,
        completed_at_ms: result.ended_at_ms,
        dispatched_at_ms: Some(e.facts.dispatched_at_ms),
        workflow_file: wf.path.display().to_string(),
        agent_kind: route_kind(&e.facts.route, wf).to_string(),
        rule_name: e.facts.route.rule_name.clone(),
        template: e.facts.route.template.clone(),
        configured_model: e.facts.route.configured_model.clone(),
        chain_id: e.facts.route.chain_id.clone(),
        stage_previous: lineage_previous(&e.facts.route),
        stage_previous_outcome: lineage_outcome(&e.facts.route),
        hop_first: e.facts.hop_first,
        reported_model: e.facts.reported_model.clone().unwrap_or_default(),
        workspace,
        turns_completed: i64::from(result.turns_completed),
        input_tokens: n(t.input_tokens),
        output_tokens: n(t.output_tokens),
        total_tokens: n(t.total_tokens),
        cache_read_tokens: n(t.cache_read_tokens),
        cache_write_tokens: n(t.cache_write_tokens),
        tokens_measured: measured,
        unaccounted_turns: i64::from(e.facts.turns_without_figure),
        dispatch_id: Some(e.facts.dispatch_id.clone()),
        session_id: e.facts.session_id.clone(),
        review_metadata: e.facts.review_metadata.clone(),
        ssh_host: e.facts.ssh_host.clone(),
        trigger: run_trigger(e),
        reaction_kind: e
            .facts
            .reaction
            .as_ref()
            .map(|r| r.kind.as_str().to_string()),
        reaction_config_key: e
            .facts
            .reaction
            .as_ref()
            .map(|r| r.kind.config_key().to_string()),
        pr_record: result
            .pr_record
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok()),
        agent_blocked: declared == Some(DeclaredOutcome::Blocked),
        usage_completeness: if !measured {
            "unmeasured".into()
        } else if e.facts.turns_without_figure > 0 {
            "partial".into()
        } else {
            "complete".into()
        },
        ..usage_facts(
            e,
            route_kind(&e.facts.route, wf),
            RunRecord::new(status).with_price(price),
        )
    };
    let events = stored_events(e);
    // Always written, so the exit clears the dispatch id the live row carried (a row that
    // still names a dispatch at the next start counts as a session lost with its process).
    let session = Some(session_meta(
        e,
        wf,
        result.ended_at_ms,
        Some(status.as_str().to_string()),
        None,
    ));
    RunWrite {
        run,
        events,
        session,
    }
}

/// What a run records about where its usage came from: provenance, the amounts the agent
/// reported (ordered by unit, then model: the map's order; US-dollar amounts are kept for the
/// record and left out of the served `vendor_amounts`), and the cause of a
/// missing figure (the spend per model comes with the price).
fn usage_facts(e: &RunningEntry, agent_kind: &str, mut run: RunRecord) -> RunRecord {
    let measured = e.facts.tokens_measured;
    let caps = crate::registry::caps_for_kind(agent_kind);
    let provenance = caps.map(|c| c.provenance(measured)).unwrap_or_default();
    run.usage_provenance = serde_json::to_value(provenance).ok();
    let vendor: Vec<serde_json::Value> = e
        .facts
        .vendor_amounts
        .iter()
        .map(|((unit, model), amount)| {
            serde_json::json!({
                "unit": unit,
                "model": model,
                "amount": amount,
                "lower_bound": false,
            })
        })
        .collect();
    run.vendor_amounts = Some(serde_json::Value::Array(vendor));
    run.unmeasured_cause = (!measured).then(|| {
        if e.facts.vendor_amounts.is_empty() {
            run.status.unmeasured_cause().as_str().into()
        } else {
            crate::domain::UnmeasuredCause::AmountsOnly.as_str().into()
        }
    });
    run
}

/// What a run's exit records: the error text, the declared outcome and the agent's statement.
fn exit_fields(
    exit: &SupervisorExit,
    budget_stop: Option<BudgetStop>,
) -> (Option<String>, Option<DeclaredOutcome>, Option<String>) {
    let error = RunError::of_exit(exit, budget_stop).map(|e| e.stored());
    match exit {
        SupervisorExit::Normal {
            declared,
            statement,
        }
        | SupervisorExit::HandoffWithheld {
            declared,
            statement,
            ..
        } => (error, *declared, statement.clone()),
        SupervisorExit::Error { .. }
        | SupervisorExit::Cancelled { .. }
        | SupervisorExit::UsageLimited(_) => (error, None, None),
    }
}

/// The run's kept events as stored rows.
fn stored_events(e: &RunningEntry) -> Vec<StoredEvent> {
    e.facts
        .events
        .events
        .iter()
        .map(|(seq, ev, _)| StoredEvent {
            seq: *seq as i64,
            at_ms: ev.at_ms,
            event_type: ev.kind.type_name().to_string(),
            payload: serde_json::to_value(ev.as_ref()).unwrap_or(serde_json::Value::Null),
        })
        .collect()
}

/// Stores an acknowledgement; returns once committed.
pub fn acknowledge(
    store: &Store,
    ack: crate::store::AttentionAck,
) -> Result<crate::store::AttentionAck, PersistError> {
    store
        .writer()
        .acknowledge(ack)
        .map_err(PersistError::store("acknowledge"))
}

/// Budget usage of one issue.
pub fn usage_for_issue(
    store: &Store,
    issue_id: &str,
) -> Result<crate::store::IssueUsage, PersistError> {
    store
        .writer()
        .usage_for_issue(issue_id)
        .map_err(PersistError::store("read usage of issue"))
}

/// The SSH host the issue's newest run used (`None`: none, or it ran here).
pub fn last_ssh_host(
    store: &Store,
    key: crate::store::IssueKey,
    value: &str,
) -> Result<Option<String>, PersistError> {
    store
        .writer()
        .last_ssh_host(key, value)
        .map_err(PersistError::store("read last ssh host"))
}

/// Budget usage of every issue with runs (one query).
pub fn usage_by_issue(
    store: &Store,
) -> Result<HashMap<String, crate::store::IssueUsage>, PersistError> {
    store
        .writer()
        .usage_by_issue()
        .map_err(PersistError::store("read usage by issue"))
}

/// The recorded spend of the runs that ended in `[start_ms, end_ms)` (a spend window).
/// [`window_spend`] over every workflow of the database.
pub fn window_spend_all(
    store: &Store,
    start_ms: i64,
    end_ms: i64,
) -> Result<crate::store::RecordedSpend, PersistError> {
    store
        .writer()
        .window_spend_in(crate::store::Scope::All, start_ms, end_ms)
        .map_err(PersistError::store("read spend window of every workflow"))
}

pub fn window_spend(
    store: &Store,
    start_ms: i64,
    end_ms: i64,
) -> Result<crate::store::RecordedSpend, PersistError> {
    store
        .writer()
        .window_spend(start_ms, end_ms)
        .map_err(PersistError::store("read spend window"))
}

/// Keeps the issue's session row current while its session runs (tokens so far, the dispatch
/// that writes it), so that a process killed mid-run leaves its spend on record; the exit write
/// clears the dispatch id. Queued, not awaited.
pub fn write_live_session(store: &Store, e: &RunningEntry, wf: &Workflow, now_ms: i64) {
    warn_on_err(
        "upsert_session",
        store.writer().upsert_session(session_meta(
            e,
            wf,
            now_ms,
            None,
            Some(e.facts.dispatch_id.clone()),
        )),
    );
}

/// Queues the live session row of a dispatch without waiting for the disk; `committed` runs
/// on the writer thread with the outcome once the row is on record (or failed). Its agent is
/// started only after `committed` reported success: from then on the session counts toward
/// `max_sessions` whatever happens to sortie (a restart records a row left naming its dispatch
/// as an interrupted run, see `store::aggregates::absorb_lost_sessions`). The writer's FIFO
/// puts every later write of the session (live rows, the run record) behind this one.
pub fn write_started_session(
    store: &Store,
    e: &RunningEntry,
    wf: &Workflow,
    now_ms: i64,
    committed: impl FnOnce(Result<(), PersistError>) + Send + 'static,
) -> Result<(), PersistError> {
    let row = session_meta(e, wf, now_ms, None, Some(e.facts.dispatch_id.clone()));
    store
        .writer()
        .upsert_session_then(row, move |r| {
            committed(r.map_err(PersistError::store("record started session")))
        })
        .map_err(PersistError::store("record started session"))
}

/// Sessions the previous process left running, recorded as interrupted at open, whose
/// processes are still to be stopped.
pub fn interrupted_sessions(store: &Store) -> Result<Vec<SessionMeta>, PersistError> {
    store
        .writer()
        .interrupted_sessions()
        .map_err(PersistError::store("read interrupted sessions"))
}

pub fn session_recovered(store: &Store, issue_id: &str) {
    warn_on_err(
        "session_recovered",
        store.writer().session_recovered(issue_id),
    );
}

/// The issue's session row from its running entry. Unmeasured tokens are stored as 0 (the row's
/// existence says nothing about measurement; run history carries the flag).
fn session_meta(
    e: &RunningEntry,
    wf: &Workflow,
    updated_at_ms: i64,
    exit_type: Option<String>,
    dispatch_id: Option<String>,
) -> SessionMeta {
    let t = &e.facts.tokens;
    let n = |v: u64| if e.facts.tokens_measured { v as i64 } else { 0 };
    SessionMeta {
        issue_id: e.facts.issue.id.clone(),
        session_id: e.facts.session_id.clone().unwrap_or_default(),
        agent_pid: e.facts.agent_pid.map(|p| p.to_string()),
        input_tokens: n(t.input_tokens),
        output_tokens: n(t.output_tokens),
        total_tokens: n(t.total_tokens),
        cache_read_tokens: n(t.cache_read_tokens),
        cache_write_tokens: n(t.cache_write_tokens),
        model_name: e.facts.reported_model.clone().unwrap_or_default(),
        api_request_count: e.facts.api_request_count as i64,
        api_requests_measured: true,
        started_at_ms: Some(e.facts.started_at_ms),
        updated_at_ms,
        // The group is recorded only while the session runs (the exit write clears it).
        agent_pgid: dispatch_id
            .as_ref()
            .and(e.facts.agent_group)
            .map(|(pgid, _)| i64::from(pgid)),
        agent_start_ticks: dispatch_id
            .as_ref()
            .and(e.facts.agent_group)
            .and_then(|(_, ticks)| i64::try_from(ticks).ok()),
        identifier: e.facts.issue.identifier.clone(),
        attempt: i64::from(e.facts.attempt),
        workspace: e
            .facts
            .workspace_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        agent_kind: route_kind(&e.facts.route, wf).to_string(),
        workflow_file: wf.path.display().to_string(),
        sortie_instance: crate::process_signal::orphans::instance_id(),
        recovery_pending: false,
        exit_type,
        dispatch_id,
    }
}

/// The run's `trigger`: "" for a run a review, bot review, merge conflict or label command
/// reaction started (the reaction names it), else what dispatched it.
fn run_trigger(e: &RunningEntry) -> Option<String> {
    match &e.facts.reaction {
        Some(r) if r.kind != crate::domain::ReactionKind::Ci => Some(String::new()),
        _ => e.facts.cause.trigger_word().map(str::to_string),
    }
}

/// Records a `merged` outcome: which reaction saw the merge and the pull request.
pub fn set_merged_outcome(
    store: &Store,
    issue_id: &str,
    merge_path: &str,
    pr: &crate::scm::PullRequestRef,
) {
    warn_on_err(
        "set_outcome",
        store.writer().set_outcome(IssueOutcome {
            observed_at_ms: crate::clock::SystemClock.now_ms(),
            merge_path: merge_path.to_string(),
            pr_number: i64::try_from(pr.number).ok(),
            pr_repository: pr.repository(),
            ..IssueOutcome::new(issue_id, OutcomeKind::Merged)
        }),
    );
}

/// A reaction write (escalations, fingerprints, given comments).
pub fn reaction_write(store: &Store, w: crate::store::ReactionWrite) {
    warn_on_err("reaction", store.writer().reaction(w));
}
