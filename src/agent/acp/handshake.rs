//! Starting an Agent Client Protocol session: `initialize` (sortie offers no file-system or
//! terminal capabilities), an optional `authenticate` with the configured method, then
//! `session/load` for an earlier session when the agent can load sessions (falling back to
//! `session/new`), or `session/new`.

use super::config::AcpConfig;
use super::parser::AUTH_REQUIRED;
use crate::agent::jsonrpc::{Message, Recv, RpcErrorObject, RpcFailure, RpcPeer, ServerReply};
use crate::agent::{AgentError, AgentErrorKind};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The protocol version sortie speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// What the handshake settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    pub session_id: String,
    pub resumed: bool,
}

fn refuse(method: &str, _params: &Value) -> ServerReply {
    Err(RpcErrorObject {
        code: -32601,
        message: format!("method not supported before a session exists: {method}"),
        data: None,
    })
}

fn failure(peer: &RpcPeer, step: &str, f: &RpcFailure) -> AgentError {
    let mut message = format!("agent {step}: {f}");
    if let RpcFailure::Closed(_) = f
        && let Some(line) = peer.child_stderr_hint()
    {
        message.push_str(&format!(" (stderr: {line})"));
    }
    AgentError::new(AgentErrorKind::ResponseError, message)
}

/// `initialize` parameters.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "sortie", "title": "Sortie", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `id (name)` of each advertised auth method.
pub fn auth_methods(init: &Value) -> Vec<String> {
    init.get("authMethods")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?;
            Some(match m.get("name").and_then(Value::as_str) {
                Some(n) => format!("{id} ({n})"),
                None => id.to_string(),
            })
        })
        .collect()
}

/// A refused `session/new` (or `authenticate`): "authentication required" is
/// `agent_auth_failed` with what a person can do, anything else `response_error`.
pub fn session_error(step: &str, e: &RpcErrorObject, methods: &[String]) -> AgentError {
    let lower = e.message.to_lowercase();
    let auth = e.code == AUTH_REQUIRED
        || ["auth", "api key", "login", "log in", "credential"]
            .iter()
            .any(|w| lower.contains(w));
    if !auth {
        return AgentError::new(
            AgentErrorKind::ResponseError,
            format!("agent {step} failed: {e}"),
        );
    }
    let offered = if methods.is_empty() {
        "none advertised".to_string()
    } else {
        methods.join(", ")
    };
    AgentError::new(
        AgentErrorKind::AgentAuthFailed,
        format!(
            "the agent is not logged in ({step}: {}): log its CLI in as the user sortie runs as, \
             or set the CLI's API key in sortie's environment; or pick one of its auth methods \
             with agent-client-protocol.auth_method (offered: {offered})",
            e.message
        ),
    )
}

/// Runs the whole handshake.
pub fn start(
    peer: &mut RpcPeer,
    config: &AcpConfig,
    workspace: &Path,
    resume: Option<&str>,
    timeout: Duration,
) -> Result<Started, AgentError> {
    let init = peer
        .request("initialize", initialize_params(), timeout, &mut refuse)
        .map_err(|f| failure(peer, "initialize", &f))?;
    let methods = auth_methods(&init);
    if let Some(method) = &config.auth_method {
        match peer.request(
            "authenticate",
            json!({"methodId": method}),
            timeout,
            &mut refuse,
        ) {
            Ok(_) => {}
            Err(RpcFailure::Error(e)) => return Err(session_error("authenticate", &e, &methods)),
            Err(f) => return Err(failure(peer, "authenticate", &f)),
        }
    }
    let cwd = workspace.display().to_string();
    let can_load = init
        .pointer("/agentCapabilities/loadSession")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(id) = resume.filter(|s| !s.trim().is_empty()) {
        if can_load {
            let params = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
            match peer.request("session/load", params, timeout, &mut refuse) {
                Ok(_) => {
                    skip_replay(peer);
                    return Ok(Started {
                        session_id: id.to_string(),
                        resumed: true,
                    });
                }
                Err(RpcFailure::Error(e)) if e.code == AUTH_REQUIRED => {
                    return Err(session_error("session/load", &e, &methods));
                }
                Err(RpcFailure::Error(e)) => log::warn!(
                    session_id:% = id,
                    error:% = e;
                    "agent session/load failed, starting a new session (earlier context lost)"
                ),
                Err(f) => return Err(failure(peer, "session/load", &f)),
            }
        } else {
            log::warn!(
                session_id:% = id;
                "agent cannot load sessions, starting a new one (earlier context lost)"
            );
        }
    }
    let v = match peer.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": []}),
        timeout,
        &mut refuse,
    ) {
        Ok(v) => v,
        Err(RpcFailure::Error(e)) => return Err(session_error("session/new", &e, &methods)),
        Err(f) => return Err(failure(peer, "session/new", &f)),
    };
    let session_id = v
        .get("sessionId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            AgentError::new(
                AgentErrorKind::ResponseError,
                "agent session/new answered without a sessionId",
            )
        })?
        .to_string();
    skip_replay(peer);
    Ok(Started {
        session_id,
        resumed: false,
    })
}

/// A loaded session replays its history as `session/update`s: none of it is this turn's.
fn skip_replay(peer: &mut RpcPeer) {
    while let Recv::Message(m) = peer.recv(Some(Instant::now()), None) {
        if let Message::Request { id, method, params } = m {
            let reply = refuse(&method, &params);
            let _ = peer.respond(&id, reply);
        }
    }
}
