//! What adapters are built from: the typed [`TrackerSettings`] / [`AgentSettings`], each
//! carrying the adapter's pass-through block as given. The only place that maps config onto
//! adapter inputs.

use std::path::Path;

use serde_json::{Map, Value};

use super::schema::ServiceConfig;
use crate::agent::AgentSettings;
use crate::scm::ScmSettings;
use crate::tracker::TrackerSettings;

impl ServiceConfig {
    /// What the tracker adapter is built from: `tracker.*`, the resolved data file and the
    /// block named by `tracker.kind`.
    pub fn tracker_settings(&self) -> TrackerSettings {
        let t = &self.tracker;
        TrackerSettings {
            kind: t.kind.clone(),
            endpoint: t.endpoint.clone(),
            api_key: t.api_key.clone(),
            project: t.project.clone(),
            active_states: t.active_states.clone(),
            terminal_states: t.terminal_states.clone(),
            query_filter: t.query_filter.clone(),
            handoff_state: t.handoff_state.clone(),
            in_progress_state: t.in_progress_state.clone(),
            api_version: t.api_version.clone(),
            user_agent: t.user_agent.clone(),
            max_poll_bytes: t.max_poll_bytes,
            path: self.tracker_path.clone(),
            block: self.adapter_block(&t.kind).cloned().unwrap_or_default(),
        }
    }

    /// What the source-control adapter is built from, when a reaction provider applies: the
    /// endpoint and API key of the tracker block of the same kind, or of the provider's own
    /// block when the tracker is another kind ([`ServiceConfig::scm_access`]), and the kind's
    /// pass-through block (client tuning).
    pub fn scm_settings(&self) -> Option<ScmSettings> {
        let kind = self.reactions.provider.clone()?;
        let (endpoint, token) = match &self.scm_access {
            Some(a) => (a.endpoint.clone(), a.api_key.clone()),
            None => (
                self.tracker.endpoint.clone(),
                self.tracker.api_key.clone().unwrap_or_default(),
            ),
        };
        Some(ScmSettings {
            endpoint,
            token,
            block: self.adapter_block(&kind).cloned().unwrap_or_default(),
            kind,
        })
    }

    /// What the agent adapter is built from: `agent.*` and the block named by `agent.kind`;
    /// relative paths in the block resolve against `workflow_dir`. The same as
    /// [`Self::agent_settings_for`] of `agent.kind` outside any rule.
    pub fn agent_settings(&self, workflow_dir: &Path) -> AgentSettings {
        self.agent_settings_for(&self.agent.kind, "", workflow_dir)
    }

    /// What a session of `kind` on the rule `rule_name` (`""`: no rule) is built from: the
    /// kind's top-level block with the rule's settings block laid over it one level deep (a
    /// key the rule writes replaces the inherited value whole; `null` removes it). Only
    /// `agent.kind` reads `agent.command`; another kind runs its adapter's default command.
    /// The timeouts stay workflow-wide.
    pub fn agent_settings_for(
        &self,
        kind: &str,
        rule_name: &str,
        workflow_dir: &Path,
    ) -> AgentSettings {
        let a = &self.agent;
        let mut block = self.resolved_block(kind, rule_name);
        // `kubernetes` in a rule's settings block is for its Jobs, never for the adapter.
        block.remove(super::kubernetes::RULE_SETTINGS_KEY);
        let rule_image = super::kubernetes::rule_image(&self.dispatch, kind, rule_name, &a.kind);
        AgentSettings {
            kind: kind.to_string(),
            command: match &self.worker.kubernetes {
                Some(k) => k.relay_command(
                    kind,
                    rule_image.as_deref(),
                    a.command.as_deref().filter(|_| kind == a.kind),
                ),
                None if kind == a.kind => a.command.clone(),
                None => None,
            },
            turn_timeout_ms: a.turn_timeout_ms,
            read_timeout_ms: a.read_timeout_ms,
            stop_grace_ms: a.stop_grace_ms,
            block,
            workflow_dir: workflow_dir.to_path_buf(),
            env: a.env.clone(),
            sandbox: self
                .worker
                .sandbox
                .enabled()
                .then(|| std::sync::Arc::new(self.worker.sandbox.clone())),
        }
    }

    /// Every agent kind a dispatch can run (the workflow-wide kind, the default selection's,
    /// each rule's) with the model its settings name there (`None`: the runtime's default).
    /// The price sources download the shared table only when one of them is priced by
    /// nothing else.
    pub fn model_needs(&self) -> Vec<crate::pricing::ModelNeed> {
        let d = &self.dispatch;
        let mut pairs = vec![(self.agent.kind.as_str(), "")];
        if let Some(k) = d.default.agent.as_deref() {
            pairs.push((k, ""));
        }
        for r in &d.rules {
            pairs.push((d.rule_kind(r, &self.agent.kind), r.name.as_str()));
        }
        let mut out: Vec<crate::pricing::ModelNeed> = pairs
            .into_iter()
            .map(|(kind, rule)| crate::pricing::ModelNeed {
                agent_kind: kind.to_string(),
                model: self.configured_model_for(kind, rule),
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The `model` of the block a session of `kind` on `rule_name` runs with, trimmed;
    /// `None` when unset or blank (the runtime's default).
    pub fn configured_model_for(&self, kind: &str, rule_name: &str) -> Option<String> {
        self.resolved_block(kind, rule_name)
            .get("model")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    }

    /// The top-level block of `kind` with the settings block of the rule `rule_name` laid
    /// over it, when that rule runs `kind` and carries one.
    fn resolved_block(&self, kind: &str, rule_name: &str) -> Map<String, Value> {
        let mut block = self.adapter_block(kind).cloned().unwrap_or_default();
        let d = &self.dispatch;
        let overlay = d
            .rule(rule_name)
            .filter(|r| d.rule_kind(r, &self.agent.kind) == kind)
            .and_then(|r| r.settings.as_ref());
        for (key, value) in overlay.into_iter().flatten() {
            if value.is_null() {
                block.remove(key);
            } else {
                block.insert(key.clone(), value.clone());
            }
        }
        block
    }
}
