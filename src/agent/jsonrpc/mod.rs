//! A persistent JSON-RPC session over a child's stdin/stdout, for agent kinds that run one
//! long-lived server per session instead of one process per turn. Synchronous: one reader
//! thread splits stdout into capped lines (and collects stderr, bounded), one writer thread
//! feeds stdin, and the session's own thread correlates responses with requests.
//!
//! - [`child`]: the process: its own group, pipes, exit watch, stop (close stdin, SIGTERM the
//!   group, grace, SIGKILL, reader joined within a bound).
//! - [`message`]: the wire shapes and the two dialects (with or without `"jsonrpc":"2.0"`).
//! - [`peer`]: ids counting up from 1, the correlation table, notifications that arrive around
//!   responses buffered and delivered in order, server requests handed to a handler.

pub mod child;
pub mod launch;
pub mod message;
pub mod peer;
pub mod turn;

pub use child::{RpcChild, RpcSpec};
pub use launch::launch;
pub use message::{Dialect, Message, RpcErrorObject};
pub use peer::{Closed, Recv, RpcFailure, RpcPeer, ServerReply};

use std::time::Duration;

/// The read timeout a kind uses when `read_timeout_ms` is unset (≤0).
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// `read_timeout_ms` as a duration, 30 s when unset.
pub fn read_timeout(read_timeout_ms: u64) -> Duration {
    if read_timeout_ms == 0 {
        DEFAULT_READ_TIMEOUT
    } else {
        Duration::from_millis(read_timeout_ms)
    }
}
