//! The opencode adapter: one `opencode run --format json` process per turn, `--session <id>`
//! once the stream has named the session, and `opencode export` after each turn to
//! cross-check the token figures streamed in `step_finish` lines.
//!
//! Startup: OpenCode prints nothing at all while it cannot reach its provider (no network),
//! so the turn runs under a startup deadline of `agent.read_timeout_ms` (30 s when unset) that
//! only its first JSON line ends; plain-text lines restart it.

pub mod argv;
mod collect;
pub mod export;
pub mod parser;
mod settings;
mod tools;

use crate::agent::process::{
    self, MAX_LINE_BYTES, ProcessSpec, TurnLimits, agent_program_on, session_workspace_on,
};
use crate::agent::stream::StreamParser;
use crate::agent::{
    AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentEvent,
    AgentSession, AgentSettings, CancelToken, StartSessionParams, TurnOutcome, TurnResult,
    UsageArrival, UsageAttribution, UsageProvenance, UsageSource, UsageStrategy,
};
use crate::clock::Clock;
use crossbeam_channel::Sender;
use parser::{ExportHook, OpencodeParser, SessionContext};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The configuration name of this kind.
pub const KIND: &str = "opencode";
/// Usage streams per model request (`step_finish`), named by provider and model. The export
/// after the turn is a cross-check; the run's figure is the streamed sum.
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
/// Where the figure comes from on a turn whose stream carried no tokens and the export did.
/// Only logged: a run's recorded provenance is the kind's static [`CAPS`] one, so such a turn
/// is still recorded as output/live.
pub const EXPORT_PROVENANCE: UsageProvenance = UsageProvenance {
    source: UsageSource::Journal,
    strategy: UsageStrategy::Records,
};
const DEFAULT_COMMAND: &str = "opencode";
/// The startup deadline and read timeout when `agent.read_timeout_ms` is unset.
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The export never waits longer than this.
const MAX_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// What OpenCode needs from sortie's environment besides the basics: its own settings and the
/// keys of the providers it is most often configured with (another provider's key goes in
/// `agent.env`).
pub const ENV_VARS: &[&str] = &[
    "OPENCODE_*",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: argv::BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &[],
    validate: settings::problems,
    classify_failure,
    build: |settings, clock| {
        let adapter = OpencodeAdapter::new(settings.clone(), clock)?;
        Ok(Arc::new(adapter))
    },
    contract: crate::domain::contract::Contract::Suite("opencode"),
};

/// Recognises OpenCode's own words for a failure that will not heal by itself (its provider
/// errors by name, never sortie's startup deadline message, which only guesses at the cause),
/// then the common ones (`failure_class::classify_common`).
pub fn classify_failure(text: &str) -> Option<crate::agent::failure_class::FailureClass> {
    use crate::agent::failure_class::FailureClass;
    const WORDS: &[(FailureClass, &[&str])] = &[
        (
            FailureClass::NoProvider,
            &[
                "providermodelnotfounderror",
                "provideriniterror",
                "no providers found",
                "no providers are available",
                "no provider selected",
            ],
        ),
        (
            FailureClass::NotLoggedIn,
            &["api key is missing", "no api key"],
        ),
    ];
    let t = text.to_ascii_lowercase();
    WORDS
        .iter()
        .find(|(_, words)| words.iter().any(|w| t.contains(w)))
        .map(|(class, _)| *class)
        .or_else(|| crate::agent::failure_class::classify_common(text))
}

/// Builds opencode sessions.
pub struct OpencodeAdapter {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
    env: Vec<(String, String)>,
}

impl OpencodeAdapter {
    /// Fails when the block's tool scoping is contradictory.
    pub fn new(settings: AgentSettings, clock: Arc<dyn Clock>) -> Result<Self, AgentError> {
        let env = argv::managed_env(&settings.block)
            .map_err(|p| AgentError::new(AgentErrorKind::AgentNotFound, p.message))?;
        Ok(OpencodeAdapter {
            settings,
            clock,
            env,
        })
    }
}

impl AgentAdapter for OpencodeAdapter {
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
        let remote = params.remote.clone();
        let workspace = session_workspace_on(&params.workspace, remote.as_ref())?;
        let (program, command_args) = agent_program_on(
            self.settings.command.as_deref(),
            DEFAULT_COMMAND,
            remote.as_ref(),
        )?;
        let base_env = crate::agent::env::session_env(&self.settings, ENV_VARS, &params);
        Ok(Box::new(OpencodeSession {
            settings: self.settings.clone(),
            clock: Arc::clone(&self.clock),
            env: self.env.clone(),
            base_env,
            workspace,
            program,
            command_args,
            remote,
            issue_id: params.issue_id,
            issue_identifier: params.issue_identifier,
            session_id: params.resume_session_id.filter(|s| !s.is_empty()),
            announced: false,
            stopped: false,
        }))
    }
}

