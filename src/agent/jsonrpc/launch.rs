//! Starting a kind's JSON-RPC server from `agent.command` (or the kind's default), with the
//! spawn failures mapped onto agent error kinds.

use super::child::RpcSpec;
use super::message::Dialect;
use super::peer::RpcPeer;
use crate::agent::process::split_command;
use crate::agent::stream::SpawnError;
use crate::agent::{AgentError, AgentErrorKind};
use std::path::PathBuf;

/// Spawns `command` (or `default` when unset or blank), split on whitespace, in `workspace`.
pub fn launch(
    command: Option<&str>,
    default: &str,
    workspace: PathBuf,
    max_line_bytes: usize,
    dialect: Dialect,
) -> Result<RpcPeer, AgentError> {
    let command = command.filter(|c| !c.trim().is_empty()).unwrap_or(default);
    let (program, args) = split_command(command)
        .ok_or_else(|| AgentError::new(AgentErrorKind::AgentNotFound, "empty agent.command"))?;
    let program = crate::agent::command::resolve_command(&program)
        .map_err(|e| AgentError::new(AgentErrorKind::AgentNotFound, e.to_string()))?
        .to_string_lossy()
        .into_owned();
    let spec = RpcSpec {
        program,
        args,
        cwd: workspace,
        env: Vec::new(),
        max_line_bytes,
    };
    RpcPeer::spawn(&spec, dialect).map_err(|e| match e {
        SpawnError::NotFound(m) => AgentError::new(AgentErrorKind::AgentNotFound, m),
        SpawnError::InvalidCwd(m) => AgentError::new(AgentErrorKind::InvalidWorkspaceCwd, m),
        SpawnError::Other(m) => AgentError::new(AgentErrorKind::PortExit, m),
    })
}
