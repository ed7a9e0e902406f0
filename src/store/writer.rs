//! The single writer thread. It owns the only read-write connection; every write arrives as a
//! `DbCmd` on one FIFO channel, so writes are serialized in the order the orchestrator issued
//! them and a read sent through the same channel observes every earlier write. It also owns
//! the events whose write failed and retries them on their schedule, and the writes the
//! database could not take (`write_backlog`): those are kept in order and retried until they
//! succeed, every later write queues behind them, and `ping` fails meanwhile.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use rusqlite::Connection;

use super::attention::{self, AttentionAck};
use super::error::{SqlContext, StoreError};
use super::event_retry::{EventRetryBuffer, PendingEvents, PendingSummary};
use super::events::{EventLimits, StoredEvent};
use super::failure_holds::{self, FailureHoldRow};
use super::handoff_absence::{self, HandoffAbsenceWrite};
use super::live_figures;
use super::outcomes::{self, IssueOutcome};
use super::parks::{self, ParkedIssue};
use super::reactions::{self, ReactionWrite};
use super::record::{self, RecordOutcome, RunWrite};
use super::retry::{self, RetryEntry};
use super::runs::RunRecord;
use super::scope::Scope;
use super::scrub::{self, Scrub};
use super::sessions::{self, SessionMeta};
use super::stage_hops::{self, StageHopWrite};
use super::usage_holds::{self, UsageHoldRow};
use super::write_backlog::WriteBacklog;
use crate::clock::Clock;

/// Longest idle wait while event retries are pending, so a wall-clock jump is noticed.
const MAX_IDLE_WAIT: Duration = Duration::from_secs(60);
/// Most queued writes committed together in one transaction.
const MAX_GROUP: usize = 512;

type Reply<T> = Sender<Result<T, StoreError>>;
type QueryFn = Box<dyn FnOnce(&Connection) + Send>;
/// Called on the writer thread once a run record that was kept for retry has committed.
pub type OnCommit = Box<dyn FnOnce(RecordOutcome) + Send>;

/// A write the writer may keep for retry, with the workflow it writes.
pub struct WriteOp {
    wf: Arc<str>,
    op: Op,
}

/// What a [`WriteOp`] writes.
enum Op {
    UpsertRetry(RetryEntry),
    DeleteRetry(String),
    Record(Box<RunWrite>, Option<OnCommit>),
    UpsertSession(SessionMeta),
    Park(ParkedIssue),
    Unpark(String),
    SetOutcome(IssueOutcome),
    ClearOutcome(String),
    DeleteAcks(Vec<String>),
    UpsertUsageHold(UsageHoldRow),
    DeleteUsageHold(UsageHoldRow),
    UpsertFailureHold(FailureHoldRow),
    DeleteFailureHold(String),
    Reaction(ReactionWrite),
    StageHop(StageHopWrite),
    HandoffAbsence(HandoffAbsenceWrite),
}

impl WriteOp {
    fn describe(&self) -> (&'static str, &str) {
        self.op.describe()
    }
}

impl Op {
    fn describe(&self) -> (&'static str, &str) {
        match self {
            Op::UpsertRetry(e) => ("save retry entry", &e.issue_id),
            Op::DeleteRetry(id) => ("delete retry entry", id),
            Op::Record(w, _) => ("record run", &w.run.issue_id),
            Op::UpsertSession(s) => ("save session metadata", &s.issue_id),
            Op::Park(p) => ("save parked issue", &p.issue_id),
            Op::Unpark(id) => ("delete parked issue", id),
            Op::SetOutcome(o) => ("save issue outcome", &o.issue_id),
            Op::ClearOutcome(id) => ("clear issue outcome", id),
            Op::DeleteAcks(_) => ("delete acknowledgements", ""),
            Op::UpsertUsageHold(h) => ("save usage hold", &h.agent_kind),
            Op::DeleteUsageHold(h) => ("delete usage hold", &h.agent_kind),
            Op::UpsertFailureHold(h) => ("save failure hold", &h.issue_id),
            Op::DeleteFailureHold(id) => ("delete failure hold", id),
            Op::Reaction(w) => ("save reaction state", w.issue_id()),
            Op::StageHop(w) => ("save stage hop", w.key()),
            Op::HandoffAbsence(w) => ("save handoff absence count", &w.issue_id),
        }
    }
}

