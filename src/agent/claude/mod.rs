//! The claude-code adapter: one `claude -p … --output-format stream-json` process per turn,
//! `--session-id` on a new conversation's first turn and `--resume` afterwards.

pub mod argv;
mod fast;
pub mod parser;
mod tools;

use crate::agent::per_turn::PerTurnSession;
use crate::agent::process::{self, TurnLimits};
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentEvent,
    AgentSession, AgentSettings, CancelToken, SettingProblem, StartSessionParams, TurnResult,
    UsageArrival, UsageAttribution, UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use argv::{SessionFlag, build_args};
use crossbeam_channel::Sender;
use parser::ClaudeParser;
use std::sync::Arc;

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
    stdin_session: false,
};
const DEFAULT_COMMAND: &str = "claude";

/// What Claude Code needs from sortie's environment besides the basics: its Anthropic
/// credentials and endpoint, its own settings, and the switches it documents.
pub const ENV_VARS: &[&str] = &[
    "ANTHROPIC_*",
    "CLAUDE_CODE_*",
    "CLAUDE_CONFIG_DIR",
    "IS_SANDBOX",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "MAX_THINKING_TOKENS",
    "MCP_TIMEOUT",
    "MCP_TOOL_TIMEOUT",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: argv::BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &["api.anthropic.com"],
    validate: settings_problems,
    classify_failure,
    build: |settings, clock| Ok(Arc::new(ClaudeAdapter::new(settings.clone(), clock))),
    contract: crate::domain::contract::Contract::Suite("claude_code"),
};

/// Recognises Claude Code's own words for a failure that will not heal by itself, then the common
/// ones (`failure_class::classify_common`).
pub fn classify_failure(text: &str) -> Option<crate::agent::failure_class::FailureClass> {
    use crate::agent::failure_class::FailureClass;
    const WORDS: &[(FailureClass, &[&str])] = &[
        (
            FailureClass::NotLoggedIn,
            &["not logged in", "invalid api key", "please run /login"],
        ),
        (FailureClass::QuotaOrBilling, &["credit balance is too low"]),
    ];
    let t = text.to_ascii_lowercase();
    WORDS
        .iter()
        .find(|(_, words)| words.iter().any(|w| t.contains(w)))
        .map(|(class, _)| *class)
        .or_else(|| crate::agent::failure_class::classify_common(text))
}

/// Claude Code refuses to bypass permissions as root (`--dangerously-skip-permissions`, which
/// sortie passes when `permission_mode` is unset, or `bypassPermissions`) unless the operator
/// declares a sandbox with `IS_SANDBOX=1`: it prints one line and exits 1 on every turn. A root
/// daemon would retry that refusal until its budget ran out, so it is caught before dispatch.
fn settings_problems(settings: &AgentSettings) -> Vec<SettingProblem> {
    let mode = settings
        .block
        .get("permission_mode")
        .and_then(|v| v.as_str());
    let declared_sandbox = std::env::var_os("IS_SANDBOX").is_some_and(|v| v == "1");
    root_bypass_refused(mode, rustix::process::geteuid().is_root(), declared_sandbox)
        .into_iter()
        .collect()
}

/// Claude Code's own rule for root, given the configured mode and the process facts.
fn root_bypass_refused(
    mode: Option<&str>,
    is_root: bool,
    declared_sandbox: bool,
) -> Option<SettingProblem> {
    let mode = mode.map(str::trim).filter(|m| !m.is_empty());
    let bypasses = mode.is_none_or(|m| m == "bypassPermissions");
    if !bypasses || declared_sandbox || !is_root {
        return None;
    }
    let what = match mode {
        None => {
            "claude-code.permission_mode is unset, so sortie would pass --dangerously-skip-permissions"
        }
        Some(_) => "claude-code.permission_mode is bypassPermissions",
    };
    Some(SettingProblem::new(
        "claude-code.permission_mode",
        format!(
            "sortie runs as root and {what}, which Claude Code refuses for root: set \
             claude-code.permission_mode to acceptEdits (or another mode that does not bypass \
             permissions), run sortie as another user, or set IS_SANDBOX=1 if this machine is a \
             sandbox"
        ),
    ))
}

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

    fn worker_mcp_settings(&self) -> Option<&AgentSettings> {
        Some(&self.settings)
    }

    fn start_session(
        &self,
        params: StartSessionParams,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let base = PerTurnSession::start(
            &self.settings,
            &self.clock,
            &params,
            DEFAULT_COMMAND,
            ENV_VARS,
        )?;
        if self
            .settings
            .block
            .get("session_persistence")
            .and_then(|v| v.as_bool())
            == Some(false)
        {
            log::warn!(
                issue_id:% = params.issue_id,
                issue_identifier:% = params.issue_identifier;
                "claude-code session_persistence is false: --resume will not work"
            );
        }
        let new_session_id = new_uuid()?;
        let (session_id, resuming) = match params.resume_session_id.filter(|s| !s.is_empty()) {
            Some(id) => (id, true),
            None => (new_session_id, false),
        };
        Ok(Box::new(ClaudeSession {
            base,
            session_id,
            resume_next: resuming,
        }))
    }
}

/// One claude-code conversation.
pub struct ClaudeSession {
    base: PerTurnSession,
    session_id: String,
    /// False only before the first turn of a brand-new conversation.
    resume_next: bool,
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
        let b = &self.base;
        if b.stopped {
            let id = Some(self.session_id.clone());
            return TurnResult::session_stopped(b.clock.as_ref(), id, None, events);
        }
        let flag = if self.resume_next {
            SessionFlag::Resume(self.session_id.clone())
        } else {
            SessionFlag::New(self.session_id.clone())
        };
        let args = build_args(
            None,
            &flag,
            &b.settings.block,
            &b.settings.workflow_dir,
            b.mcp_config.as_deref(),
        );
        let spec = b.spec(args, prompt);
        let limits = TurnLimits::from_settings(&b.settings);
        log::info!(
            agent_kind:% = KIND,
            issue_id:% = b.issue_id,
            issue_identifier:% = b.issue_identifier,
            session_id:% = self.session_id,
            resume:% = self.resume_next;
            "agent turn starting"
        );
        let mut parser = ClaudeParser::new(
            Arc::clone(&b.clock),
            b.workspace.clone(),
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
        self.base.stopped = true;
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
    fn root_may_not_bypass_permissions_outside_a_declared_sandbox() {
        let refused = |mode, root, sandbox| root_bypass_refused(mode, root, sandbox).is_some();
        assert!(refused(None, true, false));
        assert!(refused(Some(" "), true, false));
        assert!(refused(Some("bypassPermissions"), true, false));
        assert!(!refused(Some("acceptEdits"), true, false));
        assert!(!refused(None, true, true));
        assert!(!refused(None, false, false));
        let p = root_bypass_refused(None, true, false);
        assert!(p.is_some_and(|p| p.field == "claude-code.permission_mode"
            && p.message.contains("--dangerously-skip-permissions")
            && p.message.contains("acceptEdits")));
    }

    #[test]
    fn uuids_are_version_4() {
        let u = new_uuid().unwrap_or_default();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uuid().unwrap_or_default());
    }
}
