//! Starting a codex session on a fresh `app-server`: `initialize` / `initialized`, the account
//! check (an API-key login with `CODEX_API_KEY` when nobody is logged in), then a thread:
//! `thread/resume` for an earlier session's id, falling back to `thread/start`.

use super::config::CodexConfig;
use crate::agent::jsonrpc::{Message, Recv, RpcErrorObject, RpcFailure, RpcPeer, ServerReply};
use crate::agent::{AgentError, AgentErrorKind};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The environment variable an API-key login reads.
pub const API_KEY_ENV: &str = "CODEX_API_KEY";

/// What the handshake settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    pub thread_id: String,
    pub model: Option<String>,
    /// Whether an earlier thread was resumed (false: a new one, context lost).
    pub resumed: bool,
}

/// No server request is expected before a thread exists; any is refused, never left waiting.
fn refuse(method: &str, _params: &Value) -> ServerReply {
    Err(RpcErrorObject {
        code: -32601,
        message: format!("method not supported before a thread exists: {method}"),
        data: None,
    })
}

fn failure(peer: &RpcPeer, step: &str, f: &RpcFailure) -> AgentError {
    let mut message = format!("codex app-server {step}: {f}");
    if let RpcFailure::Closed(_) = f {
        let stderr = peer.child_stderr_hint();
        if let Some(line) = stderr {
            message.push_str(&format!(" (stderr: {line})"));
        }
    }
    AgentError::new(AgentErrorKind::ResponseError, message)
}

/// Runs the whole handshake.
pub fn start(
    peer: &mut RpcPeer,
    config: &CodexConfig,
    workspace: &Path,
    resume: Option<&str>,
    timeout: Duration,
) -> Result<Started, AgentError> {
    let init = json!({
        "clientInfo": {"name": "sortie_orchestrator", "title": "Sortie Orchestrator", "version": "0.1.0"},
        "capabilities": {"experimentalApi": true},
    });
    peer.request("initialize", init, timeout, &mut refuse)
        .map_err(|f| failure(peer, "initialize", &f))?;
    peer.notify("initialized", json!({}))
        .map_err(|f| failure(peer, "initialized", &f))?;
    check_account(peer, timeout)?;
    if let Some(id) = resume.filter(|s| !s.trim().is_empty()) {
        match peer.request(
            "thread/resume",
            json!({"threadId": id}),
            timeout,
            &mut refuse,
        ) {
            Ok(v) => {
                let thread_id = thread_id(&v).unwrap_or_else(|| id.to_string());
                skip_buffered(peer);
                return Ok(Started {
                    model: model(&v),
                    thread_id,
                    resumed: true,
                });
            }
            Err(f @ RpcFailure::Error(_)) => {
                log::warn!(
                    thread_id:% = id,
                    error:% = f;
                    "codex thread/resume failed, starting a new thread (earlier context lost)"
                );
            }
            Err(f) => return Err(failure(peer, "thread/resume", &f)),
        }
    }
    let v = peer
        .request(
            "thread/start",
            config.thread_start_params(workspace),
            timeout,
            &mut refuse,
        )
        .map_err(|f| failure(peer, "thread/start", &f))?;
    let thread_id = thread_id(&v).ok_or_else(|| {
        AgentError::new(
            AgentErrorKind::ResponseError,
            "codex app-server thread/start answered without a thread id",
        )
    })?;
    skip_buffered(peer);
    Ok(Started {
        model: model(&v),
        thread_id,
        resumed: false,
    })
}

