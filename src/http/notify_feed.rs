//! The notification feed: a thread (`notify-feed`) that follows published snapshots, applies
//! the `notifications` block in force to the [`Notifier`], and turns what changed (new
//! attention items as the API serves them, handoffs and merges, failure retries) into notices.
//! It reads snapshots only, so the orchestrator never waits on it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::notifications::{NotificationsConfig, NotifyEvent};
use crate::domain::{OutcomeKind, RetryTrigger};
use crate::notify::Notifier;
use crate::notify::observe::{AttentionFact, FailureFact, Observation, Observer, OutcomeFact};
use crate::orchestrator::OrchestratorHandle;
use crate::orchestrator::snapshot::{self, Snapshot};

use super::views::attention::AttentionKind;

/// The longest the feed sleeps without looking (a destination's state changes without a
/// publish).
const WAKE: Duration = Duration::from_secs(1);
/// Issue identifiers remembered for outcomes (an issue handed off is no longer running).
const IDENTIFIER_CAP: usize = 10_000;

/// Starts the feed thread; it ends with the process.
pub fn spawn(orch: OrchestratorHandle, notifier: Notifier) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("notify-feed".into())
        .spawn(move || run(&orch, &notifier))
        .map(|_| ())
}

fn run(orch: &OrchestratorHandle, notifier: &Notifier) {
    let mut observer = Observer::default();
    let mut identifiers = BTreeMap::new();
    let mut config: Option<Arc<NotificationsConfig>> = None;
    let mut seen = (0u64, u64::MAX);
    let mut published = snapshot::published_count();
    loop {
        let snap = orch.snapshot();
        if config
            .as_ref()
            .is_none_or(|c| **c != *snap.config.notifications)
        {
            notifier.configure(&snap.config.notifications);
            config = Some(Arc::clone(&snap.config.notifications));
        }
        let now = (snap.revision, crate::notify::status::generation());
        if snap.config.notifications.destinations.is_empty() {
            // Nothing to tell anyone: the next destination starts from a fresh baseline.
            observer = Observer::default();
        } else if now != seen {
            seen = now;
            remember(&snap, &mut identifiers);
            let obs = observation(&snap, &identifiers);
            for n in observer.observe(&obs, snap.generated_at_ms) {
                log::info!(
                    event:% = n.event.as_str(),
                    issue_id:% = n.issue_id.as_deref().unwrap_or(""),
                    issue_identifier:% = n.issue_identifier.as_deref().unwrap_or("");
                    "notification raised"
                );
                notifier.send(&n);
            }
        }
        published = snapshot::wait_published(published, WAKE);
    }
}

fn remember(snap: &Snapshot, ids: &mut BTreeMap<String, String>) {
    if ids.len() > IDENTIFIER_CAP {
        ids.clear();
    }
    let issues = snap
        .running
        .iter()
        .map(|r| &r.issue)
        .chain(snap.retrying.iter().map(|r| &r.issue));
    for i in issues {
        ids.insert(i.id.clone(), i.identifier.clone());
    }
}

/// What the snapshot shows that notices are made of.
pub fn observation(snap: &Snapshot, ids: &BTreeMap<String, String>) -> Observation {
    let attention = super::attention::items(snap)
        .into_iter()
        .map(|item| {
            let v = item.view;
            let also = match v.kind {
                AttentionKind::ReactionEscalated => Some(NotifyEvent::Escalation),
                AttentionKind::BudgetHeld | AttentionKind::SpendCeilingReached => {
                    Some(NotifyEvent::BudgetReached)
                }
                AttentionKind::FailureHeld => Some(NotifyEvent::RunFailed),
                _ => None,
            };
            AttentionFact {
                id: v.id,
                kind: v.kind.as_str().to_string(),
                issue_id: v.issue.issue_id,
                issue_identifier: v.issue.issue_identifier,
                text: format!("{}. {}", v.reason_text, v.why_text),
                also,
                failures: v.evidence.runs,
            }
        })
        .collect();
    let outcomes = snap
        .outcomes
        .iter()
        .filter_map(|(id, (kind, state))| {
            let event = match kind {
                OutcomeKind::HandedOff => NotifyEvent::Handoff,
                OutcomeKind::Merged => NotifyEvent::Merge,
                _ => return None,
            };
            Some(OutcomeFact {
                issue_id: id.clone(),
                issue_identifier: ids.get(id).cloned().unwrap_or_else(|| id.clone()),
                event,
                state: state.clone(),
            })
        })
        .collect();
    let failures = snap
        .retrying
        .iter()
        .filter(|r| matches!(r.trigger, RetryTrigger::Error | RetryTrigger::Stall))
        .map(|r| FailureFact {
            issue_id: r.issue.id.clone(),
            issue_identifier: r.issue.identifier.clone(),
            failures: r.attempt,
            error: r.error.clone().unwrap_or_default(),
        })
        .collect();
    Observation {
        attention,
        outcomes,
        failures,
    }
}
