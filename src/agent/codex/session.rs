//! One codex conversation: a thread on a persistent `app-server`. A turn is a `turn/start`
//! request whose messages feed the pure [`CodexParser`] until `turn/completed`; server requests
//! are answered as they come. A cancel sends `turn/interrupt` once and reads on to
//! `turn/completed` within the read timeout, then the server is stopped.

use super::config::CodexConfig;
use super::parser::{Approval, CodexParser, SessionCarry, TurnContext};
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

/// A started codex session.
pub struct CodexSession {
    pub(super) peer: Option<RpcPeer>,
    pub(super) config: CodexConfig,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) workspace: PathBuf,
    pub(super) thread_id: String,
    pub(super) pid: u32,
    pub(super) turns_run: u32,
    pub(super) carry: SessionCarry,
    pub(super) read_timeout: Duration,
    /// `agent.stop_grace_ms`: SIGTERM to SIGKILL when the session's process is stopped.
    pub(super) stop_grace: Duration,
    pub(super) turn_timeout: Option<Duration>,
    pub(super) issue_id: String,
    pub(super) issue_identifier: String,
}

impl RpcTurnParser for CodexParser {
    fn on_message(&mut self, m: Message) -> Vec<AgentEvent> {
        CodexParser::on_message(self, m)
    }
    fn take_replies(&mut self) -> Vec<(Value, ServerReply)> {
        CodexParser::take_replies(self)
    }
    fn set_exit_hint(&mut self, hint: Option<String>) {
        CodexParser::set_exit_hint(self, hint)
    }
    fn is_done(&self) -> bool {
        CodexParser::is_done(self)
    }
}

impl CodexSession {
    fn log(&self) -> TurnLog<'_> {
        TurnLog {
            agent_kind: "codex",
            issue_id: &self.issue_id,
            issue_identifier: &self.issue_identifier,
            session_id: &self.thread_id,
        }
    }

    /// `turn/interrupt` once, then reads to `turn/completed` within the read timeout (cut
    /// short by an escalated cancel). Whether the turn completed.
    fn interrupt(
        &self,
        peer: &mut RpcPeer,
        parser: &mut CodexParser,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> bool {
        if cancel.is_urgent() {
            return false;
        }
        let mut params = json!({"threadId": self.thread_id});
        if let Some(t) = parser.turn_id() {
            params["turnId"] = json!(t);
        }
        if peer.send_request("turn/interrupt", params).is_err() {
            return false;
        }
        let deadline = Instant::now() + self.read_timeout;
        turn::drain(
            peer,
            parser,
            events,
            cancel,
            deadline,
            CodexParser::saw_completion,
        )
    }

    fn stop_peer(&mut self, cancel: Option<&CancelToken>) {
        if let Some(peer) = self.peer.take() {
            self.log().stop(peer, self.stop_grace, cancel);
        }
    }

    fn parser(&self, first_turn: bool) -> CodexParser {
        let approval = if self.config.approval_decision() == "decline" {
            Approval::Decline
        } else {
            Approval::AcceptForSession
        };
        CodexParser::new(
            Arc::clone(&self.clock),
            TurnContext {
                thread_id: self.thread_id.clone(),
                pid: Some(self.pid),
                first_turn,
                workspace: self.workspace.clone(),
                approval,
            },
            self.carry.clone(),
        )
    }

    /// Starts the turn and reads it to its end; whether the server is left running.
    fn drive(
        &self,
        peer: &mut RpcPeer,
        parser: &mut CodexParser,
        params: Value,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
        end: &mut TurnEnd,
    ) -> bool {
        if let Some(reason) = cancel.reason() {
            end.cancelled = Some(reason);
            return true;
        }
        if peer.send_request("turn/start", params).is_err() {
            parser.set_exit_hint(peer.child_stderr_hint());
            return false;
        }
        let deadline = self.turn_timeout.map(|t| Instant::now() + t);
        turn::pump(peer, parser, events, cancel, deadline, end);
        if end.cancelled.is_some() {
            // A cancelled turn leaves nothing running.
            self.interrupt(peer, parser, events, cancel);
            false
        } else if parser.needs_interrupt() {
            self.interrupt(peer, parser, events, cancel)
        } else {
            // A closed stream has no server left to talk to.
            parser.is_done()
        }
    }
}

impl AgentSession for CodexSession {
    fn session_id(&self) -> Option<String> {
        Some(self.thread_id.clone())
    }

    fn run_turn(
        &mut self,
        prompt: &str,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
    ) -> TurnResult {
        let Some(mut peer) = self.peer.take() else {
            let model = self.carry.model.clone();
            let id = Some(self.thread_id.clone());
            return TurnResult::session_stopped(self.clock.as_ref(), id, model, events);
        };
        let first_turn = self.turns_run == 0;
        self.turns_run += 1;
        let mut parser = self.parser(first_turn);
        self.log().starting(self.turns_run);
        let mut end = TurnEnd::default();
        let params =
            self.config
                .turn_start_params(&self.thread_id, prompt, &self.workspace, first_turn);
        let keep_server = self.drive(&mut peer, &mut parser, params, events, cancel, &mut end);
        let (outcome, evs) = parser.finish(&end);
        send_all(events, evs);
        self.carry = parser.carry().clone();
        self.log().failed(&outcome, &mut peer);
        self.peer = Some(peer);
        if !keep_server {
            self.stop_peer(Some(cancel));
        }
        TurnResult {
            outcome,
            session_id: Some(self.thread_id.clone()),
            usage: parser.usage(),
            model: parser.model(),
        }
    }

    fn stop(&mut self) -> Result<(), AgentError> {
        self.stop_peer(None);
        Ok(())
    }
}

impl Drop for CodexSession {
    fn drop(&mut self) {
        self.stop_peer(None);
    }
}
