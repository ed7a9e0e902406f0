//! sortie patch: an answer larger than its socket's send buffer goes out with the buffer raised
//! to hold it (up to `MAX`), and the buffer is put back once the answer is written. The server
//! gives every socket a small fixed buffer so that a client which stops reading an event stream
//! is noticed by the stream's frame deadline; a one-shot answer of known length has no such
//! concern, and through the small buffer its write woke the server once per buffer's worth
//! while the client read.

use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use crate::util::{RefinedTcpStream, SocketWriter};

/// Raising starts above this size: a smaller answer fits any socket's buffer.
const FROM: usize = 64 * 1024;

/// The most one answer raises a send buffer to (the kernel also caps it at `net.core.wmem_max`).
const MAX: usize = 4 * 1024 * 1024;

/// A connection's socket, reached through the writer its answers share.
pub(crate) struct SendBuffer(Arc<Mutex<SocketWriter<RefinedTcpStream>>>);

/// A raised buffer: the size to put back.
pub(crate) struct Raised(usize);

impl SendBuffer {
    pub(crate) fn new(writer: Arc<Mutex<SocketWriter<RefinedTcpStream>>>) -> SendBuffer {
        SendBuffer(writer)
    }

    /// Raises the send buffer to hold `len` bytes when it holds fewer. `None`: left as it was
    /// (a small answer, already large enough, TLS or a Unix socket, or the socket refused).
    pub(crate) fn raise(&self, len: usize) -> Option<Raised> {
        if len <= FROM {
            return None;
        }
        let want = len.min(MAX);
        self.with_socket(|s| {
            let before = rustix::net::sockopt::socket_send_buffer_size(s).ok()?;
            if before >= want {
                return None;
            }
            // The kernel keeps (and reports) twice what it is asked for.
            rustix::net::sockopt::set_socket_send_buffer_size(s, want / 2 + 1).ok()?;
            Some(Raised(before))
        })?
    }

    /// Puts the buffer back to its size before (what is queued stays queued).
    pub(crate) fn restore(&self, r: Raised) {
        let _ = self.with_socket(|s| {
            rustix::net::sockopt::set_socket_send_buffer_size(s, (r.0 / 2).max(1))
        });
    }

    fn with_socket<T>(&self, f: impl FnOnce(&TcpStream) -> T) -> Option<T> {
        let writer = self.0.lock().ok()?;
        writer.get_ref().tcp().map(f)
    }
}
