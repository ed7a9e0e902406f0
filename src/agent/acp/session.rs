//! One Agent Client Protocol session on a persistent agent process. A turn is one
//! `session/prompt` request; its `session/update`s feed the pure [`AcpParser`] until the
//! response. A cancel sends `session/cancel` once and reads on to the response within the read
//! timeout, then the agent is stopped.

use super::parser::{AcpParser, PromptContext};
use crate::agent::jsonrpc::{Closed, Recv, RpcPeer};
use crate::agent::stream::{StreamParser, TurnEnd};
use crate::agent::{
    AgentError, AgentErrorKind, AgentEvent, AgentSession, CancelReason, CancelToken, TurnOutcome,
    TurnResult,
};
use crate::clock::Clock;
use crossbeam_channel::Sender;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A started ACP session.
pub struct AcpSession {
    pub(super) peer: Option<RpcPeer>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) workspace: PathBuf,
    pub(super) session_id: String,
    pub(super) pid: u32,
    pub(super) turns_run: u32,
    pub(super) reject_permissions: bool,
    pub(super) read_timeout: Duration,
    /// `agent.stop_grace_ms`: SIGTERM to SIGKILL when the session's process is stopped.
    pub(super) stop_grace: Duration,
    pub(super) turn_timeout: Option<Duration>,
    pub(super) issue_id: String,
    pub(super) issue_identifier: String,
}

fn send_all(events: &Sender<AgentEvent>, evs: Vec<AgentEvent>) {
    for ev in evs {
        let _ = events.send(ev);
    }
}

fn feed(
    peer: &mut RpcPeer,
    parser: &mut AcpParser,
    events: &Sender<AgentEvent>,
    m: crate::agent::jsonrpc::Message,
) {
    send_all(events, parser.on_message(m));
    for (id, reply) in parser.take_replies() {
        let _ = peer.respond(&id, reply);
    }
}

impl AcpSession {
    fn pump(
        peer: &mut RpcPeer,
        parser: &mut AcpParser,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
        deadline: Option<Instant>,
        end: &mut TurnEnd,
    ) {
        while !parser.is_done() {
            match peer.recv(deadline, Some(cancel.receiver())) {
                Recv::Message(m) => feed(peer, parser, events, m),
                Recv::TimedOut => {
                    cancel.cancel(CancelReason::TurnTimeout);
                    end.cancelled = cancel.reason();
                    return;
                }
                Recv::Cancelled => {
                    end.cancelled = Some(cancel.reason().unwrap_or(CancelReason::User));
                    return;
                }
                Recv::Closed(c) => {
                    if let Closed::ReadError(e) = c {
                        end.read_error = Some(e);
                    }
                    parser.set_exit_hint(peer.child_stderr_hint());
                    return;
                }
            }
        }
    }

    /// `session/cancel` once, then the prompt's answer within the read timeout.
    fn cancel_prompt(
        &self,
        peer: &mut RpcPeer,
        parser: &mut AcpParser,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) {
        if cancel.is_urgent()
            || peer
                .notify("session/cancel", json!({"sessionId": self.session_id}))
                .is_err()
        {
            return;
        }
        let deadline = Instant::now() + self.read_timeout;
        while !parser.is_done() {
            match peer.recv(Some(deadline), Some(cancel.urgent_receiver())) {
                Recv::Message(m) => feed(peer, parser, events, m),
                Recv::TimedOut | Recv::Cancelled | Recv::Closed(_) => return,
            }
        }
    }

    fn stop_peer(&mut self, cancel: Option<&CancelToken>) {
        if let Some(mut peer) = self.peer.take() {
            let exit = peer.stop(self.stop_grace, cancel.map(|c| c.urgent_receiver()));
            log::debug!(
                agent_kind:% = "agent-client-protocol",
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.session_id,
                exit:% = crate::log_field::opt(&exit);
                "agent server stopped"
            );
        }
    }
}

impl AgentSession for AcpSession {
    fn session_id(&self) -> Option<String> {
        Some(self.session_id.clone())
    }

    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        let Some(mut peer) = self.peer.take() else {
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
                session_id: Some(self.session_id.clone()),
                usage: None,
                model: None,
            };
        };
        let first_turn = self.turns_run == 0;
        self.turns_run += 1;
        log::info!(
            agent_kind:% = "agent-client-protocol",
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id,
            turn:% = self.turns_run;
            "agent turn starting"
        );
        let params =
            json!({"sessionId": self.session_id, "prompt": [{"type": "text", "text": prompt}]});
        let mut end = TurnEnd::default();
        let (keep, mut parser) = match peer.send_request("session/prompt", params) {
            Err(_) => {
                let mut p = self.parser(0, first_turn);
                p.set_exit_hint(peer.child_stderr_hint());
                (false, p)
            }
            Ok(id) => {
                let mut p = self.parser(id, first_turn);
                if let Some(reason) = cancel.reason() {
                    end.cancelled = Some(reason);
                }
                let deadline = self.turn_timeout.map(|t| Instant::now() + t);
                if end.cancelled.is_none() {
                    Self::pump(&mut peer, &mut p, events, cancel, deadline, &mut end);
                }
                if end.cancelled.is_some() {
                    self.cancel_prompt(&mut peer, &mut p, events, cancel);
                    (false, p)
                } else {
                    let done = p.is_done();
                    (done, p)
                }
            }
        };
        let (outcome, evs) = parser.finish(&end);
        send_all(events, evs);
        if !outcome.is_completed() {
            log::warn!(
                agent_kind:% = "agent-client-protocol",
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.session_id,
                outcome:% = crate::log_field::opt(&outcome.error_kind().map(|k| k.code())),
                stderr:% = crate::mask::mask(&peer.child().stderr_text());
                "agent turn failed"
            );
        }
        self.peer = Some(peer);
        if !keep {
            self.stop_peer(Some(cancel));
        }
        TurnResult {
            outcome,
            session_id: Some(self.session_id.clone()),
            usage: parser.usage(),
            model: None,
        }
    }

    fn stop(&mut self) -> Result<(), AgentError> {
        self.stop_peer(None);
        Ok(())
    }
}

impl AcpSession {
    fn parser(&self, prompt_id: u64, first_turn: bool) -> AcpParser {
        AcpParser::new(
            Arc::clone(&self.clock),
            PromptContext {
                session_id: self.session_id.clone(),
                pid: Some(self.pid),
                first_turn,
                workspace: self.workspace.clone(),
                reject_permissions: self.reject_permissions,
                prompt_id,
            },
        )
    }
}

impl Drop for AcpSession {
    fn drop(&mut self) {
        self.stop_peer(None);
    }
}
