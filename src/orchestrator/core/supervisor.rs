//! The supervisor of one dispatch (`sup-<identifier>` thread): in-progress transition,
//! workspace and hooks, the agent session and its turn loop, the stop protocol, `after_run`.
//! It owns the agent child process; it reports events and its end to the orchestrator and
//! never touches scheduling state.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::agent::{
    AgentAdapter, AgentErrorKind, AgentEvent, AgentEventKind, AgentSession, CancelReason,
    CancelToken, StartSessionParams, TurnOutcome, mcp_file, state_file, status_file,
};
use crate::clock::Clock;
use crate::config::Workflow;
use crate::domain::{Issue, state_eq, state_in};
use crate::prompt::PromptTemplate;
use crate::tracker::TrackerAdapter;
use crate::workspace::{HookEnv, HookKind, WorkspaceManager};

use super::msg::{
    Admitted, EVENTS_IN_FLIGHT, ErrorCode, EventGate, InFlight, OrchMsg, SupervisorExit,
    SupervisorResult,
};

/// Everything one attempt needs, frozen at dispatch (a reload does not change a running attempt).
pub struct SupervisorJob {
    pub dispatch_id: String,
    pub issue: Issue,
    /// 0 on first dispatch; the retry counter afterwards.
    pub attempt: u32,
    pub resume_session_id: Option<String>,
    pub workflow: Arc<Workflow>,
    pub template: Arc<PromptTemplate>,
    /// The run's place on a stage chain (`.stage` in the prompt).
    pub stage: crate::prompt::StageValues,
    pub workspaces: Arc<WorkspaceManager>,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub agent: Arc<dyn AgentAdapter>,
    pub cancel: CancelToken,
    pub clock: Arc<dyn Clock>,
    pub tx: Sender<OrchMsg>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The pull-request reaction this run continues: its prompt context, and the issue may sit
    /// in the handoff state meanwhile (the run follows a handoff).
    pub reaction: Option<JobReaction>,
    /// Where the daemon's API listens and which `.env` it loaded, for the session's MCP server.
    pub mcp_daemon: mcp_file::DaemonFacts,
    /// The SSH host the attempt runs on; `None` runs it here.
    pub ssh_host: Option<crate::ssh::SshHost>,
}

/// A dispatched session whose row is being committed: its supervisor starts on the writer's
/// reply (`claim::dispatch`).
pub(crate) struct Unstarted {
    pub job: SupervisorJob,
    pub route: crate::domain::stage::Route,
    pub dispatched_at_ms: i64,
}

impl Unstarted {
    pub(crate) fn issue_id(&self) -> &str {
        &self.job.issue.id
    }
}

/// A reaction run's part of the job.
#[derive(Debug, Clone)]
pub struct JobReaction {
    pub context: Option<crate::orchestrator::features::reactions::FixContext>,
}

/// Stack of a `sup-*` thread: the standard library's default. Measured from `/proc/<pid>/smaps`
/// under the scale bench (debug build, 100 sessions), at most 64 KiB of it is ever touched,
/// and only touched pages are resident, so a smaller stack would save address space, not
/// memory, while an overflow (the session's tracker calls run TLS here) aborts the daemon.
pub const SUPERVISOR_STACK: usize = 2 << 20;
/// Stack of an `evt-*` thread, which only forwards events and writes the state file: measured
/// at most 24 KiB touched (as above); twenty times that leaves room for serializing an event
/// nested to the JSON parser's depth limit.
pub const FORWARDER_STACK: usize = 512 << 10;

/// Starts the supervisor thread for `job`.
pub fn spawn(job: SupervisorJob) -> std::io::Result<std::thread::JoinHandle<()>> {
    let name = thread_name("sup-", &job.issue.identifier);
    let builder = std::thread::Builder::new()
        .name(name)
        .stack_size(SUPERVISOR_STACK);
    let workflow = crate::log_field::thread_workflow();
    builder.spawn(move || {
        crate::log_field::set_thread_workflow(workflow);
        let tx = job.tx.clone();
        // A panic must still end the run, or the issue would stay claimed as running forever.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&job)))
            .unwrap_or_else(|payload| panicked(&job, payload.as_ref()));
        if tx.send(OrchMsg::Exit(Box::new(result))).is_err() {
            log::warn!(
                issue_id:% = job.issue.id,
                issue_identifier:% = job.issue.identifier;
                "worker result dropped: orchestrator gone"
            );
        }
    })
}

/// The result of a supervisor that panicked: a failed run, retried after the failure backoff.
fn panicked(job: &SupervisorJob, payload: &(dyn std::any::Any + Send)) -> SupervisorResult {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    log::error!(
        issue_id:% = job.issue.id,
        issue_identifier:% = job.issue.identifier,
        dispatch_id:% = job.dispatch_id,
        panic:% = what.to_string();
        "supervisor panicked"
    );
    SupervisorResult {
        dispatch_id: job.dispatch_id.clone(),
        issue_id: job.issue.id.clone(),
        exit: error_exit(
            ErrorCode::SupervisorPanic,
            format!("supervisor panicked: {what}"),
            true,
        ),
        turns_completed: 0,
        session_id: None,
        workspace_path: None,
        ended_at_ms: job.clock.now_ms(),
        pr_record: None,
        evidence: None,
    }
}

