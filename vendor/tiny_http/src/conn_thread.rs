//! sortie patch: every accepted connection gets a thread of its own, started by the accept
//! loop itself (upstream handed connections to a task pool whose queue could leave a new
//! connection waiting behind busy threads). Connections are bounded by the slots of
//! `slots.rs`, held from accept until the connection thread has ended and every response
//! writer it handed out is dropped, so an event stream that keeps its writer counts for its
//! whole life.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

use crate::client::ClientConnection;
use crate::limits::InlineFn;
use crate::util::MessagesQueue;
use crate::Message;

/// Serves `client` on a new thread. When no thread can be started the client is answered
/// 503 (with limits) and closed.
pub(crate) fn spawn(
    client: ClientConnection,
    messages: Arc<MessagesQueue<Message>>,
    inline: Option<Arc<InlineFn>>,
) {
    let slot = Arc::new(Mutex::new(Some(client)));
    let theirs = slot.clone();
    let spawned = thread::Builder::new()
        .name("http-conn".into())
        .spawn(move || {
            let client = theirs.lock().ok().and_then(|mut c| c.take());
            if let Some(client) = client {
                serve(client, &messages, inline.as_deref());
            }
        });
    if spawned.is_err() {
        let client = slot.lock().ok().and_then(|mut c| c.take());
        if let Some(mut client) = client {
            client.refuse_busy();
        }
    }
}

/// Reads the connection's requests in turn and queues them for `Server::recv`, except the
/// ones `inline` answers here.
fn serve(client: ClientConnection, messages: &MessagesQueue<Message>, inline: Option<&InlineFn>) {
    // Synchronization is needed for HTTPS requests to avoid a deadlock
    if client.secure() {
        let (sender, receiver) = mpsc::channel();
        for rq in client {
            messages.push(rq.with_notify_sender(sender.clone()).into());
            if receiver.recv().is_err() {
                return;
            }
        }
    } else {
        for rq in client {
            let rq = match inline {
                Some(serve_here) => match serve_here(rq) {
                    Some(rq) => rq,
                    None => continue,
                },
                None => rq,
            };
            messages.push(rq.into());
        }
    }
}
