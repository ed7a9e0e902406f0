//! Starting a kind's JSON-RPC server from `agent.command` (or the kind's default), with the
//! spawn failures mapped onto agent error kinds.

use super::child::RpcSpec;
use super::message::Dialect;
use super::peer::RpcPeer;
use crate::agent::process::agent_program_on;
use crate::agent::stream::SpawnError;
use crate::agent::{AgentError, AgentErrorKind};
use std::path::PathBuf;

/// Spawns `agent.command` of `settings` (or `default` when unset or blank), split on
/// whitespace, in `workspace` with the session's environment `env` (`agent::env`); on `remote`
/// when one is given, else in the settings' sandbox if any.
pub fn launch(
    settings: &crate::agent::AgentSettings,
    default: &str,
    workspace: PathBuf,
    max_line_bytes: usize,
    dialect: Dialect,
    remote: Option<&crate::ssh::SshHost>,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> Result<RpcPeer, AgentError> {
    let (program, args) = agent_program_on(settings.command.as_deref(), default, remote)?;
    let spec = RpcSpec {
        program,
        args,
        cwd: workspace,
        base_env: Some(env),
        env: Vec::new(),
        max_line_bytes,
        remote: remote.cloned(),
        sandbox: settings.sandbox.clone(),
    };
    RpcPeer::spawn(&spec, dialect).map_err(|e| match e {
        SpawnError::NotFound(m) => AgentError::new(AgentErrorKind::AgentNotFound, m),
        SpawnError::InvalidCwd(m) => AgentError::new(AgentErrorKind::InvalidWorkspaceCwd, m),
        SpawnError::Other(m) => AgentError::new(AgentErrorKind::PortExit, m),
    })
}