/// Longest tracker-derived part of a thread name, in bytes. Linux keeps 15 bytes of a thread
/// name (`pthread_setname_np`, which std truncates to); the Rust name (panic messages) keeps
/// this many.
const THREAD_NAME_TEXT_MAX: usize = 48;

/// A thread name built from tracker text: `std::thread::Builder::spawn` panics on a name with
/// a NUL byte, so every control character becomes `_` and the text is capped (on a char
/// boundary) at [`THREAD_NAME_TEXT_MAX`] bytes.
pub(crate) fn thread_name(prefix: &str, text: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + THREAD_NAME_TEXT_MAX);
    name.push_str(prefix);
    let mut used = 0;
    for c in text.chars() {
        let c = if c.is_control() { '_' } else { c };
        used += c.len_utf8();
        if used > THREAD_NAME_TEXT_MAX {
            break;
        }
        name.push(c);
    }
    name
}

struct Progress {
    turns_completed: u32,
    /// Coding, review and fix turns started (the running row's `turn_count`).
    turns_started: u32,
    session_id: Option<String>,
    workspace_path: Option<PathBuf>,
    /// How the self-review phase ended, when it ran.
    review: Option<crate::orchestrator::features::self_review::PhaseEnd>,
    /// What the workspace showed after a normal exit (`tracker.handoff_evidence`).
    evidence: Option<crate::orchestrator::claim::handoff_evidence::WorkspaceEvidence>,
}

/// The pull-request record the agent or `after_run` left, read once the worker is done.
fn read_pr_record(
    job: &SupervisorJob,
    workspace: &std::path::Path,
) -> Option<crate::agent::pr_record::PrRecord> {
    let read = crate::agent::pr_record::read_on(workspace, job.ssh_host.as_ref());
    if let Some(warning) = &read.warning {
        log::warn!(
            issue_id:% = job.issue.id,
            issue_identifier:% = job.issue.identifier,
            reason:% = warning.to_string();
            "pull request record ignored"
        );
    }
    read.record
}

fn run(job: &SupervisorJob) -> SupervisorResult {
    let mut p = Progress {
        turns_completed: 0,
        turns_started: 0,
        session_id: job.resume_session_id.clone(),
        workspace_path: None,
        review: None,
        evidence: None,
    };
    let exit = run_phases(job, &mut p);
    log::info!(
        issue_id:% = job.issue.id,
        issue_identifier:% = job.issue.identifier,
        dispatch_id:% = job.dispatch_id,
        exit_kind:% = exit_kind_name(&exit),
        turns_completed:% = p.turns_completed;
        "worker exiting"
    );
    SupervisorResult {
        dispatch_id: job.dispatch_id.clone(),
        issue_id: job.issue.id.clone(),
        exit,
        turns_completed: p.turns_completed,
        pr_record: p
            .workspace_path
            .as_deref()
            .and_then(|w| read_pr_record(job, w)),
        session_id: p.session_id,
        workspace_path: p.workspace_path,
        ended_at_ms: job.clock.now_ms(),
        evidence: p.evidence,
    }
}

fn exit_kind_name(e: &SupervisorExit) -> &'static str {
    match e {
        SupervisorExit::Normal { .. } => "normal",
        SupervisorExit::Error { .. } => "error",
        SupervisorExit::Cancelled { .. } => "cancelled",
        SupervisorExit::UsageLimited(_) => "usage_limited",
        SupervisorExit::HandoffWithheld { .. } => "handoff_withheld",
    }
}

fn error_exit(code: ErrorCode, message: String, retryable: bool) -> SupervisorExit {
    SupervisorExit::Error {
        code,
        message: crate::mask::mask(&message),
        retryable,
    }
}

/// The exit of a turn the provider refused for a usage limit (masked like every error).
fn usage_limited_exit(outcome: &TurnOutcome) -> SupervisorExit {
    let (message, resets_at_ms, model) = match outcome {
        TurnOutcome::UsageLimited {
            message,
            resets_at_ms,
            model,
        } => (message.as_str(), *resets_at_ms, model.clone()),
        other => return error_exit(ErrorCode::UsageLimited, other.message(), true),
    };
    SupervisorExit::UsageLimited(super::msg::UsageLimit {
        message: crate::mask::mask(message),
        resets_at_ms,
        model,
    })
}