/// A command for the writer thread. Commands without a reply log their failures at WARN.
pub enum DbCmd {
    /// A write that is not awaited (failures are logged at WARN).
    Write(Box<WriteOp>),
    /// A run record of a workflow; when it is kept for retry the reply is
    /// [`StoreError::WriteKept`] and the `OnCommit` runs once it commits.
    RecordRun(
        Arc<str>,
        Box<RunWrite>,
        Reply<RecordOutcome>,
        Option<OnCommit>,
    ),
    /// An outcome observation, answered with whether it replaced the stored one.
    SetOutcomeWait(Arc<str>, IssueOutcome, Reply<bool>),
    Acknowledge(Arc<str>, AttentionAck, Reply<AttentionAck>),
    /// Runs a read on the writer's connection, after every earlier write.
    Query(QueryFn),
    PendingEvents(Reply<Vec<PendingSummary>>),
    Ping(Reply<()>),
    Flush(Reply<()>),
    Shutdown(Reply<()>),
}

/// A cloneable handle to the writer thread.
#[derive(Clone)]
pub struct WriterHandle {
    tx: Sender<DbCmd>,
    /// The workflow every write of this handle stores and every read filters by.
    workflow: Arc<str>,
}

impl WriterHandle {
    /// The same writer, writing `workflow`'s rows.
    pub(crate) fn scoped(&self, workflow: Arc<str>) -> WriterHandle {
        WriterHandle {
            tx: self.tx.clone(),
            workflow,
        }
    }

    /// The workflow this handle writes.
    pub fn workflow(&self) -> &str {
        &self.workflow
    }

    fn send(&self, cmd: DbCmd) -> Result<(), StoreError> {
        self.tx.send(cmd).map_err(|_| StoreError::WriterGone)
    }

    fn write(&self, op: Op) -> Result<(), StoreError> {
        self.send(DbCmd::Write(Box::new(WriteOp {
            wf: self.workflow.clone(),
            op,
        })))
    }

    fn scope(&self) -> Scope {
        Scope::One(self.workflow.clone())
    }

    fn call<T>(&self, make: impl FnOnce(Reply<T>) -> DbCmd) -> Result<T, StoreError> {
        let (tx, rx) = bounded(1);
        self.send(make(tx))?;
        rx.recv().map_err(|_| StoreError::WriterGone)?
    }

