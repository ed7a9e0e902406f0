//! Routing: the `Host` check against DNS rebinding and the cross-origin check first (every
//! path), then the route table with method enforcement (405 + `Allow` + the JSON envelope),
//! then the handler.

use std::time::Instant;

use tiny_http::{Method, Request, Response};

use super::AppState;
use super::host::{HostDecision, HostPolicy};
use super::origin;
use super::query::percent_decode;
use super::respond::{self, ApiError, JsonReply, echo, send_error, send_json};
use super::workflows::Served;
use super::{
    actions, dashboard, issue_detail, openapi, operator_message, prices, probes, runs, scrape, sse,
    state_doc, stats, webhooks,
};

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Root,
    Livez,
    Readyz,
    State,
    Runs,
    RunIssues,
    RunEvents(String),
    Stats,
    Prices,
    Events,
    Refresh,
    RetryNow(String),
    ReactionCheck(String, String),
    Acknowledge(String),
    /// `/api/v1/webhooks/{kind}`: a forge's signed delivery ([`webhooks::serve`]).
    Webhook(String),
    /// `/api/v1/notifications`: an agent's message to the operator ([`operator_message`]).
    OperatorMessage,
    OpenApi,
    /// `/metrics`: the Prometheus scrape ([`scrape::serve`]).
    Metrics,
    /// `/ui`, `/ui/…`: the embedded dashboard ([`dashboard::serve`]).
    Dashboard,
    /// `/favicon.ico`, served with the dashboard's files.
    Favicon,
    Issue(String),
    /// `/api/v1/workflows`: the workflows the daemon serves ([`super::workflows`]).
    Workflows,
    NotFound,
}

impl Route {
    /// The methods the route accepts, as its `Allow` header says. The reference's method
    /// enforcement allows one method per endpoint (`Allow: GET`, or `POST` for the actions);
    /// only the dashboard accepts HEAD as well. So HEAD elsewhere is 405, and an event
    /// stream never opens for it.
    pub fn allow(&self) -> &'static str {
        match self {
            Route::Refresh
            | Route::RetryNow(_)
            | Route::ReactionCheck(..)
            | Route::Acknowledge(_)
            | Route::OperatorMessage
            | Route::Webhook(_) => "POST",
            Route::Dashboard => "GET, HEAD",
            _ => "GET",
        }
    }

    /// The documented `(method, path template)` of the route; `None` for paths another module
    /// serves or none serves. Exhaustive on purpose: a new route must say how it is documented.
    pub fn template(&self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Route::Root => ("get", "/"),
            Route::Livez => ("get", "/livez"),
            Route::Readyz => ("get", "/readyz"),
            Route::State => ("get", "/api/v1/state"),
            Route::Runs => ("get", "/api/v1/runs"),
            Route::RunIssues => ("get", "/api/v1/runs/issues"),
            Route::RunEvents(_) => ("get", "/api/v1/runs/{dispatch_id}/events"),
            Route::Stats => ("get", "/api/v1/stats"),
            Route::Prices => ("get", "/api/v1/prices"),
            Route::Events => ("get", "/api/v1/events"),
            Route::Refresh => ("post", "/api/v1/refresh"),
            Route::RetryNow(_) => ("post", "/api/v1/retries/{identifier}/run"),
            Route::ReactionCheck(..) => ("post", "/api/v1/reactions/{identifier}/{kind}/check"),
            Route::Acknowledge(_) => ("post", "/api/v1/attention/{id}/acknowledge"),
            Route::Webhook(_) => ("post", "/api/v1/webhooks/{kind}"),
            Route::OperatorMessage => ("post", "/api/v1/notifications"),
            Route::OpenApi => ("get", "/openapi.json"),
            Route::Issue(_) => ("get", "/api/v1/{identifier}"),
            Route::Workflows => ("get", "/api/v1/workflows"),
            Route::Metrics | Route::Dashboard | Route::Favicon | Route::NotFound => return None,
        })
    }

    /// Answered for the daemon, not one workflow (`?workflow=` is not read).
    fn daemon_wide(&self) -> bool {
        matches!(
            self,
            Route::Root
                | Route::Livez
                | Route::Readyz
                | Route::Metrics
                | Route::Dashboard
                | Route::Favicon
                | Route::OpenApi
                | Route::Workflows
                | Route::NotFound
        )
    }

    fn accepts(&self, m: &Method) -> bool {
        self.allow().split(", ").any(|a| a == m.as_str())
    }
}

/// Fixed paths under `/api/v1/` that take precedence over `/api/v1/{identifier}`. The OpenAPI document is
/// served at `/openapi.json`, outside `/api/v1/`, so no identifier is shadowed by it.
const FIXED: &[&str] = &[
    "state",
    "runs",
    "stats",
    "prices",
    "events",
    "refresh",
    "notifications",
    "workflows",
];