fn run_phases(job: &SupervisorJob, p: &mut Progress) -> SupervisorExit {
    let cfg = &job.workflow.config;
    let issue = &job.issue;

    // 1. Move the issue to the in-progress state (non-fatal).
    match cfg.tracker.in_progress_state.as_deref() {
        Some(state) if !state_eq(state, &issue.state) => {
            match job.tracker.transition_issue(&issue.id, state) {
                Ok(()) => {
                    job.metrics.dispatch_transition("success");
                    let _ = job.tx.send(OrchMsg::IssueMoved {
                        dispatch_id: job.dispatch_id.clone(),
                        state: state.to_string(),
                    });
                }
                Err(e) => {
                    job.metrics.dispatch_transition("error");
                    log::warn!(
                        issue_id:% = issue.id,
                        issue_identifier:% = issue.identifier,
                        error:% = e.to_string();
                        "in-progress transition failed"
                    );
                }
            }
        }
        Some(_) => job.metrics.dispatch_transition("skipped"),
        None => {}
    }
    if let Some(r) = job.cancel.reason() {
        return SupervisorExit::Cancelled { reason: r };
    }

    // 2. Workspace (preparing it removes a stale `.sortie/status`), before_run. Its lock is
    // held until this function returns, after `after_run`.
    let (ws, _workspace_lock) =
        match job
            .workspaces
            .prepare_on(issue, job.attempt, job.ssh_host.as_ref())
        {
            Ok(prepared) => prepared,
            Err(e) => return error_exit(ErrorCode::Workspace, e.to_string(), true),
        };
    p.workspace_path = Some(ws.path.clone());
    let _ = job.tx.send(OrchMsg::WorkspaceReady {
        dispatch_id: job.dispatch_id.clone(),
        path: ws.path.clone(),
    });
    log::info!(
        issue_id:% = issue.id,
        issue_identifier:% = issue.identifier,
        workspace:% = ws.path.display(),
        created_now:% = ws.created_now;
        "workspace prepared"
    );
    let hook_env = HookEnv {
        issue_id: issue.id.clone(),
        issue_identifier: issue.identifier.clone(),
        attempt: job.attempt,
        extra: Vec::new(),
    };
    if let Err(e) = job.workspaces.run_hook_on(
        HookKind::BeforeRun,
        &ws.path,
        &hook_env,
        job.ssh_host.as_ref(),
    ) {
        return error_exit(ErrorCode::Hook, e.to_string(), true);
    }

    // 3. The session and its turns; after_run runs whatever happened past this point.
    let baseline = evidence_baseline(job, &ws.path, &hook_env);
    let exit = run_session(job, p, &ws.path, &hook_env);
    let after_env = after_run_env(hook_env, p.review.as_ref());
    if let Err(e) = job.workspaces.run_hook_on(
        HookKind::AfterRun,
        &ws.path,
        &after_env,
        job.ssh_host.as_ref(),
    ) {
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            error:% = e.to_string();
            "after_run hook failed"
        );
    }
    if let (Some(start), SupervisorExit::Normal { .. }) = (baseline, &exit) {
        p.evidence = Some(evidence_after(job, &ws.path, &after_env, start));
    }
    exit
}

/// The workspace as the session starts, when `tracker.handoff_evidence` asks for evidence of
/// work (`None` otherwise): git's reading (or why there is none) and the pull-request record.
fn evidence_baseline(
    job: &SupervisorJob,
    workspace: &std::path::Path,
    env: &HookEnv,
) -> Option<EvidenceStart> {
    if job.workflow.config.tracker.handoff_evidence == crate::config::HandoffEvidence::Off {
        return None;
    }
    let git = crate::workspace::evidence::baseline(
        &job.workspaces,
        workspace,
        env,
        job.ssh_host.as_ref(),
    );
    if let Err(why) = &git {
        log::warn!(
            issue_id:% = job.issue.id,
            issue_identifier:% = job.issue.identifier,
            error:% = why;
            "workspace evidence baseline not read"
        );
    }
    let pr_record = crate::agent::pr_record::read_on(workspace, job.ssh_host.as_ref()).record;
    Some(EvidenceStart { git, pr_record })
}

/// What [`evidence_baseline`] read.
struct EvidenceStart {
    git: Result<crate::workspace::evidence::Baseline, crate::workspace::evidence::EvidenceError>,
    pr_record: Option<crate::agent::pr_record::PrRecord>,
}

/// What the workspace shows after `after_run` against the session's start.
fn evidence_after(
    job: &SupervisorJob,
    workspace: &std::path::Path,
    env: &HookEnv,
    start: EvidenceStart,
) -> crate::orchestrator::claim::handoff_evidence::WorkspaceEvidence {
    let git = start.git.and_then(|base| {
        crate::workspace::evidence::observe(
            &job.workspaces,
            workspace,
            env,
            job.ssh_host.as_ref(),
            &base,
        )
    });
    let pr_record = crate::agent::pr_record::read_on(workspace, job.ssh_host.as_ref()).record;
    let new_pr_record = pr_record.is_some() && pr_record != start.pr_record;
    match &git {
        Ok(o) => log::info!(
            issue_id:% = job.issue.id,
            issue_identifier:% = job.issue.identifier,
            new_commits:% = o.new_commits,
            files_changed:% = o.files_changed,
            new_pr_record:% = new_pr_record;
            "workspace evidence read"
        ),
        Err(why) => log::warn!(
            issue_id:% = job.issue.id,
            issue_identifier:% = job.issue.identifier,
            error:% = why,
            new_pr_record:% = new_pr_record;
            "workspace evidence not read"
        ),
    }
    crate::orchestrator::claim::handoff_evidence::WorkspaceEvidence { git, new_pr_record }
}

