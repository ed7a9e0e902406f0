//! The HTTP server on sortie's one port: tiny_http with a small pool of request threads, a
//! thread per event stream, and blocking writes. Handlers read the orchestrator's published
//! snapshot and open read-only database connections; actions go through the orchestrator.
//!
//! Traps handled here (ARCHITECTURE.md, "Known traps"): an `accept()` error ends tiny_http's accept loop for
//! good, so `RLIMIT_NOFILE` is raised, streams are capped, and the loop's end is reported as
//! fatal; the listener carries `SO_SNDTIMEO` (never `SO_RCVTIMEO`) so every accepted socket
//! bounds a blocked send, which the event stream's per-frame deadline builds on.
//!
//! Hostile clients (see [`limits`]): the vendored tiny_http, patched, reads every request head
//! and body whole on the connection's own thread under deadlines before a request thread sees
//! it, so a slow or stalled client holds only its own connection thread, never one of the
//! eight request threads; a body is read only once its head is admitted ([`admission`]) and
//! within its cap, idle keep-alive connections are closed, one client holds at most its
//! share of the connections, some are kept for probes, and connections beyond the caps are
//! answered 503. Refusals are logged at most once a second per reason ([`refusals`]). The
//! `Host` rule ([`host`]) stops DNS rebinding.
//!
//! Bursts: every accepted connection gets its own thread straight from the accept loop (no
//! pool queue to wait in), the listen backlog holds a burst of a thousand, and an event stream
//! keeps one thread of its own: its connection thread ends once the stream takes the socket.

pub mod actions;
pub mod admission;
pub mod attention;
pub mod dashboard;
pub mod event_json;
pub mod host;
pub mod issue_detail;
pub mod limits;
mod live_rows;
pub mod notify_feed;
pub mod openapi;
pub mod operator_message;
pub mod origin;
pub mod pr_loop;
pub mod prices;
pub mod probes;
pub mod query;
pub mod reaction_next;
pub mod reaction_words;
pub mod refusals;
pub mod respond;
pub mod router;
pub mod runs;
pub mod scrape;
pub mod sse;
pub mod state_doc;
pub mod stats;
pub mod views;
pub mod webhooks;
pub mod wording;
pub mod workflows;

pub use workflows::{LeftOutWorkflow, ServedWorkflow};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::clock::Clock;
use crate::config::ServerBind;
use crate::orchestrator::OrchestratorHandle;
use crate::store::Store;

/// Request-handling threads.
const POOL_SIZE: usize = 8;
/// How long a request thread waits for a request before it logs the refusal counts
/// nobody carried on ([`refusals::Refusals::flush`]).
const IDLE_FLUSH: Duration = refusals::LOG_EVERY;
/// Event streams open at once at most; each holds a thread and a socket, and counts as a
/// connection ([`limits::max_streams`] lowers it for a small `server.max_connections`).
pub const MAX_STREAMS: usize = 256;
/// Connections the kernel keeps waiting for `accept()`. The standard library listens with
/// 128, so a burst of more clients (a dashboard reload behind a proxy, many event streams
/// at once) had SYNs dropped and retried by the clients only after 1, 3, 7 s. The kernel caps
/// it at `net.core.somaxconn`.
const LISTEN_BACKLOG: i32 = 1024;
/// How long one blocked send may wait before it returns to its caller (inherited by every
/// accepted socket). The event stream's frame deadline loops over it.
const SEND_TIMEOUT: Duration = Duration::from_millis(500);
/// Send buffer of every accepted socket (the kernel doubles it). A fixed size keeps a client
/// that stops reading from absorbing megabytes of autotuned buffer before its frame deadline
/// can notice. An answer larger than it raises its own socket's buffer while it is written
/// (the vendored tiny_http's `send_buffer`), so a large document goes out in one write.
const SEND_BUFFER: usize = 128 * 1024;

/// A running server.
pub struct HttpServer {
    server: Arc<tiny_http::Server>,
    state: Arc<AppState>,
    served: Arc<workflows::Served>,
    fatal: Receiver<String>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// The workflows it answers for (workflows are added and removed there).
    pub fn served(&self) -> Arc<workflows::Served> {
        self.served.clone()
    }

    /// Receives a message when the accept loop ends unexpectedly (exit non-zero).
    pub fn fatal_receiver(&self) -> Receiver<String> {
        self.fatal.clone()
    }

