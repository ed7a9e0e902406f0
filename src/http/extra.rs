//! PLUG-IN POINT for `/metrics`, `/ui/…` and `/favicon.ico`, which another engineer builds
//! (`crate::metrics`, `crate::ui`). Until they are plugged in here, these paths answer 404 with
//! the error envelope. The router sends every request for them here, before method
//! enforcement, so the handlers that replace this decide their own methods.

use tiny_http::Request;

use super::AppState;
use super::respond::{ApiError, send_error};

pub fn serve(_state: &AppState, req: Request) {
    let path = req.url().split('?').next().unwrap_or("/").to_string();
    send_error(
        req,
        ApiError::new(
            404,
            "not_found",
            format!("no route for {path} in this build"),
        ),
    );
}
