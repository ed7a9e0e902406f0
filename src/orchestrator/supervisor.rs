//! The supervisor of one dispatch (`sup-<identifier>` thread): in-progress transition,
//! workspace and hooks, the agent session and its turn loop, the stop protocol, `after_run`.
//! It owns the agent child process; it reports events and its end to the orchestrator and
//! never touches scheduling state.

use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Sender, unbounded};

use crate::agent::{
    AgentAdapter, AgentEvent, AgentEventKind, CancelReason, CancelToken, StartSessionParams,
    state_file, status_file,
};
use crate::clock::Clock;
use crate::config::Workflow;
use crate::domain::{Issue, state_eq, state_in};
use crate::prompt::PromptTemplate;
use crate::tracker::TrackerAdapter;
use crate::workspace::{HookEnv, HookKind, WorkspaceManager};

use super::msg::{OrchMsg, SupervisorExit, SupervisorResult};

/// Everything one attempt needs, frozen at dispatch (a reload does not change a running attempt).
pub struct SupervisorJob {
    pub dispatch_id: String,
    pub issue: Issue,
    /// 0 on first dispatch; the retry counter afterwards.
    pub attempt: u32,
    pub resume_session_id: Option<String>,
    pub workflow: Arc<Workflow>,
    pub template: Arc<PromptTemplate>,
    pub workspaces: Arc<WorkspaceManager>,
    pub tracker: Arc<dyn TrackerAdapter>,
    pub agent: Arc<dyn AgentAdapter>,
    pub cancel: CancelToken,
    pub clock: Arc<dyn Clock>,
    pub tx: Sender<OrchMsg>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// Starts the supervisor thread for `job`.
pub fn spawn(job: SupervisorJob) -> std::io::Result<std::thread::JoinHandle<()>> {
    let name = format!("sup-{}", job.issue.identifier);
    std::thread::Builder::new().name(name).spawn(move || {
        let tx = job.tx.clone();
        let result = run(&job);
        if tx.send(OrchMsg::Exit(Box::new(result))).is_err() {
            log::warn!(
                "worker result dropped: orchestrator gone issue_id={} issue_identifier={}",
                job.issue.id,
                job.issue.identifier
            );
        }
    })
}

struct Progress {
    turns_completed: u32,
    session_id: Option<String>,
    workspace_path: Option<PathBuf>,
}

fn run(job: &SupervisorJob) -> SupervisorResult {
    let mut p = Progress {
        turns_completed: 0,
        session_id: job.resume_session_id.clone(),
        workspace_path: None,
    };
    let exit = run_phases(job, &mut p);
    log::info!(
        "worker exiting issue_id={} issue_identifier={} dispatch_id={} exit_kind={} turns_completed={}",
        job.issue.id,
        job.issue.identifier,
        job.dispatch_id,
        exit_kind_name(&exit),
        p.turns_completed
    );
    SupervisorResult {
        dispatch_id: job.dispatch_id.clone(),
        issue_id: job.issue.id.clone(),
        exit,
        turns_completed: p.turns_completed,
        session_id: p.session_id,
        workspace_path: p.workspace_path,
        ended_at_ms: job.clock.now_ms(),
    }
}

fn exit_kind_name(e: &SupervisorExit) -> &'static str {
    match e {
        SupervisorExit::Normal { .. } => "normal",
        SupervisorExit::Error { .. } => "error",
        SupervisorExit::Cancelled { .. } => "cancelled",
    }
}

fn error_exit(code: &str, message: String, retryable: bool) -> SupervisorExit {
    SupervisorExit::Error {
        code: code.to_string(),
        message: crate::mask::mask(&message),
        retryable,
    }
}

