//! Request/response correlation over an [`RpcChild`]. Our ids count up from 1. While a caller
//! waits for one response, notifications and responses to other requests are buffered and
//! later handed out in arrival order by [`RpcPeer::recv`]; server requests are answered on the
//! spot by the caller's handler, so the peer is never left waiting.

use super::child::{RpcChild, RpcSpec};
use super::message::{self, Dialect, Message, RpcErrorObject};
use crate::agent::process::StdoutItem;
use crate::agent::stream::{ExitInfo, SpawnError};
use crossbeam_channel::{Receiver, select};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Why the stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// The server closed stdout (it exited, usually).
    Eof,
    /// A read failed, e.g. a line over the cap; the reader stopped.
    ReadError(String),
}

/// What one wait for a message gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Recv {
    Message(Message),
    TimedOut,
    Cancelled,
    Closed(Closed),
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcFailure {
    /// No response within the read timeout.
    Timeout,
    Closed(Closed),
    /// The server answered with an error.
    Error(RpcErrorObject),
    /// Stdin is closed: the session was stopped.
    NotRunning,
}

impl std::fmt::Display for RpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcFailure::Timeout => f.write_str("no response within the read timeout"),
            RpcFailure::Closed(Closed::Eof) => f.write_str("the agent server closed its output"),
            RpcFailure::Closed(Closed::ReadError(e)) => write!(f, "stdout read error: {e}"),
            RpcFailure::Error(e) => write!(f, "error response: {e}"),
            RpcFailure::NotRunning => f.write_str("the agent server is not running"),
        }
    }
}

/// A handler's answer to a server request.
pub type ServerReply = Result<Value, RpcErrorObject>;

/// One JSON-RPC session with a server process.
pub struct RpcPeer {
    child: RpcChild,
    dialect: Dialect,
    next_id: u64,
    /// Messages read while waiting for a response, in arrival order.
    pending: VecDeque<Message>,
    closed: Option<Closed>,
}

impl RpcPeer {
    /// Starts the server.
    pub fn spawn(spec: &RpcSpec, dialect: Dialect) -> Result<RpcPeer, SpawnError> {
        Ok(RpcPeer {
            child: RpcChild::spawn(spec)?,
            dialect,
            next_id: 1,
            pending: VecDeque::new(),
            closed: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn child(&mut self) -> &mut RpcChild {
        &mut self.child
    }

    /// The server's newest stderr line, waiting up to a second for stderr to end (a server
    /// that just died usually said why on its way out).
    pub fn child_stderr_hint(&self) -> Option<String> {
        self.child.last_stderr_line(Duration::from_secs(1))
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64, RpcFailure> {
        let id = self.next_id;
        self.next_id += 1;
        log::debug!(id:% = id, method:% = method; "jsonrpc request");
        if self
            .child
            .write(message::request(self.dialect, id, method, params))
        {
            Ok(id)
        } else {
            Err(RpcFailure::NotRunning)
        }
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), RpcFailure> {
        if self
            .child
            .write(message::notification(self.dialect, method, params))
        {
            Ok(())
        } else {
            Err(RpcFailure::NotRunning)
        }
    }

    /// Answers a server request.
    pub fn respond(&mut self, id: &Value, reply: ServerReply) -> Result<(), RpcFailure> {
        if self.child.write(message::response(self.dialect, id, reply)) {
            Ok(())
        } else {
            Err(RpcFailure::NotRunning)
        }
    }

    /// Sends a request and waits up to `timeout` for its response. Server requests that
    /// arrive meanwhile go to `handler` and are answered; everything else is buffered for
    /// [`recv`](Self::recv).
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
        handler: &mut dyn FnMut(&str, &Value) -> ServerReply,
    ) -> Result<Value, RpcFailure> {
        let id = self.send_request(method, params)?;
        self.await_response(id, timeout, handler)
    }

    /// Waits for the response to `id` (see [`request`](Self::request)).
    pub fn await_response(
        &mut self,
        id: u64,
        timeout: Duration,
        handler: &mut dyn FnMut(&str, &Value) -> ServerReply,
    ) -> Result<Value, RpcFailure> {
        if let Some(pos) = self
            .pending
            .iter()
            .position(|m| m.response_id() == Some(id))
            && let Some(Message::Response { result, .. }) = self.pending.remove(pos)
        {
            return result.map_err(RpcFailure::Error);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(Some(deadline), None) {
                Recv::Message(Message::Response { id: got, result })
                    if got.as_u64() == Some(id) =>
                {
                    return result.map_err(RpcFailure::Error);
                }
                Recv::Message(Message::Request {
                    id: rid,
                    method,
                    params,
                }) => {
                    let reply = handler(&method, &params);
                    self.respond(&rid, reply)?;
                }
                Recv::Message(other) => self.pending.push_back(other),
                Recv::TimedOut => return Err(RpcFailure::Timeout),
                Recv::Cancelled => return Err(RpcFailure::NotRunning),
                Recv::Closed(c) => return Err(RpcFailure::Closed(c)),
            }
        }
    }

    /// The next message (buffered ones first), waiting until `deadline` (none: forever),
    /// returning early when `cancel` fires (is ready or disconnected).
    pub fn recv(&mut self, deadline: Option<Instant>, cancel: Option<&Receiver<()>>) -> Recv {
        if let Some(m) = self.pending.pop_front() {
            return Recv::Message(m);
        }
        self.read(deadline, cancel)
    }

    /// Waits for the stream to end, up to `timeout`; buffered messages are dropped.
    pub fn drain_until_closed(&mut self, timeout: Duration) -> Option<Closed> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(Some(deadline), None) {
                Recv::Closed(c) => return Some(c),
                Recv::TimedOut | Recv::Cancelled => return None,
                Recv::Message(_) => {}
            }
        }
    }

    fn read(&mut self, deadline: Option<Instant>, cancel: Option<&Receiver<()>>) -> Recv {
        if let Some(c) = &self.closed {
            return Recv::Closed(c.clone());
        }
        let never = crossbeam_channel::never();
        let cancel = cancel.unwrap_or(&never);
        let timeout = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(86_400));
        let item = select! {
            recv(self.child.stdout.receiver()) -> item => item.inspect(|_| self.child.stdout.took()),
            recv(cancel) -> _ => return Recv::Cancelled,
            default(timeout) => return Recv::TimedOut,
        };
        let closed = match item {
            Ok(StdoutItem::Line(line)) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Recv::Message(Message::Malformed(String::new()));
                }
                return Recv::Message(Message::parse(&line));
            }
            Ok(StdoutItem::Error(e)) => Closed::ReadError(e),
            Ok(StdoutItem::Eof) | Err(_) => Closed::Eof,
        };
        self.closed = Some(closed.clone());
        Recv::Closed(closed)
    }

    /// Stops the server (see [`RpcChild::stop`]).
    pub fn stop(&mut self, grace: Duration, urgent: Option<&Receiver<()>>) -> Option<ExitInfo> {
        self.child.stop(grace, urgent)
    }
}
