//! The state document's `health` member: the database, preflight, workflow and poll checks.

use schemars::JsonSchema;
use serde::Serialize;

use crate::domain::PollOutcome;
use crate::orchestrator::snapshot::Snapshot;
use crate::orchestrator::state::CheckHealth;

use super::super::wording;
use super::{opt_ts, ts};

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Pass,
    Fail,
}

impl CheckStatus {
    fn of(failing: bool) -> CheckStatus {
        if failing {
            CheckStatus::Fail
        } else {
            CheckStatus::Pass
        }
    }
}

/// One of the orchestrator's own checks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Check")]
pub struct CheckView {
    pub status: CheckStatus,
    pub checked_at: Option<String>,
    pub last_success_at: Option<String>,
    pub consecutive_failures: u32,
    pub failing_since: Option<String>,
    /// The failure, while failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CheckView {
    pub fn build<E>(c: &CheckHealth<E>) -> CheckView {
        let failing = c.failing_streak > 0;
        CheckView {
            status: CheckStatus::of(failing),
            checked_at: opt_ts(c.checked_at_ms),
            last_success_at: opt_ts(c.last_success_ms),
            consecutive_failures: c.failing_streak,
            failing_since: opt_ts(c.since_ms).filter(|_| failing),
            error: c.error.clone().filter(|_| failing),
        }
    }
}

/// The workflow check, naming the workflow file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowCheckView {
    #[serde(flatten)]
    pub check: CheckView,
    pub file: String,
}

/// The poll check, with the last poll's outcome and when the next one is due.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PollCheckView {
    #[serde(flatten)]
    pub check: CheckView,
    /// `succeeded` or the failure's kind; absent before the first poll.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    pub next_poll_at: Option<String>,
    /// When the poll whose tracker reads are still out began; `null` when none is out. A
    /// tracker that hangs shows here before its reads time out.
    pub in_flight_since: Option<String>,
    /// Poll ticks skipped since start because the previous poll's reads were still out.
    pub ticks_skipped: u64,
    pub summary_text: String,
}

/// The checks behind readiness and the dashboard's health strip.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Health")]
pub struct HealthView {
    pub database: CheckView,
    pub preflight: CheckView,
    pub workflow: WorkflowCheckView,
    pub poll: PollCheckView,
    pub tracker: TrackerHealthView,
    /// The pull-request provider's reads; `null` while no reaction uses one.
    pub scm: Option<ScmCheckView>,
    /// The SSH worker hosts (`worker.ssh_hosts`) in order; empty when agents run locally.
    pub ssh_hosts: Vec<SshHostView>,
    /// The notification destinations (`notifications.destinations`) by name; empty when none
    /// is configured.
    pub notifications: Vec<NotificationDestinationView>,
}

/// One notification destination: when it last took a notice, its latest failure, and what
/// waits in its queue.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NotificationDestinationView {
    pub name: String,
    /// `slack` or `webhook`.
    pub kind: String,
    pub status: CheckStatus,
    pub last_success_at: Option<String>,
    pub last_error_at: Option<String>,
    /// The latest failure after retries (masked).
    pub last_error: Option<String>,
    pub failing_since: Option<String>,
    /// Notices in a row that failed after their retries.
    pub consecutive_failures: u32,
    pub queued: usize,
    /// Why the destination sends nothing (its `url` or `secret` names an unset variable);
    /// absent while it is enabled. A disabled destination's status is `fail`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
}

impl NotificationDestinationView {
    fn list() -> Vec<NotificationDestinationView> {
        crate::notify::status::all()
            .into_iter()
            .map(|d| NotificationDestinationView {
                name: d.name,
                kind: d.kind.as_str().to_string(),
                status: CheckStatus::of(d.failing_since_ms.is_some() || d.disabled.is_some()),
                last_success_at: opt_ts(d.last_success_ms),
                last_error_at: opt_ts(d.last_error_ms),
                last_error: d.last_error,
                failing_since: opt_ts(d.failing_since_ms),
                consecutive_failures: d.consecutive_failures,
                queued: d.queued,
                disabled: d.disabled.map(|(why, _)| why),
            })
            .collect()
    }
}

