//! `dispatch`: the typed rule set that routes each issue to an agent kind, a prompt template
//! and that kind's settings, and the stage chains its `next` links form. Built and checked by
//! `dispatch_build`; read by the orchestrator's routing and served as `config.dispatch`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The name run history gives the `dispatch.default` selection.
pub const DEFAULT_RULE_NAME: &str = "default";

/// The hop ceiling's floor when `dispatch.max_consecutive_hops` is absent.
pub const MIN_HOP_CEILING: u32 = 10;

/// `dispatch`. The default value (no block) routes every issue to the workflow-wide agent and
/// the WORKFLOW.md body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DispatchConfig {
    /// In configuration order: the order `match` rules are tried.
    pub rules: Vec<DispatchRule>,
    /// `dispatch.default`.
    pub default: DispatchSelection,
    /// `dispatch.max_consecutive_hops` as written; `None` when absent or null.
    pub max_consecutive_hops: Option<u32>,
    /// Every template a rule or the default names, by the path as written, read and checked
    /// at load (a reload reads them again).
    pub templates: BTreeMap<String, RuleTemplate>,
}

/// One `dispatch.rules[]` entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DispatchRule {
    /// `""` when unnamed.
    pub name: String,
    /// The stage label as written (compared case-insensitively with an issue's labels).
    pub stage: Option<String>,
    /// The rule a successful run advances the issue to.
    pub next: Option<String>,
    /// `None` for a stage rule (selected by its label); `Some` with every key empty for a
    /// catch-all.
    pub matcher: Option<RuleMatch>,
    pub selection: DispatchSelection,
    /// The rule's settings block, under the name of the kind the rule runs; laid one level
    /// deep over that kind's top-level block (a `null` value removes the inherited key).
    pub settings: Option<Map<String, Value>>,
}

/// What a rule (or the default) selects; each `None` falls through to the next layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchSelection {
    /// An agent kind the registry knows.
    pub agent: Option<String>,
    /// A template path as written, relative to the WORKFLOW.md directory (a key of
    /// [`DispatchConfig::templates`]).
    pub template: Option<String>,
}

/// A per-rule prompt template, read at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTemplate {
    /// The resolved file, inside the WORKFLOW.md directory.
    pub path: std::path::PathBuf,
    /// The template body (no front matter).
    pub text: String,
}

/// A rule's `match` block: AND across keys, OR within a key's list; an empty key does not take
/// part. Lists keep the order written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleMatch {
    /// Globs (`*`, `?`, `[set]`) against the lowercase label set.
    pub labels: Vec<String>,
    /// Case-insensitive equality.
    pub issue_type: Vec<String>,
    /// Whole-word phrases against the title, literal.
    pub title: Vec<String>,
    /// Globs against the issue's identifier.
    pub identifier: Vec<String>,
    /// Case-insensitive equality.
    pub assignee: Vec<String>,
    pub priority: Option<PriorityPredicate>,
}

impl RuleMatch {
    /// A block with no key: the rule takes every issue (a catch-all).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.issue_type.is_empty()
            && self.title.is_empty()
            && self.identifier.is_empty()
            && self.assignee.is_empty()
            && self.priority.is_none()
    }
}

/// `match.priority`: exactly one operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityPredicate {
    Eq(i64),
    Lt(i64),
    Lte(i64),
    Gt(i64),
    Gte(i64),
    In(Vec<i64>),
}

impl PriorityPredicate {
    /// The operator as written (`eq`, `lt`, `lte`, `gt`, `gte`, `in`).
    pub fn op(&self) -> &'static str {
        match self {
            PriorityPredicate::Eq(_) => "eq",
            PriorityPredicate::Lt(_) => "lt",
            PriorityPredicate::Lte(_) => "lte",
            PriorityPredicate::Gt(_) => "gt",
            PriorityPredicate::Gte(_) => "gte",
            PriorityPredicate::In(_) => "in",
        }
    }

    pub fn matches(&self, priority: i64) -> bool {
        match self {
            PriorityPredicate::Eq(v) => priority == *v,
            PriorityPredicate::Lt(v) => priority < *v,
            PriorityPredicate::Lte(v) => priority <= *v,
            PriorityPredicate::Gt(v) => priority > *v,
            PriorityPredicate::Gte(v) => priority >= *v,
            PriorityPredicate::In(vs) => vs.contains(&priority),
        }
    }
}

/// How a rule is selected (`config.dispatch.rules[].selected_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectedBy {
    Stage,
    CatchAll,
    Match,
}

impl SelectedBy {
    pub const fn as_str(self) -> &'static str {
        match self {
            SelectedBy::Stage => "stage",
            SelectedBy::CatchAll => "catch_all",
            SelectedBy::Match => "match",
        }
    }
}

impl DispatchRule {
    pub fn selected_by(&self) -> SelectedBy {
        match (&self.stage, &self.matcher) {
            (Some(_), _) => SelectedBy::Stage,
            (None, Some(m)) if !m.is_empty() => SelectedBy::Match,
            (None, _) => SelectedBy::CatchAll,
        }
    }

    /// Whether `labels` (lowercase) carries this rule's stage label.
    pub fn stage_on(&self, labels: &[String]) -> bool {
        self.stage
            .as_deref()
            .is_some_and(|s| labels.iter().any(|l| stage_labels_equal(l, s)))
    }
}

