//! `GET /livez` and `GET /readyz`.

use super::AppState;
use super::respond::JsonReply;
use super::views::health::CheckStatus;
use super::views::probe::{ProbeView, ReadinessChecks, ReadinessView};
use super::views::to_value;

/// 200 `pass` while alive, 503 `fail` while draining.
pub fn livez(state: &AppState) -> JsonReply {
    if state.orch.snapshot().draining {
        JsonReply::with_status(
            503,
            to_value(&ProbeView {
                status: CheckStatus::Fail,
            }),
        )
    } else {
        JsonReply::ok(to_value(&ProbeView {
            status: CheckStatus::Pass,
        }))
    }
}

/// A read connection answers now, and the orchestrator's database check passes (the store
/// takes writes — none is kept for retry — and budget reads succeed).
fn database_ok(state: &AppState, snap: &crate::orchestrator::snapshot::Snapshot) -> bool {
    let answers = match state.store.read_conn() {
        Ok(c) => c.ping().is_ok(),
        Err(_) => false,
    };
    answers && snap.health.database.failing_streak == 0
}

/// Database, preflight, workflow; `pass` only when every check passes and not draining.
pub fn readyz(state: &AppState) -> JsonReply {
    let snap = state.orch.snapshot();
    let database = database_ok(state, &snap);
    let preflight = snap.health.preflight.failing_streak == 0;
    // The process started, so the workflow loaded at least once; a later failed reload keeps
    // this check passing (`health.workflow` in the state document reports it).
    let workflow = true;
    let ready = database && preflight && workflow && !snap.draining;
    let uptime_ms = (state.clock.now_ms() - snap.started_at_ms).max(0);
    JsonReply::with_status(
        if ready { 200 } else { 503 },
        to_value(&ReadinessView {
            status: CheckStatus::pass_if(ready),
            version: state.version.to_string(),
            uptime_seconds: uptime_ms as f64 / 1000.0,
            checks: ReadinessChecks {
                database: CheckStatus::pass_if(database),
                preflight: CheckStatus::pass_if(preflight),
                workflow: CheckStatus::pass_if(workflow),
            },
        }),
    )
}
