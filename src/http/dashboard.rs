//! `/ui`, `/ui/…` and `/favicon.ico`: the embedded dashboard. [`crate::ui`] decides the status,
//! headers and body (content-hashed assets, ETag revalidation); this module writes them.

use tiny_http::{Request, Response};

use super::respond::{ApiError, header, send_error};

/// An answer to HEAD carries the headers of the GET answer, `Content-Length` included;
/// tiny_http leaves the body out itself.
pub fn serve(req: Request, path: &str) {
    let if_none_match = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("If-None-Match"))
        .map(|h| h.value.as_str().to_string());
    let Some(ui) = crate::ui::serve(path, if_none_match.as_deref()) else {
        return send_error(req, ApiError::no_route(path));
    };
    let mut resp = Response::from_data(ui.body).with_status_code(ui.status);
    for (k, v) in &ui.headers {
        if let Some(h) = header(k, v) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}
