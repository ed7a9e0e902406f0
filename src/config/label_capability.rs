//! Whether the selected tracker can carry the labels a workflow uses: labels it reads
//! (dispatch rules matching on labels, stage labels) and labels sortie writes (stage labels on
//! a hop, escalation labels of the reactions). The tracker kind's descriptor says what it can
//! do ([`crate::tracker::LabelSupport`]); a use it cannot serve is a preflight problem, which
//! `sortie validate` reports and which holds dispatch, and a label it will not create is a
//! warning naming the labels a person has to create in the tracker first.

use super::error::{ConfigWarning, PreflightProblem};
use super::schema::ServiceConfig;
use crate::domain::EscalationMode;
use crate::registry;
use crate::tracker::LabelSupport;

/// The check id of every finding here.
pub const CHECK: &str = "tracker.labels";

/// One label the workflow uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelUse {
    /// The setting it comes from.
    field: String,
    /// The label; `None` for a pattern (a dispatch rule's `match.labels`).
    label: Option<String>,
    writes: bool,
}

fn uses(config: &ServiceConfig) -> Vec<LabelUse> {
    let mut out = Vec::new();
    for (i, rule) in config.dispatch.rules.iter().enumerate() {
        if let Some(stage) = &rule.stage {
            out.push(LabelUse {
                field: format!("dispatch.rules[{i}].stage"),
                label: Some(stage.clone()),
                writes: true,
            });
        }
        if rule.matcher.as_ref().is_some_and(|m| !m.labels.is_empty()) {
            out.push(LabelUse {
                field: format!("dispatch.rules[{i}].match.labels"),
                label: None,
                writes: false,
            });
        }
    }
    let r = &config.reactions;
    if r.provider.is_none() {
        return out;
    }
    let escalations = [
        ("ci_failure", r.ci_failure.as_ref().map(|c| &c.escalation)),
        (
            "review_comments",
            r.review_comments.as_ref().map(|c| &c.escalation),
        ),
        ("bot_review", r.bot_review.as_ref().map(|c| &c.escalation)),
        (
            "merge_conflicts",
            r.merge_conflicts.as_ref().map(|c| &c.escalation),
        ),
        ("auto_merge", r.auto_merge.as_ref().map(|c| &c.escalation)),
        (
            "merge_completion",
            r.merge_completion.as_ref().map(|c| &c.escalation),
        ),
    ];
    for (kind, escalation) in escalations {
        if let Some(e) = escalation.filter(|e| e.mode == EscalationMode::Label) {
            out.push(LabelUse {
                field: format!("reactions.{kind}.escalation_label"),
                label: Some(e.label.clone()),
                writes: true,
            });
        }
    }
    out
}

fn support(config: &ServiceConfig) -> Option<LabelSupport> {
    registry::tracker(&config.tracker.kind).map(|d| d.labels)
}

/// The label uses the tracker cannot serve: it reads no labels, writes none, or refuses the
/// spelling.
pub fn problems(config: &ServiceConfig) -> Vec<PreflightProblem> {
    let Some(s) = support(config) else {
        return Vec::new();
    };
    let kind = &config.tracker.kind;
    let mut out = Vec::new();
    for u in uses(config) {
        let what = match &u.label {
            Some(l) => format!("label {l:?}"),
            None => "labels".to_string(),
        };
        let why = if !s.read {
            Some(format!(
                "reads {what}, but tracker kind {kind:?} has no labels"
            ))
        } else if u.writes && !s.write {
            Some(format!(
                "writes {what}, but tracker kind {kind:?} cannot change an issue's labels"
            ))
        } else if !s.spaces
            && u.label
                .as_ref()
                .is_some_and(|l| l.contains(char::is_whitespace))
        {
            Some(format!(
                "uses {what}, but tracker kind {kind:?} refuses labels with white space"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            out.push(PreflightProblem::new(
                CHECK,
                format!("{}: the workflow {why}", u.field),
            ));
        }
    }
    out
}

/// Labels sortie will write that the tracker does not create: they must exist beforehand.
pub fn warnings(config: &ServiceConfig) -> Vec<ConfigWarning> {
    if !support(config).is_some_and(|s| s.write && !s.creates_missing) {
        return Vec::new();
    }
    uses(config)
        .into_iter()
        .filter(|u| u.writes)
        .filter_map(|u| {
            let label = u.label?;
            Some(ConfigWarning::new(
                CHECK,
                u.field,
                format!(
                    "tracker kind {:?} does not create labels: create {label:?} in the tracker before sortie needs it",
                    config.tracker.kind
                ),
            ))
        })
        .collect()
}