/// One SSH worker host: its sessions and whether placement skips it after repeated
/// connection failures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SshHostView {
    pub host: String,
    pub running: u32,
    pub status: SshHostStatus,
    /// When the host takes sessions again, while out of service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_of_service_until: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SshHostStatus {
    InService,
    OutOfService,
}

impl SshHostView {
    fn list(snap: &Snapshot) -> Vec<SshHostView> {
        snap.ssh_host_usage()
            .into_iter()
            .map(|(host, running)| {
                let until = snap
                    .ssh_hosts_out
                    .iter()
                    .find(|(h, u)| *h == host && *u > snap.generated_at_ms)
                    .map(|(_, u)| *u);
                SshHostView {
                    host,
                    running,
                    status: if until.is_some() {
                        SshHostStatus::OutOfService
                    } else {
                        SshHostStatus::InService
                    },
                    out_of_service_until: until.map(ts),
                }
            })
            .collect()
    }
}

/// The pull-request provider check, naming the provider kind first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScmCheckView {
    pub provider: String,
    #[serde(flatten)]
    pub check: CheckView,
}

impl ScmCheckView {
    fn build(h: &crate::orchestrator::state::ScmHealth) -> ScmCheckView {
        ScmCheckView {
            provider: h.provider.clone(),
            check: CheckView::build(&h.check),
        }
    }
}

/// The tracker kind and what its API said about rate limits at the latest poll, so a user
/// sees a budget running low before polls start failing on it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TrackerHealthView {
    pub kind: String,
    /// `null` for a tracker that reports no limits (the file tracker), or before it answered.
    pub rate_limit: Option<RateLimitView>,
}

/// `X-RateLimit-*` figures of the latest answer and the latest rate-limited answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RateLimitView {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    pub reset_at: Option<String>,
    pub last_limited_at: Option<String>,
    /// 429 or 403.
    pub last_limited_status: Option<u16>,
}

impl TrackerHealthView {
    fn build(snap: &Snapshot) -> TrackerHealthView {
        TrackerHealthView {
            kind: snap.config.tracker_kind.clone(),
            rate_limit: snap
                .health
                .tracker_rate_limit
                .as_ref()
                .map(|r| RateLimitView {
                    limit: r.limit,
                    remaining: r.remaining,
                    reset_at: opt_ts(r.reset_at_ms),
                    last_limited_at: opt_ts(r.last_limited_at_ms),
                    last_limited_status: r.last_limited_status,
                }),
        }
    }
}

impl PollCheckView {
    fn build(snap: &Snapshot) -> PollCheckView {
        let poll = &snap.health.poll;
        let polled = poll.at_ms.is_some();
        let failing = polled && poll.outcome != Some(PollOutcome::Ok);
        let streak = if failing {
            poll.failing_streak.max(1)
        } else {
            0
        };
        let outcome = poll.outcome.filter(|_| polled).map(|o| match o {
            PollOutcome::Ok => "succeeded".to_string(),
            other => other.as_str().to_string(),
        });
        let next_poll_at = poll.next_at_ms.filter(|_| !snap.draining).map(ts);
        PollCheckView {
            check: CheckView {
                status: CheckStatus::of(failing),
                checked_at: opt_ts(poll.at_ms),
                last_success_at: opt_ts(poll.last_success_ms),
                consecutive_failures: streak,
                failing_since: opt_ts(poll.failing_since_ms.or(poll.at_ms)).filter(|_| failing),
                error: poll.error.clone().filter(|_| failing),
            },
            outcome,
            next_poll_at,
            in_flight_since: opt_ts(poll.in_flight_since_ms),
            ticks_skipped: poll.ticks_skipped,
            summary_text: wording::poll_summary(
                poll.outcome.filter(|_| polled).map(PollOutcome::as_str),
                streak,
                poll.last_success_ms
                    .map(|at| (snap.generated_at_ms - at).max(0)),
            ) + &wording::poll_waiting(
                poll.in_flight_since_ms
                    .map(|at| (snap.generated_at_ms - at).max(0)),
                poll.ticks_skipped,
            ),
        }
    }
}