    /// Stops accepting, ends every event stream before its next frame, joins the pool.
    pub fn shutdown(self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        crate::orchestrator::snapshot::notify_published();
        for _ in 0..self.threads.len() {
            self.server.unblock();
        }
        for t in self.threads {
            let _ = t.join();
        }
        // Streams end at their next check; one blocked in a write gives up at its deadline.
        let deadline = Instant::now() + sse::FRAME_DEADLINE + SEND_TIMEOUT;
        while self.state.sse_open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            crate::orchestrator::snapshot::notify_published();
            let _ = crate::orchestrator::snapshot::wait_published(
                crate::orchestrator::snapshot::published_count(),
                Duration::from_millis(50),
            );
        }
    }
}

/// One [`AppState`] per workflow, sharing the daemon-wide parts (shutdown flag, stream
/// counts, webhook ingress, refusal log).
fn served(
    workflows: Vec<ServedWorkflow>,
    left_out: Vec<LeftOutWorkflow>,
    clock: Arc<dyn Clock>,
    max_connections: usize,
) -> workflows::Served {
    let shared = workflows::Shared {
        clock,
        stopping: Arc::new(AtomicBool::new(false)),
        sse_open: Arc::new(AtomicUsize::new(0)),
        sse_serial: Arc::new(AtomicUsize::new(0)),
        max_streams: limits::max_streams(max_connections),
        webhooks: Arc::new(webhooks::Ingress::from_env()),
        refusals: Arc::default(),
    };
    workflows::Served::new(workflows, left_out, shared)
}

/// Shared by the request and stream threads.
pub struct AppState {
    pub orch: OrchestratorHandle,
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub version: &'static str,
    /// Set at shutdown: streams end, pool threads exit quietly. Shared by every workflow's
    /// state, like the stream counts.
    pub stopping: Arc<AtomicBool>,
    pub sse_open: Arc<AtomicUsize>,
    pub sse_serial: Arc<AtomicUsize>,
    pub max_streams: usize,
    /// `GET /api/v1/state`'s document, built once per published snapshot.
    pub state_cache: state_doc::StateCache,
    /// Webhook secrets, rate buckets, delivery memory and body budget.
    pub webhooks: Arc<webhooks::Ingress>,
    /// The bounded log of refused requests and connections.
    pub refusals: Arc<refusals::Refusals>,
}

/// Raises the soft open-file limit to the hard one, so a burst of clients does not make
/// `accept()` fail (which would end tiny_http's accept loop).
fn raise_nofile_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current.is_some() && lim.current != lim.maximum {
        let new = rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        match setrlimit(Resource::Nofile, new) {
            Ok(()) => {
                log::debug!(to:% = crate::log_field::opt(&lim.maximum); "raised open file limit")
            }
            Err(e) => log::warn!(error:% = e; "cannot raise open file limit"),
        }
    }
}

/// The soft open-file limit (`None`: unlimited or unknown).
fn current_nofile_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// tiny_http's accept thread duplicates each accepted socket with `try_clone().unwrap()`; when
/// that hits the open-file limit the thread panics and the accept loop is gone without the
/// error message `recv()` would otherwise deliver. A panic hook recognises that panic by its
/// location and reports it as fatal, like the loop's ordinary end.
fn watch_accept_thread_panics(fatal: crossbeam_channel::Sender<String>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_accept = info.location().is_some_and(|l| {
            l.file().contains("tiny_http") && l.file().ends_with("refined_tcp_stream.rs")
        });
        if in_accept {
            let _ = fatal.try_send(format!("accept loop ended: {info}"));
        }
        previous(info);
    }));
}

fn listen(addr: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    // Listening again on a listening socket only changes its backlog (Linux).
    rustix::net::listen(&listener, LISTEN_BACKLOG)?;
    rustix::net::sockopt::set_socket_timeout(
        &listener,
        rustix::net::sockopt::Timeout::Send,
        Some(SEND_TIMEOUT),
    )?;
    rustix::net::sockopt::set_socket_send_buffer_size(&listener, SEND_BUFFER)?;
    // Inherited by accepted sockets: a body written after its head must not wait for the
    // client's delayed ACK (40 ms) behind Nagle's algorithm.
    rustix::net::sockopt::set_tcp_nodelay(&listener, true)?;
    Ok(listener)
}

/// Why the server did not start.
#[derive(Debug)]
pub enum StartError {
    /// The explicitly chosen address cannot be bound.
    Listen(std::net::SocketAddr, std::io::Error),
    /// The server could not be built on the bound socket.
    Server(
        std::net::SocketAddr,
        Box<dyn std::error::Error + Send + Sync>,
    ),
    /// A worker thread could not be spawned.
    Thread(std::io::Error),
    /// There is no workflow to answer for.
    NoWorkflow,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Listen(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            StartError::Server(addr, e) => write!(f, "cannot start the http server on {addr}: {e}"),
            StartError::Thread(e) => write!(f, "cannot start http thread: {e}"),
            StartError::NoWorkflow => write!(f, "no workflow to serve"),
        }
    }
}

