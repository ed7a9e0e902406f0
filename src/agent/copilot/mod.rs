//! The copilot-cli adapter: one `copilot -p … --output-format json` process per turn. The CLI
//! names its session only in the `result` line at the end of a turn; later turns pass
//! `--resume <that id>`, or `--continue` when no id was ever reported.

pub mod argv;
pub mod parser;
pub mod preflight;
pub mod quota;
mod tools;

use crate::agent::process::{
    self, MAX_LINE_BYTES, ProcessSpec, TurnLimits, agent_program_on, session_workspace_on,
};
use crate::agent::stream::StreamParser;
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentEvent,
    AgentSession, AgentSettings, CancelToken, SettingProblem, StartSessionParams, TurnOutcome,
    TurnResult, UsageArrival, UsageAttribution, UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use argv::{Continuity, PromptArg, build_args};
use crossbeam_channel::Sender;
use parser::CopilotParser;
use std::path::PathBuf;
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
        let remote = params.remote.clone();
        let workspace = session_workspace_on(&params.workspace, remote.as_ref())?;
        let (program, command_args) = agent_program_on(
            self.settings.command.as_deref(),
            DEFAULT_COMMAND,
            remote.as_ref(),
        )?;
        let env = crate::agent::env::session_env(&self.settings, ENV_VARS, &params);
        // The preflight runs the CLI here; on a host it is skipped.
        if remote.is_none() {
            preflight::check(&program, &command_args, &workspace, &env).inspect_err(|e| {
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
            settings: self.settings.clone(),
            clock: Arc::clone(&self.clock),
            workspace,
            program,
            command_args,
            // The worker's MCP file is local; an agent on a host cannot read it.
            mcp_config: params.mcp_config_path.filter(|_| remote.is_none()),
            remote,
            issue_id: params.issue_id,
            issue_identifier: params.issue_identifier,
            session_id: params.resume_session_id.filter(|s| !s.trim().is_empty()),
            ran_before: false,
            premium_requests: 0,
            stopped: false,
            env,
        }))
    }
}

/// One copilot-cli conversation.
pub struct CopilotSession {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
    workspace: PathBuf,
    program: String,
    command_args: Vec<String>,
    mcp_config: Option<PathBuf>,
    /// The host the session's processes run on.
    remote: Option<crate::ssh::SshHost>,
    /// Every turn's environment (`agent::env`).
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    issue_id: String,
    issue_identifier: String,
    /// The id to resume: from an earlier attempt, then from each turn's `result` line.
    session_id: Option<String>,
    /// A turn's process ran in this session, so a conversation exists to continue.
    ran_before: bool,
    /// Premium requests reported by this session's turns so far.
    premium_requests: u64,
    stopped: bool,
}

impl CopilotSession {
    fn continuity(&self) -> Continuity {
        match &self.session_id {
            Some(id) => Continuity::Resume(id.clone()),
            None if self.ran_before => Continuity::Continue,
            None => Continuity::New,
        }
    }

    fn limits(&self) -> TurnLimits {
        TurnLimits::from_settings(&self.settings)
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
                session_id: self.session_id.clone(),
                usage: None,
                model: None,
            };
        }
        let continuity = self.continuity();
        // The prompt (issue text) always travels on stdin, so `ps` never shows it.
        let prompt_arg = PromptArg::Stdin;
        let mut args = self.command_args.clone();
        args.extend(build_args(
            prompt_arg,
            &continuity,
            &self.settings.block,
            &self.settings.workflow_dir,
            self.mcp_config.as_deref(),
        ));
        let spec = ProcessSpec {
            program: self.program.clone(),
            args,
            cwd: self.workspace.clone(),
            stdin: Some(prompt.as_bytes().to_vec()),
            base_env: Some(self.env.clone()),
            max_line_bytes: MAX_LINE_BYTES,
            remote: self.remote.clone(),
            sandbox: self.settings.sandbox.clone(),
            ..ProcessSpec::default()
        };
        log::info!(
            agent_kind:% = KIND,
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id.as_deref().unwrap_or(""),
            continuity:? = continuity;
            "agent turn starting"
        );
        let mut parser = CopilotParser::new(
            Arc::clone(&self.clock),
            self.workspace.clone(),
            self.session_id.clone(),
        );
        let turn = process::run_turn(&spec, &mut parser, events, cancel, self.limits());
        if let Some(sid) = parser.session_id().filter(|s| !s.is_empty()) {
            self.session_id = Some(sid);
        }
        if turn.pid.is_some() {
            self.ran_before = true;
        }
        if let Some(p) = parser.premium_requests() {
            self.premium_requests = self.premium_requests.saturating_add(p);
            log::info!(
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.session_id.as_deref().unwrap_or(""),
                premium_requests:% = p,
                session_premium_requests:% = self.premium_requests;
                "copilot turn premium requests"
            );
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
        self.stopped = true;
        Ok(())
    }
}