/// Maps a path (without query) to its route.
pub fn route(path: &str) -> Route {
    match path {
        "/" => return Route::Root,
        "/livez" => return Route::Livez,
        "/readyz" => return Route::Readyz,
        "/metrics" => return Route::Metrics,
        "/openapi.json" => return Route::OpenApi,
        "/favicon.ico" => return Route::Favicon,
        "/ui" => return Route::Dashboard,
        _ => {}
    }
    if path.starts_with("/ui/") {
        return Route::Dashboard;
    }
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Route::NotFound;
    };
    let segs: Vec<String> = rest.split('/').map(percent_decode).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["state"] => Route::State,
        ["runs"] => Route::Runs,
        ["runs", "issues"] => Route::RunIssues,
        ["stats"] => Route::Stats,
        ["runs", d, "events"] if !d.is_empty() => Route::RunEvents(d.to_string()),
        ["events"] => Route::Events,
        ["prices"] => Route::Prices,
        ["refresh"] => Route::Refresh,
        ["notifications"] => Route::OperatorMessage,
        ["workflows"] => Route::Workflows,
        ["retries", id, "run"] if !id.is_empty() => Route::RetryNow(id.to_string()),
        ["reactions", id, kind, "check"] if !id.is_empty() && !kind.is_empty() => {
            Route::ReactionCheck(id.to_string(), kind.to_string())
        }
        ["attention", id, "acknowledge"] if !id.is_empty() => Route::Acknowledge(id.to_string()),
        ["webhooks", kind] if !kind.is_empty() => Route::Webhook(kind.to_string()),
        [one] if !one.is_empty() && !FIXED.contains(one) => Route::Issue(one.to_string()),
        _ => Route::NotFound,
    }
}

fn header_value<'a>(req: &'a Request, name: &'static str) -> Option<&'a str> {
    req.headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// The refusal of a request the server does not serve: no Host on HTTP/1.1, a host name not
/// allowed, or a browser's state-changing request from another origin. Refusals are logged at
/// most once per interval each (`state.refusals`).
fn refusal(
    state: &AppState,
    host_policy: &HostPolicy,
    req: &Request,
    path: &str,
    method: &tiny_http::Method,
) -> Option<ApiError> {
    let http_1_0 = *req.http_version() == tiny_http::HTTPVersion(1, 0);
    match host_policy.check(header_value(req, "Host"), http_1_0) {
        HostDecision::Served => {}
        HostDecision::Missing => {
            return Some(ApiError::new(
                400,
                "missing_host",
                "an HTTP/1.1 request must carry a Host header",
            ));
        }
        HostDecision::NotAllowed => {
            if let Some(suppressed) = state
                .refusals
                .note(("http", "host_not_allowed"), Instant::now())
            {
                log::warn!(
                    method:% = method,
                    path:% = echo(path),
                    host:% = echo(header_value(req, "Host").unwrap_or("")),
                    suppressed:% = suppressed;
                    "request for a host name not allowed rejected"
                );
            }
            return Some(ApiError::new(
                403,
                "host_not_allowed",
                "the Host header names a host this server does not answer for (DNS rebinding protection; see server.allowed_hosts)",
            ));
        }
    }
    let decision = origin::check(
        method.as_str(),
        header_value(req, "Sec-Fetch-Site"),
        header_value(req, "Origin"),
        header_value(req, "Host"),
    );
    if !decision.refused() {
        return None;
    }
    if let Some(suppressed) = state
        .refusals
        .note(("http", "cross_origin"), Instant::now())
    {
        log::warn!(
            method:% = method,
            path:% = echo(path),
            origin:% = echo(header_value(req, "Origin").unwrap_or("")),
            sec_fetch_site:% = echo(header_value(req, "Sec-Fetch-Site").unwrap_or("")),
            host:% = echo(header_value(req, "Host").unwrap_or("")),
            suppressed:% = suppressed;
            "cross-origin request rejected"
        );
    }
    Some(ApiError::new(
        403,
        "cross_origin_request_rejected",
        "a browser sent a state-changing request from another origin; nothing changed",
    ))
}

/// Handles one request on a pool thread (an event stream moves to a thread of its own).
/// Serves a request on its connection's thread when its answer never waits long (the probes,
/// and one workflow's state document, served from its cache); hands any other back to be
/// queued for the `http-N` threads. Saves the two thread wake-ups of the queue, the larger
/// share of such a request's cost on a small host. A panic is caught and logged: the
/// connection is dropped, the server goes on.
pub fn serve_inline(served: &Served, host_policy: &HostPolicy, req: Request) -> Option<Request> {
    let path = req.url().split('?').next().unwrap_or("");
    let cheap = match route(path) {
        Route::Livez | Route::Readyz => true,
        Route::State => !served.several(),
        _ => false,
    };
    if !(cheap && *req.method() == Method::Get) {
        return Some(req);
    }
    let served_here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handle(served, host_policy, req)
    }));
    if let Err(panic) = served_here {
        let panic = crate::orchestrator::io_pool::panic_text(&*panic);
        log::error!(panic:% = panic; "request handler panicked");
    }
    None
}

