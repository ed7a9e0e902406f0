//! The codex adapter: one persistent `codex app-server` per session, spoken to in JSON-RPC
//! without the `jsonrpc` member over its stdin/stdout. The session is a codex thread; each
//! turn is a `turn/start` on it, and a later dispatch resumes the thread with `thread/resume`.
//!
//! Usage arrives incrementally (`thread/tokenUsage/updated` per model request, reconciled with
//! `turn/completed.usage` when the server sends one) and attributes to the session as a whole:
//! codex names no model per figure.
//!
//! Sortie has no in-process tool registry yet, so `thread/start` advertises no
//! `dynamicTools`, and every `item/tool/call` is answered `success:false` with an
//! `unsupported_tool_call` event.

pub mod config;
pub mod handshake;
pub mod limits;
pub mod parser;
mod session;

pub use session::CodexSession;

use crate::agent::jsonrpc::{self, Dialect};
use crate::agent::process::session_workspace_on;
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentSession,
    AgentSettings, SettingProblem, StartSessionParams, UsageArrival, UsageAttribution,
    UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use config::CodexConfig;
use std::sync::Arc;
use std::time::Duration;

/// The configuration name of this kind.
pub const KIND: &str = "codex";
/// The longest stdout line the app-server may send.
pub const MAX_LINE_BYTES: usize = 1 << 20;
const DEFAULT_COMMAND: &str = "codex app-server";

/// Figures from the protocol as they arrive, for the session as a whole.
pub const CAPS: AdapterCaps = AdapterCaps {
    usage_arrival: UsageArrival::Incremental,
    usage_attribution: UsageAttribution::SessionTotal,
    usage_provenance: Some(UsageProvenance {
        source: UsageSource::Protocol,
        strategy: UsageStrategy::Live,
    }),
    resumable: true,
    requires_command: true,
    stdin_session: true,
};

/// What a Codex CLI needs from sortie's environment besides the basics: its OpenAI credentials
/// and endpoint, and its own settings (`CODEX_HOME`, …).
pub const ENV_VARS: &[&str] = &["OPENAI_*", "CODEX_*"];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: config::BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &["api.openai.com", "auth.openai.com", "chatgpt.com"],
    validate: settings_problems,
    classify_failure,
    build: |settings, clock| Ok(Arc::new(CodexAdapter::new(settings.clone(), clock))),
    contract: crate::domain::contract::Contract::Suite("codex"),
};

/// Recognises Codex's own words for a failure that will not heal by itself, then the common
/// ones (`failure_class::classify_common`).
pub fn classify_failure(text: &str) -> Option<crate::agent::failure_class::FailureClass> {
    use crate::agent::failure_class::FailureClass;
    const WORDS: &[(FailureClass, &[&str])] = &[
        (
            FailureClass::NotLoggedIn,
            &["not logged in", "please log in", "codex login"],
        ),
        (
            FailureClass::Unreachable,
            &[
                "error sending request for url",
                "stream disconnected before completion: error sending request",
            ],
        ),
    ];
    let t = text.to_ascii_lowercase();
    WORDS
        .iter()
        .find(|(_, words)| words.iter().any(|w| t.contains(w)))
        .map(|(class, _)| *class)
        .or_else(|| crate::agent::failure_class::classify_common(text))
}

fn settings_problems(settings: &AgentSettings) -> Vec<SettingProblem> {
    CodexConfig::parse(&settings.block).1
}

/// Builds codex sessions.
pub struct CodexAdapter {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
}

impl CodexAdapter {
    pub fn new(settings: AgentSettings, clock: Arc<dyn Clock>) -> Self {
        CodexAdapter { settings, clock }
    }
}

impl AgentAdapter for CodexAdapter {
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
        let workspace = session_workspace_on(&params.workspace, params.remote.as_ref())?;
        let (config, problems) = CodexConfig::parse(&self.settings.block);
        if let Some(p) = problems.first() {
            return Err(AgentError::new(
                AgentErrorKind::ResponseError,
                format!("{}: {}", p.field, p.message),
            ));
        }
        let mut peer = jsonrpc::launch(
            &self.settings,
            DEFAULT_COMMAND,
            workspace.clone(),
            MAX_LINE_BYTES,
            Dialect::Bare,
            params.remote.as_ref(),
            crate::agent::env::session_env(&self.settings, ENV_VARS, &params),
        )?;
        let read_timeout = jsonrpc::read_timeout(self.settings.read_timeout_ms);
        let started = match handshake::start(
            &mut peer,
            &config,
            &workspace,
            params.resume_session_id.as_deref(),
            read_timeout,
        ) {
            Ok(s) => s,
            Err(e) => {
                peer.stop(Duration::ZERO, None);
                log::warn!(
                    issue_id:% = params.issue_id,
                    issue_identifier:% = params.issue_identifier,
                    error_kind:% = e.kind,
                    error:% = e.message;
                    "codex session start failed"
                );
                return Err(e);
            }
        };
        log::info!(
            issue_id:% = params.issue_id,
            issue_identifier:% = params.issue_identifier,
            session_id:% = started.thread_id,
            resumed:% = started.resumed,
            pid:% = peer.pid();
            "codex session started"
        );
        Ok(Box::new(CodexSession {
            pid: peer.pid(),
            peer: Some(peer),
            config,
            clock: Arc::clone(&self.clock),
            workspace,
            thread_id: started.thread_id,
            turns_run: 0,
            carry: parser::SessionCarry {
                model: started.model,
                ..Default::default()
            },
            read_timeout,
            stop_grace: self.settings.stop_grace(),
            turn_timeout: (self.settings.turn_timeout_ms > 0)
                .then(|| Duration::from_millis(self.settings.turn_timeout_ms)),
            issue_id: params.issue_id,
            issue_identifier: params.issue_identifier,
        }))
    }
}
