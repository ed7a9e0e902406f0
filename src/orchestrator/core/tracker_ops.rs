//! The `tracker-ops` thread: best-effort tracker writes (lifecycle comments, escalation
//! labels and comments) that must not stall the orchestrator. Writes run in order; failures
//! are logged, never retried. At shutdown the queue is drained within what is left of the
//! shutdown budget, and what is still queued then is logged as lost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tracker::TrackerAdapter;

use super::io_pool::{IoPool, JobLabel};

/// How long shutdown waits for queued tracker writes.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(35);

/// The lifecycle point a comment marks (the metric label and the log's `lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Dispatch,
    Completion,
    Failure,
}

impl Lifecycle {
    pub const fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Dispatch => "dispatch",
            Lifecycle::Completion => "completion",
            Lifecycle::Failure => "failure",
        }
    }
}

impl std::fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One queued write.
#[derive(Debug, Clone)]
pub enum TrackerOp {
    Comment {
        issue_id: String,
        issue_identifier: String,
        lifecycle: Lifecycle,
        text: String,
    },
    /// A reaction's escalation write; its failure is logged and the escalation stands.
    Escalate {
        issue_id: String,
        issue_identifier: String,
        kind: crate::domain::ReactionKind,
        write: crate::orchestrator::features::reactions::escalation::EscalationWrite,
    },
}

/// The handle the orchestrator keeps: a one-thread [`IoPool`], so writes run in order and
/// the ones still queued at shutdown can be named.
pub struct TrackerOps {
    pool: IoPool<()>,
    tracker: Arc<dyn TrackerAdapter>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl TrackerOps {
    /// Starts the thread.
    pub fn spawn(
        tracker: Arc<dyn TrackerAdapter>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> TrackerOps {
        // Writes report nothing back: their results are logged and counted where they run.
        let (done_tx, _) = crossbeam_channel::bounded(0);
        TrackerOps {
            pool: IoPool::spawn("tracker-ops", 1, done_tx),
            tracker,
            metrics,
        }
    }

    /// Queues a write (never blocks); it goes to the adapter in use now.
    pub fn submit(&self, op: TrackerOp) {
        let (tracker, metrics) = (self.tracker.clone(), self.metrics.clone());
        let label = JobLabel::new(op.what(), op.issue_identifier());
        self.pool
            .submit(label, move || run(tracker.as_ref(), &metrics, op));
    }

    /// Writes queued from now on go to `tracker` (a reload rebuilt the adapter); writes
    /// already queued keep the adapter they were queued under.
    pub fn use_tracker(&mut self, tracker: Arc<dyn TrackerAdapter>) {
        self.tracker = tracker;
    }

    /// Stops accepting writes and waits for the queue to drain, at most `timeout`; every
    /// write still queued or running then is logged as lost (comments and escalation writes
    /// are best effort: none is retried at the next start).
    pub fn drain(&mut self, timeout: Duration) {
        self.pool.close();
        let deadline = Instant::now() + timeout;
        while !self.pool.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10).min(timeout));
        }
        for o in self.pool.outstanding() {
            log::warn!(
                operation:% = o.label.what,
                issue_identifier:% = o.label.subject,
                started:% = o.started;
                "tracker write lost at shutdown"
            );
        }
    }
}

impl TrackerOp {
    /// The operation, for the log.
    fn what(&self) -> &'static str {
        match self {
            TrackerOp::Comment { .. } => "lifecycle comment",
            TrackerOp::Escalate { .. } => "reaction escalation",
        }
    }

    fn issue_identifier(&self) -> String {
        match self {
            TrackerOp::Comment {
                issue_identifier, ..
            }
            | TrackerOp::Escalate {
                issue_identifier, ..
            } => issue_identifier.clone(),
        }
    }
}