impl HealthView {
    pub fn build(snap: &Snapshot) -> HealthView {
        let h = &snap.health;
        HealthView {
            database: CheckView::build(&h.database),
            preflight: CheckView::build(&h.preflight),
            workflow: WorkflowCheckView {
                check: CheckView::build(&h.workflow),
                file: snap.config.workflow_file.clone(),
            },
            poll: PollCheckView::build(snap),
            tracker: TrackerHealthView::build(snap),
            scm: h.scm.as_ref().map(ScmCheckView::build),
            ssh_hosts: SshHostView::list(snap),
            notifications: NotificationDestinationView::list(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn health_before_the_first_poll() {
        let snap = Snapshot::default();
        let h = super::super::to_value(&HealthView::build(&snap));
        assert_eq!(h["poll"]["status"], "pass");
        assert_eq!(
            h["poll"]["summary_text"],
            "Sortie has not polled the tracker yet."
        );
        assert!(h["poll"].get("outcome").is_none());
        assert_eq!(h["database"]["checked_at"], Value::Null);
        assert!(h["database"].get("error").is_none());
        assert_eq!(h["scm"], Value::Null);
        assert_eq!(h["ssh_hosts"], serde_json::json!([]));
    }

    #[test]
    fn ssh_hosts_show_their_sessions_and_an_outage_until_it_ends() {
        let mut snap = Snapshot {
            generated_at_ms: 1_774_535_400_000,
            ..Default::default()
        };
        snap.config.ssh_hosts = vec!["build1".into(), "ci@build2:2222".into()];
        snap.ssh_hosts_out = std::sync::Arc::new(vec![
            ("ci@build2:2222".into(), 1_774_535_460_000),
            ("build1".into(), 1_774_535_399_000),
        ]);
        let h = super::super::to_value(&HealthView::build(&snap));
        assert_eq!(
            h["ssh_hosts"],
            serde_json::json!([
                {"host": "build1", "running": 0, "status": "in_service"},
                {"host": "ci@build2:2222", "running": 0, "status": "out_of_service",
                 "out_of_service_until": "2026-03-26T14:31:00.000Z"}
            ])
        );
    }

    #[test]
    fn scm_check_names_the_provider_first_and_its_error_while_failing() {
        let mut snap = Snapshot::default();
        let check = CheckHealth::<crate::scm::ScmError> {
            checked_at_ms: Some(1_774_535_398_000),
            failing_streak: 2,
            since_ms: Some(1_774_535_390_000),
            last_success_ms: Some(1_774_535_380_000),
            error: Some("pull request read failed".into()),
            ..Default::default()
        };
        snap.health.scm = Some(crate::orchestrator::state::ScmHealth {
            provider: "github".into(),
            check,
        });
        let text = serde_json::to_string(&HealthView::build(&snap).scm).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"provider":"github","status":"fail","checked_at":"2026-03-26T14:29:58.000Z","last_success_at":"2026-03-26T14:29:40.000Z","consecutive_failures":2,"failing_since":"2026-03-26T14:29:50.000Z","error":"pull request read failed"}"#
        );
        let passing = crate::orchestrator::state::ScmHealth {
            provider: "github".into(),
            check: CheckHealth::default(),
        };
        snap.health.scm = Some(passing);
        let h = super::super::to_value(&HealthView::build(&snap));
        assert_eq!(h["scm"]["status"], "pass");
        assert!(h["scm"].get("error").is_none());
    }
}