/// The `after_run` environment: the run's hook variables plus how self-review ended
/// (`SORTIE_SELF_REVIEW_STATUS`) and, when it was written, its summary
/// (`SORTIE_SELF_REVIEW_SUMMARY_PATH`).
fn after_run_env(
    mut env: HookEnv,
    review: Option<&crate::orchestrator::features::self_review::PhaseEnd>,
) -> HookEnv {
    let status = review.map_or(
        crate::orchestrator::features::self_review::record::STATUS_DISABLED,
        |r| r.meta.status.as_str(),
    );
    env.extra
        .push(("SORTIE_SELF_REVIEW_STATUS".into(), status.to_string()));
    if let Some(path) = review.and_then(|r| r.summary_path.as_ref()) {
        env.extra.push((
            "SORTIE_SELF_REVIEW_SUMMARY_PATH".into(),
            path.to_string_lossy().into_owned(),
        ));
    }
    env
}

/// `.sortie/state.json` as the supervisor keeps it: shared by the turn loop (turn numbers) and
/// the event forwarder (token totals), written at most once a second plus at each turn start
/// and end (`state_file::ThrottledStateFile`).
type SharedState = Arc<std::sync::Mutex<state_file::ThrottledStateFile>>;

/// Room between the agent's stream parser and the forwarder; a full channel makes the parser
/// wait, which leaves lines in the bounded stdout channel and then in the agent's pipe.
///
/// A bounded channel allocates and touches all its slots up front, and an `AgentEvent` slot
/// is about 160 bytes: 1,024 slots were 164 KiB resident per session, most of a session's
/// memory (scale bench: 16 MiB of the heap at 100 sessions). The forwarder only hands each
/// event on, so it seldom lags the parser by more than a few events; 128 keeps that slack at
/// 20 KiB, and the orchestrator-side bound ([`EVENTS_IN_FLIGHT`]) is unchanged.
const FORWARD_CHANNEL: usize = 128;

/// Starts the agent session, runs its turns and stops it; the event forwarder lives exactly as
/// long as the session.
fn run_session(
    job: &SupervisorJob,
    p: &mut Progress,
    workspace: &std::path::Path,
    hook_env: &HookEnv,
) -> SupervisorExit {
    let issue = &job.issue;
    let mut params = StartSessionParams {
        workspace: workspace.to_path_buf(),
        resume_session_id: job.resume_session_id.clone(),
        issue_id: issue.id.clone(),
        issue_identifier: issue.identifier.clone(),
        mcp_config_path: None,
        remote: job.ssh_host.clone(),
        attempt: Some(job.attempt),
    };
    // The worker's MCP server runs beside the agent from this machine's files; an agent in a
    // Kubernetes pod cannot start it, so it gets none.
    if job.workflow.config.worker.kubernetes.is_none() {
        params.mcp_config_path =
            match mcp_file::prepare(job.agent.as_ref(), &params, &mcp_context(job)) {
                Ok(path) => path,
                Err(e) => return error_exit(ErrorCode::Workspace, e.to_string(), true),
            };
    }
    let wrote_mcp = params.mcp_config_path.is_some();
    let exit = run_started_session(job, p, params, workspace, hook_env);
    if wrote_mcp && let Err(e) = mcp_file::remove(workspace) {
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            error:% = e.to_string();
            "session MCP file not removed"
        );
    }
    exit
}

