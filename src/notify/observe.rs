//! Turns successive observations of the daemon's state into notices: an attention item not
//! seen before, an issue outcome that changed to handed off or merged, a failure retry not
//! seen before. Pure; the caller builds each [`Observation`] from a published snapshot.
//!
//! The first observation is the baseline: what already stands when sortie starts (or when the
//! first destination is configured) is not announced again.

use std::collections::{BTreeMap, BTreeSet};

use super::Notice;
use crate::config::notifications::NotifyEvent;

/// A current attention item.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionFact {
    pub id: String,
    pub kind: String,
    pub issue_id: Option<String>,
    pub issue_identifier: Option<String>,
    /// The item's reason sentence.
    pub text: String,
    /// The narrower event the item also is (`escalation`, `budget_reached`, `run_failed`).
    pub also: Option<NotifyEvent>,
    /// `run_failed`: the failed runs in a row the item counts.
    pub failures: Option<u32>,
}

/// An issue's outcome worth a notice.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeFact {
    pub issue_id: String,
    pub issue_identifier: String,
    /// `handoff` or `merge`.
    pub event: NotifyEvent,
    /// The tracker state written (handoff), or empty.
    pub state: String,
}

/// A retry queued after a failed run.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureFact {
    pub issue_id: String,
    pub issue_identifier: String,
    /// Failed runs in a row (the retry's attempt number).
    pub failures: u32,
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    pub attention: Vec<AttentionFact>,
    pub outcomes: Vec<OutcomeFact>,
    pub failures: Vec<FailureFact>,
}

#[derive(Debug, Default)]
pub struct Observer {
    primed: bool,
    attention: BTreeSet<String>,
    outcomes: BTreeMap<String, NotifyEvent>,
    failures: BTreeSet<(String, u32)>,
}

impl Observer {
    /// The notices `obs` brings compared with the previous observation.
    pub fn observe(&mut self, obs: &Observation, now_ms: i64) -> Vec<Notice> {
        let mut out = Vec::new();
        if self.primed {
            for a in obs
                .attention
                .iter()
                .filter(|a| !self.attention.contains(&a.id))
            {
                out.extend(attention_notices(a, now_ms));
            }
            for o in &obs.outcomes {
                if self.outcomes.get(&o.issue_id) != Some(&o.event) {
                    out.push(outcome_notice(o, now_ms));
                }
            }
            for f in &obs.failures {
                if !self.failures.contains(&(f.issue_id.clone(), f.failures)) {
                    out.push(failure_notice(f, now_ms));
                }
            }
        }
        self.primed = true;
        self.attention = obs.attention.iter().map(|a| a.id.clone()).collect();
        self.outcomes = obs
            .outcomes
            .iter()
            .map(|o| (o.issue_id.clone(), o.event))
            .collect();
        self.failures = obs
            .failures
            .iter()
            .map(|f| (f.issue_id.clone(), f.failures))
            .collect();
        out
    }
}

fn with_issue(n: Notice, id: Option<&str>, identifier: Option<&str>) -> Notice {
    n.issue(id.unwrap_or_default(), identifier.unwrap_or_default())
}

fn attention_notices(a: &AttentionFact, now_ms: i64) -> Vec<Notice> {
    let base = |event: NotifyEvent| {
        let mut n = with_issue(
            Notice::new(event, a.text.clone(), now_ms),
            a.issue_id.as_deref(),
            a.issue_identifier.as_deref(),
        );
        n.attention_id = Some(a.id.clone());
        n.attention_kind = Some(a.kind.clone());
        n.failures = a.failures;
        n
    };
    let mut out = vec![base(NotifyEvent::AttentionRaised)];
    out.extend(a.also.map(base));
    out
}

fn outcome_notice(o: &OutcomeFact, now_ms: i64) -> Notice {
    let text = match o.event {
        NotifyEvent::Merge => "Its pull request was merged.".to_string(),
        _ if o.state.is_empty() => "A successful run handed the issue off.".to_string(),
        _ => format!("A successful run handed the issue off to {}.", o.state),
    };
    Notice::new(o.event, text, now_ms).issue(&o.issue_id, &o.issue_identifier)
}

fn failure_notice(f: &FailureFact, now_ms: i64) -> Notice {
    let runs = if f.failures == 1 { "run" } else { "runs" };
    let mut n = Notice::new(
        NotifyEvent::RunFailed,
        format!(
            "{} {runs} in a row failed; a retry is queued. Last error: {}",
            f.failures, f.error
        ),
        now_ms,
    )
    .issue(&f.issue_id, &f.issue_identifier);
    n.failures = Some(f.failures);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, also: Option<NotifyEvent>) -> AttentionFact {
        AttentionFact {
            id: id.into(),
            kind: "reaction_escalated".into(),
            issue_id: Some("1".into()),
            issue_identifier: Some("A-1".into()),
            text: "needs a person".into(),
            also,
            failures: None,
        }
    }

    fn events(ns: &[Notice]) -> Vec<&'static str> {
        ns.iter().map(|n| n.event.as_str()).collect()
    }

    #[test]
    fn the_first_observation_is_the_baseline_and_changes_are_announced_once() {
        let mut o = Observer::default();
        let first = Observation {
            attention: vec![item("old", None)],
            ..Default::default()
        };
        assert!(o.observe(&first, 1).is_empty());
        let next = Observation {
            attention: vec![
                item("old", None),
                item("new", Some(NotifyEvent::Escalation)),
            ],
            outcomes: vec![
                OutcomeFact {
                    issue_id: "1".into(),
                    issue_identifier: "A-1".into(),
                    event: NotifyEvent::Handoff,
                    state: "Review".into(),
                },
                OutcomeFact {
                    issue_id: "2".into(),
                    issue_identifier: "A-2".into(),
                    event: NotifyEvent::Merge,
                    state: String::new(),
                },
            ],
            failures: vec![FailureFact {
                issue_id: "3".into(),
                issue_identifier: "A-3".into(),
                failures: 2,
                error: "exit 1".into(),
            }],
        };
        let ns = o.observe(&next, 2);
        assert_eq!(
            events(&ns),
            [
                "attention_raised",
                "escalation",
                "handoff",
                "merge",
                "run_failed"
            ]
        );
        assert_eq!(ns[1].attention_id.as_deref(), Some("new"));
        assert_eq!(
            ns[2].text,
            "A successful run handed the issue off to Review."
        );
        assert_eq!(ns[4].failures, Some(2));
        assert!(o.observe(&next, 3).is_empty(), "announced once");
    }
}