/// One opencode conversation.
pub struct OpencodeSession {
    settings: AgentSettings,
    clock: Arc<dyn Clock>,
    /// The managed variables, replacing any copies in `base_env`.
    env: Vec<(String, String)>,
    /// Every process's environment (`agent::env`).
    base_env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    workspace: PathBuf,
    program: String,
    command_args: Vec<String>,
    /// The host the session's processes run on.
    remote: Option<crate::ssh::SshHost>,
    issue_id: String,
    issue_identifier: String,
    /// `None` until the first stream names the session (or a resume supplies it).
    session_id: Option<String>,
    /// `session_started` was sent for `session_id`.
    announced: bool,
    stopped: bool,
}

impl OpencodeSession {
    fn read_timeout(&self) -> Duration {
        match self.settings.read_timeout_ms {
            0 => DEFAULT_READ_TIMEOUT,
            ms => Duration::from_millis(ms),
        }
    }

    fn spec(&self, args: Vec<String>) -> ProcessSpec {
        let mut all = self.command_args.clone();
        all.extend(args);
        ProcessSpec {
            program: self.program.clone(),
            args: all,
            cwd: self.workspace.clone(),
            stdin: None,
            base_env: Some(self.base_env.clone()),
            env: self.env.clone(),
            env_remove: argv::MANAGED_ENV.iter().map(|s| s.to_string()).collect(),
            max_line_bytes: MAX_LINE_BYTES,
            remote: self.remote.clone(),
            sandbox: self.settings.sandbox.clone(),
        }
    }

    /// Runs `opencode export --sanitize <id>` under the supervisor with its own deadline.
    fn export_hook(&self) -> ExportHook {
        let timeout = (self.read_timeout() * 2).min(MAX_EXPORT_TIMEOUT);
        let base = self.spec(Vec::new());
        Box::new(move |sid: &str| {
            let mut spec = base.clone();
            spec.args.extend(argv::export_args(sid));
            let limits = TurnLimits {
                turn_timeout: Some(timeout),
                drain_timeout: timeout,
                ..TurnLimits::default()
            };
            let mut collect = collect::CollectParser::default();
            let (tx, _rx) = crossbeam_channel::unbounded();
            let turn = process::run_turn(&spec, &mut collect, &tx, &CancelToken::new(), limits);
            match turn.outcome {
                TurnOutcome::Completed { .. } => Ok(collect.text().to_string()),
                other => Err(AgentError::new(
                    AgentErrorKind::ResponseError,
                    format!("{} (stderr: {})", other.message(), turn.stderr),
                )),
            }
        })
    }

    fn refuse(&self, message: &str, events: &Sender<AgentEvent>) -> TurnResult {
        let outcome = TurnOutcome::EndedWithError {
            message: message.into(),
            kind: AgentErrorKind::ResponseError,
        };
        let _ = events.send(AgentEvent::new(
            self.clock.now_ms(),
            outcome.terminal_event(None),
        ));
        TurnResult {
            outcome,
            session_id: self.session_id.clone(),
            usage: None,
            model: None,
        }
    }
}

impl AgentSession for OpencodeSession {
    fn session_id(&self) -> Option<String> {
        self.session_id.clone()
    }

    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        // `&mut self` already rules out a second turn while one runs.
        if self.stopped {
            return self.refuse("session already stopped", events);
        }
        // The prompt (issue text) always travels on stdin, so `ps` never shows it.
        let args = argv::run_args(
            &self.workspace,
            self.session_id.as_deref(),
            &self.settings.block,
            None,
        );
        let mut spec = self.spec(args);
        spec.stdin = Some(prompt.as_bytes().to_vec());
        let limits = TurnLimits {
            turn_timeout: (self.settings.turn_timeout_ms > 0)
                .then(|| Duration::from_millis(self.settings.turn_timeout_ms)),
            drain_timeout: self.read_timeout(),
            first_line_timeout: Some(self.read_timeout()),
            grace: self.settings.stop_grace(),
        };
        log::info!(
            agent_kind:% = KIND,
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id.as_deref().unwrap_or("");
            "agent turn starting"
        );
        let ctx = SessionContext {
            expected: self.session_id.clone(),
            announced: self.announced,
        };
        let mut parser = OpencodeParser::new(Arc::clone(&self.clock), self.workspace.clone(), ctx)
            .with_export(self.export_hook());
        let turn = process::run_turn(&spec, &mut parser, events, cancel, limits);
        if let Some(got) = parser.mismatched_session() {
            log::warn!(
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.session_id.as_deref().unwrap_or(""),
                reported:% = got;
                "opencode continued another session"
            );
        } else if let Some(sid) = parser.session_id().filter(|s| !s.is_empty()) {
            self.session_id = Some(sid);
            self.announced = parser.announced();
        }
        if parser.usage_from_export() {
            log::info!(
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.session_id.as_deref().unwrap_or(""),
                source:% = EXPORT_PROVENANCE.source.word(),
                strategy:% = EXPORT_PROVENANCE.strategy.word();
                "opencode usage read from the session export"
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
