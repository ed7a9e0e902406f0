//! What one attempt runs with, read from the configuration in force at the attempt's start:
//! the route's agent kind with its settings (the rule's block over the kind's top-level
//! block), its prompt template and its `.stage` values. The route itself (rule, kind,
//! template, chain) stays as it was frozen at the claim's first dispatch.

use std::sync::Arc;

use crate::domain::stage::Route;
use crate::orchestrator::core::orchestrator::*;
use crate::prompt::StageValues;

/// Why the configuration in force cannot run an attempt on its route (logged as the
/// attempt's `error`; the attempt starts no session).
#[derive(Debug)]
pub(crate) enum AttemptRefused {
    /// The route names a template the dispatch block no longer has.
    TemplateNotConfigured { name: String },
    /// The route's template does not parse.
    Template(crate::prompt::PromptError),
    /// The route's agent kind is not registered in this build.
    AgentKindUnavailable { kind: String },
    /// The route's resolved settings do not build an adapter.
    Adapter(crate::agent::AgentError),
}

impl std::fmt::Display for AttemptRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttemptRefused::TemplateNotConfigured { name } => {
                write!(f, "template {name:?} is not configured")
            }
            AttemptRefused::Template(e) => write!(f, "{e}"),
            AttemptRefused::AgentKindUnavailable { kind } => {
                write!(f, "agent kind {kind:?} is not available")
            }
            AttemptRefused::Adapter(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AttemptRefused {}

impl Orchestrator {
    /// The route filled for this attempt and the template and adapter it runs with; `None`
    /// (logged) when the configuration in force cannot run it: its kind is not registered,
    /// its template is gone, or its settings do not build an adapter.
    pub(crate) fn attempt_resources(
        &self,
        issue: &Issue,
        frozen: &Route,
    ) -> Option<(Route, Arc<PromptTemplate>, Arc<dyn AgentAdapter>)> {
        let cfg = &self.workflow.config;
        let mut route = frozen.clone();
        if route.agent_kind.is_empty() {
            route.agent_kind = cfg.agent.kind.clone();
        }
        // A route recorded without its template (a reaction's) takes its rule's.
        if route.template.is_empty()
            && let Some(rule) = cfg.dispatch.rule(&route.rule_name)
        {
            route.template = rule
                .selection
                .template
                .clone()
                .or_else(|| cfg.dispatch.default.template.clone())
                .unwrap_or_default();
        }
        route.configured_model = cfg
            .configured_model_for(&route.agent_kind, &route.rule_name)
            .unwrap_or_default();
        let refused = |what: &str, error: AttemptRefused| {
            log::warn!(
                issue_id:% = issue.id,
                issue_identifier:% = issue.identifier,
                rule_name:% = route.rule_name,
                agent_kind:% = route.agent_kind,
                reason:% = what,
                error:% = error;
                "attempt refused"
            );
        };
        let template = match self.route_template(&route) {
            Ok(t) => t,
            Err(e) => {
                refused("template", e);
                return None;
            }
        };
        match self.route_agent(&route) {
            Ok(agent) => Some((route, template, agent)),
            Err(e) => {
                refused("agent settings", e);
                None
            }
        }
    }

    fn route_template(&self, route: &Route) -> Result<Arc<PromptTemplate>, AttemptRefused> {
        if route.template.is_empty() {
            return Ok(self.template.clone());
        }
        let held = self
            .workflow
            .config
            .dispatch
            .templates
            .get(&route.template)
            .ok_or_else(|| AttemptRefused::TemplateNotConfigured {
                name: route.template.clone(),
            })?;
        PromptTemplate::parse(&held.text, &held.path.display().to_string(), 0)
            .map(Arc::new)
            .map_err(AttemptRefused::Template)
    }

    /// The workflow's own adapter when the route runs the workflow kind with its top-level
    /// settings; otherwise one built for the route's kind and resolved settings block.
    fn route_agent(&self, route: &Route) -> Result<Arc<dyn AgentAdapter>, AttemptRefused> {
        let cfg = &self.workflow.config;
        let rule_block = cfg
            .dispatch
            .rule(&route.rule_name)
            .is_some_and(|r| r.settings.is_some());
        if route.agent_kind == cfg.agent.kind && !rule_block {
            return Ok(self.agent.clone());
        }
        if crate::registry::agent(&route.agent_kind).is_none() {
            return Err(AttemptRefused::AgentKindUnavailable {
                kind: route.agent_kind.clone(),
            });
        }
        let dir = self
            .workflow
            .path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let settings = cfg.agent_settings_for(&route.agent_kind, &route.rule_name, &dir);
        crate::registry::adapter_for_with_clock(&settings, self.clock.clone())
            .map_err(AttemptRefused::Adapter)
    }

    /// An attempt the configuration cannot run starts no session: a poll tick's leaves the
    /// issue unclaimed (the next tick tries again); a retry's is rescheduled with backoff and
    /// keeps its claim.
    pub(crate) fn refused_attempt(
        &mut self,
        issue: &Issue,
        attempt: u32,
        session_id: Option<String>,
        pass: Pass,
        cause: crate::orchestrator::core::state::DispatchCause,
    ) {
        self.metrics.dispatch("error");
        if cause == crate::orchestrator::core::state::DispatchCause::PollTick {
            return;
        }
        let next = attempt + 1;
        self.schedule_retry(
            issue,
            next,
            failure_delay_ms(next, self.backoff_cap()),
            RetryTrigger::Timer,
            Some("retry agent settings refused".into()),
            session_id,
            pass,
        );
    }
}

/// `.stage` for a run on `route`: the rule's name when it carries a stage label, and the hop
/// that reached the claim.
pub(crate) fn stage_values(
    dispatch: &crate::config::dispatch::DispatchConfig,
    route: &Route,
) -> StageValues {
    let current = dispatch
        .rule(&route.rule_name)
        .filter(|r| r.stage.is_some())
        .map(|r| r.name.clone())
        .unwrap_or_default();
    let (previous, previous_outcome) = route
        .lineage
        .as_ref()
        .map(|l| (l.previous.clone(), l.previous_outcome.as_str().to_string()))
        .unwrap_or_default();
    StageValues {
        current,
        previous,
        previous_outcome,
    }
}
