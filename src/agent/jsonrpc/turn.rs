//! The turn loop shared by the kinds that run one JSON-RPC server per session: every message
//! read feeds the kind's pure parser, whose owed replies go back at once; the loop ends when
//! the parser says the turn is over, the stream closes, the turn deadline passes (a
//! `TurnTimeout` cancel) or a cancel arrives. After a cancel the kind asks the server to stop
//! the turn and [`drain`]s what is left within the read timeout.

use std::time::Instant;

use serde_json::Value;

use super::{Closed, Message, Recv, RpcPeer, ServerReply};
use crate::agent::stream::{StreamParser, TurnEnd};
use crate::agent::{AgentEvent, CancelReason, CancelToken, TurnOutcome};
use crossbeam_channel::Sender;

/// What the loop needs of a kind's parser beyond [`StreamParser`].
pub trait RpcTurnParser: StreamParser {
    /// One message from the server: the events it makes.
    fn on_message(&mut self, m: Message) -> Vec<AgentEvent>;
    /// The answers owed to server requests, oldest first.
    fn take_replies(&mut self) -> Vec<(Value, ServerReply)>;
    /// A line about why the server went away (its last stderr line), for the failure message.
    fn set_exit_hint(&mut self, hint: Option<String>);
    /// Whether the turn is over.
    fn is_done(&self) -> bool;
}

/// Sends every event; a dropped receiver only means nobody listens any more.
pub fn send_all(events: &Sender<AgentEvent>, evs: Vec<AgentEvent>) {
    for ev in evs {
        let _ = events.send(ev);
    }
}

/// One message into the parser, its events out and its owed replies answered.
fn feed<P: RpcTurnParser>(
    peer: &mut RpcPeer,
    parser: &mut P,
    events: &Sender<AgentEvent>,
    m: Message,
) {
    send_all(events, parser.on_message(m));
    for (id, reply) in parser.take_replies() {
        let _ = peer.respond(&id, reply);
    }
}

/// Reads messages until the turn ends, the stream closes, or a cancel or the turn deadline
/// interrupts it; `end` records the cancel or the read error.
pub fn pump<P: RpcTurnParser>(
    peer: &mut RpcPeer,
    parser: &mut P,
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

/// After a stop request: reads on until `done` holds, the deadline passes, the stream closes
/// or the cancel escalates. Whether `done` was reached.
pub fn drain<P: RpcTurnParser>(
    peer: &mut RpcPeer,
    parser: &mut P,
    events: &Sender<AgentEvent>,
    cancel: &CancelToken,
    deadline: Instant,
    done: fn(&P) -> bool,
) -> bool {
    while !done(parser) {
        match peer.recv(Some(deadline), Some(cancel.urgent_receiver())) {
            Recv::Message(m) => feed(peer, parser, events, m),
            Recv::TimedOut | Recv::Cancelled | Recv::Closed(_) => return false,
        }
    }
    true
}

/// Who a session's log lines are about.
pub struct TurnLog<'a> {
    pub agent_kind: &'static str,
    pub issue_id: &'a str,
    pub issue_identifier: &'a str,
    pub session_id: &'a str,
}

impl TurnLog<'_> {
    pub fn starting(&self, turn: u32) {
        log::info!(
            agent_kind:% = self.agent_kind,
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id,
            turn:% = turn;
            "agent turn starting"
        );
    }

    /// A turn that did not complete, with the server's stderr (masked).
    pub fn failed(&self, outcome: &TurnOutcome, peer: &mut RpcPeer) {
        if outcome.is_completed() {
            return;
        }
        log::warn!(
            agent_kind:% = self.agent_kind,
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id,
            outcome:% = crate::log_field::opt(&outcome.error_kind().map(|k| k.code())),
            stderr:% = crate::mask::mask(&peer.child().stderr_text());
            "agent turn failed"
        );
    }

    /// Stops the server (SIGTERM, `grace`, SIGKILL; an escalated cancel cuts the grace short).
    pub fn stop(
        &self,
        mut peer: RpcPeer,
        grace: std::time::Duration,
        cancel: Option<&CancelToken>,
    ) {
        let exit = peer.stop(grace, cancel.map(|c| c.urgent_receiver()));
        log::debug!(
            agent_kind:% = self.agent_kind,
            issue_id:% = self.issue_id,
            issue_identifier:% = self.issue_identifier,
            session_id:% = self.session_id,
            exit:% = crate::log_field::opt(&exit);
            "agent server stopped"
        );
    }
}
