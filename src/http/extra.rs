//! `/metrics`, `/ui/…` and `/favicon.ico`: the Prometheus scrape (`crate::metrics`) and the
//! embedded dashboard (`crate::ui`). The router sends every request for these paths here
//! before method enforcement, so this module enforces its own methods (GET and HEAD).

use tiny_http::{Method, Request, Response};

use super::AppState;
use super::respond::{ApiError, header, send_error};

pub fn serve(state: &AppState, req: Request) {
    let path = req.url().split('?').next().unwrap_or("/").to_string();
    let head_only = *req.method() == Method::Head;
    if !matches!(req.method(), Method::Get | Method::Head) {
        let allow = "GET, HEAD";
        let mut err = ApiError::new(
            405,
            "method_not_allowed",
            format!(
                "{} is not allowed on {path}; allowed: {allow}",
                req.method()
            ),
        );
        err.allow = Some(allow);
        send_error(req, err);
        return;
    }
    if path == "/metrics" {
        let body = state.orch.metrics.render(&state.orch.snapshot());
        let mut resp = Response::from_data(if head_only {
            Vec::new()
        } else {
            body.into_bytes()
        });
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
        return;
    }
    let if_none_match = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("If-None-Match"))
        .map(|h| h.value.as_str().to_string());
    match crate::ui::serve(&path, if_none_match.as_deref()) {
        Some(ui) => {
            let body = if head_only { Vec::new() } else { ui.body };
            let mut resp = Response::from_data(body).with_status_code(ui.status);
            for (k, v) in &ui.headers {
                if let Some(h) = header(k, v) {
                    resp.add_header(h);
                }
            }
            let _ = req.respond(resp);
        }
        None => send_error(
            req,
            ApiError::new(404, "not_found", format!("no route for {path}")),
        ),
    }
}