pub fn handle(served: &Served, host_policy: &HostPolicy, req: Request) {
    let Some(primary) = served.primary() else {
        return send_error(
            req,
            ApiError::new(503, "no_workflow", "no workflow is loaded"),
        );
    };
    let url = req.url().to_string();
    let path = url.split('?').next().unwrap_or("/").to_string();
    let method = req.method().clone();
    if let Some(e) = refusal(&primary, host_policy, &req, &path, &method) {
        return send_error(req, e);
    }
    let r = route(&path);
    if r == Route::NotFound {
        return send_error(req, ApiError::no_route(&path));
    }
    if !r.accepts(&method) {
        return send_error(
            req,
            ApiError::method_not_allowed(method.as_str(), r.allow()),
        );
    }
    let across_all = served.several() && r == Route::State && !super::workflows::names_one(&url);
    let (state, url) = match served.pick(r.daemon_wide(), r == Route::State, &url) {
        Ok(picked) => picked,
        Err(e) => return send_error(req, e),
    };
    let state = &state;
    if served.several() && r == Route::Metrics {
        return scrape::serve_many(served, req);
    }
    if across_all {
        return send_json(req, served.aggregate_state(), None);
    }
    let result: Result<JsonReply, ApiError> = match &r {
        Route::Root => {
            let mut resp = Response::empty(302);
            if let Some(h) = respond::header("Location", "/ui/") {
                resp.add_header(h);
            }
            let _ = req.respond(resp);
            return;
        }
        Route::Events => return sse::open(state, req),
        Route::Metrics => return scrape::serve(state, req),
        Route::Dashboard | Route::Favicon => return dashboard::serve(req, &path),
        Route::Livez => Ok(probes::livez(state)),
        Route::Readyz => Ok(probes::readyz(state)),
        Route::State => return state_doc::serve(state, req),
        Route::Runs => runs::list_runs(state, &url),
        Route::RunIssues => runs::list_issue_groups(state, &url),
        Route::RunEvents(d) => runs::run_events(state, d),
        Route::Stats => return stats::serve(state, req, &url),
        Route::Prices => prices::prices(state),
        Route::Refresh => actions::refresh(state),
        Route::RetryNow(id) => actions::retry_now(state, id),
        Route::ReactionCheck(id, kind) => actions::reaction_check(state, id, kind),
        Route::Acknowledge(id) => actions::acknowledge(state, id),
        Route::Webhook(kind) => return webhooks::serve(state, req, kind),
        Route::OperatorMessage => return operator_message::serve(state, req),
        Route::OpenApi => Ok(JsonReply::ok(openapi::document())),
        Route::Issue(id) => issue_detail::detail(state, id),
        Route::Workflows => Ok(served.list()),
        Route::NotFound => Err(ApiError::no_route(&path)),
    };
    match result {
        Ok(reply) => send_json(req, reply, None),
        Err(e) => send_error(req, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_paths_take_precedence_over_identifiers() {
        assert_eq!(route("/api/v1/state"), Route::State);
        assert_eq!(route("/api/v1/runs"), Route::Runs);
        assert_eq!(route("/api/v1/events"), Route::Events);
        assert_eq!(route("/api/v1/prices"), Route::Prices);
        assert_eq!(route("/api/v1/refresh"), Route::Refresh);
        assert_eq!(route("/api/v1/stats"), Route::Stats);
        assert_eq!(route("/openapi.json"), Route::OpenApi);
        assert_eq!(
            route("/api/v1/openapi.json"),
            Route::Issue("openapi.json".into())
        );
        assert_eq!(route("/api/v1/MT-1"), Route::Issue("MT-1".into()));
        assert_eq!(
            route("/api/v1/owner%2Frepo%239"),
            Route::Issue("owner/repo#9".into())
        );
        assert_eq!(route("/api/v1/"), Route::NotFound);
    }

    #[test]
    fn parameterized_routes() {
        assert_eq!(
            route("/api/v1/runs/ABC/events"),
            Route::RunEvents("ABC".into())
        );
        assert_eq!(route("/api/v1/runs/issues"), Route::RunIssues);
        assert_eq!(
            route("/api/v1/retries/MT-1/run"),
            Route::RetryNow("MT-1".into())
        );
        assert_eq!(
            route("/api/v1/attention/ab/acknowledge"),
            Route::Acknowledge("ab".into())
        );
        assert_eq!(
            route("/api/v1/webhooks/github"),
            Route::Webhook("github".into())
        );
        assert_eq!(route("/ui/issues/X"), Route::Dashboard);
        assert_eq!(route("/metrics"), Route::Metrics);
        assert_eq!(route("/nope"), Route::NotFound);
    }

    #[test]
    fn allow_headers() {
        assert_eq!(Route::State.allow(), "GET");
        assert_eq!(Route::Refresh.allow(), "POST");
        assert!(Route::State.accepts(&Method::Get));
        assert!(!Route::State.accepts(&Method::Head));
        assert!(!Route::Events.accepts(&Method::Head));
        assert!(Route::Dashboard.accepts(&Method::Head));
        assert!(!Route::Favicon.accepts(&Method::Head));
        assert!(!Route::Refresh.accepts(&Method::Get));
        assert!(Route::Refresh.accepts(&Method::Post));
    }
}
