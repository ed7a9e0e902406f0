//! Where a row stands on its stage chain (`stage_position`) and the hop that reached its run
//! (`stage_lineage`). The chain and the hop ceiling follow the configuration as of the latest
//! poll tick, while the row's rule and lineage stay as they were when its dispatch was selected
//! (so a reload that takes the rule off every chain serves `null` beside the kept rule name).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::config::dispatch::DispatchConfig;
use crate::domain::stage::Route;
use crate::orchestrator::snapshot::{ConfigView, Snapshot};

use super::nonempty;

/// `stage_position`: the chain the row's rule stands on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StagePosition {
    /// The chain's rule names in `next` order (a member of `config.dispatch.chains`).
    pub chain: Vec<String>,
    /// The row's `rule_name`.
    pub current: String,
    /// The issue's consecutive automatic hops; 0 without a hop record.
    pub hop_count: u32,
    /// `config.dispatch.hop_ceiling`.
    pub hop_ceiling: u32,
}

/// `stage_lineage`: the hop that reached the run; each member omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct StageLineageView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<String>,
    /// The rule whose hop reached the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// `succeeded` or `no_change`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_outcome: Option<String>,
}

/// What a stage position is computed from: the dispatch rules in force and the issues' hop
/// counts.
#[derive(Debug, Clone, Copy)]
pub struct Stages<'a> {
    pub dispatch: &'a DispatchConfig,
    pub hop_counts: &'a BTreeMap<String, u32>,
}

impl<'a> Stages<'a> {
    pub fn of(snap: &'a Snapshot) -> Stages<'a> {
        Stages {
            dispatch: &snap.config.dispatch,
            hop_counts: &snap.hop_counts,
        }
    }

    /// The issue's consecutive hops (0 without a record).
    pub fn hops(&self, issue_id: &str) -> u32 {
        self.hop_counts.get(issue_id).copied().unwrap_or(0)
    }

    /// The position of `rule` reached from `previous`, `None` when the rule is empty or on
    /// no chain.
    pub fn position(
        &self,
        rule: &str,
        previous: Option<&str>,
        issue_id: &str,
    ) -> Option<StagePosition> {
        self.position_with(rule, previous, self.hops(issue_id))
    }

    /// [`Stages::position`] with a known hop count.
    pub fn position_with(
        &self,
        rule: &str,
        previous: Option<&str>,
        hop_count: u32,
    ) -> Option<StagePosition> {
        let chain = self
            .dispatch
            .chain_for(rule, previous.filter(|p| !p.is_empty()))?;
        Some(StagePosition {
            chain,
            current: rule.to_string(),
            hop_count,
            hop_ceiling: self.dispatch.hop_ceiling(),
        })
    }

    /// The position of a row dispatched on `route`.
    pub fn of_route(&self, route: &Route, issue_id: &str) -> Option<StagePosition> {
        let previous = route.lineage.as_ref().map(|l| l.previous.as_str());
        self.position(&route.rule_name, previous, issue_id)
    }
}

/// The lineage a route carries: `None` unless a hop reached its run.
pub fn lineage(route: &Route) -> Option<StageLineageView> {
    let l = route.lineage.as_ref()?;
    Some(StageLineageView {
        chain_id: nonempty(&route.chain_id),
        previous: nonempty(&l.previous),
        previous_outcome: Some(l.previous_outcome.as_str().to_string()),
    })
}

/// The rule, agent kind and configured model a row serves, each `None` when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteNames {
    pub rule_name: Option<String>,
    pub agent_kind: Option<String>,
    pub configured_model: Option<String>,
}

impl RouteNames {
    /// From a row's route. A route whose agent kind is empty was not resolved (a row stored
    /// before routes were kept): it serves the workflow-wide agent kind and model.
    pub fn of(route: &Route, cfg: &ConfigView) -> RouteNames {
        if route.agent_kind.is_empty() {
            return RouteNames {
                rule_name: nonempty(&route.rule_name),
                agent_kind: nonempty(&cfg.agent_kind),
                configured_model: cfg.configured_model.clone().filter(|m| !m.is_empty()),
            };
        }
        RouteNames {
            rule_name: nonempty(&route.rule_name),
            agent_kind: nonempty(&route.agent_kind),
            configured_model: nonempty(&route.configured_model),
        }
    }

    /// From an optional route: no route (no dispatch context) serves none of the three.
    pub fn of_opt(route: Option<&Route>, cfg: &ConfigView) -> RouteNames {
        route.map(|r| RouteNames::of(r, cfg)).unwrap_or_default()
    }