/// [`run_session`] once the session's parameters are ready: starts it, runs its turns, stops it.
fn run_started_session(
    job: &SupervisorJob,
    p: &mut Progress,
    params: StartSessionParams,
    workspace: &std::path::Path,
    hook_env: &HookEnv,
) -> SupervisorExit {
    let issue = &job.issue;
    let max_turns = job.workflow.config.agent.max_turns.max(1);
    let mut session = match job.agent.start_session(params) {
        Ok(s) => s,
        Err(e) => {
            report_startup_failure(job, &e.message);
            return error_exit(
                ErrorCode::Agent(e.kind),
                e.message.clone(),
                e.kind.retryable(),
            );
        }
    };
    let initial = state_file::StateFile {
        turn_number: 0,
        max_turns,
        attempt: Some(job.attempt),
        started_at: crate::clock::rfc3339_ms(job.clock.now_ms()),
        ..Default::default()
    };
    let mut file = state_file::ThrottledStateFile::new(workspace, initial);
    file.flush(job.clock.instant());
    let state: SharedState = Arc::new(std::sync::Mutex::new(file));
    let (ev_tx, forwarder) = spawn_forwarder(job, &state);

    let normal = SupervisorExit::Normal {
        declared: None,
        statement: None,
    };
    let mut ended = None;
    for turn in 1..=max_turns {
        if let ControlFlow::Break(end) =
            run_turn(job, p, session.as_mut(), &ev_tx, workspace, &state, turn)
        {
            ended = Some(end);
            break;
        }
    }
    let exit = match ended {
        Some(end) => end.unwrap_or(normal),
        // The coding turns ran out with the issue still active and nothing declared.
        None if job.workflow.config.self_review.enabled && job.ssh_host.is_none() => {
            let turns = ReviewTurns {
                job,
                p: &mut *p,
                session: session.as_mut(),
                ev_tx: &ev_tx,
                state: &state,
            };
            self_review_phase(turns, workspace, hook_env).unwrap_or(normal)
        }
        None => normal,
    };

    if let Err(e) = session.stop() {
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            error:% = e.to_string();
            "agent session stop failed"
        );
    }
    if let Some(id) = session.session_id() {
        p.session_id = Some(id);
    }
    drop(ev_tx);
    if let Ok(handle) = forwarder {
        let _ = handle.join();
    }
    exit
}

/// What the session's `.sortie/mcp.json` names besides the session parameters.
fn mcp_context(job: &SupervisorJob) -> mcp_file::McpContext {
    mcp_file::McpContext {
        workflow_path: job.workflow.path.clone(),
        db_path: job.workflow.config.db_path.clone(),
        attempt: Some(job.attempt),
        daemon: job.mcp_daemon.clone(),
        needs: sidecar_needs(&job.workflow.config),
    }
}

/// The daemon's variables the session's MCP server needs: the `SORTIE_*` settings overrides
/// (its workflow loads like the daemon's), and only when its `tracker_api` tool can work (a
/// `tracker.project` is set) the tracker key's override and the variables the tracker settings
/// are read from: those holding the resolved key, endpoint, project or filter, and those the
/// tracker kind's block names as `$VAR`.
fn sidecar_needs(cfg: &crate::config::ServiceConfig) -> mcp_file::SidecarNeeds {
    const KEY_OVERRIDE: &str = "SORTIE_TRACKER_API_KEY";
    let mut names: Vec<String> = crate::config::override_vars()
        .into_iter()
        .filter(|v| *v != KEY_OVERRIDE)
        .map(str::to_string)
        .collect();
    let t = &cfg.tracker;
    if t.project.as_deref().is_none_or(|p| p.trim().is_empty()) {
        return mcp_file::SidecarNeeds {
            names,
            values: Vec::new(),
        };
    }
    names.push(KEY_OVERRIDE.to_string());
    let block = cfg.adapter_block(&t.kind);
    names.extend(
        block
            .into_iter()
            .flat_map(|b| b.values())
            .filter_map(serde_json::Value::as_str)
            .filter_map(|v| {
                let v = v.trim().strip_prefix('$')?;
                let v = v
                    .strip_prefix('{')
                    .and_then(|v| v.strip_suffix('}'))
                    .unwrap_or(v);
                Some(v.to_string())
            }),
    );
    let values = [&t.api_key, &t.endpoint, &t.project, &t.query_filter]
        .into_iter()
        .flatten()
        .filter(|v| !v.is_empty())
        .cloned()
        .collect();
    mcp_file::SidecarNeeds { names, values }
}

/// A session that failed to start reports it as the run's `startup_failed` event, unless
/// sortie stopped the start itself (the job was cancelled meanwhile).
fn report_startup_failure(job: &SupervisorJob, message: &str) {
    if job.cancel.reason().is_some() {
        return;
    }
    let event = AgentEvent::new(
        job.clock.now_ms(),
        AgentEventKind::StartupFailed {
            message: crate::mask::mask(message),
        },
    );
    // No forwarder runs yet: the event takes a slot of its own, and reaches `orch` before the
    // exit sent on the same channel.
    if let Some(slot) = EventGate::new(1).admit(false) {
        let _ = job.tx.send(OrchMsg::Agent {
            dispatch_id: Arc::from(job.dispatch_id.as_str()),
            event,
            slot,
        });
    }
}

