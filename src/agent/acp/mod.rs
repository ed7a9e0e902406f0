//! The agent-client-protocol adapter: one persistent agent process per session (Gemini CLI
//! with `--experimental-acp`, Kiro CLI with `acp`, or any other ACP agent), spoken to in
//! JSON-RPC 2.0 over its stdin/stdout. A turn is a `session/prompt`; a later dispatch loads
//! the earlier session with `session/load` when the agent can.
//!
//! Sortie advertises neither file-system nor terminal capabilities (the agent uses its own
//! tools in the workspace) and passes no MCP servers. Usage, when reported on the prompt
//! response, is one figure per turn for the session as a whole.

pub mod config;
pub mod handshake;
pub mod kiro;
pub mod parser;
mod session;

pub use session::AcpSession;

use crate::agent::jsonrpc::{self, Dialect};
use crate::agent::process::{MAX_LINE_BYTES, session_workspace_on};
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentSession,
    AgentSettings, SettingProblem, StartSessionParams, UsageArrival, UsageAttribution,
    UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use config::AcpConfig;
use std::sync::Arc;
use std::time::Duration;

/// The configuration name of this kind.
pub const KIND: &str = "agent-client-protocol";
const DEFAULT_COMMAND: &str = "gemini --experimental-acp";

/// One figure per turn from the protocol, for the session as a whole.
pub const CAPS: AdapterCaps = AdapterCaps {
    usage_arrival: UsageArrival::TurnEnd,
    usage_attribution: UsageAttribution::SessionTotal,
    usage_provenance: Some(UsageProvenance {
        source: UsageSource::Protocol,
        strategy: UsageStrategy::Live,
    }),
    resumable: true,
    requires_command: true,
    stdin_session: true,
};

/// What the usual ACP agents need from sortie's environment besides the basics: Gemini CLI's
/// key and Google Cloud settings, Kiro CLI's own variables.
pub const ENV_VARS: &[&str] = &[
    "GEMINI_*",
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "KIRO_*",
];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: config::BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &[],
    validate: |settings: &AgentSettings| -> Vec<SettingProblem> {
        AcpConfig::parse(&settings.block).1
    },
    classify_failure,
    build: |settings, clock| Ok(Arc::new(AcpAdapter::new(settings.clone(), clock))),
    contract: crate::domain::contract::Contract::Suite("agent_client_protocol"),
};

/// Recognises the ACP agent's own words for a failure that will not heal by itself, then the common
/// ones (`failure_class::classify_common`).
pub fn classify_failure(text: &str) -> Option<crate::agent::failure_class::FailureClass> {
    use crate::agent::failure_class::FailureClass;
    const WORDS: &[(FailureClass, &[&str])] = &[
        (
            FailureClass::NotLoggedIn,
            &[
                "api key not valid",
                "api key is missing",
                "please set an auth method",
                "gemini_api_key environment variable not found",
            ],
        ),
        (FailureClass::Unreachable, &["fetch failed"]),
    ];
    let t = text.to_ascii_lowercase();
    WORDS
        .iter()
        .find(|(_, words)| words.iter().any(|w| t.contains(w)))
        .map(|(class, _)| *class)
        .or_else(|| crate::agent::failure_class::classify_common(text))
}

/// Builds ACP sessions.
pub struct AcpAdapter {
    /// The configured kind the sessions are recorded under (this kind, or one converted onto it).
    kind: &'static str,
    /// The variables of sortie's environment that kind's agent gets (its descriptor's list).
    env_vars: &'static [&'static str],
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
}

impl AcpAdapter {
    pub fn new(settings: AgentSettings, clock: Arc<dyn Clock>) -> Self {
        Self::for_kind(KIND, ENV_VARS, settings, clock)
    }

    /// An adapter for a kind that runs over this protocol under a name of its own (`kiro`):
    /// `settings` already carry the converted command and the environment that kind needs.
    pub fn for_kind(
        kind: &'static str,
        env_vars: &'static [&'static str],
        settings: AgentSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        AcpAdapter {
            kind,
            env_vars,
            settings,
            clock,
        }
    }
}

impl AgentAdapter for AcpAdapter {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn caps(&self) -> AdapterCaps {
        CAPS
    }

    fn start_session(
        &self,
        params: StartSessionParams,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let workspace = session_workspace_on(&params.workspace, params.remote.as_ref())?;
        let (config, problems) = AcpConfig::parse(&self.settings.block);
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
            Dialect::V2,
            params.remote.as_ref(),
            crate::agent::env::session_env(&self.settings, self.env_vars, &params),
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
                    agent_kind:% = self.kind,
                    issue_id:% = params.issue_id,
                    issue_identifier:% = params.issue_identifier,
                    error_kind:% = e.kind,
                    error:% = e.message;
                    "agent session start failed"
                );
                return Err(e);
            }
        };
        log::info!(
            agent_kind:% = self.kind,
            issue_id:% = params.issue_id,
            issue_identifier:% = params.issue_identifier,
            session_id:% = started.session_id,
            resumed:% = started.resumed,
            pid:% = peer.pid();
            "agent session started"
        );
        Ok(Box::new(AcpSession {
            pid: peer.pid(),
            peer: Some(peer),
            clock: Arc::clone(&self.clock),
            workspace,
            session_id: started.session_id,
            turns_run: 0,
            reject_permissions: config.reject_permissions,
            read_timeout,
            stop_grace: self.settings.stop_grace(),
            turn_timeout: (self.settings.turn_timeout_ms > 0)
                .then(|| Duration::from_millis(self.settings.turn_timeout_ms)),
            issue_id: params.issue_id,
            issue_identifier: params.issue_identifier,
        }))
    }
}
