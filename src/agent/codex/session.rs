//! One codex conversation: a thread on a persistent `app-server`. A turn is a `turn/start`
//! request whose messages feed the pure [`CodexParser`] until `turn/completed`; server requests
//! are answered as they come. A cancel sends `turn/interrupt` once and reads on to
//! `turn/completed` within the read timeout, then the server is stopped.

use super::config::CodexConfig;
use super::parser::{Approval, CodexParser, SessionCarry, TurnContext};
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

fn send_all(events: &Sender<AgentEvent>, evs: Vec<AgentEvent>) {
    for ev in evs {
        // A dropped receiver only means nobody listens any more.
        let _ = events.send(ev);
    }
}

impl CodexSession {
    fn ended(&self, outcome: TurnOutcome, events: &Sender<AgentEvent>) -> TurnResult {
        let _ = events.send(AgentEvent::new(
            self.clock.now_ms(),
            outcome.terminal_event(None),
        ));
        TurnResult {
            outcome,
            session_id: Some(self.thread_id.clone()),
            usage: None,
            model: self.carry.model.clone(),
        }
    }

    /// Reads messages until the turn ends, the stream closes, or a cancel or the turn
    /// deadline interrupts it.
    fn pump(
        peer: &mut RpcPeer,
        parser: &mut CodexParser,
        events: &Sender<AgentEvent>,
        cancel: &CancelToken,
        deadline: Option<Instant>,
        end: &mut TurnEnd,
    ) {
        loop {
            if parser.is_done() {
                return;
            }
            match peer.recv(deadline, Some(cancel.receiver())) {
                Recv::Message(m) => {
                    send_all(events, parser.on_message(m));
                    for (id, reply) in parser.take_replies() {
                        let _ = peer.respond(&id, reply);
                    }
                }
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
        while !parser.saw_completion() {
            match peer.recv(Some(deadline), Some(cancel.urgent_receiver())) {
                Recv::Message(m) => {
                    send_all(events, parser.on_message(m));
                    for (id, reply) in parser.take_replies() {
                        let _ = peer.respond(&id, reply);
                    }
                }
                Recv::TimedOut | Recv::Cancelled | Recv::Closed(_) => return false,
            }
        }
        true
    }

    fn stop_peer(&mut self, cancel: Option<&CancelToken>) {
        if let Some(mut peer) = self.peer.take() {
            let exit = peer.stop(self.stop_grace, cancel.map(|c| c.urgent_receiver()));
            log::debug!(
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.thread_id,
                exit:% = crate::log_field::opt(&exit);
                "codex app-server stopped"
            );
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
            return self.ended(
                TurnOutcome::EndedWithError {
                    message: "session already stopped".into(),
                    kind: AgentErrorKind::ResponseError,
                },
                events,
            );
        };
        let first_turn = self.turns_run == 0;
        self.turns_run += 1;
        let approval = if self.config.approval_decision() == "decline" {
            Approval::Decline
        } else {
            Approval::AcceptForSession
        };
        let mut parser = CodexParser::new(
            Arc::clone(&self.clock),
            TurnContext {
                thread_id: self.thread_id.clone(),
                pid: Some(self.pid),
                first_turn,
                workspace: self.workspace.clone(),
                approval,
            },
            self.carry.clone(),
        );
        log::info!(
            agent_kind:% = "codex",
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.thread_id,
            turn:% = self.turns_run;
            "agent turn starting"
        );
        let mut end = TurnEnd::default();
        let params =
            self.config
                .turn_start_params(&self.thread_id, prompt, &self.workspace, first_turn);
        let keep_server = if let Some(reason) = cancel.reason() {
            end.cancelled = Some(reason);
            true
        } else if peer.send_request("turn/start", params).is_err() {
            parser.set_exit_hint(peer.child_stderr_hint());
            false
        } else {
            let deadline = self.turn_timeout.map(|t| Instant::now() + t);
            Self::pump(&mut peer, &mut parser, events, cancel, deadline, &mut end);
            if end.cancelled.is_some() {
                // A cancelled turn leaves nothing running.
                self.interrupt(&mut peer, &mut parser, events, cancel);
                false
            } else if parser.needs_interrupt() {
                self.interrupt(&mut peer, &mut parser, events, cancel)
            } else {
                // A closed stream has no server left to talk to.
                parser.is_done()
            }
        };
        let (outcome, evs) = parser.finish(&end);
        send_all(events, evs);
        self.carry = parser.carry().clone();
        if !outcome.is_completed() {
            log::warn!(
                agent_kind:% = "codex",
                issue_id:% = self.issue_id,
                issue_identifier:% = self.issue_identifier,
                session_id:% = self.thread_id,
                outcome:% = crate::log_field::opt(&outcome.error_kind().map(|k| k.code())),
                stderr:% = crate::mask::mask(&peer.child().stderr_text());
                "agent turn failed"
            );
        }
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
