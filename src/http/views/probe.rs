//! `GET /livez` and `GET /readyz`.

use schemars::JsonSchema;
use serde::Serialize;

use super::health::CheckStatus;

/// Liveness: `pass`, or `fail` while draining.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Probe")]
pub struct ProbeView {
    pub status: CheckStatus,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReadinessChecks {
    pub database: CheckStatus,
    pub preflight: CheckStatus,
    pub workflow: CheckStatus,
}

/// Readiness: `pass` only when every check passes and sortie is not draining.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Readiness")]
pub struct ReadinessView {
    pub status: CheckStatus,
    pub version: String,
    pub uptime_seconds: f64,
    pub checks: ReadinessChecks,
}

impl CheckStatus {
    pub fn pass_if(ok: bool) -> CheckStatus {
        if ok {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        }
    }
}
