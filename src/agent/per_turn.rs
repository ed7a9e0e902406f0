//! What the fork-per-turn kinds' sessions share: the program, workspace, host, environment
//! and MCP file resolved once when the session starts, and each turn's [`ProcessSpec`] built
//! from them. A kind keeps only its own conversation state (how a turn continues the last) and
//! its arguments.

use crate::agent::process::{MAX_LINE_BYTES, ProcessSpec, agent_program_on, session_workspace_on};
use crate::agent::{AgentError, AgentSettings, StartSessionParams};
use crate::clock::Clock;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

/// One fork-per-turn session's fixed parts.
pub struct PerTurnSession {
    pub settings: AgentSettings,
    pub clock: Arc<dyn Clock>,
    pub workspace: PathBuf,
    pub program: String,
    pub command_args: Vec<String>,
    /// The worker-written MCP file; `None` on a host, which cannot read it.
    pub mcp_config: Option<PathBuf>,
    /// The host the session's processes run on.
    pub remote: Option<crate::ssh::SshHost>,
    /// Every turn's environment (`agent::env`).
    pub env: Vec<(OsString, OsString)>,
    pub issue_id: String,
    pub issue_identifier: String,
    /// `stop` was called; every process is gone when a turn returns, so nothing else is owed.
    pub stopped: bool,
}

impl PerTurnSession {
    /// Resolves the workspace (on the host, if any), the program (`agent.command`, else
    /// `default_command`) and the environment (`env_vars` passed through).
    pub fn start(
        settings: &AgentSettings,
        clock: &Arc<dyn Clock>,
        params: &StartSessionParams,
        default_command: &str,
        env_vars: &[&str],
    ) -> Result<Self, AgentError> {
        let remote = params.remote.clone();
        let workspace = session_workspace_on(&params.workspace, remote.as_ref())?;
        let (program, command_args) = agent_program_on(
            settings.command.as_deref(),
            default_command,
            remote.as_ref(),
        )?;
        let env = crate::agent::env::session_env(settings, env_vars, params);
        Ok(PerTurnSession {
            settings: settings.clone(),
            clock: Arc::clone(clock),
            workspace,
            program,
            command_args,
            mcp_config: params.mcp_config_path.clone().filter(|_| remote.is_none()),
            remote,
            env,
            issue_id: params.issue_id.clone(),
            issue_identifier: params.issue_identifier.clone(),
            stopped: false,
        })
    }

    /// One turn's process: the command's own arguments, then `args`; the prompt (issue text)
    /// always travels on stdin, so `ps` never shows it.
    pub fn spec(&self, args: Vec<String>, prompt: &str) -> ProcessSpec {
        let mut all = self.command_args.clone();
        all.extend(args);
        ProcessSpec {
            program: self.program.clone(),
            args: all,
            cwd: self.workspace.clone(),
            stdin: Some(prompt.as_bytes().to_vec()),
            base_env: Some(self.env.clone()),
            max_line_bytes: MAX_LINE_BYTES,
            remote: self.remote.clone(),
            sandbox: self.settings.sandbox.clone(),
            ..ProcessSpec::default()
        }
    }
}
