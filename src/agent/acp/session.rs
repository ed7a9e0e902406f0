//! One Agent Client Protocol session on a persistent agent process. A turn is one
//! `session/prompt` request; its `session/update`s feed the pure [`AcpParser`] until the
//! response. A cancel sends `session/cancel` once and reads on to the response within the read
//! timeout, then the agent is stopped.

use super::parser::{AcpParser, PromptContext};
use crate::agent::jsonrpc::turn::{self, RpcTurnParser, TurnLog, send_all};
use crate::agent::jsonrpc::{Message, RpcPeer, ServerReply};
use crate::agent::stream::{StreamParser, TurnEnd};
use crate::agent::{AgentError, AgentEvent, AgentSession, CancelToken, TurnResult};
use crate::clock::Clock;
use crossbeam_channel::Sender;
use serde_json::{Value, json};
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

impl RpcTurnParser for AcpParser {
    fn on_message(&mut self, m: Message) -> Vec<AgentEvent> {
        AcpParser::on_message(self, m)
    }
    fn take_replies(&mut self) -> Vec<(Value, ServerReply)> {
        AcpParser::take_replies(self)
    }
    fn set_exit_hint(&mut self, hint: Option<String>) {
        AcpParser::set_exit_hint(self, hint)
    }
    fn is_done(&self) -> bool {
        AcpParser::is_done(self)
    }
}

impl AcpSession {
    fn log(&self) -> TurnLog<'_> {
        TurnLog {
            agent_kind: "agent-client-protocol",
            issue_id: &self.issue_id,
            issue_identifier: &self.issue_identifier,
            session_id: &self.session_id,
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
        turn::drain(peer, parser, events, cancel, deadline, AcpParser::is_done);
    }

    fn stop_peer(&mut self, cancel: Option<&CancelToken>) {
        if let Some(peer) = self.peer.take() {
            self.log().stop(peer, self.stop_grace, cancel);
        }
    }

    /// Sends the prompt and reads its answer; whether the agent is left running, and the
    /// parser that read the turn.
    fn drive(
        &self,
        peer: &mut RpcPeer,
        prompt: &str,
        first_turn: bool,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
        end: &mut TurnEnd,
    ) -> (bool, AcpParser) {
        let params =
            json!({"sessionId": self.session_id, "prompt": [{"type": "text", "text": prompt}]});
        let id = match peer.send_request("session/prompt", params) {
            Err(_) => {
                let mut p = self.parser(0, first_turn);
                p.set_exit_hint(peer.child_stderr_hint());
                return (false, p);
            }
            Ok(id) => id,
        };
        let mut p = self.parser(id, first_turn);
        if let Some(reason) = cancel.reason() {
            end.cancelled = Some(reason);
        }
        let deadline = self.turn_timeout.map(|t| Instant::now() + t);
        if end.cancelled.is_none() {
            turn::pump(peer, &mut p, events, cancel, deadline, end);
        }
        if end.cancelled.is_some() {
            self.cancel_prompt(peer, &mut p, events, cancel);
            return (false, p);
        }
        let done = p.is_done();
        (done, p)
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
            let id = Some(self.session_id.clone());
            return TurnResult::session_stopped(self.clock.as_ref(), id, None, events);
        };
        let first_turn = self.turns_run == 0;
        self.turns_run += 1;
        self.log().starting(self.turns_run);
        let mut end = TurnEnd::default();
        let (keep, mut parser) =
            self.drive(&mut peer, prompt, first_turn, events, cancel, &mut end);
        let (outcome, evs) = parser.finish(&end);
        send_all(events, evs);
        self.log().failed(&outcome, &mut peer);
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