impl std::error::Error for StartError {}

/// Binds and starts the server. Port 0 disables it (`Ok(None)`). When the port was not chosen
/// explicitly and the default is busy, sortie runs without a server (warning); an explicit
/// port that cannot be bound is an error.
pub fn start(
    bind: &ServerBind,
    orch: OrchestratorHandle,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
) -> Result<Option<HttpServer>, StartError> {
    let one = ServedWorkflow {
        name: String::new(),
        path: String::new(),
        orch,
        store,
    };
    start_many(bind, vec![one], Vec::new(), clock)
}

/// [`start`] for several workflows (`workflows`): each answers under `?workflow=NAME`;
/// `left_out` are listed by `GET /api/v1/workflows` only.
pub fn start_many(
    bind: &ServerBind,
    workflows: Vec<ServedWorkflow>,
    left_out: Vec<LeftOutWorkflow>,
    clock: Arc<dyn Clock>,
) -> Result<Option<HttpServer>, StartError> {
    if bind.port == 0 {
        log::info!("http server disabled (port 0)");
        return Ok(None);
    }
    let addr = std::net::SocketAddr::new(bind.host, bind.port);
    let listener = match listen(addr) {
        Ok(l) => l,
        Err(e) if !bind.explicit => {
            log::warn!(
                addr:% = addr,
                error:% = e;
                "http server listen failed; running without HTTP server"
            );
            return Ok(None);
        }
        Err(e) => return Err(StartError::Listen(addr, e)),
    };
    raise_nofile_limit();
    let (max_connections, per_client) = limits::connection_caps(
        bind.max_connections,
        bind.max_connections_per_client,
        current_nofile_limit(),
    );
    let served = Arc::new(served(workflows, left_out, clock, max_connections));
    let Some(state) = served.primary() else {
        return Err(StartError::NoWorkflow);
    };
    let host_policy = host::HostPolicy::for_bind(bind.host, &bind.allowed_hosts);
    let mut limits = admission::limits(max_connections, per_client, state.clone());
    let probe_reserve = limits.probe_reserve;
    let (inline_served, inline_policy) = (served.clone(), Arc::new(host_policy.clone()));
    limits.inline = Some(Arc::new(move |req| {
        router::serve_inline(&inline_served, &inline_policy, req)
    }));
    let server = tiny_http::Server::from_listener_with_limits(listener, limits)
        .map(Arc::new)
        .map_err(|e| StartError::Server(addr, e))?;
    log::info!(
        addr:% = addr,
        max_connections:% = max_connections,
        max_connections_per_client:% = per_client,
        probe_reserve:% = probe_reserve,
        max_streams:% = limits::max_streams(max_connections),
        host_check:% = match &host_policy {
            host::HostPolicy::Any => "any".to_string(),
            host::HostPolicy::Only(names) => names.join(","),
        };
        "http server listening"
    );
    let host_policy = Arc::new(host_policy);
    let (fatal_tx, fatal_rx) = crossbeam_channel::bounded(POOL_SIZE + 1);
    watch_accept_thread_panics(fatal_tx.clone());
    let mut threads = Vec::new();
    for n in 0..POOL_SIZE {
        let server = server.clone();
        let state = state.clone();
        let served = served.clone();
        let fatal_tx = fatal_tx.clone();
        let host_policy = host_policy.clone();
        let t = std::thread::Builder::new()
            .name(format!("http-{n}"))
            .spawn(move || {
                loop {
                    match server.recv_timeout(IDLE_FLUSH) {
                        Ok(Some(req)) => router::handle(&served, &host_policy, req),
                        Ok(None) if state.stopping.load(Ordering::SeqCst) => break,
                        Ok(None) => state.refusals.flush(Instant::now()),
                        Err(_) if state.stopping.load(Ordering::SeqCst) => break,
                        Err(e) => {
                            let _ = fatal_tx.try_send(format!("accept loop ended: {e}"));
                            break;
                        }
                    }
                }
            })
            .map_err(StartError::Thread)?;
        threads.push(t);
    }
    Ok(Some(HttpServer {
        server,
        state,
        served,
        fatal: fatal_rx,
        threads,
    }))
}