/// `result.thread.id` of a `thread/start` or `thread/resume` answer.
pub fn thread_id(v: &Value) -> Option<String> {
    v.pointer("/thread/id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The model a thread answer reports.
pub fn model(v: &Value) -> Option<String> {
    v.get("model")
        .or_else(|| v.pointer("/thread/model"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What `account/read`'s answer leaves to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountNext {
    /// Logged in, or the provider needs no OpenAI account.
    Ready,
    /// Log in with this API key.
    Login(String),
}

/// Decides from `account/read`'s result and the `CODEX_API_KEY` value: an account is ready;
/// no account and a key means an API-key login; no account, no key and `requiresOpenaiAuth`
/// (assumed when absent) is `agent_auth_failed`, naming what a person must do.
pub fn account_next(result: &Value, api_key: Option<&str>) -> Result<AccountNext, AgentError> {
    if result.get("account").is_some_and(|a| !a.is_null()) {
        return Ok(AccountNext::Ready);
    }
    if let Some(key) = api_key.filter(|k| !k.trim().is_empty()) {
        return Ok(AccountNext::Login(key.to_string()));
    }
    let needs_login = result
        .get("requiresOpenaiAuth")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if !needs_login {
        return Ok(AccountNext::Ready);
    }
    Err(AgentError::new(
        AgentErrorKind::AgentAuthFailed,
        format!(
            "codex is not logged in (account/read reported no account): run `codex login` \
             as the user sortie runs as, or set {API_KEY_ENV} in sortie's environment"
        ),
    ))
}

/// `account/read`; a missing account is logged in with an API key when one is set, and
/// otherwise ends the start with `agent_auth_failed` when the server needs an OpenAI login.
fn check_account(peer: &mut RpcPeer, timeout: Duration) -> Result<(), AgentError> {
    let v = peer
        .request(
            "account/read",
            json!({"refreshToken": false}),
            timeout,
            &mut refuse,
        )
        .map_err(|f| failure(peer, "account/read", &f))?;
    let key = std::env::var(API_KEY_ENV).ok();
    let key = match account_next(&v, key.as_deref())? {
        AccountNext::Ready => return Ok(()),
        AccountNext::Login(key) => key,
    };
    peer.request(
        "account/login/start",
        json!({"type": "apiKey", "apiKey": key}),
        timeout,
        &mut refuse,
    )
    .map_err(|f| failure(peer, "account/login/start", &f))?;
    await_login(peer, timeout)
}

fn await_login(peer: &mut RpcPeer, timeout: Duration) -> Result<(), AgentError> {
    let deadline = Instant::now() + timeout;
    loop {
        match peer.recv(Some(deadline), None) {
            Recv::Message(Message::Notification { method, params })
                if method == "account/login/completed" =>
            {
                if params.get("success").and_then(Value::as_bool) == Some(true) {
                    return Ok(());
                }
                let why = params
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                return Err(AgentError::new(
                    AgentErrorKind::AgentAuthFailed,
                    format!(
                        "codex refused the {API_KEY_ENV} login: {why}; check the key, or run `codex login`"
                    ),
                ));
            }
            Recv::Message(Message::Request { id, method, params }) => {
                let reply = refuse(&method, &params);
                peer.respond(&id, reply)
                    .map_err(|f| failure(peer, "login", &f))?;
            }
            Recv::Message(other) => {
                log::debug!(message_kind:% = other.kind_word(); "codex message during login")
            }
            Recv::TimedOut | Recv::Cancelled => {
                return Err(failure(
                    peer,
                    "account/login/completed",
                    &RpcFailure::Timeout,
                ));
            }
            Recv::Closed(c) => {
                return Err(failure(
                    peer,
                    "account/login/completed",
                    &RpcFailure::Closed(c),
                ));
            }
        }
    }
}

/// Handshake chatter (`configWarning`, `thread/started`, status changes) is logged, not
/// replayed into the first turn.
fn skip_buffered(peer: &mut RpcPeer) {
    while let Recv::Message(m) = peer.recv(Some(Instant::now()), None) {
        match m {
            Message::Notification { method, params } if method == "configWarning" => {
                let summary = params.get("summary").and_then(Value::as_str).unwrap_or("");
                log::info!(summary:% = summary; "codex config warning");
            }
            Message::Request { id, method, params } => {
                let reply = refuse(&method, &params);
                let _ = peer.respond(&id, reply);
            }
            other => log::debug!(message_kind:% = other.kind_word(); "codex handshake"),
        }
    }
}
