//! `GET /livez` and `GET /readyz`.

use serde_json::json;

use super::AppState;
use super::respond::JsonReply;

/// 200 `pass` while alive, 503 `fail` while draining.
pub fn livez(state: &AppState) -> JsonReply {
    if state.orch.snapshot().draining {
        JsonReply::with_status(503, json!({"status": "fail"}))
    } else {
        JsonReply::ok(json!({"status": "pass"}))
    }
}

fn database_ok(state: &AppState) -> bool {
    match state.store.read_conn() {
        Ok(c) => c
            .connection()
            .query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
            .is_ok(),
        Err(_) => false,
    }
}

/// Database ping, preflight, workflow; `pass` only when every check passes and not draining.
pub fn readyz(state: &AppState) -> JsonReply {
    let snap = state.orch.snapshot();
    let pf = |ok: bool| if ok { "pass" } else { "fail" };
    let database = database_ok(state);
    let preflight = snap.health.preflight.failing_streak == 0;
    // The process started, so the workflow loaded at least once; a later failed reload keeps
    // this check passing (the seed: health.workflow reports it).
    let workflow = true;
    let ready = database && preflight && workflow && !snap.draining;
    let uptime_ms = (state.clock.now_ms() - snap.started_at_ms).max(0);
    JsonReply::with_status(
        if ready { 200 } else { 503 },
        json!({
            "status": pf(ready),
            "version": state.version,
            "uptime_seconds": uptime_ms as f64 / 1000.0,
            "checks": {
                "database": pf(database),
                "preflight": pf(preflight),
                "workflow": pf(workflow),
            },
        }),
    )
}
