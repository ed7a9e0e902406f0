//! One triage run, on a thread of its own (never on `orch`): a single turn of the reaction's
//! agent in the issue's existing workspace, under the workspace lock and a deadline, then the
//! verdict file it wrote ([`super::triage::VERDICT_FILE`]). Every failure (no workspace, the
//! lock held, the agent not started, the turn failed or timed out, no readable verdict) is an
//! `Err` with its reason, which the caller turns into the documented outcome.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::{AgentAdapter, AgentEvent, CancelReason, CancelToken, StartSessionParams};
use crate::workspace::WorkspaceManager;

use super::triage::{MAX_VERDICT_BYTES, TriageError, VERDICT_FILE, Verdict, parse_verdict};

/// Events of the triage turn wait here for the drain thread.
const EVENT_CHANNEL: usize = 256;

/// Added to the host's connect timeout for one short remote command.
const REMOTE_OP_MARGIN: Duration = Duration::from_secs(10);

/// Everything a triage run needs, gathered on `orch`.
pub struct TriageJob {
    pub agent: Arc<dyn AgentAdapter>,
    pub workspaces: Arc<WorkspaceManager>,
    pub issue_id: String,
    pub issue_identifier: String,
    pub prompt: String,
    /// The turn is cancelled (its process group killed) when this has passed.
    pub deadline: Duration,
    /// Cancelled from outside too (shutdown).
    pub cancel: CancelToken,
    /// The SSH worker the issue's runs use; `None` runs here. On a host the agent runs in the
    /// remote workspace (same path) and the verdict file is read and removed there.
    pub host: Option<crate::ssh::SshHost>,
}

/// The verdict and its reason, or why there is none.
pub type TriageResult = Result<(Verdict, String), TriageError>;

/// What a triage turn spent, summed from the agent's usage deltas, so it counts against the
/// issue's budgets like any run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriageSpend {
    pub tokens: crate::agent::TokenUsage,
    /// The agent reported usage at least once.
    pub measured: bool,
    /// The model the agent last named; `""` when none.
    pub model: String,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    /// The SSH worker the turn ran on.
    pub ssh_host: Option<String>,
}

/// A finished triage run: its verdict and its spend (`None` when no agent session started).
pub struct TriageDone {
    pub result: TriageResult,
    pub spend: Option<TriageSpend>,
}

/// Runs the triage turn, reads its verdict and sums what it spent; `now_ms` dates the run.
pub fn run_counted(job: &TriageJob, now_ms: &dyn Fn() -> i64) -> TriageDone {
    let started_at_ms = now_ms();
    let spend = std::sync::Arc::new(std::sync::Mutex::new(None::<TriageSpend>));
    let result = run(job, &spend);
    let spend = spend
        .lock()
        .map(|mut s| s.take())
        .unwrap_or_else(|p| p.into_inner().take())
        .map(|mut s| {
            s.started_at_ms = started_at_ms;
            s.ended_at_ms = now_ms();
            s.ssh_host = job.host.as_ref().map(|h| h.name().to_string());
            s
        });
    TriageDone { result, spend }
}

/// Sums the usage deltas of the turn's events into `spend`.
fn drain_events(
    rx: crossbeam_channel::Receiver<AgentEvent>,
    spend: std::sync::Arc<std::sync::Mutex<Option<TriageSpend>>>,
) {
    let mut sum = TriageSpend::default();
    for ev in rx {
        if let crate::agent::AgentEventKind::TokenUsage { usage, model, .. } = ev.kind {
            sum.measured = true;
            sum.tokens.input_tokens = sum.tokens.input_tokens.saturating_add(usage.input_tokens);
            sum.tokens.output_tokens = sum.tokens.output_tokens.saturating_add(usage.output_tokens);
            sum.tokens.total_tokens = sum.tokens.total_tokens.saturating_add(usage.total_tokens);
            sum.tokens.cache_read_tokens = sum
                .tokens
                .cache_read_tokens
                .saturating_add(usage.cache_read_tokens);
            sum.tokens.cache_write_tokens = sum
                .tokens
                .cache_write_tokens
                .saturating_add(usage.cache_write_tokens);
            if let Some(m) = model.filter(|m| !m.is_empty()) {
                sum.model = m;
            }
        }
    }
    if let Ok(mut s) = spend.lock() {
        *s = Some(sum);
    }
}