fn run(tracker: &dyn TrackerAdapter, metrics: &crate::metrics::Metrics, op: TrackerOp) {
    match op {
        TrackerOp::Comment {
            issue_id,
            issue_identifier,
            lifecycle,
            text,
        } => match tracker.comment_issue(&issue_id, &crate::mask::mask(&text)) {
            Ok(()) => {
                metrics.tracker_comment(lifecycle.as_str(), "success");
                log::info!(
                    issue_id:% = issue_id,
                    issue_identifier:% = issue_identifier,
                    lifecycle:% = lifecycle;
                    "tracker comment posted"
                )
            }
            Err(e) => {
                metrics.tracker_comment(lifecycle.as_str(), "error");
                log::warn!(
                    issue_id:% = issue_id,
                    issue_identifier:% = issue_identifier,
                    lifecycle:% = lifecycle,
                    error:% = e.to_string();
                    "tracker comment failed"
                )
            }
        },
        TrackerOp::Escalate {
            issue_id,
            issue_identifier,
            kind,
            write,
        } => {
            let action = escalate(tracker, &issue_id, &issue_identifier, kind, &write);
            match (kind, action) {
                (_, None) => {}
                (crate::domain::ReactionKind::Ci, Some(a)) => metrics.ci_escalation(a),
                (
                    crate::domain::ReactionKind::Review | crate::domain::ReactionKind::BotReview,
                    Some(a),
                ) => metrics.review_escalation(a),
                _ => {}
            }
        }
    }
}

fn escalate(
    tracker: &dyn TrackerAdapter,
    issue_id: &str,
    issue_identifier: &str,
    kind: crate::domain::ReactionKind,
    write: &crate::orchestrator::features::reactions::escalation::EscalationWrite,
) -> Option<&'static str> {
    use crate::orchestrator::features::reactions::escalation::EscalationWrite;
    let (action, result) = match write {
        EscalationWrite::Label(label) => ("label", tracker.add_label(issue_id, label)),
        EscalationWrite::Comment(text) => (
            "comment",
            tracker.comment_issue(issue_id, &crate::mask::mask(text)),
        ),
        EscalationWrite::None => return None,
    };
    match result {
        Ok(()) => {
            log::info!(
                issue_id:% = issue_id,
                issue_identifier:% = issue_identifier,
                reaction_kind:% = kind,
                action:% = action;
                "reaction escalated"
            );
            Some(action)
        }
        Err(e) => {
            log::warn!(
                issue_id:% = issue_id,
                issue_identifier:% = issue_identifier,
                reaction_kind:% = kind,
                action:% = action,
                error:% = e.to_string();
                "reaction escalation write failed; the escalation stands"
            );
            Some("error")
        }
    }
}

/// The comment body of a lifecycle point: a head line, the session, and for an ended
/// session its duration, turns, error (cut to 200 characters) and queued retry.
pub fn lifecycle_comment(
    lifecycle: Lifecycle,
    session_id: Option<&str>,
    duration_ms: i64,
    turns: u32,
    error: Option<&str>,
    retry: Option<&str>,
) -> String {
    let head = match lifecycle {
        Lifecycle::Dispatch => "Sortie session started.",
        Lifecycle::Completion if retry.is_some() => "Sortie session completed (re-queuing).",
        Lifecycle::Completion => "Sortie session completed.",
        Lifecycle::Failure => "Sortie session failed.",
    };
    let mut lines = vec![head.to_string()];
    if let Some(s) = session_id {
        lines.push(format!("Session: {s}"));
    }
    if lifecycle != Lifecycle::Dispatch {
        lines.push(format!("Duration: {}s", duration_ms.max(0) / 1000));
        lines.push(format!("Turns: {turns}"));
    }
    if let Some(e) = error {
        let cut: String = e.chars().take(200).collect();
        let ellipsis = if e.chars().count() > 200 { "..." } else { "" };
        lines.push(format!("Error: {cut}{ellipsis}"));
    }
    if let Some(r) = retry {
        lines.push(format!("Retry: {r}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_bodies() {
        assert_eq!(
            lifecycle_comment(Lifecycle::Dispatch, Some("s1"), 0, 0, None, None),
            "Sortie session started.\nSession: s1"
        );
        let long = "x".repeat(250);
        let failed = lifecycle_comment(
            Lifecycle::Failure,
            None,
            65_000,
            3,
            Some(&long),
            Some("in 10s"),
        );
        assert!(failed.starts_with("Sortie session failed.\nDuration: 65s\nTurns: 3\nError: "));
        assert!(failed.contains(&format!("{}...", "x".repeat(200))));
        assert!(failed.ends_with("Retry: in 10s"));
    }
}