    /// Queues a retry upsert (not awaited; failures are logged).
    pub fn upsert_retry(&self, entry: RetryEntry) -> Result<(), StoreError> {
        self.write(Op::UpsertRetry(entry))
    }
    pub fn delete_retry(&self, issue_id: &str) -> Result<(), StoreError> {
        self.write(Op::DeleteRetry(issue_id.to_string()))
    }
    /// Records a finished run with its events and aggregate increments; returns once committed
    /// (the run is durable from then on) with the new run id.
    pub fn record_run(&self, run: RunRecord, events: Vec<StoredEvent>) -> Result<i64, StoreError> {
        self.record(RunWrite {
            run,
            events,
            session: None,
        })
        .map(|o| o.run_id)
    }
    /// [`record_run`](Self::record_run) with the session row and the full outcome.
    pub fn record(&self, write: RunWrite) -> Result<RecordOutcome, StoreError> {
        let wf = self.workflow.clone();
        self.call(|r| DbCmd::RecordRun(wf, Box::new(write), r, None))
    }
    /// [`record`](Self::record); when the database cannot take it now the answer is
    /// [`StoreError::WriteKept`]: the record is kept in order and `on_commit` runs (on the
    /// writer thread) once it has committed.
    pub fn record_or_keep(
        &self,
        write: RunWrite,
        on_commit: OnCommit,
    ) -> Result<RecordOutcome, StoreError> {
        let wf = self.workflow.clone();
        self.call(|r| DbCmd::RecordRun(wf, Box::new(write), r, Some(on_commit)))
    }
    pub fn upsert_session(&self, session: SessionMeta) -> Result<(), StoreError> {
        self.write(Op::UpsertSession(session))
    }
    pub fn park(&self, parked: ParkedIssue) -> Result<(), StoreError> {
        self.write(Op::Park(parked))
    }
    pub fn unpark(&self, issue_id: &str) -> Result<(), StoreError> {
        self.write(Op::Unpark(issue_id.to_string()))
    }
    /// Queues an outcome observation (replacement rules apply; failures are logged).
    pub fn set_outcome(&self, outcome: IssueOutcome) -> Result<(), StoreError> {
        self.write(Op::SetOutcome(outcome))
    }
    /// Records an outcome observation and waits; returns whether it replaced the stored one.
    pub fn set_outcome_wait(&self, outcome: IssueOutcome) -> Result<bool, StoreError> {
        let wf = self.workflow.clone();
        self.call(|r| DbCmd::SetOutcomeWait(wf, outcome, r))
    }
    pub fn clear_outcome(&self, issue_id: &str) -> Result<(), StoreError> {
        self.write(Op::ClearOutcome(issue_id.to_string()))
    }
    /// Stores an acknowledgement and returns once committed, with the stored row (the first
    /// acknowledgement's time is kept).
    pub fn acknowledge(&self, ack: AttentionAck) -> Result<AttentionAck, StoreError> {
        let wf = self.workflow.clone();
        self.call(|r| DbCmd::Acknowledge(wf, ack, r))
    }
    pub fn delete_acks(&self, item_ids: Vec<String>) -> Result<(), StoreError> {
        self.write(Op::DeleteAcks(item_ids))
    }
    /// Queues a usage hold's save (the later reset wins for a stored scope).
    pub fn upsert_usage_hold(&self, hold: UsageHoldRow) -> Result<(), StoreError> {
        self.write(Op::UpsertUsageHold(hold))
    }
    pub fn delete_usage_hold(&self, hold: UsageHoldRow) -> Result<(), StoreError> {
        self.write(Op::DeleteUsageHold(hold))
    }
    /// Queues a failure hold's save (one row per issue; a new hold replaces the old).
    pub fn upsert_failure_hold(&self, hold: FailureHoldRow) -> Result<(), StoreError> {
        self.write(Op::UpsertFailureHold(hold))
    }
    pub fn delete_failure_hold(&self, issue_id: String) -> Result<(), StoreError> {
        self.write(Op::DeleteFailureHold(issue_id))
    }
    pub fn stage_hop(&self, w: StageHopWrite) -> Result<(), StoreError> {
        self.write(Op::StageHop(w))
    }
    pub fn reaction(&self, w: ReactionWrite) -> Result<(), StoreError> {
        self.write(Op::Reaction(w))
    }
    /// Queues an issue's count of withheld handoffs in a row (0 removes it).
    pub fn handoff_absence(&self, w: HandoffAbsenceWrite) -> Result<(), StoreError> {
        self.write(Op::HandoffAbsence(w))
    }
    /// Runs `f` on the writer's connection after every earlier command (read-your-writes).
    pub fn query<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = bounded(1);
        self.send(DbCmd::Query(Box::new(move |conn| {
            let _ = tx.send(f(conn));
        })))?;
        rx.recv().map_err(|_| StoreError::WriterGone)?
    }
    /// Sessions spent by the issue, after every earlier write.
    pub fn count_runs_for_issue(&self, issue_id: &str) -> Result<i64, StoreError> {
        let id = issue_id.to_string();
        let sc = self.scope();
        self.query(move |c| super::runs::count_for_issue(c, &sc, &id))
    }
    /// Uncached tokens the issue spent, after every earlier write.
    pub fn uncached_tokens_for_issue(&self, issue_id: &str) -> Result<i64, StoreError> {
        let id = issue_id.to_string();
        let sc = self.scope();
        self.query(move |c| super::runs::uncached_tokens_for_issue(c, &sc, &id))
    }
    /// Folds sessions left running by a killed process into the counters (see
    /// `aggregates::absorb_lost_sessions`); returns how many there were.
    pub fn absorb_lost_sessions(
        &self,
        now_ms: i64,
        book: std::sync::Arc<crate::pricing::RateBook>,
    ) -> Result<i64, StoreError> {
        let wf = self.workflow.clone();
        self.query(move |c| super::aggregates::absorb_lost_sessions(c, &wf, now_ms, &book))
    }
    /// Saves a session row and returns once it is committed (the dispatch's row, which must be
    /// on record before the agent is spawned).
    pub fn upsert_session_wait(&self, session: SessionMeta) -> Result<(), StoreError> {
        let wf = self.workflow.clone();
        self.query(move |c| sessions::upsert(c, &wf, &session))
    }
    /// Queues a session row without waiting; `done` gets the outcome on the writer thread once
    /// it is committed (or failed), after every earlier write.
    pub fn upsert_session_then(
        &self,
        session: SessionMeta,
        done: impl FnOnce(Result<(), StoreError>) + Send + 'static,
    ) -> Result<(), StoreError> {
        let wf = self.workflow.clone();
        self.send(DbCmd::Query(Box::new(move |c| {
            done(sessions::upsert(c, &wf, &session))
        })))
    }
    /// Sessions a restart recorded as interrupted whose processes are not stopped yet.
    pub fn interrupted_sessions(&self) -> Result<Vec<SessionMeta>, StoreError> {
        let sc = self.scope();
        self.query(move |c| sessions::recovery_pending(c, &sc))
    }
    /// Marks an interrupted session's processes as stopped; returns once committed.
    pub fn session_recovered(&self, issue_id: &str) -> Result<(), StoreError> {
        let id = issue_id.to_string();
        let wf = self.workflow.clone();
        self.query(move |c| sessions::recovered(c, &wf, &id))
    }
    /// Budget usage of one issue, after every earlier write.
    pub fn usage_for_issue(&self, issue_id: &str) -> Result<super::runs::IssueUsage, StoreError> {
        let id = issue_id.to_string();
        let sc = self.scope();
        self.query(move |c| super::runs::usage_for_issue(c, &sc, &id))
    }
    /// The SSH host of the issue's newest run, after every earlier write.
    pub fn last_ssh_host(
        &self,
        key: super::runs::IssueKey,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        let value = value.to_string();
        let sc = self.scope();
        self.query(move |c| super::runs::last_ssh_host(c, &sc, key, &value))
    }
    /// Budget usage of every issue with runs, after every earlier write.
    pub fn usage_by_issue(
        &self,
    ) -> Result<std::collections::HashMap<String, super::runs::IssueUsage>, StoreError> {
        let sc = self.scope();
        self.query(move |c| super::runs::usage_by_issue(c, &sc))
    }
    /// The recorded spend of the runs that ended in `[start_ms, end_ms)` (a spend window),
    /// after every earlier write.
    pub fn window_spend(
        &self,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<super::spend_window::RecordedSpend, StoreError> {
        self.window_spend_in(self.scope(), start_ms, end_ms)
    }
    /// [`window_spend`](Self::window_spend) of `scope` (every workflow, for a shared ceiling).
    pub fn window_spend_in(
        &self,
        scope: Scope,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<super::spend_window::RecordedSpend, StoreError> {
        self.query(move |c| super::spend_window::window_spend(c, &scope, start_ms, end_ms))
    }
    /// What the unnamed (single) workflow left in the database.
    pub fn unnamed_rows(&self) -> Result<super::adopt::UnnamedRows, StoreError> {
        self.query(super::adopt::unnamed_rows)
    }
    /// Moves the unnamed workflow's rows to `name` (`None`: `name` has rows already, nothing
    /// moved).
    pub fn adopt_unnamed(&self, name: &str) -> Result<Option<i64>, StoreError> {
        let name = name.to_string();
        self.query(move |c| super::adopt::adopt_unnamed(c, &name))
    }
    /// Runs whose events await a retried write.
    pub fn pending_event_writes(&self) -> Result<Vec<PendingSummary>, StoreError> {
        self.call(DbCmd::PendingEvents)
    }
    /// Checks the database answers and takes writes (health): fails with
    /// [`StoreError::WritesFailing`] while failed writes are kept for retry.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.call(DbCmd::Ping)
    }
    /// Queues a ping without waiting: the answer arrives on the returned channel once every
    /// earlier command has been applied, so a caller that must not block reads it later.
    pub fn ping_queued(&self) -> Result<Receiver<Result<(), StoreError>>, StoreError> {
        let (tx, rx) = bounded(1);
        self.send(DbCmd::Ping(tx))?;
        Ok(rx)
    }
    /// Returns once every earlier command has been applied.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.call(DbCmd::Flush)
    }
    /// Applies every earlier command, drops events still awaiting a retry (WARN), stops.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        self.call(DbCmd::Shutdown)
    }
}