/// The `evt-<identifier>` thread: forwards agent events to the orchestrator tagged with the
/// dispatch id, in order, under the shedding rule of [`EventGate`], and keeps
/// `.sortie/state.json`'s token totals current for agent-side tools. It ends when the returned
/// sender is dropped, writing the final figures.
fn spawn_forwarder(
    job: &SupervisorJob,
    state: &SharedState,
) -> (
    Sender<AgentEvent>,
    std::io::Result<std::thread::JoinHandle<()>>,
) {
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<AgentEvent>(FORWARD_CHANNEL);
    let mut forwarder = Forwarder {
        tx: job.tx.clone(),
        dispatch_id: Arc::from(job.dispatch_id.as_str()),
        state: state.clone(),
        clock: job.clock.clone(),
        gate: EventGate::new(EVENTS_IN_FLIGHT),
        events: Vec::new(),
        slots: None,
        usage: None,
    };
    let identifier = job.issue.identifier.clone();
    let metrics = job.metrics.clone();
    let workflow = crate::log_field::thread_workflow();
    let handle = std::thread::Builder::new()
        .name(thread_name("evt-", &job.issue.identifier))
        .stack_size(FORWARDER_STACK)
        .spawn(move || {
            crate::log_field::set_thread_workflow(workflow);
            while let Ok(first) = ev_rx.recv() {
                forwarder.take(first);
                // The rest of the burst goes with it, as one message.
                while forwarder.events.len() < FORWARD_BATCH
                    && let Ok(event) = ev_rx.try_recv()
                {
                    forwarder.take(event);
                }
                forwarder.send();
            }
            with_state(&forwarder.state, |f| f.flush(forwarder.clock.instant()));
            let shed = forwarder.gate.shed();
            if shed > 0 {
                metrics.events_shed(shed);
                log::info!(
                    issue_identifier:% = identifier,
                    dispatch_id:% = forwarder.dispatch_id,
                    shed:% = shed;
                    "agent events shed under backpressure"
                );
            }
        });
    (ev_tx, handle)
}

/// Most events the forwarder sends in one message.
const FORWARD_BATCH: usize = 256;

/// The forwarder's state between two messages to the orchestrator: the events drained so far,
/// their gate slots, and the usage they carry that the state file has not taken yet.
struct Forwarder {
    tx: Sender<OrchMsg>,
    dispatch_id: Arc<str>,
    state: SharedState,
    clock: Arc<dyn crate::clock::Clock>,
    gate: EventGate,
    events: Vec<AgentEvent>,
    slots: Option<InFlight>,
    usage: Option<crate::agent::TokenUsage>,
}

impl Forwarder {
    /// Adds one event to the batch under the shedding rule; an essential event that finds the
    /// gate full sends the batch first (its slots may be the ones it waits for), then waits.
    fn take(&mut self, event: AgentEvent) {
        match &event.kind {
            AgentEventKind::TokenUsage { usage, .. } => {
                self.usage = Some(self.usage.map_or(*usage, |u| u.plus(usage)));
            }
            k if k.is_terminal() => self.update_state(true),
            _ => {}
        }
        let mut slots = self.slots.take().unwrap_or_else(|| self.gate.none());
        match self.gate.try_admit(&mut slots, event.kind.is_sheddable()) {
            Admitted::Taken => {}
            Admitted::Shed => {
                self.slots = Some(slots);
                return;
            }
            Admitted::Full => {
                self.slots = Some(slots);
                self.send();
                let mut slots = self.gate.none();
                self.gate.wait_admit(&mut slots);
                self.slots = Some(slots);
                self.events.push(event);
                return;
            }
        }
        self.slots = Some(slots);
        self.events.push(event);
    }

    /// Sends the batch (one message, or the plain one for a single event) and hands the state
    /// file the usage it carried, under one lock.
    fn send(&mut self) {
        self.update_state(false);
        let Some(slots) = self.slots.take() else {
            return;
        };
        let dispatch_id = Arc::clone(&self.dispatch_id);
        let msg = if self.events.len() == 1
            && let Some(event) = self.events.pop()
        {
            OrchMsg::Agent {
                dispatch_id,
                event,
                slot: slots,
            }
        } else if self.events.is_empty() {
            return;
        } else {
            OrchMsg::AgentBatch {
                dispatch_id,
                // The next burst grows its own list: at one event a second a session keeps
                // no room for 256 (about 40 KiB each, 40 MiB over 1,000 sessions).
                events: std::mem::take(&mut self.events),
                slots,
            }
        };
        let _ = self.tx.send(msg);
    }

    /// Usage figures update the state file (throttled); a turn's end writes it.
    fn update_state(&mut self, turn_ended: bool) {
        let usage = self.usage.take();
        if usage.is_none() && !turn_ended {
            return;
        }
        let now = self.clock.instant();
        with_state(&self.state, |f| {
            if let Some(u) = &usage {
                f.add_usage(u, now);
            }
            if turn_ended {
                f.flush(now);
            }
        });
    }
}

/// Runs `f` on the state file, even after a panic elsewhere poisoned its lock.
fn with_state(state: &SharedState, f: impl FnOnce(&mut state_file::ThrottledStateFile)) {
    match state.lock() {
        Ok(mut s) => f(&mut s),
        Err(p) => f(&mut p.into_inner()),
    }
}

