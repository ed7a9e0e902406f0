//! sortie patch: connections refused by the accept loop (no slot: `slots.rs`) are answered
//! 503 and closed without a thread of their own. The answer is written at once (it fits an
//! empty send buffer); then one `refuser` thread reads and discards whatever the client still
//! sends for up to a second before closing, so the close does not reset the connection and
//! destroy the answer before the client reads it.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use crate::connection::Connection;
use crate::limits::{error_response, ConnRefusal, Limits};

/// Refused connections lingering at once; beyond, a refused connection is closed at once.
const MAX_LINGERING: usize = 64;
const LINGER: Duration = Duration::from_secs(1);

pub(crate) fn start() -> Option<SyncSender<Connection>> {
    let (tx, rx) = sync_channel(MAX_LINGERING);
    std::thread::Builder::new()
        .name("http-refuser".into())
        .spawn(move || run(rx))
        .ok()?;
    Some(tx)
}

pub(crate) fn refuse(
    mut sock: Connection,
    peer: Option<SocketAddr>,
    why: ConnRefusal,
    limits: &Limits,
    lingering: Option<&SyncSender<Connection>>,
) {
    (limits.on_refused)(why, peer);
    let _ = sock.set_nonblocking(true);
    let r = why.refusal();
    let answer = error_response(limits, r.status, r.code, &r.message, r.retry_after);
    let _ = sock.write_all(&answer);
    let _ = sock.shutdown(Shutdown::Write);
    if let Some(tx) = lingering {
        match tx.try_send(sock) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn run(rx: Receiver<Connection>) {
    let mut open: Vec<(Connection, Instant)> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let next = if open.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(Duration::from_millis(20))
        };
        match next {
            Ok(c) => open.push((c, Instant::now() + LINGER)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        open.retain_mut(|(c, until)| {
            if now >= *until {
                return false;
            }
            loop {
                match c.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    Err(_) => return false,
                }
            }
        });
    }
}