    /// What a dispatch of the stage rule `rule` resolves to under `cfg`: its kind and the
    /// model of its settings block, else of the kind's top-level block when that is the
    /// workflow-wide kind. Empty when no rule with a stage label has that name.
    pub fn of_stage_rule(rule: &str, cfg: &ConfigView) -> RouteNames {
        let rule_name = nonempty(rule);
        let Some(r) = cfg.dispatch.rule(rule).filter(|r| r.stage.is_some()) else {
            return RouteNames {
                rule_name,
                ..Default::default()
            };
        };
        let kind = cfg.dispatch.rule_kind(r, &cfg.agent_kind).to_string();
        let from_settings = r.settings.as_ref().and_then(|s| s.get("model"));
        let configured_model = match from_settings {
            // A `null` removes the inherited model.
            Some(v) => v.as_str().map(str::trim).and_then(nonempty),
            None if kind == cfg.agent_kind => cfg.configured_model.clone(),
            None => None,
        };
        RouteNames {
            rule_name,
            agent_kind: nonempty(&kind),
            configured_model: configured_model.filter(|m| !m.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::dispatch::DispatchRule;
    use crate::domain::stage::{StageLineage, StageOutcome};

    fn rule(name: &str, stage: Option<&str>, next: Option<&str>) -> DispatchRule {
        DispatchRule {
            name: name.into(),
            stage: stage.map(str::to_string),
            next: next.map(str::to_string),
            ..Default::default()
        }
    }

    /// Two chains that share `implement`: specify → implement → review, plan → implement →
    /// review; and a rule on no chain.
    fn dispatch() -> DispatchConfig {
        DispatchConfig {
            rules: vec![
                rule("specify", Some("stage-specify"), Some("implement")),
                rule("plan", Some("stage-plan"), Some("implement")),
                rule("implement", Some("stage-implement"), Some("review")),
                rule("review", Some("stage-review"), None),
                rule("bugfix", None, None),
            ],
            ..Default::default()
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_chain_follows_the_previous_rule_and_falls_back_to_the_first_holding_it() {
        let d = dispatch();
        let hops = BTreeMap::from([("7".to_string(), 2)]);
        let s = Stages {
            dispatch: &d,
            hop_counts: &hops,
        };
        let p = s.position("implement", Some("plan"), "7");
        assert_eq!(
            p,
            Some(StagePosition {
                chain: names(&["plan", "implement", "review"]),
                current: "implement".into(),
                hop_count: 2,
                hop_ceiling: 10,
            })
        );
        // No previous rule (a park, a pending reaction, a first dispatch): the first chain.
        let p = s.position("implement", None, "8");
        assert_eq!(
            p.map(|p| (p.chain, p.hop_count)),
            Some((names(&["specify", "implement", "review"]), 0))
        );
        // A chain's first rule has a position beside a null lineage.
        assert_eq!(
            s.position("specify", None, "8").map(|p| p.current),
            Some("specify".into())
        );
        // A previous rule that does not precede the rule on any chain does not choose.
        assert_eq!(
            s.position("review", Some("bugfix"), "8").map(|p| p.chain),
            Some(names(&["specify", "implement", "review"]))
        );
        assert_eq!(s.position("bugfix", None, "7"), None, "on no chain");
        assert_eq!(s.position("", None, "7"), None, "no rule");
        assert_eq!(s.position("gone", Some("specify"), "7"), None, "removed");
    }

    #[test]
    fn lineage_is_null_without_a_hop_and_omits_empty_members() {
        let mut route = Route {
            rule_name: "implement".into(),
            chain_id: "c1".into(),
            ..Default::default()
        };
        assert_eq!(lineage(&route), None);
        route.lineage = Some(StageLineage {
            previous: "specify".into(),
            previous_outcome: StageOutcome::NoChange,
        });
        let v = super::super::to_value(&lineage(&route));
        assert_eq!(
            v,
            serde_json::json!({"chain_id": "c1", "previous": "specify", "previous_outcome": "no_change"})
        );
        route.chain_id.clear();
        let v = super::super::to_value(&lineage(&route));
        assert_eq!(
            v,
            serde_json::json!({"previous": "specify", "previous_outcome": "no_change"})
        );
    }

    #[test]
    fn route_names_come_from_the_route_and_fall_back_when_unresolved() {
        let cfg = ConfigView {
            agent_kind: "mock".into(),
            configured_model: Some("m-1".into()),
            ..Default::default()
        };
        let resolved = Route {
            rule_name: "implement".into(),
            agent_kind: "other".into(),
            ..Default::default()
        };
        assert_eq!(
            RouteNames::of(&resolved, &cfg),
            RouteNames {
                rule_name: Some("implement".into()),
                agent_kind: Some("other".into()),
                configured_model: None,
            }
        );
        let unresolved = RouteNames::of(&Route::default(), &cfg);
        assert_eq!(unresolved.agent_kind.as_deref(), Some("mock"));
        assert_eq!(unresolved.configured_model.as_deref(), Some("m-1"));
        assert_eq!(unresolved.rule_name, None);
        assert_eq!(RouteNames::of_opt(None, &cfg), RouteNames::default());
    }

    #[test]
    fn a_stage_rule_resolves_its_kind_and_model_from_the_configuration() {
        let mut d = dispatch();
        d.rules[2].settings = Some(serde_json::Map::from_iter([(
            "model".to_string(),
            serde_json::json!("big-model"),
        )]));
        d.rules[3].selection.agent = Some("other".into());
        let cfg = ConfigView {
            agent_kind: "mock".into(),
            configured_model: Some("m-1".into()),
            dispatch: std::sync::Arc::new(d),
            ..Default::default()
        };
        let n = RouteNames::of_stage_rule("implement", &cfg);
        assert_eq!(n.agent_kind.as_deref(), Some("mock"));
        assert_eq!(n.configured_model.as_deref(), Some("big-model"));
        let n = RouteNames::of_stage_rule("specify", &cfg);
        assert_eq!(n.configured_model.as_deref(), Some("m-1"));
        let n = RouteNames::of_stage_rule("review", &cfg);
        assert_eq!(
            (n.agent_kind.as_deref(), n.configured_model),
            (Some("other"), None)
        );
        // No stage rule of that name any more: only the name is kept.
        let n = RouteNames::of_stage_rule("bugfix", &cfg);
        assert_eq!(
            (n.rule_name.as_deref(), n.agent_kind),
            (Some("bugfix"), None)
        );
    }
}
