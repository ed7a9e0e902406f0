//! The copilot-cli adapter: one `copilot -p … --output-format json` process per turn. The CLI
//! names its session only in the `result` line at the end of a turn; later turns pass
//! `--resume <that id>`, or `--continue` when no id was ever reported.

pub mod argv;
pub mod parser;
pub mod preflight;
pub mod quota;
mod tools;

use crate::agent::per_turn::PerTurnSession;
use crate::agent::process::{self, TurnLimits};
use crate::agent::stream::StreamParser;
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentEvent, AgentSession,
    AgentSettings, CancelToken, SettingProblem, StartSessionParams, TurnResult, UsageArrival,
    UsageAttribution, UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use argv::{Continuity, PromptArg, build_args};
use crossbeam_channel::Sender;
use parser::CopilotParser;
use std::sync::Arc;

/// The configuration name of this kind.
pub const KIND: &str = "copilot-cli";
/// Usage arrives per message (per request on newer CLIs), read live from stdout; newer CLIs
/// name the model.
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
const DEFAULT_COMMAND: &str = "copilot";

/// What GitHub Copilot CLI needs from sortie's environment besides the basics: its GitHub
/// credentials (`COPILOT_GITHUB_TOKEN`, `GH_TOKEN`, `GITHUB_TOKEN`), `gh`'s host and config,
/// and its own settings.
pub const ENV_VARS: &[&str] = &[
    "COPILOT_*",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_HOST",
    "GH_CONFIG_DIR",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: argv::BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &[
        "api.githubcopilot.com",
        "*.githubcopilot.com",
        "api.github.com",
    ],
    validate: settings_problems,
    classify_failure,
    build: |settings, clock| Ok(Arc::new(CopilotAdapter::new(settings.clone(), clock))),
    contract: crate::domain::contract::Contract::File("agent_copilot_daemon.rs"),
};

/// Recognises the Copilot CLI's own words for a failure that will not heal by itself, then the common
/// ones (`failure_class::classify_common`).
pub fn classify_failure(text: &str) -> Option<crate::agent::failure_class::FailureClass> {
    use crate::agent::failure_class::FailureClass;
    const WORDS: &[(FailureClass, &[&str])] = &[
        (
            FailureClass::UnsupportedToken,
            &[
                "are not supported by copilot",
                "classic personal access tokens",
            ],
        ),
        (
            FailureClass::NotLoggedIn,
            &[
                "no authentication information found",
                "error: not authenticated",
            ],
        ),
        (
            FailureClass::Unreachable,
            &["network fetch failed", "error sending request for url"],
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
    argv::block_problems(&settings.block)
}

/// Builds copilot-cli sessions.
pub struct CopilotAdapter {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
}

impl CopilotAdapter {
    pub fn new(settings: AgentSettings, clock: Arc<dyn Clock>) -> Self {
        CopilotAdapter { settings, clock }
    }
}

impl AgentAdapter for CopilotAdapter {
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
        // The preflight runs the CLI here; on a host it is skipped.
        if base.remote.is_none() {
            preflight::check(
                &base.program,
                &base.command_args,
                &base.workspace,
                &base.env,
            )
            .inspect_err(|e| {
                log::warn!(
                    issue_id:% = params.issue_id,
                    issue_identifier:% = params.issue_identifier,
                    error_kind:% = e.kind,
                    error:% = e.message;
                    "copilot preflight failed"
                );
            })?;
        }
        Ok(Box::new(CopilotSession {
            base,
            session_id: params.resume_session_id.filter(|s| !s.trim().is_empty()),
            ran_before: false,
            premium_requests: 0,
        }))
    }
}

/// One copilot-cli conversation.
pub struct CopilotSession {
    base: PerTurnSession,
    /// The id to resume: from an earlier attempt, then from each turn's `result` line.
    session_id: Option<String>,
    /// A turn's process ran in this session, so a conversation exists to continue.
    ran_before: bool,
    /// Premium requests reported by this session's turns so far.
    premium_requests: u64,
}

impl CopilotSession {
    fn continuity(&self) -> Continuity {
        match &self.session_id {
            Some(id) => Continuity::Resume(id.clone()),
            None if self.ran_before => Continuity::Continue,
            None => Continuity::New,
        }
    }

    /// Adds a turn's premium requests to the session's count, logged.
    fn count_premium(&mut self, p: u64) {
        self.premium_requests = self.premium_requests.saturating_add(p);
        log::info!(
            issue_id:% = self.base.issue_id,
            issue_identifier:% = self.base.issue_identifier,
            session_id:% = self.session_id.as_deref().unwrap_or(""),
            premium_requests:% = p,
            session_premium_requests:% = self.premium_requests;
            "copilot turn premium requests"
        );
    }
}

impl AgentSession for CopilotSession {
    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        let b = &self.base;
        if b.stopped {
            let id = self.session_id.clone();
            return TurnResult::session_stopped(b.clock.as_ref(), id, None, events);
        }
        let continuity = self.continuity();
        let args = build_args(
            PromptArg::Stdin,
            &continuity,
            &b.settings.block,
            &b.settings.workflow_dir,
            b.mcp_config.as_deref(),
        );
        let spec = b.spec(args, prompt);
        log::info!(
            agent_kind:% = KIND,
            issue_id:% = b.issue_id,
            issue_identifier:% = b.issue_identifier,
            session_id:% = self.session_id.as_deref().unwrap_or(""),
            continuity:% = continuity.word();
            "agent turn starting"
        );
        let mut parser = CopilotParser::new(
            Arc::clone(&b.clock),
            b.workspace.clone(),
            self.session_id.clone(),
        );
        let limits = TurnLimits::from_settings(&b.settings);
        let turn = process::run_turn(&spec, &mut parser, events, cancel, limits);
        if let Some(sid) = parser.session_id().filter(|s| !s.is_empty()) {
            self.session_id = Some(sid);
        }
        if turn.pid.is_some() {
            self.ran_before = true;
        }
        if let Some(p) = parser.premium_requests() {
            self.count_premium(p);
        }
        TurnResult {
            outcome: turn.outcome,
            session_id: self.session_id.clone(),
            usage: parser.usage(),
            model: parser.model(),
        }
    }

    fn stop(&mut self) -> Result<(), AgentError> {
        // Fork-per-turn: every process is gone when `run_turn` returns.
        self.base.stopped = true;
        Ok(())
    }
}
