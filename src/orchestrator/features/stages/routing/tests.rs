use super::*;
use crate::config::dispatch::{DispatchRule, DispatchSelection, PriorityPredicate, RuleMatch};
use crate::domain::stage::StageOutcome;

fn cfg(rules: Vec<DispatchRule>, default: DispatchSelection) -> ServiceConfig {
    let wf = crate::orchestrator::core::feature_world::workflow();
    let mut c = wf.config;
    c.dispatch.rules = rules;
    c.dispatch.default = default;
    c
}

fn staged(name: &str, label: &str, next: Option<&str>) -> DispatchRule {
    DispatchRule {
        name: name.into(),
        stage: Some(label.into()),
        next: next.map(str::to_string),
        selection: DispatchSelection {
            agent: None,
            template: Some(format!("{name}.md")),
        },
        ..Default::default()
    }
}

fn matching(name: &str, m: RuleMatch) -> DispatchRule {
    DispatchRule {
        name: name.into(),
        matcher: Some(m),
        ..Default::default()
    }
}

fn issue(labels: &[&str]) -> Issue {
    Issue {
        id: "1".into(),
        identifier: "P-1".into(),
        title: "Fix the login".into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        priority: Some(2),
        issue_type: "Bug".into(),
        ..Default::default()
    }
}

#[test]
fn stage_labels_win_over_match_rules_and_route_forward() {
    let c = cfg(
        vec![
            matching("any", RuleMatch::default()),
            staged("plan", "stage-plan", Some("implement")),
            staged("implement", "stage-implement", Some("review")),
            staged("review", "stage-review", None),
        ],
        DispatchSelection::default(),
    );
    let s = select(&issue(&["stage-plan"]), &c, None);
    assert_eq!(s.route.rule_name, "plan");
    assert_eq!(s.route.template, "plan.md");
    assert!(s.several_stage_labels.is_empty());
    let s = select(&issue(&["stage-plan", "stage-review"]), &c, None);
    assert_eq!(s.route.rule_name, "review");
    assert_eq!(s.several_stage_labels, vec!["stage-plan", "stage-review"]);
    assert_eq!(select(&issue(&["x"]), &c, None).route.rule_name, "any");
}

#[test]
fn the_hop_target_carries_the_lineage() {
    let c = cfg(
        vec![
            staged("plan", "stage-plan", Some("implement")),
            staged("implement", "stage-implement", None),
        ],
        DispatchSelection::default(),
    );
    let hop = StageHop {
        source_rule: "plan".into(),
        target_rule: "implement".into(),
        target_label: "stage-implement".into(),
        previous_outcome: Some(StageOutcome::NoChange),
        ..Default::default()
    };
    let s = select(&issue(&["stage-implement"]), &c, Some(&hop));
    assert_eq!(s.route.rule_name, "implement");
    let l = s.route.lineage.expect("lineage");
    assert_eq!(
        (l.previous.as_str(), l.previous_outcome),
        ("plan", StageOutcome::NoChange)
    );
    // Without the label the hop does not select.
    let s = select(&issue(&[]), &c, Some(&hop));
    assert_eq!(s.route.rule_name, "");
    assert!(s.route.lineage.is_none());
}

#[test]
fn match_keys_and_across_or_within_then_default_then_workflow() {
    let m = RuleMatch {
        labels: vec!["b*".into(), "urgent".into()],
        issue_type: vec!["BUG".into()],
        priority: Some(PriorityPredicate::Lte(2)),
        title: vec!["login".into()],
        ..Default::default()
    };
    let c = cfg(
        vec![matching("bugs", m)],
        DispatchSelection {
            agent: None,
            template: Some("d.md".into()),
        },
    );
    assert_eq!(
        select(&issue(&["backend"]), &c, None).route.rule_name,
        "bugs"
    );
    let mut other = issue(&["backend"]);
    other.priority = None;
    let s = select(&other, &c, None);
    assert_eq!(
        (s.route.rule_name.as_str(), s.route.template.as_str()),
        ("default", "d.md")
    );
    let c = cfg(vec![], DispatchSelection::default());
    let s = select(&other, &c, None);
    assert_eq!(
        (s.route.rule_name.as_str(), s.route.agent_kind.as_str()),
        ("", "mock")
    );
}