/// Starts the writer thread on `conn`; a requested scrub pass (`store::scrub`) runs on it a
/// batch at a time whenever no command is waiting.
pub(crate) fn spawn(
    conn: Connection,
    clock: Arc<dyn Clock>,
    limits: EventLimits,
    retry_buffer_bytes: usize,
) -> Result<(WriterHandle, JoinHandle<()>), StoreError> {
    let (tx, rx) = unbounded();
    let scrub = if scrub::requested(&conn)? {
        log::info!(
            secrets_known:% = crate::mask::secrets().len();
            "database scrub started: every stored text is rewritten through the secret masker, a batch at a time"
        );
        Some(Scrub::start(&conn)?)
    } else {
        None
    };
    let writer = Writer {
        conn,
        clock,
        limits,
        pending: EventRetryBuffer::with_capacity(retry_buffer_bytes),
        backlog: WriteBacklog::default(),
        scrub,
    };
    let join = std::thread::Builder::new()
        .name("db-writer".into())
        .spawn(move || writer.run(rx))
        .map_err(|e| StoreError::Open {
            path: "db-writer thread".into(),
            source: Box::new(e),
        })?;
    Ok((
        WriterHandle {
            tx,
            workflow: Arc::from(""),
        },
        join,
    ))
}

struct Writer {
    conn: Connection,
    clock: Arc<dyn Clock>,
    limits: EventLimits,
    pending: EventRetryBuffer,
    backlog: WriteBacklog<WriteOp>,
    /// A scrub pass in progress: it advances only while no command waits.
    scrub: Option<Scrub>,
}

