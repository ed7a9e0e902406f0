//! What adapters are built from: the typed [`TrackerSettings`] / [`AgentSettings`], and the
//! generic constructor maps (the resolved core fields, shallow-merged with the adapter's
//! pass-through block; keys already present win, so a block cannot override core settings).
//! The only place that maps config onto adapter inputs.

use std::path::Path;

use serde_json::{Map, Value};

use super::schema::ServiceConfig;
use crate::agent::AgentSettings;
use crate::registry;
use crate::tracker::TrackerSettings;

fn put_opt(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(s) = v {
        m.insert(key.to_string(), Value::String(s.clone()));
    }
}

fn merge_block(m: &mut Map<String, Value>, block: Option<&Map<String, Value>>) {
    for (k, v) in block.into_iter().flatten() {
        if !m.contains_key(k) {
            m.insert(k.clone(), v.clone());
        }
    }
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::String).collect())
}

impl ServiceConfig {
    /// Constructor map for the tracker adapter: resolved `tracker.*` values, then the block named
    /// by `tracker.kind`. A kind with a local data file gets it, absolute, under its path key.
    pub fn tracker_adapter_config(&self) -> Map<String, Value> {
        let t = &self.tracker;
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(t.kind.clone()));
        put_opt(&mut m, "endpoint", &t.endpoint);
        put_opt(&mut m, "api_key", &t.api_key);
        put_opt(&mut m, "project", &t.project);
        m.insert("active_states".into(), strings(&t.active_states));
        m.insert("terminal_states".into(), strings(&t.terminal_states));
        put_opt(&mut m, "query_filter", &t.query_filter);
        put_opt(&mut m, "handoff_state", &t.handoff_state);
        put_opt(&mut m, "in_progress_state", &t.in_progress_state);
        put_opt(&mut m, "no_change_state", &t.no_change_state);
        if let (Some(p), Some(key)) = (
            &self.tracker_path,
            registry::tracker(&t.kind).and_then(|d| d.path_key),
        ) {
            m.insert(key.into(), Value::String(p.display().to_string()));
        }
        merge_block(&mut m, self.adapter_block(&t.kind));
        m
    }

    /// Constructor map for the agent adapter: only `kind`, `command` and the three timeouts
    /// (orchestrator-only keys are withheld so they cannot shadow same-named adapter keys such
    /// as `claude-code.max_turns`), then the block named by `agent.kind`.
    pub fn agent_adapter_config(&self) -> Map<String, Value> {
        let a = &self.agent;
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(a.kind.clone()));
        put_opt(&mut m, "command", &a.command);
        m.insert("turn_timeout_ms".into(), a.turn_timeout_ms.into());
        m.insert("read_timeout_ms".into(), a.read_timeout_ms.into());
        m.insert(
            "stall_timeout_ms".into(),
            a.stall_timeout_ms.unwrap_or(0).into(),
        );
        merge_block(&mut m, self.adapter_block(&a.kind));
        m
    }

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
            path: self.tracker_path.clone(),
            block: self.adapter_block(&t.kind).cloned().unwrap_or_default(),
        }
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
            block: self.adapter_block(&a.kind).cloned().unwrap_or_default(),
            workflow_dir: workflow_dir.to_path_buf(),
        }
    }
}
