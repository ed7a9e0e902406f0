//! The `tracker-ops` thread: best-effort tracker writes (lifecycle comments) that must not
//! stall the orchestrator's tick. Writes run in order; failures are logged, never retried.
//! At shutdown the queue is drained within a deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::tracker::TrackerAdapter;

/// How long shutdown waits for queued tracker writes.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(35);

/// One queued write.
#[derive(Debug, Clone)]
pub enum TrackerOp {
    Comment {
        issue_id: String,
        issue_identifier: String,
        /// `dispatch`, `completion`, `failure` (for logs).
        lifecycle: &'static str,
        text: String,
    },
}

/// The handle the orchestrator keeps.
pub struct TrackerOps {
    tx: Option<Sender<TrackerOp>>,
    done: Receiver<()>,
}

impl TrackerOps {
    /// Starts the thread.
    pub fn spawn(
        tracker: Arc<dyn TrackerAdapter>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> TrackerOps {
        let (tx, rx) = crossbeam_channel::unbounded::<TrackerOp>();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name("tracker-ops".into())
            .spawn(move || {
                for op in rx.iter() {
                    run(tracker.as_ref(), &metrics, op);
                }
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            log::error!(
                "cannot start the tracker-ops thread; lifecycle comments are off error=\"{e}\""
            );
        }
        TrackerOps { tx: Some(tx), done }
    }

    /// Queues a write (never blocks).
    pub fn submit(&self, op: TrackerOp) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(op);
        }
    }

    /// Stops accepting writes and waits for the queue to drain, at most `timeout`.
    pub fn drain(&mut self, timeout: Duration) {
        self.tx = None;
        let deadline = Instant::now() + timeout;
        if self
            .done
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_err()
        {
            log::warn!("tracker writes still pending at shutdown; abandoning them");
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
                metrics.tracker_comment(lifecycle, "success");
                log::info!(
                    "tracker comment posted issue_id={issue_id} issue_identifier={issue_identifier} lifecycle={lifecycle}"
                )
            }
            Err(e) => {
                metrics.tracker_comment(lifecycle, "error");
                log::warn!(
                    "tracker comment failed issue_id={issue_id} issue_identifier={issue_identifier} lifecycle={lifecycle} error=\"{e}\""
                )
            }
        },
    }
}

/// The comment body of a lifecycle point (config-cli.md §1.4).
pub fn lifecycle_comment(
    lifecycle: &str,
    session_id: Option<&str>,
    duration_ms: i64,
    turns: u32,
    error: Option<&str>,
    retry: Option<&str>,
) -> String {
    let head = match lifecycle {
        "dispatch" => "Sortie session started.",
        "completion" if retry.is_some() => "Sortie session completed (re-queuing).",
        "completion" => "Sortie session completed.",
        _ => "Sortie session failed.",
    };
    let mut lines = vec![head.to_string()];
    if let Some(s) = session_id {
        lines.push(format!("Session: {s}"));
    }
    if lifecycle != "dispatch" {
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
            lifecycle_comment("dispatch", Some("s1"), 0, 0, None, None),
            "Sortie session started.\nSession: s1"
        );
        let long = "x".repeat(250);
        let failed = lifecycle_comment("failure", None, 65_000, 3, Some(&long), Some("in 10s"));
        assert!(failed.starts_with("Sortie session failed.\nDuration: 65s\nTurns: 3\nError: "));
        assert!(failed.contains(&format!("{}...", "x".repeat(200))));
        assert!(failed.ends_with("Retry: in 10s"));
    }
}
