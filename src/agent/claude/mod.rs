//! The claude-code adapter: one `claude -p … --output-format stream-json` process per turn,
//! `--session-id` on a new conversation's first turn and `--resume` afterwards.

pub mod argv;
pub mod parser;
mod tools;

use crate::agent::process::{
    self, MAX_LINE_BYTES, ProcessSpec, TurnLimits, split_command, verify_workspace,
};
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentEvent,
    AgentSession, AgentSettings, CancelToken, StartSessionParams, TurnOutcome, TurnResult,
    UsageArrival, UsageAttribution, UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use argv::{SessionFlag, build_args, prompt_needs_stdin};
use crossbeam_channel::Sender;
use parser::ClaudeParser;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The configuration name of this kind.
pub const KIND: &str = "claude-code";
/// Usage arrives per API request and names its model.
pub const CAPS: AdapterCaps = AdapterCaps {
    usage_arrival: UsageArrival::Incremental,
    usage_attribution: UsageAttribution::PerModel,
    usage_provenance: Some(UsageProvenance {
        source: UsageSource::Output,
        strategy: UsageStrategy::Live,
    }),
    resumable: true,
    requires_command: true,
};
const DEFAULT_COMMAND: &str = "claude";

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    build: |settings, clock| Ok(Arc::new(ClaudeAdapter::new(settings.clone(), clock))),
};

/// Builds claude-code sessions.
pub struct ClaudeAdapter {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
}

impl ClaudeAdapter {
    pub fn new(settings: AgentSettings, clock: Arc<dyn Clock>) -> Self {
        ClaudeAdapter { settings, clock }
    }
}

impl AgentAdapter for ClaudeAdapter {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn caps(&self) -> AdapterCaps {
        CAPS
    }

    fn start_session(
        &self,
        params: StartSessionParams,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let workspace = verify_workspace(&params.workspace)
            .map_err(|m| AgentError::new(AgentErrorKind::InvalidWorkspaceCwd, m))?;
        let command = self
            .settings
            .command
            .clone()
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_COMMAND.to_string());
        let (program, command_args) = split_command(&command)
            .ok_or_else(|| AgentError::new(AgentErrorKind::AgentNotFound, "empty agent.command"))?;
        let program = crate::agent::command::resolve_command(&program)
            .map_err(|e| AgentError::new(AgentErrorKind::AgentNotFound, e.to_string()))?
            .to_string_lossy()
            .into_owned();
        if self
            .settings
            .block
            .get("session_persistence")
            .and_then(|v| v.as_bool())
            == Some(false)
        {
            log::warn!(
                "claude-code session_persistence is false: --resume will not work issue_id={} issue_identifier={}",
                params.issue_id,
                params.issue_identifier
            );
        }
        let new_session_id = new_uuid()?;
        let (session_id, resuming) = match params.resume_session_id.filter(|s| !s.is_empty()) {
            Some(id) => (id, true),
            None => (new_session_id, false),
        };
        Ok(Box::new(ClaudeSession {
            settings: self.settings.clone(),
            clock: Arc::clone(&self.clock),
            workspace,
            program,
            command_args,
            mcp_config: params.mcp_config_path,
            issue_id: params.issue_id,
            issue_identifier: params.issue_identifier,
            session_id,
            resume_next: resuming,
            stopped: false,
        }))
    }
}

/// One claude-code conversation.
pub struct ClaudeSession {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
    workspace: PathBuf,
    program: String,
    command_args: Vec<String>,
    mcp_config: Option<PathBuf>,
    issue_id: String,
    issue_identifier: String,
    session_id: String,
    /// False only before the first turn of a brand-new conversation.
    resume_next: bool,
    stopped: bool,
}

impl AgentSession for ClaudeSession {
    fn session_id(&self) -> Option<String> {
        Some(self.session_id.clone())
    }

    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        if self.stopped {
            let outcome = TurnOutcome::EndedWithError {
                message: "session already stopped".into(),
                kind: AgentErrorKind::ResponseError,
            };
            let _ = events.send(AgentEvent::new(
                self.clock.now_ms(),
                outcome.terminal_event(None),
            ));
            return TurnResult {
                outcome,
                session_id: Some(self.session_id.clone()),
                usage: None,
                model: None,
            };
        }
        let flag = if self.resume_next {
            SessionFlag::Resume(self.session_id.clone())
        } else {
            SessionFlag::New(self.session_id.clone())
        };
        let on_stdin = prompt_needs_stdin(prompt);
        let mut args = self.command_args.clone();
        args.extend(build_args(
            (!on_stdin).then_some(prompt),
            &flag,
            &self.settings.block,
            &self.settings.workflow_dir,
            self.mcp_config.as_deref(),
        ));
        let spec = ProcessSpec {
            program: self.program.clone(),
            args,
            cwd: self.workspace.clone(),
            stdin: on_stdin.then(|| prompt.as_bytes().to_vec()),
            env: Vec::new(),
            max_line_bytes: MAX_LINE_BYTES,
        };
        let limits = TurnLimits {
            turn_timeout: (self.settings.turn_timeout_ms > 0)
                .then(|| Duration::from_millis(self.settings.turn_timeout_ms)),
            drain_timeout: Duration::from_millis(if self.settings.read_timeout_ms > 0 {
                self.settings.read_timeout_ms
            } else {
                5000
            }),
            ..TurnLimits::default()
        };
        log::info!(
            "agent turn starting agent_kind={KIND} issue_id={} issue_identifier={} session_id={} resume={}",
            self.issue_id,
            self.issue_identifier,
            self.session_id,
            self.resume_next
        );
        let mut parser = ClaudeParser::new(
            Arc::clone(&self.clock),
            self.workspace.clone(),
            Some(self.session_id.clone()),
        );
        let turn = process::run_turn(&spec, &mut parser, events, cancel, limits);
        if let Some(sid) =
            super::stream::StreamParser::session_id(&parser).filter(|s| !s.is_empty())
        {
            self.session_id = sid;
        }
        // Once a process has run with this id the conversation exists; resume from now on.
        if turn.pid.is_some() {
            self.resume_next = true;
        }
        TurnResult {
            outcome: turn.outcome,
            session_id: Some(self.session_id.clone()),
            usage: super::stream::StreamParser::usage(&parser),
            model: super::stream::StreamParser::model(&parser),
        }
    }

    fn stop(&mut self) -> Result<(), AgentError> {
        // Fork-per-turn: every process is gone when `run_turn` returns.
        self.stopped = true;
        Ok(())
    }
}

/// A random RFC 4122 version-4 UUID for a new conversation.
fn new_uuid() -> Result<String, AgentError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| {
        AgentError::new(AgentErrorKind::ResponseError, format!("no randomness: {e}"))
    })?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = data_encoding::HEXLOWER.encode(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let u = new_uuid().unwrap_or_default();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uuid().unwrap_or_default());
    }
}
