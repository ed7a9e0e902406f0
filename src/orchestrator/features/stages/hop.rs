//! The hop a successful exit makes in place of the handoff write: its plan, decided on `orch`
//! by the stages feature from the configuration in force, and its label writes, made off
//! `orch` with the exit's other tracker calls (`claim::exit_calls`).

use crate::config::dispatch::DispatchConfig;
use crate::domain::Issue;
use crate::orchestrator::core::state::RunFacts;
use crate::tracker::TrackerAdapter;

/// A stage hop a successful exit would make, decided on `orch` from the configuration in
/// force: the labels it writes are written off it ([`HopPlan::write`]) and the outcome
/// applied by `StagesFeature::apply_hop`.
#[derive(Debug, Clone)]
pub(crate) struct HopPlan {
    pub(super) source_rule: String,
    pub(super) target_rule: String,
    pub(super) target_label: String,
    /// The issue's consecutive hops so far.
    pub(super) count: u32,
    pub(super) ceiling: u32,
    /// Configured stage labels other than the target that the dispatch read showed: each is
    /// removed.
    stale: Vec<String>,
    /// The labels the dispatch read showed.
    labels: Vec<String>,
}

/// What the label writes of a hop did.
#[derive(Debug, Clone)]
pub(crate) enum HopWrite {
    /// One more hop would pass the ceiling: no write made.
    Ceiling,
    /// The target label could not be added.
    AddFailed(String),
    /// The target label was added; `labels` are the issue's labels after the hop and `left`
    /// the stale stage labels whose removal failed.
    Made {
        labels: Vec<String>,
        left: Vec<String>,
    },
}

impl HopPlan {
    /// The hop a successful run of `facts` whose rule carries `next` would make, after
    /// `count` consecutive hops; `None` when its rule has no next stage with a label.
    pub(super) fn new(d: &DispatchConfig, facts: &RunFacts, count: u32) -> Option<HopPlan> {
        let source = d
            .rule(&facts.route.rule_name)
            .filter(|r| r.next.is_some())?;
        let (target, label) = source
            .next
            .as_deref()
            .and_then(|n| d.rule(n))
            .and_then(|t| t.stage.clone().map(|l| (t, l)))?;
        let issue = &facts.issue;
        Some(HopPlan {
            source_rule: source.name.clone(),
            target_rule: target.name.clone(),
            count,
            ceiling: d.hop_ceiling(),
            stale: issue
                .labels
                .iter()
                .filter(|l| d.is_stage_label(l) && !l.eq_ignore_ascii_case(&label))
                .cloned()
                .collect(),
            labels: issue.labels.clone(),
            target_label: label,
        })
    }

    /// The tracker writes of the hop (off `orch`): the target label, then the removal of
    /// every stale stage label.
    pub(crate) fn write(&self, tracker: &dyn TrackerAdapter, issue: &Issue) -> HopWrite {
        if self.count + 1 > self.ceiling {
            return HopWrite::Ceiling;
        }
        if let Err(e) = tracker.add_label(&issue.id, &self.target_label) {
            return HopWrite::AddFailed(e.to_string());
        }
        let mut labels = Vec::new();
        let mut left = Vec::new();
        for l in &self.labels {
            if !self.stale.contains(l) {
                labels.push(l.clone());
                continue;
            }
            if let Err(e) = tracker.remove_label(&issue.id, l) {
                log::warn!(
                    issue_id:% = issue.id,
                    issue_identifier:% = issue.identifier,
                    label:% = l,
                    error:% = e.to_string();
                    "stage label not removed"
                );
                left.push(l.clone());
                labels.push(l.clone());
            }
        }
        if !labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&self.target_label))
        {
            labels.push(self.target_label.to_lowercase());
        }
        HopWrite::Made { labels, left }
    }
}
