//! The HTTP server on sortie's one port (tiny_http, blocking, a small accept pool).
//!
//! This build serves the probes, the state snapshot and the refresh trigger; the full seed
//! API (runs, events stream, issue detail, dashboard, metrics) is being built on the same
//! router.

mod routes;

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::cli::run::ServerBind;
use crate::clock::Clock;
use crate::orchestrator::OrchestratorHandle;
use crate::store::Store;

/// Request-handling threads.
const POOL_SIZE: usize = 4;

/// A running server.
pub struct HttpServer {
    server: Arc<tiny_http::Server>,
    fatal: Receiver<String>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Receives a message when the accept loop ends unexpectedly.
    pub fn fatal_receiver(&self) -> Receiver<String> {
        self.fatal.clone()
    }

    /// Stops accepting and joins the pool.
    pub fn shutdown(self) {
        self.server.unblock();
        for _ in 1..self.threads.len() {
            self.server.unblock();
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Shared by the request threads.
pub struct AppState {
    pub orch: OrchestratorHandle,
    pub store: Arc<Store>,
    pub clock: Arc<dyn Clock>,
    pub version: &'static str,
}

/// Binds and starts the server. Port 0 disables it (`Ok(None)`). When the port was not chosen
/// explicitly and the default is busy, sortie runs without a server (warning); an explicit
/// port that cannot be bound is an error.
pub fn start(
    bind: &ServerBind,
    orch: OrchestratorHandle,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
) -> Result<Option<HttpServer>, String> {
    if bind.port == 0 {
        log::info!("http server disabled (port 0)");
        return Ok(None);
    }
    let addr = std::net::SocketAddr::new(bind.host, bind.port);
    let server = match tiny_http::Server::http(addr) {
        Ok(s) => Arc::new(s),
        Err(e) if !bind.explicit => {
            log::warn!(
                "http server listen failed; running without HTTP server addr={addr} error=\"{e}\""
            );
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot listen on {addr}: {e}")),
    };
    log::info!("http server listening addr={addr}");
    let state = Arc::new(AppState {
        orch,
        store,
        clock,
        version: crate::cli::VERSION,
    });
    let (fatal_tx, fatal_rx) = crossbeam_channel::bounded(POOL_SIZE);
    let mut threads = Vec::new();
    for n in 0..POOL_SIZE {
        let server = server.clone();
        let state = state.clone();
        let fatal_tx = fatal_tx.clone();
        let t = std::thread::Builder::new()
            .name(format!("http-{n}"))
            .spawn(move || {
                loop {
                    match server.recv() {
                        Ok(req) => routes::handle(&state, req),
                        Err(e) => {
                            let _ = fatal_tx.try_send(format!("accept loop ended: {e}"));
                            break;
                        }
                    }
                }
            })
            .map_err(|e| format!("cannot start http thread: {e}"))?;
        threads.push(t);
    }
    Ok(Some(HttpServer {
        server,
        fatal: fatal_rx,
        threads,
    }))
}