impl Writer {
    fn run(mut self, rx: Receiver<DbCmd>) {
        let mut carried: Option<DbCmd> = None;
        loop {
            self.retry_due_events();
            self.retry_backlog();
            if let Some(cmd) = carried.take() {
                if let DbCmd::Shutdown(reply) = cmd {
                    self.pending.drop_all("shutdown");
                    self.drop_backlog("shutdown");
                    let _ = reply.send(Ok(()));
                    return;
                }
                carried = self.timed_dispatch(cmd, &rx);
                continue;
            }
            if self.scrub.is_some() && self.backlog.is_empty() && rx.is_empty() {
                self.scrub_step();
                continue;
            }
            let next_due = match (self.pending.next_due_ms(), self.backlog.next_due_ms()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let cmd = match next_due {
                Some(due) => {
                    let wait =
                        (due - self.clock.now_ms()).clamp(0, MAX_IDLE_WAIT.as_millis() as i64);
                    match rx.recv_timeout(Duration::from_millis(wait as u64)) {
                        Ok(cmd) => cmd,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(cmd) => cmd,
                    Err(_) => break,
                },
            };
            // Due retries run before the command, so a caller that advanced a clock and then
            // pinged observes them.
            self.retry_due_events();
            self.retry_backlog();
            if let DbCmd::Shutdown(reply) = cmd {
                self.pending.drop_all("shutdown");
                self.drop_backlog("shutdown");
                let _ = reply.send(Ok(()));
                return;
            }
            carried = self.timed_dispatch(cmd, &rx);
        }
        self.pending.drop_all("writer stopped");
        self.drop_backlog("writer stopped");
    }

    fn handle(&mut self, cmd: DbCmd) {
        match cmd {
            DbCmd::Write(op) => self.write(*op),
            DbCmd::RecordRun(wf, w, reply, on_commit) => {
                let r = self.record_or_keep(wf, w, on_commit);
                let _ = reply.send(r);
            }
            DbCmd::SetOutcomeWait(wf, o, reply) => {
                let r = if self.backlog.is_empty() {
                    match outcomes::set(&self.conn, &wf, &o) {
                        Err(e) if e.is_transient() => {
                            let error = e.to_string();
                            self.keep(
                                WriteOp {
                                    wf,
                                    op: Op::SetOutcome(o),
                                },
                                error.clone(),
                            );
                            Err(StoreError::WriteKept { error })
                        }
                        r => r,
                    }
                } else {
                    self.backlog.push_behind(WriteOp {
                        wf,
                        op: Op::SetOutcome(o),
                    });
                    Err(self.kept_error())
                };
                let _ = reply.send(r);
            }
            DbCmd::Acknowledge(wf, a, reply) => {
                let _ = reply.send(attention::acknowledge(&self.conn, &wf, &a));
            }
            DbCmd::Query(f) => f(&self.conn),
            DbCmd::PendingEvents(reply) => {
                let _ = reply.send(Ok(self.pending.summaries()));
            }
            DbCmd::Ping(reply) => {
                let r = self
                    .conn
                    .query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                    .ctx("ping database")
                    .map(|_| ());
                let r = match (r, self.backlog.failure()) {
                    (Ok(()), Some(f)) => Err(StoreError::WritesFailing {
                        since_ms: f.since_ms,
                        pending: f.pending,
                        error: f.error,
                    }),
                    (r, _) => r,
                };
                let _ = reply.send(r);
            }
            DbCmd::Flush(reply) => {
                let _ = reply.send(Ok(()));
            }
            DbCmd::Shutdown(reply) => {
                let _ = reply.send(Ok(()));
            }
        }
    }

    /// [`Writer::dispatch`], timed for `sortie_store_command_duration_seconds`.
    fn timed_dispatch(&mut self, cmd: DbCmd, rx: &Receiver<DbCmd>) -> Option<DbCmd> {
        let started = std::time::Instant::now();
        let carried = self.dispatch(cmd, rx);
        super::write_latency::observe(started.elapsed());
        carried
    }

    /// Handles one command; a write also takes the writes already queued behind it (see
    /// [`Writer::write_group`]). Returns the command that ended the group, to handle next.
    fn dispatch(&mut self, cmd: DbCmd, rx: &Receiver<DbCmd>) -> Option<DbCmd> {
        match cmd {
            DbCmd::Write(op) => self.write_group(*op, rx),
            cmd => {
                self.handle(cmd);
                None
            }
        }
    }

    /// Writes already waiting in the channel commit together: one transaction, so one sync
    /// to disk, for a burst (a restart firing a thousand retries) instead of one per write.
    /// Order is kept: the group stops at the first command that is not a plain write. If
    /// anything in the group fails transiently, or the commit fails, the group is rolled back
    /// and its writes are replayed one by one, which keeps exactly the writes a lone write
    /// would have kept.
    fn write_group(&mut self, first: WriteOp, rx: &Receiver<DbCmd>) -> Option<DbCmd> {
        let mut ops = vec![first];
        let mut carried = None;
        while ops.len() < MAX_GROUP {
            let Ok(cmd) = rx.try_recv() else { break };
            match cmd {
                DbCmd::Write(op) => ops.push(*op),
                cmd => {
                    carried = Some(cmd);
                    break;
                }
            }
        }
        if ops.len() == 1 || !self.backlog.is_empty() || !self.commit_group(&ops) {
            for op in ops {
                self.write(op);
            }
        }
        carried
    }

    /// Applies `ops` in one transaction; `false` (rolled back) when any failed transiently
    /// or the commit failed. A write that fails for good is logged and skipped, as alone.
    fn commit_group(&mut self, ops: &[WriteOp]) -> bool {
        if self.conn.execute_batch("BEGIN IMMEDIATE").is_err() {
            return false;
        }
        let mut applied = Vec::with_capacity(ops.len());
        for op in ops {
            match self.run_op(op) {
                Ok(()) => applied.push(op),
                Err(e) if e.is_transient() => return self.rollback(),
                Err(e) => {
                    let (what, issue_id) = op.describe();
                    warn_failed(what, issue_id, Err(e));
                }
            }
        }
        match self.conn.execute_batch("COMMIT") {
            Ok(()) => {
                applied.into_iter().for_each(committed);
                true
            }
            Err(_) => self.rollback(),
        }
    }

    fn rollback(&mut self) -> bool {
        if let Err(e) = self.conn.execute_batch("ROLLBACK") {
            log::debug!(error:% = e.to_string(); "rollback of a write group");
        }
        false
    }

    /// Applies one write, or queues it behind kept ones; a transient failure keeps it.
    fn write(&mut self, op: WriteOp) {
        if !self.backlog.is_empty() {
            self.backlog.push_behind(op);
            return;
        }
        if let Err(failed) = self.apply(op) {
            let (op, e) = *failed;
            self.keep(op, e.to_string());
        }
    }

    /// A run record: committed, kept for retry (`WriteKept`) or failed for good.
    fn record_or_keep(
        &mut self,
        wf: Arc<str>,
        w: Box<RunWrite>,
        on_commit: Option<OnCommit>,
    ) -> Result<RecordOutcome, StoreError> {
        if !self.backlog.is_empty() {
            self.backlog.push_behind(WriteOp {
                wf,
                op: Op::Record(w, on_commit),
            });
            return Err(self.kept_error());
        }
        match self.record_run(&wf, &w) {
            Ok(o) => Ok(o),
            Err(e) if e.is_transient() => {
                let error = e.to_string();
                let op = Op::Record(w, on_commit);
                self.keep(WriteOp { wf, op }, error.clone());
                Err(StoreError::WriteKept { error })
            }
            Err(e) => Err(e),
        }
    }

    fn kept_error(&self) -> StoreError {
        StoreError::WriteKept {
            error: self.backlog.failure().map(|f| f.error).unwrap_or_default(),
        }
    }

    /// Keeps a write that failed transiently (ERROR: the database is not taking writes).
    fn keep(&mut self, op: WriteOp, error: String) {
        let (what, issue_id) = op.describe();
        log::error!(
            op:% = what,
            issue_id:% = issue_id,
            pending:% = self.backlog.len() + 1,
            error:% = error;
            "database write failed, kept for retry"
        );
        self.backlog.push_failed(op, error, self.clock.now_ms());
    }

    /// Runs one write. A transient failure hands the op back (to be kept); any other is
    /// logged and the write dropped (it would fail the same way again).
    fn apply(&mut self, op: WriteOp) -> Result<(), Box<(WriteOp, StoreError)>> {
        match self.run_op(&op) {
            Ok(()) => {
                committed(&op);
                Ok(())
            }
            Err(e) if e.is_transient() => Err(Box::new((op, e))),
            Err(e) => {
                let (what, issue_id) = op.describe();
                warn_failed(what, issue_id, Err(e));
                Ok(())
            }
        }
    }

    fn run_op(&mut self, w: &WriteOp) -> Result<(), StoreError> {
        let (c, wf) = (&self.conn, &*w.wf);
        match &w.op {
            Op::UpsertRetry(e) => retry::upsert(c, wf, e),
            Op::DeleteRetry(id) => retry::delete(c, wf, id),
            Op::Record(r, _) => self.record_run(wf, r).map(|_| ()),
            Op::UpsertSession(s) => sessions::upsert(c, wf, s),
            Op::Park(p) => parks::park(c, wf, p),
            Op::Unpark(id) => parks::unpark(c, wf, id),
            Op::SetOutcome(o) => outcomes::set(c, wf, o).map(|_| ()),
            Op::ClearOutcome(id) => outcomes::clear(c, wf, id),
            Op::DeleteAcks(ids) => attention::delete(c, wf, ids).map(|_| ()),
            Op::UpsertUsageHold(h) => usage_holds::upsert(c, wf, h),
            Op::DeleteUsageHold(h) => usage_holds::delete(c, wf, h),
            Op::UpsertFailureHold(h) => failure_holds::upsert(c, wf, h),
            Op::DeleteFailureHold(id) => failure_holds::delete(c, wf, id),
            Op::Reaction(r) => reactions::apply(c, wf, r),
            Op::StageHop(h) => stage_hops::apply(c, wf, h),
            Op::HandoffAbsence(h) => handoff_absence::apply(c, wf, h),
        }
    }

    /// Retries kept writes, oldest first, while they succeed. A committed run record's
    /// `OnCommit` runs with its outcome.
    fn retry_backlog(&mut self) {
        loop {
            let now = self.clock.now_ms();
            let Some(op) = self.backlog.take_due(now) else {
                return;
            };
            let WriteOp { wf, op } = op;
            let r = match op {
                Op::Record(w, on_commit) => match self.record_run(&wf, &w) {
                    Ok(outcome) => {
                        log::info!(
                            issue_id:% = w.run.issue_id,
                            issue_identifier:% = w.run.identifier,
                            run_id:% = outcome.run_id;
                            "run recorded on retry"
                        );
                        if let Some(f) = on_commit {
                            f(outcome);
                        }
                        Ok(())
                    }
                    Err(e) if e.is_transient() => {
                        let op = Op::Record(w, on_commit);
                        Err(Box::new((WriteOp { wf, op }, e)))
                    }
                    Err(e) => {
                        log::error!(
                            issue_id:% = w.run.issue_id,
                            issue_identifier:% = w.run.identifier,
                            error:% = e;
                            "run record dropped: its retry failed for good"
                        );
                        Ok(())
                    }
                },
                op => self.apply(WriteOp { wf, op }),
            };
            match r {
                Ok(()) => {
                    self.backlog.succeeded(now);
                    if self.backlog.is_empty() {
                        log::info!("database writes recovered; every kept write is stored");
                    }
                }
                Err(failed) => {
                    let (op, e) = *failed;
                    let (what, issue_id) = op.describe();
                    log::warn!(
                        op:% = what,
                        issue_id:% = issue_id,
                        pending:% = self.backlog.len() + 1,
                        error:% = e;
                        "kept database write failed again"
                    );
                    self.backlog.failed_again(op, e.to_string(), now);
                    return;
                }
            }
        }
    }

    /// At shutdown: one last try of every kept write, then whatever is left is logged lost.
    fn drop_backlog(&mut self, why: &str) {
        if self.backlog.is_empty() {
            return;
        }
        for op in self.backlog.drain() {
            let (what, issue_id) = op.describe();
            let issue_id = issue_id.to_string();
            let WriteOp { wf, op } = op;
            let r = match op {
                Op::Record(w, on_commit) => self.record_run(&wf, &w).map(|o| {
                    if let Some(f) = on_commit {
                        f(o);
                    }
                }),
                op => self.apply(WriteOp { wf, op }).map_err(|failed| failed.1),
            };
            if let Err(e) = r {
                log::error!(
                    op:% = what,
                    issue_id:% = issue_id,
                    reason:% = why,
                    error:% = e;
                    "kept database write lost"
                );
            }
        }
    }

    /// The run with its events in one transaction; if that fails and there were events, the
    /// run without them (events queued for retry); if that fails too, the error.
    fn record_run(&mut self, wf: &str, w: &RunWrite) -> Result<RecordOutcome, StoreError> {
        let now = self.clock.now_ms();
        let has_events =
            !w.events.is_empty() && w.run.dispatch_id.as_deref().is_some_and(|d| !d.is_empty());
        match record::record(&mut self.conn, wf, w, has_events, &self.limits, now) {
            Ok((run_id, pruned)) => {
                forget_live(w);
                if pruned.aged_runs + pruned.size_runs > 0 {
                    log::info!(
                        aged_runs:% = pruned.aged_runs,
                        size_runs:% = pruned.size_runs,
                        run_id:% = run_id;
                        "pruned stored run events"
                    );
                }
                Ok(RecordOutcome {
                    run_id,
                    events_stored: has_events,
                    pruned,
                })
            }
            Err(first) if has_events => {
                log::warn!(
                    issue_id:% = w.run.issue_id,
                    issue_identifier:% = w.run.identifier,
                    dispatch_id:% = w.run.dispatch_id.as_deref().unwrap_or(""),
                    error:% = first;
                    "run events not written, storing run without them"
                );
                let (run_id, pruned) =
                    record::record(&mut self.conn, wf, w, false, &self.limits, now)?;
                forget_live(w);
                let dispatch_id = w.run.dispatch_id.clone().unwrap_or_default();
                self.pending.push_failed(
                    PendingEvents::new(
                        dispatch_id,
                        Some(run_id),
                        w.run.completed_at_ms,
                        w.events.clone(),
                    ),
                    now,
                );
                Ok(RecordOutcome {
                    run_id,
                    events_stored: false,
                    pruned,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// One batch of the scrub pass; the last one finishes it (see `store::scrub`).
    fn scrub_step(&mut self) {
        let Some(pass) = self.scrub.as_mut() else {
            return;
        };
        match pass.step(&self.conn) {
            Ok(false) => {}
            Ok(true) => {
                if let Some(pass) = self.scrub.take() {
                    self.finish_scrub(pass);
                }
            }
            Err(e) => {
                log::warn!(
                    error:% = e.to_string();
                    "database scrub stopped; the next start runs it again"
                );
                if let Some(pass) = self.scrub.take() {
                    pass.abandon(&self.conn);
                }
            }
        }
    }

    fn finish_scrub(&mut self, pass: Scrub) {
        let report = pass.report();
        let elapsed_ms = pass.elapsed_ms();
        let size = scrub::database_bytes(&self.conn).unwrap_or(u64::MAX);
        let vacuum = size <= scrub::VACUUM_MAX_BYTES;
        match pass.finish(&self.conn, vacuum) {
            Ok(wal_truncated) => {
                log::info!(
                    tables:% = report.tables,
                    rows_read:% = report.rows_read,
                    rows_rewritten:% = report.rows_rewritten,
                    rows_removed:% = report.rows_removed,
                    restarts:% = report.restarts,
                    duration_ms:% = elapsed_ms,
                    file_rebuilt:% = vacuum,
                    wal_truncated:% = wal_truncated;
                    "database scrub finished"
                );
                if !vacuum {
                    log::warn!(
                        size_bytes:% = size;
                        "database file not rebuilt after the scrub: free pages older builds left may still hold clear text; stop sortie and run `sortie scrub` to rebuild it"
                    );
                }
            }
            Err(e) => log::warn!(
                error:% = e.to_string();
                "database scrub not finished; the next start runs it again"
            ),
        }
    }

    fn retry_due_events(&mut self) {
        let now = self.clock.now_ms();
        for p in self.pending.take_due(now) {
            let r = record::write_events_only(
                &mut self.conn,
                &p.dispatch_id,
                p.run_id,
                p.completed_at_ms,
                &p.events,
                &self.limits,
            );
            match r {
                Ok(_) => log::info!(
                    dispatch_id:% = p.dispatch_id,
                    retries:% = p.retries + 1;
                    "run events written on retry"
                ),
                Err(e) => {
                    log::warn!(
                        dispatch_id:% = p.dispatch_id,
                        retries:% = p.retries + 1,
                        error:% = e;
                        "run events retry failed"
                    );
                    self.pending.retry_failed(p, now);
                }
            }
        }
    }
}

/// A committed write's effect on the served live figures: a live session row's figures are
/// on record now (`live_figures`); a run record's come with the aggregate totals.
fn committed(w: &WriteOp) {
    match &w.op {
        Op::UpsertSession(s) if s.exit_type.is_none() => {
            if let Some(id) = s.dispatch_id.as_deref() {
                live_figures::note_committed(id, live_figures::of_row(s));
            }
        }
        Op::Record(w, _) => forget_live(w),
        Op::Reaction(ReactionWrite::PrLoop(_)) => super::pr_loop::note_committed(),
        _ => {}
    }
}

fn forget_live(w: &RunWrite) {
    if let Some(id) = w.run.dispatch_id.as_deref() {
        live_figures::forget(id);
    }
}

fn warn_failed(what: &str, issue_id: &str, r: Result<(), StoreError>) {
    if let Err(e) = r {
        log::warn!(
            op:% = what,
            issue_id:% = issue_id,
            error:% = e.to_string();
            "database write failed"
        );
    }
}
