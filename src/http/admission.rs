//! What the connection threads decide before a request reaches the request threads: which
//! bodies are read (and with which cap), which requests a probe connection may carry, and
//! what becomes of the connections the server refuses by itself. The hooks of
//! [`limits`].

use std::net::SocketAddr;
use std::time::Instant;

use tiny_http::{Admission, ConnRefusal, Head, Method};

use super::AppState;
use super::limits::{
    BODY_TIMEOUT, HEAD_TIMEOUT, MAX_HEAD, MAX_HEAD_LINE, MAX_REQUEST_LINE, PROBE_HEAD_TIMEOUT,
    envelope, probe_reserve,
};
use super::router::{Route, route};

/// Every request but a webhook delivery: a body of at most [`super::limits::MAX_BODY`].
/// A delivery is decided by [`super::webhooks::admit`] from its head.
pub fn admit(state: &AppState, head: &Head<'_>) -> Admission {
    if *head.method == Method::Post {
        let path = head.target.split('?').next().unwrap_or("/");
        if let Route::Webhook(kind) = route(path) {
            return super::webhooks::admit(state, head, &kind);
        }
    }
    Admission::Read {
        max_body: super::limits::MAX_BODY,
        hold: None,
    }
}

/// The requests a connection kept for probes may carry: `GET /livez`, `/readyz`, `/metrics`.
pub fn is_probe(method: &Method, target: &str) -> bool {
    *method == Method::Get
        && matches!(
            target.split('?').next(),
            Some("/livez" | "/readyz" | "/metrics")
        )
}

/// Counts a refused connection and logs it within the refusal log's bounds.
pub fn refused(state: &AppState, why: ConnRefusal, peer: Option<SocketAddr>) {
    state.orch.metrics.connection_refused(why.as_str());
    if let Some(suppressed) = state.refusals.note(("http", why.as_str()), Instant::now()) {
        let remote = peer.map(|a| a.to_string()).unwrap_or_default();
        log::warn!(
            reason = why.as_str(),
            remote = remote.as_str(),
            suppressed = suppressed;
            "connection refused"
        );
    }
}

/// The limits for tiny_http ([`super::limits`]), with this module's hooks over `state`.
pub fn limits(
    max_connections: usize,
    per_client: usize,
    state: std::sync::Arc<AppState>,
) -> tiny_http::Limits {
    let refused_state = state.clone();
    tiny_http::Limits {
        head_timeout: HEAD_TIMEOUT,
        body_timeout: BODY_TIMEOUT,
        admit: std::sync::Arc::new(move |head| admit(&state, head)),
        max_request_line: MAX_REQUEST_LINE,
        max_head_line: MAX_HEAD_LINE,
        max_head: MAX_HEAD,
        max_connections,
        max_connections_per_client: per_client,
        probe_reserve: probe_reserve(max_connections),
        probe_head_timeout: PROBE_HEAD_TIMEOUT,
        is_probe,
        on_refused: std::sync::Arc::new(move |why, peer| refused(&refused_state, why, peer)),
        error_body: envelope,
        error_content_type: "application/json; charset=utf-8",
        // Set by the server once it knows what it serves (`router::serve_inline`).
        inline: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_the_three_health_routes_read_with_get() {
        for p in ["/livez", "/readyz", "/metrics", "/livez?x=1"] {
            assert!(is_probe(&Method::Get, p), "{p}");
        }
        assert!(!is_probe(&Method::Post, "/livez"));
        for p in ["/", "/api/v1/state", "/livez/x", "/metricsx"] {
            assert!(!is_probe(&Method::Get, p), "{p}");
        }
    }
}