/// Stage labels compare case-insensitively and otherwise literally (white space included).
pub fn stage_labels_equal(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

impl DispatchConfig {
    /// The rule of that name (`""` never names one).
    pub fn rule(&self, name: &str) -> Option<&DispatchRule> {
        if name.is_empty() {
            return None;
        }
        self.rules.iter().find(|r| r.name == name)
    }

    /// The rule whose stage label equals `label`.
    pub fn rule_for_stage(&self, label: &str) -> Option<&DispatchRule> {
        self.rules.iter().find(|r| {
            r.stage
                .as_deref()
                .is_some_and(|s| stage_labels_equal(s, label))
        })
    }

    /// The kind a rule runs: its `agent`, else `dispatch.default.agent`, else `workflow_kind`.
    pub fn rule_kind<'a>(&'a self, rule: &'a DispatchRule, workflow_kind: &'a str) -> &'a str {
        rule.selection
            .agent
            .as_deref()
            .or(self.default.agent.as_deref())
            .unwrap_or(workflow_kind)
    }

    /// Each stage chain, as rule names in `next` order, in the order of the rules that start
    /// them: a chain starts at a rule that carries `next` and that no `next` names, and ends at
    /// a rule without `next`. Chains that share a tail list it in each. Empty when no rule
    /// carries `next`. (Load refuses cycles; a cycle met here ends the chain.)
    pub fn chains(&self) -> Vec<Vec<String>> {
        let named: std::collections::HashSet<&str> = self
            .rules
            .iter()
            .filter_map(|r| r.next.as_deref())
            .collect();
        self.rules
            .iter()
            .filter(|r| r.next.is_some() && !named.contains(r.name.as_str()))
            .map(|start| self.chain_from(start))
            .collect()
    }

    fn chain_from(&self, start: &DispatchRule) -> Vec<String> {
        let mut chain = vec![start.name.clone()];
        let mut at = start;
        while let Some(next) = at.next.as_deref().and_then(|n| self.rule(n)) {
            if chain.contains(&next.name) {
                break;
            }
            chain.push(next.name.clone());
            at = next;
        }
        chain
    }

    /// The hops of the longest chain (its rule count minus one); 0 without chains.
    pub fn longest_chain_hops(&self) -> u32 {
        self.chains()
            .iter()
            .map(|c| c.len().saturating_sub(1) as u32)
            .max()
            .unwrap_or(0)
    }

    /// The limit on consecutive automatic hops per issue: the written
    /// `dispatch.max_consecutive_hops`, or the larger of 10 and the longest chain's hops.
    pub fn hop_ceiling(&self) -> u32 {
        self.max_consecutive_hops
            .unwrap_or_else(|| MIN_HOP_CEILING.max(self.longest_chain_hops()))
    }

    /// The chain `rule` stands on: of several, the first that lists `previous` immediately
    /// before it, otherwise the first that holds it; `None` when no chain holds it.
    pub fn chain_for(&self, rule: &str, previous: Option<&str>) -> Option<Vec<String>> {
        if rule.is_empty() {
            return None;
        }
        let chains = self.chains();
        let follows = |c: &Vec<String>| {
            previous.is_some_and(|p| c.windows(2).any(|w| w[0] == p && w[1] == rule))
        };
        chains
            .iter()
            .find(|c| follows(c))
            .or_else(|| chains.iter().find(|c| c.iter().any(|n| n == rule)))
            .cloned()
    }

    /// Every configured stage label, in rule order.
    pub fn stage_labels(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().filter_map(|r| r.stage.as_deref())
    }

    /// Whether `label` is a configured stage label.
    pub fn is_stage_label(&self, label: &str) -> bool {
        self.stage_labels().any(|s| stage_labels_equal(s, label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, stage: Option<&str>, next: Option<&str>) -> DispatchRule {
        DispatchRule {
            name: name.into(),
            stage: stage.map(str::to_string),
            next: next.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn chains_start_where_no_next_points_and_share_tails() {
        let cfg = DispatchConfig {
            rules: vec![
                DispatchRule {
                    matcher: Some(RuleMatch {
                        labels: vec!["feature".into()],
                        ..Default::default()
                    }),
                    ..rule("specify", None, Some("implement"))
                },
                rule("plan", Some("stage-plan"), Some("implement")),
                rule("implement", Some("stage-implement"), Some("review")),
                rule("review", Some("stage-review"), None),
            ],
            ..Default::default()
        };
        assert_eq!(
            cfg.chains(),
            vec![
                vec!["specify", "implement", "review"],
                vec!["plan", "implement", "review"]
            ]
        );
        assert_eq!(cfg.longest_chain_hops(), 2);
        assert_eq!(cfg.hop_ceiling(), 10);
        assert_eq!(
            cfg.chain_for("implement", Some("plan")),
            Some(vec!["plan".into(), "implement".into(), "review".into()])
        );
        assert_eq!(
            cfg.chain_for("implement", None),
            Some(vec!["specify".into(), "implement".into(), "review".into()])
        );
        assert_eq!(cfg.rules[0].selected_by(), SelectedBy::Match);
        assert_eq!(cfg.rules[1].selected_by(), SelectedBy::Stage);
        assert!(cfg.rules[1].stage_on(&["stage-plan".into()]));
        assert!(cfg.is_stage_label("STAGE-Review"));
        let cfg = DispatchConfig {
            max_consecutive_hops: Some(3),
            ..cfg
        };
        assert_eq!(cfg.hop_ceiling(), 3);
        assert_eq!(DispatchConfig::default().hop_ceiling(), 10);
        assert!(DispatchConfig::default().chains().is_empty());
    }

    #[test]
    fn priority_predicates_compare_as_written() {
        assert!(PriorityPredicate::Lte(2).matches(2));
        assert!(!PriorityPredicate::Lt(2).matches(2));
        assert!(PriorityPredicate::In(vec![1, 3]).matches(3));
        assert_eq!(PriorityPredicate::In(vec![]).op(), "in");
    }
}