/// Runs the triage turn and reads its verdict; the turn's spend lands in `spend`.
fn run(
    job: &TriageJob,
    spend: &std::sync::Arc<std::sync::Mutex<Option<TriageSpend>>>,
) -> TriageResult {
    let (workspace, _lock) = job
        .workspaces
        .lock_existing(&job.issue_identifier)
        .map_err(|e| TriageError::Workspace(e.to_string()))?;
    let verdict_path = workspace.join(VERDICT_FILE);
    let host = job.host.as_ref();
    remove_verdict_on(&verdict_path, host)?;
    let params = StartSessionParams {
        workspace: workspace.clone(),
        resume_session_id: None,
        issue_id: job.issue_id.clone(),
        issue_identifier: job.issue_identifier.clone(),
        mcp_config_path: None,
        remote: job.host.clone(),
        attempt: None,
    };
    let mut session = job
        .agent
        .start_session(params)
        .map_err(|e| TriageError::AgentNotStarted(crate::mask::mask(&e.message)))?;
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<AgentEvent>(EVENT_CHANNEL);
    let drain = std::thread::Builder::new()
        .name("triage-events".into())
        .spawn({
            let spend = spend.clone();
            move || drain_events(ev_rx, spend)
        })
        .map_err(|e| TriageError::EventDrain(e.to_string()))?;
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
    let cancel = job.cancel.clone();
    let deadline = job.deadline;
    let watchdog = std::thread::Builder::new()
        .name("triage-deadline".into())
        .spawn(move || {
            if let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                done_rx.recv_timeout(deadline)
            {
                cancel.cancel(CancelReason::TurnTimeout);
            }
        });
    let result = session.run_turn(&job.prompt, &ev_tx, &job.cancel);
    drop(done_tx);
    if let Ok(w) = watchdog {
        let _ = w.join();
    }
    let _ = session.stop();
    drop(ev_tx);
    let _ = drain.join();
    match job.cancel.reason() {
        Some(CancelReason::TurnTimeout) => {
            let _ = remove_verdict_on(&verdict_path, host);
            return Err(TriageError::TimedOut {
                after_ms: deadline.as_millis(),
            });
        }
        Some(r) => return Err(TriageError::Cancelled(r.as_str().to_string())),
        None => {}
    }
    if !result.outcome.is_completed() {
        return Err(TriageError::TurnFailed(crate::mask::mask(
            &result.outcome.message(),
        )));
    }
    let verdict = match host {
        None => read_verdict(&verdict_path),
        Some(h) => read_verdict_on(&workspace, h),
    };
    let _ = remove_verdict_on(&verdict_path, host);
    verdict
}

/// [`remove_verdict`] here, or `rm -f` of the same path on `host`.
fn remove_verdict_on(path: &Path, host: Option<&crate::ssh::SshHost>) -> Result<(), TriageError> {
    let Some(host) = host else {
        return remove_verdict(path);
    };
    let script = format!("rm -f -- {}", crate::ssh::quote(&path.to_string_lossy()));
    let timeout = Duration::from_secs(u64::from(host.options.connect_timeout_s)) + REMOTE_OP_MARGIN;
    match host.run(&script, None, timeout) {
        Ok(out) if out.success() => Ok(()),
        Ok(out) => Err(TriageError::VerdictNotRemoved(
            out.last_stderr_line().unwrap_or_default(),
        )),
        Err(e) => Err(TriageError::VerdictNotRemoved(e.to_string())),
    }
}

/// The verdict file of the remote workspace, read on `host` under the same rules as here (no
/// symlink followed, a regular file, at most [`MAX_VERDICT_BYTES`]).
fn read_verdict_on(workspace: &Path, host: &crate::ssh::SshHost) -> TriageResult {
    let name = VERDICT_FILE.trim_start_matches(".sortie/");
    match crate::agent::sortie_file::read_on(workspace, name, MAX_VERDICT_BYTES, Some(host)) {
        Ok(None) => Err(TriageError::NoVerdictFile),
        Ok(Some(bytes)) => parse_verdict(&String::from_utf8_lossy(&bytes)),
        Err(e) => Err(TriageError::NotRead(e.to_string())),
    }
}

fn remove_verdict(path: &Path) -> Result<(), TriageError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TriageError::VerdictNotRemoved(e.to_string())),
    }
}

/// The verdict file, size-checked before it is read; a symlink is not followed.
fn read_verdict(path: &Path) -> TriageResult {
    let meta = std::fs::symlink_metadata(path).map_err(|_| TriageError::NoVerdictFile)?;
    if !meta.is_file() {
        return Err(TriageError::NotRegularFile);
    }
    if meta.len() > MAX_VERDICT_BYTES {
        return Err(TriageError::TooLarge);
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(MAX_VERDICT_BYTES)
                .read_to_string(&mut text)
                .map(|_| ())
        })
        .map_err(|e| TriageError::NotRead(e.to_string()))?;
    parse_verdict(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_file_is_read_within_its_cap() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("triage.json");
        assert!(read_verdict(&path).is_err(), "missing");
        std::fs::write(&path, r#"{"verdict":"escalate","reason":"unclear"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read_verdict(&path),
            Ok((Verdict::Escalate, "unclear".to_string()))
        );
        let big = format!(
            r#"{{"verdict":"act","reason":"{}"}}"#,
            "x".repeat(MAX_VERDICT_BYTES as usize)
        );
        std::fs::write(&path, big).unwrap_or_else(|e| panic!("{e}"));
        assert!(read_verdict(&path).is_err(), "over the cap");
    }
}