/// Runs turn `turn`. `Continue` goes on to the next turn; `Break(Some(exit))` ends the
/// session with that exit, `Break(None)` ends it normally (the issue left the active states).
fn run_turn(
    job: &SupervisorJob,
    p: &mut Progress,
    session: &mut dyn AgentSession,
    ev_tx: &Sender<AgentEvent>,
    workspace: &std::path::Path,
    state: &SharedState,
    turn: u32,
) -> ControlFlow<Option<SupervisorExit>> {
    let issue = &job.issue;
    let max_turns = job.workflow.config.agent.max_turns.max(1);
    if let Some(r) = job.cancel.reason() {
        return ControlFlow::Break(Some(SupervisorExit::Cancelled { reason: r }));
    }
    let reaction = job.reaction.as_ref().and_then(|r| r.context.as_ref());
    let cx = crate::prompt::TurnContext {
        tool_advertisement: None,
        reaction,
        stage: Some(&job.stage),
    };
    let prompt = match crate::prompt::build_turn_prompt_in(
        &job.template,
        issue,
        Some(job.attempt),
        (turn, max_turns),
        cx,
    ) {
        Ok(s) => s,
        Err(e) => {
            return ControlFlow::Break(Some(error_exit(
                ErrorCode::PromptRender,
                format!("prompt render (turn {turn}): {e}"),
                true,
            )));
        }
    };
    start_turn(job, p, state);
    log::info!(
        issue_id:% = issue.id,
        issue_identifier:% = issue.identifier,
        turn_number:% = turn,
        max_turns:% = max_turns;
        "turn started"
    );
    let result = session.run_turn(&prompt, ev_tx, &job.cancel);
    if result.session_id.is_some() {
        p.session_id = result.session_id.clone();
    }
    if !result.outcome.is_completed() {
        let kind = failed_turn_kind(job, &result.outcome);
        // A first turn whose agent could not be started is a session that did not start.
        if turn == 1
            && matches!(
                kind,
                Some(AgentErrorKind::AgentNotFound | AgentErrorKind::InvalidWorkspaceCwd)
            )
        {
            report_startup_failure(job, &result.outcome.message());
        }
        return ControlFlow::Break(Some(failed_turn_exit(job, &result.outcome)));
    }
    p.turns_completed += 1;
    log::info!(
        issue_id:% = issue.id,
        issue_identifier:% = issue.identifier,
        turn_number:% = turn,
        max_turns:% = max_turns;
        "turn completed"
    );
    after_turn(job, workspace)
}

/// Counts a turn as started: the orchestrator's running row and the state file learn its number.
fn start_turn(job: &SupervisorJob, p: &mut Progress, state: &SharedState) {
    p.turns_started += 1;
    let turn = p.turns_started;
    let _ = job.tx.send(OrchMsg::TurnStarted {
        dispatch_id: job.dispatch_id.clone(),
        turn,
    });
    with_state(state, |f| f.set_turn(turn, job.clock.instant()));
}

/// The error kind of a turn that did not complete, `None` when it was stopped from outside
/// or refused for a usage limit.
fn failed_turn_kind(job: &SupervisorJob, outcome: &TurnOutcome) -> Option<AgentErrorKind> {
    match job.cancel.reason() {
        Some(r) if r != CancelReason::TurnTimeout => None,
        _ if matches!(outcome, TurnOutcome::UsageLimited { .. }) => None,
        // An unfinished turn that names no kind failed as a turn, which is retried.
        _ => Some(outcome.error_kind().unwrap_or(AgentErrorKind::TurnFailed)),
    }
}

/// The exit of a turn that did not complete.
fn failed_turn_exit(job: &SupervisorJob, outcome: &TurnOutcome) -> SupervisorExit {
    match (job.cancel.reason(), failed_turn_kind(job, outcome)) {
        (Some(reason), None) if reason != CancelReason::TurnTimeout => {
            SupervisorExit::Cancelled { reason }
        }
        (_, Some(kind)) => error_exit(ErrorCode::Agent(kind), outcome.message(), kind.retryable()),
        _ => usage_limited_exit(outcome),
    }
}

/// Runs the self-review phase in the session; `Some` exit when the phase ends the run otherwise
/// than normally. How it ended is kept for `after_run`.
fn self_review_phase(
    mut turns: ReviewTurns<'_>,
    workspace: &std::path::Path,
    hook_env: &HookEnv,
) -> Option<SupervisorExit> {
    let job = turns.job;
    let input = crate::orchestrator::features::self_review::PhaseInput {
        config: &job.workflow.config.self_review,
        issue: &job.issue,
        workspace,
        workspaces: &job.workspaces,
        env: hook_env,
        cancel: job.cancel.receiver(),
        metrics: &job.metrics,
    };
    let end = crate::orchestrator::features::self_review::run_phase(&input, &mut turns);
    let exit = end.exit.clone();
    turns.p.review = Some(end);
    exit
}

/// The supervisor's side of the self-review phase: its turns run in the session like coding
/// turns (counted, in the state file, reported to the orchestrator).
struct ReviewTurns<'a> {
    job: &'a SupervisorJob,
    p: &'a mut Progress,
    session: &'a mut dyn AgentSession,
    ev_tx: &'a Sender<AgentEvent>,
    state: &'a SharedState,
}

