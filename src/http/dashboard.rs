//! `/ui`, `/ui/…` and `/favicon.ico`: the embedded dashboard. [`crate::ui`] decides the status,
//! headers and body (content-hashed assets, ETag revalidation); this module writes them.

use tiny_http::{Request, Response};

use super::respond::{ApiError, header, send_error};

pub fn serve(req: Request, path: &str, head_only: bool) {
    let if_none_match = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("If-None-Match"))
        .map(|h| h.value.as_str().to_string());
    let Some(ui) = crate::ui::serve(path, if_none_match.as_deref()) else {
        return send_error(
            req,
            ApiError::new(404, "not_found", format!("no route for {path}")),
        );
    };
    let body = if head_only { Vec::new() } else { ui.body };
    let mut resp = Response::from_data(body).with_status_code(ui.status);
    for (k, v) in &ui.headers {
        if let Some(h) = header(k, v) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}