fn run_phases(job: &SupervisorJob, p: &mut Progress) -> SupervisorExit {
    let cfg = &job.workflow.config;
    let issue = &job.issue;

    // 1. Move the issue to the in-progress state (non-fatal).
    match cfg.tracker.in_progress_state.as_deref() {
        Some(state) if !state_eq(state, &issue.state) => {
            match job.tracker.transition_issue(&issue.id, state) {
                Ok(()) => job.metrics.dispatch_transition("success"),
                Err(e) => {
                    job.metrics.dispatch_transition("error");
                    log::warn!(
                        "in-progress transition failed issue_id={} issue_identifier={} error=\"{}\"",
                        issue.id,
                        issue.identifier,
                        e
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

    // 2. Workspace, the stale stop file, before_run.
    let ws = match job.workspaces.ensure(issue, job.attempt) {
        Ok(ws) => ws,
        Err(e) => return error_exit("workspace_error", e.to_string(), true),
    };
    p.workspace_path = Some(ws.path.clone());
    log::info!(
        "workspace prepared issue_id={} issue_identifier={} workspace={} created_now={}",
        issue.id,
        issue.identifier,
        ws.path.display(),
        ws.created_now
    );
    if let Err(e) = status_file::clear(&ws.path) {
        log::warn!(
            "could not remove stale status file issue_id={} issue_identifier={} error=\"{}\"",
            issue.id,
            issue.identifier,
            e
        );
    }
    let hook_env = HookEnv {
        issue_id: issue.id.clone(),
        issue_identifier: issue.identifier.clone(),
        attempt: job.attempt,
        extra: Vec::new(),
    };
    if let Err(e) = job
        .workspaces
        .run_hook(HookKind::BeforeRun, &ws.path, &hook_env)
    {
        return error_exit("hook_failed", e.to_string(), true);
    }

    // 3. The session and its turns; after_run runs whatever happened past this point.
    let exit = run_session(job, p, &ws.path);
    if let Err(e) = job
        .workspaces
        .run_hook(HookKind::AfterRun, &ws.path, &hook_env)
    {
        log::warn!(
            "after_run hook failed issue_id={} issue_identifier={} error=\"{}\"",
            issue.id,
            issue.identifier,
            e
        );
    }
    exit
}

fn run_session(
    job: &SupervisorJob,
    p: &mut Progress,
    workspace: &std::path::Path,
) -> SupervisorExit {
    let cfg = &job.workflow.config;
    let issue = &job.issue;
    let max_turns = cfg.agent.max_turns.max(1);

    let mut session = match job.agent.start_session(StartSessionParams {
        workspace: workspace.to_path_buf(),
        resume_session_id: job.resume_session_id.clone(),
        issue_identifier: issue.identifier.clone(),
        mcp_config_path: None,
    }) {
        Ok(s) => s,
        Err(e) => {
            return error_exit(e.kind.code(), e.message.clone(), e.kind.retryable());
        }
    };

    // Agent events go through a forwarder so they reach the orchestrator tagged with the
    // dispatch id, in order.
    // The forwarder also keeps `.sortie/state.json` current on every token event, for
    // agent-side tools; the turn loop updates it at each turn start.
    let state = Arc::new(std::sync::Mutex::new(state_file::StateFile {
        turn_number: 0,
        max_turns,
        attempt: Some(job.attempt),
        started_at: crate::clock::rfc3339_ms(job.clock.now_ms()),
        ..Default::default()
    }));
    write_state(workspace, &state);
    let (ev_tx, ev_rx) = unbounded::<AgentEvent>();
    let fwd_tx = job.tx.clone();
    let dispatch_id = job.dispatch_id.clone();
    let fwd_state = state.clone();
    let fwd_ws = workspace.to_path_buf();
    let forwarder = std::thread::Builder::new()
        .name(format!("evt-{}", issue.identifier))
        .spawn(move || {
            for event in ev_rx.iter() {
                if let AgentEventKind::TokenUsage { usage, .. } = &event.kind {
                    if let Ok(mut st) = fwd_state.lock() {
                        st.input_tokens += usage.input_tokens;
                        st.output_tokens += usage.output_tokens;
                        st.total_tokens += usage.total_tokens;
                        st.cache_read_tokens += usage.cache_read_tokens;
                        st.cache_write_tokens += usage.cache_write_tokens;
                    }
                    write_state(&fwd_ws, &fwd_state);
                }
                let _ = fwd_tx.send(OrchMsg::Agent {
                    dispatch_id: dispatch_id.clone(),
                    event,
                });
            }
        });

    let mut exit = SupervisorExit::Normal {
        declared: None,
        statement: None,
    };
    let mut turn = 0u32;
    while turn < max_turns {
        turn += 1;
        if let Some(r) = job.cancel.reason() {
            exit = SupervisorExit::Cancelled { reason: r };
            break;
        }
        let prompt = match crate::prompt::build_turn_prompt(
            &job.template,
            issue,
            Some(job.attempt),
            turn,
            max_turns,
        ) {
            Ok(s) => s,
            Err(e) => {
                exit = error_exit(
                    "prompt_render",
                    format!("prompt render (turn {turn}): {e}"),
                    true,
                );
                break;
            }
        };
        let _ = job.tx.send(OrchMsg::TurnStarted {
            dispatch_id: job.dispatch_id.clone(),
            turn,
        });
        if let Ok(mut st) = state.lock() {
            st.turn_number = turn;
        }
        write_state(workspace, &state);
        log::info!(
            "turn started issue_id={} issue_identifier={} turn_number={} max_turns={}",
            issue.id,
            issue.identifier,
            turn,
            max_turns
        );
        let result = session.run_turn(&prompt, &ev_tx, &job.cancel);
        if result.session_id.is_some() {
            p.session_id = result.session_id.clone();
        }
        if !result.outcome.is_completed() {
            exit = match job.cancel.reason() {
                Some(r) if r != CancelReason::TurnTimeout => {
                    SupervisorExit::Cancelled { reason: r }
                }
                _ => {
                    let kind = result.outcome.error_kind();
                    let code = kind.map(|k| k.code()).unwrap_or("turn_failed");
                    let retryable = kind.map(|k| k.retryable()).unwrap_or(true);
                    error_exit(code, result.outcome.message(), retryable)
                }
            };
            break;
        }
        p.turns_completed = turn;
        log::info!(
            "turn completed issue_id={} issue_identifier={} turn_number={} max_turns={}",
            issue.id,
            issue.identifier,
            turn,
            max_turns
        );

        // The stop protocol: a declared outcome ends the loop (soft stop).
        let status = status_file::read(workspace);
        if let Some(warning) = &status.warning {
            log::warn!(
                "status file refused issue_id={} issue_identifier={} reason=\"{}\"",
                issue.id,
                issue.identifier,
                warning
            );
        }
        if let Some(declared) = status.outcome {
            exit = SupervisorExit::Normal {
                declared: Some(declared),
                statement: status.statement,
            };
            break;
        }

        // Stop when the issue left the active states.
        match job
            .tracker
            .fetch_issue_states_by_ids(std::slice::from_ref(&issue.id))
        {
            Ok(states) => match states.get(&issue.id) {
                Some(s) if state_in(s, &cfg.tracker.active_states) => {}
                _ => break,
            },
            Err(e) => log::warn!(
                "issue state refresh failed issue_id={} issue_identifier={} error=\"{}\"",
                issue.id,
                issue.identifier,
                e
            ),
        }
    }

    if let Err(e) = session.stop() {
        log::warn!(
            "agent session stop failed issue_id={} issue_identifier={} error=\"{}\"",
            issue.id,
            issue.identifier,
            e
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

/// Writes `.sortie/state.json`; a failure only costs agent-side tools their view.
fn write_state(workspace: &std::path::Path, state: &std::sync::Mutex<state_file::StateFile>) {
    let snapshot = match state.lock() {
        Ok(s) => s.clone(),
        Err(p) => p.into_inner().clone(),
    };
    if let Err(e) = state_file::write(workspace, &snapshot) {
        log::debug!(
            "state file not written workspace={} error=\"{e}\"",
            workspace.display()
        );
    }
}