impl crate::orchestrator::features::self_review::ReviewHost for ReviewTurns<'_> {
    fn run_turn(
        &mut self,
        prompt: &str,
        kind: crate::orchestrator::features::self_review::TurnKind,
    ) -> crate::orchestrator::features::self_review::TurnEnd {
        let job = self.job;
        start_turn(job, self.p, self.state);
        log::info!(
            issue_id:% = job.issue.id,
            issue_identifier:% = job.issue.identifier,
            turn_number:% = self.p.turns_started,
            turn_kind:% = kind.as_str();
            "self-review turn started"
        );
        let result = self.session.run_turn(prompt, self.ev_tx, &job.cancel);
        if result.session_id.is_some() {
            self.p.session_id = result.session_id.clone();
        }
        if result.outcome.is_completed() {
            self.p.turns_completed += 1;
            return crate::orchestrator::features::self_review::TurnEnd::Completed;
        }
        let exit = failed_turn_exit(job, &result.outcome);
        // A stop, a turn deadline or a usage limit ends the run; any other failure ends the
        // phase, and the run ends normally on the coding turns' work.
        let ends_run = match &exit {
            SupervisorExit::Error { code, .. } => {
                *code == ErrorCode::Agent(AgentErrorKind::TurnTimeout)
            }
            SupervisorExit::Normal { .. } | SupervisorExit::HandoffWithheld { .. } => false,
            SupervisorExit::Cancelled { .. } | SupervisorExit::UsageLimited(_) => true,
        };
        crate::orchestrator::features::self_review::TurnEnd::Failed {
            message: crate::mask::mask(&result.outcome.message()),
            exit: ends_run.then_some(exit),
        }
    }

    fn report(&mut self, phase: crate::orchestrator::features::self_review::SelfReviewPhase) {
        let _ = self.job.tx.send(OrchMsg::SelfReview {
            dispatch_id: self.job.dispatch_id.clone(),
            phase,
        });
    }

    fn cancel_reason(&self) -> Option<CancelReason> {
        self.job.cancel.reason()
    }
}

/// Between turns: a declared outcome in `.sortie/status` ends the session (the soft stop), and
/// so does the issue leaving the active states. A failed state read ends the session with a
/// retryable error (failure backoff): turns are not spent on an issue whose state is unknown.
fn after_turn(
    job: &SupervisorJob,
    workspace: &std::path::Path,
) -> ControlFlow<Option<SupervisorExit>> {
    let issue = &job.issue;
    let status = status_file::read_on(workspace, job.ssh_host.as_ref());
    if let Some(warning) = &status.warning {
        log::warn!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            reason:% = warning.to_string();
            "status file refused"
        );
    }
    if let Some(declared) = status.outcome {
        return ControlFlow::Break(Some(SupervisorExit::Normal {
            declared: Some(declared),
            statement: status.statement,
        }));
    }
    match job
        .tracker
        .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
    {
        Ok(states) => match states.get(&issue.id) {
            Some(s) if may_continue(job, s) => ControlFlow::Continue(()),
            _ => ControlFlow::Break(None),
        },
        Err(e) => {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                error:% = e.to_string();
                "issue state refresh failed, ending the session"
            );
            ControlFlow::Break(Some(error_exit(
                ErrorCode::TrackerRefresh,
                format!("issue state refresh after a turn: {e}"),
                true,
            )))
        }
    }
}

/// Whether the session goes on in state `s`: an active state, or, for a run that continues a
/// pull-request reaction, the handoff state the issue waits in.
fn may_continue(job: &SupervisorJob, s: &str) -> bool {
    let t = &job.workflow.config.tracker;
    state_in(s, &t.active_states)
        || (job.reaction.is_some() && t.handoff_state.as_deref().is_some_and(|h| state_eq(h, s)))
}

#[cfg(test)]
mod tests {
    use super::thread_name;

    #[test]
    fn thread_names_from_tracker_text_always_spawn() {
        for text in [
            "PROJ-1",
            "a\0b",
            "\u{7}\n\t",
            "é✓世界",
            &"x".repeat(500),
            "",
        ] {
            let name = thread_name("sup-", text);
            assert!(name.starts_with("sup-"));
            assert!(!name.chars().any(char::is_control), "{name:?}");
            assert!(name.len() <= 4 + super::THREAD_NAME_TEXT_MAX, "{name:?}");
            let spawned = std::thread::Builder::new().name(name).spawn(|| ());
            assert!(spawned.is_ok_and(|h| h.join().is_ok()), "{text:?}");
        }
        assert_eq!(thread_name("evt-", "a\0b"), "evt-a_b");
        assert_eq!(
            thread_name("evt-", &"é".repeat(30)),
            format!("evt-{}", "é".repeat(24))
        );
    }
}
