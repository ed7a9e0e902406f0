//! What adapters are built from: the typed [`TrackerSettings`] / [`AgentSettings`], each
//! carrying the adapter's pass-through block as given. The only place that maps config onto
//! adapter inputs.

use std::path::Path;

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
            path: self.tracker_path.clone(),
            block: self.adapter_block(&t.kind).cloned().unwrap_or_default(),
        }
    }

    /// What the source-control adapter is built from, when a reaction provider applies: the
    /// tracker block of the same kind (endpoint and API key) and the kind's pass-through block.
    pub fn scm_settings(&self) -> Option<ScmSettings> {
        let kind = self.reactions.provider.clone()?;
        Some(ScmSettings {
            endpoint: self.tracker.endpoint.clone(),
            token: self.tracker.api_key.clone().unwrap_or_default(),
            block: self.adapter_block(&kind).cloned().unwrap_or_default(),
            kind,
        })
    }

    /// What the agent adapter is built from: `agent.*` and the block named by `agent.kind`;
    /// relative paths in the block resolve against `workflow_dir`.
    pub fn agent_settings(&self, workflow_dir: &Path) -> AgentSettings {
        let a = &self.agent;
        AgentSettings {
            kind: a.kind.clone(),
            command: a.command.clone(),
            turn_timeout_ms: a.turn_timeout_ms,
            read_timeout_ms: a.read_timeout_ms,
            stop_grace_ms: a.stop_grace_ms,
            block: self.adapter_block(&a.kind).cloned().unwrap_or_default(),
            workflow_dir: workflow_dir.to_path_buf(),
        }
    }
}
