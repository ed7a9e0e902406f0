//! `GET /metrics`: the Prometheus text exposition. Counters come from [`crate::metrics`]; the
//! gauges are taken from the orchestrator's published snapshot (and the webhook body budget)
//! at scrape time, so a scrape never waits on the orchestrator.

use tiny_http::{Request, Response};

use super::AppState;
use super::respond::header;

pub fn serve(state: &AppState, req: Request) {
    let snap = state.orch.snapshot();
    let gauges = snap.gauge_values(state.clock.now_ms());
    state.orch.metrics.set_spend(&snap.spend_gauges());
    state
        .orch
        .metrics
        .set_webhook_body_bytes(state.webhooks.body_bytes());
    let mut body = state.orch.metrics.render(&gauges);
    body.push_str(&crate::notify::status::render_metrics());
    let mut resp = Response::from_data(body.into_bytes());
    for h in [
        header("Content-Type", crate::metrics::CONTENT_TYPE),
        header("Cache-Control", "no-store"),
        header("X-Content-Type-Options", "nosniff"),
    ]
    .into_iter()
    .flatten()
    {
        resp.add_header(h);
    }
    let _ = req.respond(resp);
}
